/* Vectored reads on pipes and sockets behave as the kernel's own: whole datagrams
 * split over segments, short reads, EOF, EAGAIN, ESPIPE, EINTR and restarts after a
 * signal, and the argument registers kept across the call. One line per check.
 * usage: meter_vec FILE (a readable regular file, for the registers check) */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int failed;
static char a[64], b[64], c[64];

static void check(const char *name, int ok, long got)
{
	printf("%s: %s", name, ok ? "ok\n" : "FAIL");
	if (!ok)
		printf(" (%ld, %s)\n", got, got < 0 ? strerror(errno) : "");
	failed |= !ok;
}

static ssize_t rv(int fd, size_t la, size_t lb, size_t lc)
{
	struct iovec v[3] = { { a, la }, { b, lb }, { c, lc } };
	memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c, 0, sizeof c);
	return readv(fd, v, 3);
}

/* Blocked in a syscall: the reader's state in /proc is S. */
static void wait_asleep(pid_t tid)
{
	char path[64], buf[256], *p;
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	for (;;) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		if ((p = strrchr(buf, ')')) && p[1] == ' ' && p[2] == 'S')
			return;
		sched_yield();
	}
}

static pid_t reader;
static int wfd;
static volatile sig_atomic_t caught;

static void on_usr1(int sig)
{
	(void)sig;
	caught = 1;
}

/* Once the reader sleeps in its call: a signal, then (if wfd) one datagram. */
static void *poke(void *arg)
{
	pthread_t r = *(pthread_t *)arg;
	wait_asleep(reader);
	pthread_kill(r, SIGUSR1);
	if (wfd >= 0) {
		wait_asleep(reader);
		(void)!write(wfd, "late!", 5);
	}
	return NULL;
}

/* A blocking readv of fd interrupted by SIGUSR1 (handled with flags), wfd (-1:
 * none) writing "late!" after the signal: the readv's result. */
static ssize_t interrupted(int fd, int w, int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	pthread_t self = pthread_self(), t;
	ssize_t n;
	sigaction(SIGUSR1, &sa, NULL);
	reader = (pid_t)syscall(SYS_gettid);
	wfd = w;
	caught = 0;
	pthread_create(&t, NULL, poke, &self);
	n = rv(fd, 2, 0, 10);
	int e = errno;
	pthread_join(t, NULL);
	errno = e;
	return n;
}

static void datagrams(int type, const char *kind)
{
	char name[64];
	int s[2];
	ssize_t n;
	if (socketpair(AF_UNIX, type, 0, s) < 0)
		return check(kind, 0, -1);
	(void)!write(s[1], "0123456789", 10);
	n = rv(s[0], 4, 0, 10);
	snprintf(name, sizeof name, "%s split over segments", kind);
	check(name, n == 10 && !memcmp(a, "0123", 4) && !memcmp(c, "456789", 7), n);
	(void)!write(s[1], "abcdefghijklmnopqrst", 20);
	(void)!write(s[1], "next", 4);
	n = rv(s[0], 3, 3, 0);
	snprintf(name, sizeof name, "%s cut as the kernel cuts it", kind);
	check(name, n == 6 && !memcmp(a, "abc", 3) && !memcmp(b, "def", 3), n);
	n = rv(s[0], 2, 2, 2);
	snprintf(name, sizeof name, "%s after a cut one", kind);
	check(name, n == 4 && !memcmp(a, "ne", 2) && !memcmp(b, "xt", 2), n);
	(void)!write(s[1], "", 0);
	n = rv(s[0], 4, 4, 4);
	snprintf(name, sizeof name, "%s empty", kind);
	check(name, n == 0, n);
	n = interrupted(s[0], s[1], SA_RESTART);
	snprintf(name, sizeof name, "%s restarted after a signal (SA_RESTART)", kind);
	check(name, caught && n == 5 && !memcmp(a, "la", 2) && !memcmp(c, "te!", 3), n);
	n = interrupted(s[0], -1, 0);
	snprintf(name, sizeof name, "%s EINTR after a signal", kind);
	check(name, caught && n < 0 && errno == EINTR, n);
	fcntl(s[0], F_SETFL, O_NONBLOCK);
	n = rv(s[0], 4, 4, 4);
	snprintf(name, sizeof name, "%s EAGAIN when nonblocking", kind);
	check(name, n < 0 && errno == EAGAIN, n);
	close(s[1]);
	n = rv(s[0], 4, 4, 4);
	snprintf(name, sizeof name, "%s after the peer closed", kind);
	check(name, type == SOCK_SEQPACKET ? n == 0 : n < 0 && errno == EAGAIN, n);
	close(s[0]);
}

