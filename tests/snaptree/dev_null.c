/* snaptree guest: the guest's own opens of /dev/null (write-only, read-write
 * appending) and /dev/zero, and a child whose standard output is its own
 * /dev/null (as a shell's `cat f >/dev/null`): each keeps its access mode and
 * flags across the snapshot, even when the run's stdin is the host's /dev/null. */
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int wo = open("/dev/null", O_WRONLY), rw = open("/dev/null", O_RDWR | O_APPEND);
	int zero = open("/dev/zero", O_RDONLY);
	CHECK(wo >= 0 && rw >= 0 && zero >= 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		int out = open("/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0666);
		if (out < 0 || dup2(out, 1) < 0 || close(out) < 0)
			_exit(2);
		for (int s = 0; s < STEPS; s++) {
			if (write(1, "discarded\n", 10) != 10)
				_exit(3);
			pause_ms(50);
		}
		_exit((fcntl(1, F_GETFL) & O_ACCMODE) == O_WRONLY ? 0 : 4);
	}
	for (int s = 0; s < STEPS; s++) {
		char buf[8] = { 1 };
		CHECK(write(wo, "x", 1) == 1 && write(rw, "yy", 2) == 2);
		CHECK(read(rw, buf, sizeof buf) == 0 && read(zero, buf, sizeof buf) == sizeof buf);
		int modes = (fcntl(wo, F_GETFL) & O_ACCMODE) * 1 + (fcntl(rw, F_GETFL) & O_ACCMODE) * 4 +
			    (fcntl(rw, F_GETFL) & O_APPEND ? 16 : 0) + (fcntl(zero, F_GETFL) & O_ACCMODE) * 32;
		mix(buf, sizeof buf);
		mix(&modes, sizeof modes);
		char line[32];
		snprintf(line, sizeof line, "modes %d", modes);
		step_done(s, line);
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}
