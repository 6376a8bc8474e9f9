/* snaptree guest: a deleted file in /dev/shm held by descriptor only, inherited
 * by two forked children (one open file: one offset). Turns go through a word
 * at the file's start (pread/pwrite); each child appends a record per step with
 * write(2) at the shared offset; the parent reads the records back, checks the
 * offset against the size, and prints its hash. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"

static uint32_t get_turn(int fd)
{
	uint32_t t = 0;
	return pread(fd, &t, sizeof t, 0) == sizeof t ? t : 0xffffffffu;
}

static void wait_for(int fd, uint32_t want, const char *who)
{
	for (int waited = 0; get_turn(fd) != want; waited++) {
		if (waited > 20000) {
			printf("%s: turn %u never came (at %u)\n", who, want, get_turn(fd));
			fflush(stdout);
			_exit(3);
		}
		pause_ms(1);
	}
}

static void give(int fd, uint32_t t)
{
	if (pwrite(fd, &t, sizeof t, 0) != sizeof t)
		_exit(4);
}

int main(void)
{
	char path[] = "/dev/shm/snaptree-fd-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && unlink(path) == 0 && fchmod(fd, 0640) == 0);
	give(fd, 0);
	CHECK(lseek(fd, 64, SEEK_SET) == 64);
	pid_t kid[2];
	for (uint32_t k = 1; k <= 2; k++) {
		kid[k - 1] = fork();
		CHECK(kid[k - 1] >= 0);
		if (kid[k - 1] == 0) {
			for (int s = 0; s < STEPS; s++) {
				wait_for(fd, 3u * s + k, k == 1 ? "first child" : "second child");
				char rec[64];
				int n = snprintf(rec, sizeof rec, "%u:%02d:%08x;", k, s,
						 (unsigned)(s * 2654435761u * k));
				if (write(fd, rec, (size_t)n) != n)
					_exit(2);
				give(fd, 3u * s + k + 1);
			}
			_exit((int)k);
		}
	}
	off_t seen = 64;
	for (int s = 0; s < STEPS; s++) {
		give(fd, 3u * s + 1);
		wait_for(fd, 3u * s + 3, "parent");
		struct stat sb;
		off_t at = lseek(fd, 0, SEEK_CUR);
		CHECK(fstat(fd, &sb) == 0 && at == sb.st_size && at > seen);
		char buf[256];
		CHECK(pread(fd, buf, (size_t)(at - seen), seen) == at - seen);
		mix(buf, (size_t)(at - seen));
		seen = at;
		printf("size %lld ", (long long)sb.st_size);
		step_done(s, "deleted-fd");
	}
	for (int k = 0; k < 2; k++) {
		int st;
		CHECK(waitpid(kid[k], &st, 0) == kid[k] && WIFEXITED(st));
		printf("child %d exit %d\n", k + 1, WEXITSTATUS(st));
	}
	struct stat sb;
	CHECK(fstat(fd, &sb) == 0);
	printf("links %lu mode %o flags %o\n", (unsigned long)sb.st_nlink,
	       (unsigned)(sb.st_mode & 07777), (unsigned)(fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND)));
	return 0;
}
