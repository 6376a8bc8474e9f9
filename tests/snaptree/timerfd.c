/* snaptree guest: a periodic timerfd (20 ms) read every step, and a one-shot
 * timerfd armed for 10 s that must still be armed, with less time left, at
 * the end: both carry across a snapshot as relative times. */
#include <sys/timerfd.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int per = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	int once = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK);
	struct itimerspec p = { { 0, 20000000 }, { 0, 20000000 } }, o = { { 0, 0 }, { 10, 0 } };
	CHECK(per >= 0 && once >= 0);
	CHECK(timerfd_settime(per, 0, &p, NULL) == 0 && timerfd_settime(once, 0, &o, NULL) == 0);
	int reads = 0;
	for (int s = 0; s < STEPS; s++) {
		uint64_t ticks = 0;
		CHECK(read(per, &ticks, 8) == 8 && ticks >= 1);
		reads++;
		mix(&reads, sizeof reads);
		step_done(s, "tick");
	}
	struct itimerspec cur;
	uint64_t t;
	CHECK(timerfd_gettime(once, &cur) == 0);
	printf("one-shot armed %d, fired %d\n", cur.it_value.tv_sec < 10 &&
	       (cur.it_value.tv_sec > 0 || cur.it_value.tv_nsec > 0), read(once, &t, 8) == 8);
	CHECK(timerfd_gettime(per, &cur) == 0);
	printf("periodic interval %ld ns\n", cur.it_interval.tv_nsec);
	return 0;
}
