/* snaptree guest: a named FIFO in the run's directory opened by two
 * processes: the child writes two fixed-size records a step, the parent reads
 * one, so bytes wait in the FIFO across every pause; the parent drains the
 * rest once the child has exited. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"

#define REC 32

int main(void)
{
	CHECK(mkfifo("fifo", 0640) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		int w = open("fifo", O_WRONLY);
		CHECK(w >= 0);
		for (int s = 0; s < STEPS; s++) {
			for (int k = 0; k < 2; k++) {
				char rec[REC];
				memset(rec, '.', REC);
				snprintf(rec, REC, "step %d record %d", s, k);
				CHECK(write(w, rec, REC) == REC);
			}
			pause_ms(50);
		}
		_exit(9);
	}
	int r = open("fifo", O_RDONLY);
	CHECK(r >= 0);
	for (int s = 0; s < STEPS; s++) {
		char rec[REC];
		CHECK(read(r, rec, REC) == REC);
		mix(rec, REC);
		printf("%s ", rec);
		step_done(s, "fifo");
	}
	int st, left = 0;
	CHECK(waitpid(kid, &st, 0) == kid);
	char rec[REC];
	while (read(r, rec, REC) == REC) {
		mix(rec, REC);
		left++;
	}
	struct stat sb;
	CHECK(stat("fifo", &sb) == 0 && S_ISFIFO(sb.st_mode));
	printf("child exit %d, %d records left %016llx, mode %o\n", WEXITSTATUS(st), left,
	       (unsigned long long)fnv, sb.st_mode & 0777);
	return 0;
}
