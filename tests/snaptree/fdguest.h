/* Shared by the descriptor-kind snaptree guests: steps 50 ms apart, a line
 * per step flushed (the snapshot falls between lines written and lines to
 * come), a running FNV-1a hash, and a check that stops the guest loudly. */
#ifndef SNAPTREE_FDGUEST_H
#define SNAPTREE_FDGUEST_H
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 36
static uint64_t fnv = 1469598103934665603ull;

static inline void mix(const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fnv = (fnv ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
}

#define CHECK(x)                                                                    \
	do {                                                                        \
		if (!(x)) {                                                         \
			printf("FAILED line %d: %s (%s)\n", __LINE__, #x, strerror(errno)); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

static inline void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* the step's line and the pause that follows it */
static inline void step_done(int s, const char *what)
{
	printf("step %d %s %016llx\n", s, what, (unsigned long long)fnv);
	fflush(stdout);
	pause_ms(50);
}
#endif