/* The same from a thread that is not its process's leader. */
static void *split_in_thread(void *arg)
{
	int fd = *(int *)arg;
	ssize_t n = rv(fd, 4, 0, 10);
	check("datagram split over segments, in a thread", n == 10 && !memcmp(a, "0123", 4) &&
	      !memcmp(c, "456789", 7), n);
	return NULL;
}

static void pipes(void)
{
	struct iovec v[2] = { { a, 4 }, { b, 4 } };
	int p[2];
	ssize_t n, got = 0;
	if (pipe(p) < 0)
		return check("pipe", 0, -1);
	(void)!write(p[1], "hello, world", 12);
	while (got < 12 && (n = rv(p[0], 0, 5, 20)) > 0)
		got += n;
	check("pipe whole in short reads", got == 12, got);
	n = interrupted(p[0], p[1], SA_RESTART);
	check("pipe restarted after a signal (SA_RESTART)", caught && n >= 2 && !memcmp(a, "la", 2), n);
	if (n > 0 && n < 5) /* a plain read fills the first segment only: the rest waits */
		(void)rv(p[0], 5 - (size_t)n, 0, 0);
	n = interrupted(p[0], -1, 0);
	check("pipe EINTR after a signal", caught && n < 0 && errno == EINTR, n);
	n = preadv(p[0], v, 2, 0);
	check("pipe preadv ESPIPE", n < 0 && errno == ESPIPE, n);
	(void)!write(p[1], "xy", 2);
	n = preadv2(p[0], v, 2, -1, 0);
	check("pipe preadv2 at -1", n == 2 && !memcmp(a, "xy", 2), n);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	n = rv(p[0], 4, 4, 4);
	check("pipe EAGAIN when nonblocking", n < 0 && errno == EAGAIN, n);
	close(p[1]);
	n = rv(p[0], 4, 4, 4);
	check("pipe EOF", n == 0, n);
	n = rv(p[0], 0, 0, 0);
	check("pipe all segments empty", n == 0, n);
	close(p[0]);
}

/* readv by hand: rsi, rdx (and the rest but rax, rcx, r11) as they were. */
static int regs_kept(int fd, struct iovec *v, int cnt)
{
	long ret;
	register long r10 asm("r10") = 0x1010;
	register long r8 asm("r8") = 0x88;
	register long r9 asm("r9") = 0x99;
	unsigned long si = (unsigned long)v, dx = (unsigned long)cnt;
	asm volatile("syscall"
		     : "=a"(ret), "+S"(si), "+d"(dx), "+r"(r10), "+r"(r8), "+r"(r9)
		     : "a"((long)SYS_readv), "D"((long)fd)
		     : "rcx", "r11", "memory");
	return ret >= 0 && si == (unsigned long)v && dx == (unsigned long)cnt && r10 == 0x1010 &&
	       r8 == 0x88 && r9 == 0x99;
}

static void registers(const char *file)
{
	struct iovec v[2] = { { a, 4 }, { b, 4 } };
	int p[2], s[2], f = open(file, O_RDONLY);
	if (pipe(p) < 0 || socketpair(AF_UNIX, SOCK_DGRAM, 0, s) < 0 || f < 0)
		return check("registers", 0, -1);
	(void)!write(p[1], "12345678", 8);
	(void)!write(s[1], "12345678", 8);
	check("registers kept: pipe", regs_kept(p[0], v, 2), 0);
	check("registers kept: datagram", regs_kept(s[0], v, 2), 0);
	check("registers kept: file", regs_kept(f, v, 2), 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: meter_vec FILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pipes();
	datagrams(SOCK_DGRAM, "datagram");
	datagrams(SOCK_SEQPACKET, "seqpacket");
	int s[2];
	pthread_t t;
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, s) == 0 && write(s[1], "0123456789", 10) == 10 &&
	    pthread_create(&t, NULL, split_in_thread, &s[0]) == 0)
		pthread_join(t, NULL);
	registers(argv[1]);
	return failed;
}
