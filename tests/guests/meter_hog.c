/* Hogs for metering tests: each exceeds one dimension until the supervisor stops it.
 * usage: meter_hog fuel|spin MS|memory|peak MIB|write|read FILE|flood|lines|fds|ns */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	volatile unsigned long spin = 0;

	if (strcmp(what, "fuel") == 0) {
		for (;;)
			spin++;
	} else if (strcmp(what, "spin") == 0 && argc > 2) {
		/* a bounded spinner: MS of CPU time, then exit */
		clock_t end = clock() + (clock_t)(atol(argv[2]) * (CLOCKS_PER_SEC / 1000));
		while (clock() < end)
			spin++;
		return 0;
	} else if (strcmp(what, "memory") == 0) {
		/* touch every page; keep what we got once the address space cap says no */
		for (;;) {
			char *p = malloc(1 << 20);
			if (!p)
				pause();
			memset(p, 1, 1 << 20);
		}
	} else if (strcmp(what, "peak") == 0 && argc > 2) {
		/* touch MIB MiB and exit at once, before any sample can see it live */
		size_t n = (size_t)atol(argv[2]) << 20;
		char *p = malloc(n);
		if (!p)
			return 1;
		memset(p, 1, n);
		return p[n - 1] == 1 ? 0 : 1;
	} else if (strcmp(what, "write") == 0) {
		int fd = open("/tmp/big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		memset(buf, 'w', sizeof buf);
		for (long long n = 0; fd >= 0 && n < (2ll << 30); n += sizeof buf)
			if (write(fd, buf, sizeof buf) < 0)
				return 1;
		return 0;
	} else if (strcmp(what, "read") == 0 && argc > 2) {
		for (;;) {
			int fd = open(argv[2], O_RDONLY);
			if (fd < 0)
				return 1;
			while (read(fd, buf, sizeof buf) > 0)
				;
			close(fd);
		}
	} else if (strcmp(what, "flood") == 0) {
		memset(buf, 'x', sizeof buf);
		for (;;)
			if (write(1, buf, sizeof buf) < 0)
				return 1;
	} else if (strcmp(what, "lines") == 0) {
		for (unsigned long i = 0;; i++)
			if (dprintf(1, "line %lu\n", i) < 0)
				return 1;
	} else if (strcmp(what, "fds") == 0) {
		for (;;)
			if (open("/dev/null", O_RDONLY) < 0)
				pause();
	} else if (strcmp(what, "ns") == 0) {
		memset(buf, 'n', 4096);
		for (unsigned long i = 0;; i++) {
			char name[64];
			snprintf(name, sizeof name, "cell-%lu", i);
			int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, buf, 4096) != 4096)
				pause();
			close(fd);
		}
	}
	fprintf(stderr, "usage: meter_hog fuel|spin MS|memory|write|read FILE|flood|lines|fds|ns\n");
	return 2;
}
