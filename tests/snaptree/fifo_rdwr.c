/* snaptree guest: a named FIFO opened once for reading and writing, the
 * descriptor inherited by a forked child: the child writes two fixed-size
 * records a step through it, the parent reads one through its copy, so bytes
 * wait in the FIFO across every pause; the parent drains the rest once the
 * child has exited, and the FIFO is still open for both (a write, a read). */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"

#define REC 32

int main(void)
{
	CHECK(mkfifo("fifo", 0640) == 0);
	int fd = open("fifo", O_RDWR);
	CHECK(fd >= 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		for (int s = 0; s < STEPS; s++) {
			for (int k = 0; k < 2; k++) {
				char rec[REC];
				memset(rec, '.', REC);
				snprintf(rec, REC, "step %d record %d", s, k);
				CHECK(write(fd, rec, REC) == REC);
			}
			pause_ms(50);
		}
		_exit(9);
	}
	char rec[REC];
	for (int s = 0; s < STEPS; s++) {
		CHECK(read(fd, rec, REC) == REC);
		mix(rec, REC);
		step_done(s, rec);
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st));
	for (int s = 0; s < STEPS; s++) {
		CHECK(read(fd, rec, REC) == REC);
		mix(rec, REC);
	}
	CHECK(write(fd, "last", 4) == 4 && read(fd, rec, 4) == 4);
	printf("child exit %d, drained %016llx, flags %o, %.4s\n", WEXITSTATUS(st),
	       (unsigned long long)fnv, (unsigned)(fcntl(fd, F_GETFL) & O_ACCMODE), rec);
	return 0;
}
