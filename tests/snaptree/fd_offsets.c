/* snaptree guest: descriptors and offsets: a file written through one
 * descriptor and read through a dup'd one (shared offset), another opened
 * O_APPEND, a third read at its own offset, a directory open; offsets carry
 * across the pauses. */
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int w = open("data.bin", O_CREAT | O_TRUNC | O_RDWR, 0644);
	int ap = open("log.txt", O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0644);
	CHECK(w >= 0 && ap >= 0);
	char buf[256];
	for (int i = 0; i < 64; i++) {
		memset(buf, 'A' + i % 26, sizeof buf);
		CHECK(write(w, buf, sizeof buf) == sizeof buf);
	}
	int d = dup(w), r = open("data.bin", O_RDONLY | O_CLOEXEC), dir = open(".", O_RDONLY | O_DIRECTORY);
	CHECK(d >= 0 && r >= 0 && dir >= 0 && lseek(w, 100, SEEK_SET) == 100);
	for (int s = 0; s < STEPS; s++) {
		CHECK(read(d, buf, 37) == 37 && read(r, buf + 37, 11) == 11);
		mix(buf, 48);
		int n = snprintf(buf, sizeof buf, "step %d at %ld/%ld\n", s, (long)lseek(w, 0, SEEK_CUR),
				 (long)lseek(r, 0, SEEK_CUR));
		CHECK(write(ap, buf, (size_t)n) == n);
		step_done(s, "read");
	}
	CHECK(lseek(ap, 0, SEEK_CUR) == lseek(ap, 0, SEEK_END));
	int lr = open("log.txt", O_RDONLY);
	ssize_t n = read(lr, buf, sizeof buf);
	CHECK(n > 0);
	printf("offsets %ld %ld log starts %.12s\n", (long)lseek(d, 0, SEEK_CUR),
	       (long)lseek(r, 0, SEEK_CUR), buf);
	return 0;
}
