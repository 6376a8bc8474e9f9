/* Races its own iovec: a second thread flips the first segment's length between
 * 1 byte and 64 MiB while the main thread calls, so the lengths the supervisor
 * reads at the stop need not be those the kernel would read after it.
 * usage: meter_race writev FILE | readv FILE | pwritev2 FILE | pipe | stream | dgram
 * pipe, stream and dgram read what a writer thread keeps queued (a pipe of 1 MiB, an
 * AF_UNIX stream or datagram pair holding up to 8 MiB, datagrams of 3 MiB read with a
 * second one-byte segment), the segment lengthened a tuned delay after each call. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BIG (64u << 20)
#define DGRAM ((3u << 20) + 1) /* dividing no bound: the crossing read lands past it */

static struct iovec v[2];
static char *buf;

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

/* Keeps fd full: chunks of DGRAM bytes (whole datagrams on a datagram socket). */
static void *feed(void *arg)
{
	int fd = (int)(long)arg;
	for (;;)
		if (write(fd, buf, DGRAM) < 0)
			pause();
	return NULL;
}

/* The reader's call number, the flipper's last call seen returned and reset. */
static volatile unsigned long called, returned, reset;
static volatile unsigned long delay = 1ul << 22; /* spins from the call to the flip */
static size_t queue; /* the most one read can return: a longer segment reserves more in vain */

/* Lengthens the segment a delay after each call began: long enough for the
 * supervisor to have read it short at the stop, short enough for the kernel to
 * read it long (the reader shortens the delay until a read comes back long). */
static void *flip_late(void *arg)
{
	volatile size_t *len = &v[0].iov_len;
	(void)arg;
	for (;;) {
		unsigned long c;
		while ((c = called) == reset)
			;
		for (volatile unsigned long i = 0; i < delay; i++)
			;
		*len = queue;
		while (returned != c)
			;
		*len = 1;
		reset = c;
	}
	return NULL;
}

/* Reads fd with the segment lengthened late: shorter delays while reads come back
 * short, longer once they come back long. */
static int drain(int fd)
{
	pthread_t t;
	v[0].iov_len = 1;
	if (pthread_create(&t, NULL, flip_late, NULL))
		return 1;
	for (;;) {
		ssize_t n;
		called++;
		n = readv(fd, v, 2);
		returned = called;
		while (reset != called)
			;
		if (n < 0)
			pause();
		if ((size_t)n <= 1 + v[1].iov_len)
			delay -= delay / 20;
		else /* a margin from the stop, whose timing varies */
			delay += delay / 10;
	}
}

/* Queued data to race on: a pipe of 1 MiB, or a socket pair with 8 MiB. */
static int queued(const char *how)
{
	int sv[2], sz = 4 << 20;
	pthread_t t;
	if (!strcmp(how, "pipe")) {
		if (pipe(sv) < 0)
			return 1;
		queue = (size_t)fcntl(sv[1], F_SETPIPE_SZ, 1 << 20);
	} else if (socketpair(AF_UNIX, !strcmp(how, "dgram") ? SOCK_DGRAM : SOCK_STREAM, 0, sv) < 0) {
		return 1;
	} else {
		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
		setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
		queue = strcmp(how, "dgram") ? 2 * (size_t)sz : DGRAM;
	}
	if (pthread_create(&t, NULL, feed, (void *)(long)sv[1]))
		return 1;
	return drain(sv[0]);
}

int main(int argc, char **argv)
{
	pthread_t t;
	if (argc < 2)
		goto usage;
	int rd = !strcmp(argv[1], "readv");
	if (!(buf = calloc(1, BIG)))
		return 1;
	v[0].iov_base = buf;
	v[1].iov_base = buf + BIG - 1;
	v[1].iov_len = !strcmp(argv[1], "dgram");
	if (argc == 2 && (!strcmp(argv[1], "pipe") || !strcmp(argv[1], "stream") || v[1].iov_len))
		return queued(argv[1]);
	if (argc != 3 || pthread_create(&t, NULL, flip, NULL))
		goto usage;
	int fd = open(argv[2], rd ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
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
	fprintf(stderr, "usage: meter_race writev|readv|pwritev2 FILE | pipe|stream|dgram\n");
	return 2;
}
