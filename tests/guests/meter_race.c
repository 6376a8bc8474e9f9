/* Races its own iovec: a second thread flips the first segment's length between
 * 1 byte and 64 MiB while the main thread calls, so the lengths the supervisor
 * reads at the stop need not be those the kernel would read after it.
 * usage: meter_race writev FILE | readv FILE | pwritev2 FILE */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define BIG (64u << 20)

static struct iovec v[1];

static void *flip(void *arg)
{
	volatile size_t *len = &v[0].iov_len;
	(void)arg;
	for (;;) {
		*len = 1;
		*len = BIG;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	if (argc != 3)
		goto usage;
	int rd = !strcmp(argv[1], "readv");
	int fd = open(argv[2], rd ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || !(v[0].iov_base = calloc(1, BIG)) || pthread_create(&t, NULL, flip, NULL))
		return 1;
	for (;;) {
		ssize_t n;
		if (rd)
			n = readv(fd, v, 1);
		else if (!strcmp(argv[1], "writev"))
			n = writev(fd, v, 1);
		else if (!strcmp(argv[1], "pwritev2"))
			n = pwritev2(fd, v, 1, -1, 0);
		else
			goto usage;
		if (n < 0)
			pause();
	}
usage:
	fprintf(stderr, "usage: meter_race writev|readv|pwritev2 FILE\n");
	return 2;
}
