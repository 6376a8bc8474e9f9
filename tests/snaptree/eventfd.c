/* snaptree guest: two eventfds (one a semaphore) whose counters carry across
 * the pauses: each step adds, the next drains part of it. */
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int ev = eventfd(7, EFD_NONBLOCK), sem = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	CHECK(ev >= 0 && sem >= 0);
	for (int s = 0; s < STEPS; s++) {
		uint64_t v = (uint64_t)s * 3 + 1, got = 0, one = 0;
		CHECK(write(ev, &v, 8) == 8 && write(sem, &v, 8) == 8);
		if (s % 3 == 2)
			CHECK(read(ev, &got, 8) == 8);
		CHECK(read(sem, &one, 8) == 8 && one == 1);
		mix(&got, 8);
		char line[64];
		snprintf(line, sizeof line, "drained %llu", (unsigned long long)got);
		step_done(s, line);
	}
	uint64_t left = 0, n = 0, one;
	uint64_t five = 5;
	CHECK(write(ev, &five, 8) == 8 && read(ev, &left, 8) == 8);
	CHECK(fcntl(sem, F_SETFL, O_NONBLOCK) == 0);
	while (read(sem, &one, 8) == 8)
		n++;
	printf("left %llu, semaphore %llu\n", (unsigned long long)left, (unsigned long long)n);
	return 0;
}
