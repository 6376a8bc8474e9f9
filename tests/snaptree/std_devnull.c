/* snaptree guest: the root replaces its own standard descriptors, as a shell's
 * `exec 2>&1 >/dev/null </dev/zero` does: fd 2 a copy of the run's stdout, fd
 * 1 its own /dev/null, fd 0 its own /dev/zero; it keeps writing to 1 and
 * reading 0, and reports on 2. Restored, each is what it was, not the run's. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int null = open("/dev/null", O_WRONLY), zero = open("/dev/zero", O_RDONLY);
	CHECK(null >= 0 && zero >= 0);
	CHECK(dup2(1, 2) == 2 && dup2(null, 1) == 1 && dup2(zero, 0) == 0);
	CHECK(close(null) == 0 && close(zero) == 0);
	CHECK((stdout = fdopen(2, "w")) != NULL);
	for (int s = 0; s < STEPS; s++) {
		char buf[16];
		struct stat o, i;
		memset(buf, 7, sizeof buf);
		CHECK(write(1, "discarded\n", 10) == 10);
		CHECK(read(0, buf, sizeof buf) == sizeof buf);
		CHECK(fstat(1, &o) == 0 && fstat(0, &i) == 0);
		int what = (S_ISCHR(o.st_mode) && major(o.st_rdev) == 1 && minor(o.st_rdev) == 3) +
			   2 * (S_ISCHR(i.st_mode) && major(i.st_rdev) == 1 && minor(i.st_rdev) == 5) +
			   4 * ((fcntl(1, F_GETFL) & O_ACCMODE) == O_WRONLY);
		mix(buf, sizeof buf);
		char line[32];
		snprintf(line, sizeof line, "null+zero %d", what);
		step_done(s, line);
	}
	return 0;
}
