/* Turns between the processes of a snaptree guest through shared memory: a
 * counter in the shared page, polled 1 ms apart. A turn that never comes
 * (memory no longer shared after a restore) fails the guest loudly instead of
 * hanging it. */
#ifndef SNAPTREE_TURNS_H
#define SNAPTREE_TURNS_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline void wait_turn(volatile uint32_t *turn, uint32_t want, const char *who)
{
	for (int waited = 0; *turn != want; waited++) {
		if (waited > 20000) {
			printf("%s: turn %u never came (at %u)\n", who, want, *turn);
			fflush(stdout);
			_exit(3);
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void give_turn(volatile uint32_t *turn, uint32_t next)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*turn = next;
}
#endif
