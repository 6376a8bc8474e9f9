/* Snapshot guest for descriptor objects: sets up what argv[1] names, creates
 * "ready", holds it through 40 steps 50 ms apart, then checks it and prints
 * what it found (the same lines natively, uninterrupted and restored).
 *   all: an eventfd (semaphore, dup'd), a periodic timerfd, a signalfd with a
 *        signal pending, stream, datagram and seqpacket socketpairs with bytes
 *        queued, an abstract Unix listener with an accepted client, a TCP
 *        listener on 127.0.0.1, a pty pair (raw, 24x80), an epoll set over them;
 * and states a snapshot refuses: tcp-established, tcp-pending, unix-pending,
 * scm-rights, pty-buffered, dgram-unconnected, udp, pty-orphan (a slave without
 * its master), epoll-stale (a watch whose descriptor now holds another file),
 * sysv-partial (a SysV segment with a page unmapped), sysv-unattached (a
 * segment made and never attached), inotify. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                         \
	do {                                                                             \
		if (!(x)) {                                                              \
			printf("FAILED line %d: %s (%s)\n", __LINE__, #x, strerror(errno)); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static int ev, tfd, sfd, sp[2], dg[2], sq[2], lis, cli, acc, tcp, pm, ps, ep;
static const char abstract_name[] = "\0sbx-snap-fdkinds";

static struct sockaddr_un unix_addr(socklen_t *len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, abstract_name, sizeof abstract_name - 1);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof abstract_name - 1);
	return a;
}

static int tcp_listener(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0 && setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
	CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 7) == 0);
	return s;
}

static int tcp_client(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0);
	return s;
}

static int unix_listener(void)
{
	socklen_t len;
	struct sockaddr_un a = unix_addr(&len);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, len) == 0 && listen(s, 5) == 0);
	return s;
}

static int unix_client(void)
{
	socklen_t len;
	struct sockaddr_un a = unix_addr(&len);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(s >= 0 && connect(s, (struct sockaddr *)&a, len) == 0);
	return s;
}

static void open_pty(void)
{
	struct winsize ws = { 24, 80, 0, 0 };
	struct termios t;
	pm = posix_openpt(O_RDWR | O_NOCTTY);
	CHECK(pm >= 0 && grantpt(pm) == 0 && unlockpt(pm) == 0);
	ps = open(ptsname(pm), O_RDWR | O_NOCTTY);
	CHECK(ps >= 0 && tcgetattr(ps, &t) == 0);
	cfmakeraw(&t);
	CHECK(tcsetattr(ps, TCSANOW, &t) == 0 && ioctl(pm, TIOCSWINSZ, &ws) == 0);
}

static void watch(int fd, uint32_t events, uint64_t data)
{
	struct epoll_event e = { .events = events, .data.u64 = data };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0);
}

static void set_up_all(void)
{
	sigset_t m;
	struct itimerspec its = { { 0, 30000000 }, { 0, 30000000 } };
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	CHECK(sigprocmask(SIG_BLOCK, &m, NULL) == 0);
	CHECK((ev = eventfd(3, EFD_SEMAPHORE)) >= 0 && dup2(ev, 40) == 40);
	CHECK((tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) >= 0);
	CHECK(timerfd_settime(tfd, 0, &its, NULL) == 0);
	CHECK((sfd = signalfd(-1, &m, SFD_NONBLOCK)) >= 0 && raise(SIGUSR1) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0 && write(sp[0], "hello", 5) == 5);
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, dg) == 0);
	CHECK(send(dg[0], "a", 1, 0) == 1 && send(dg[0], "", 0, 0) == 0);
	char big[300];
	memset(big, 'z', sizeof big);
	CHECK(send(dg[0], big, sizeof big, 0) == sizeof big && send(dg[1], "back", 4, 0) == 4);
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sq) == 0 && send(sq[1], "seq", 3, 0) == 3);
	lis = unix_listener();
	cli = unix_client();
	CHECK((acc = accept(lis, NULL, NULL)) >= 0 && write(cli, "ping", 4) == 4);
	tcp = tcp_listener(4242);
	open_pty();
	CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
	watch(sp[1], EPOLLIN, 1);
	watch(ev, EPOLLIN, 2);
	watch(sfd, EPOLLIN, 3);
	watch(lis, EPOLLIN, 4);
	watch(ps, EPOLLIN | EPOLLOUT, 5);
}

static void check_all(void)
{
	uint64_t v;
	char buf[512];
	struct signalfd_siginfo si;
	CHECK(read(40, &v, 8) == 8 && v == 1);
	printf("eventfd semaphore %llu\n", (unsigned long long)v);
	CHECK(read(tfd, &v, 8) == 8 && v >= 1);
	printf("timerfd ticked\n");
	CHECK(read(sfd, &si, sizeof si) == sizeof si);
	printf("signalfd signal %u\n", si.ssi_signo);
	struct epoll_event evs[8];
	int n = epoll_wait(ep, evs, 8, 0), seen = 0;
	for (int i = 0; i < n; i++)
		seen |= 1 << evs[i].data.u64;
	printf("epoll ready %d mask %#x\n", n, seen);
	CHECK(read(sp[1], buf, sizeof buf) == 5);
	printf("stream %.5s\n", buf);
	ssize_t a = recv(dg[1], buf, sizeof buf, 0), b = recv(dg[1], buf, sizeof buf, 0);
	ssize_t c = recv(dg[1], buf, sizeof buf, 0), d = recv(dg[1], buf, sizeof buf, 0);
	printf("datagrams %zd %zd %zd %zd\n", a, b, c, d);
	CHECK(recv(dg[0], buf, sizeof buf, 0) == 4);
	CHECK(recv(sq[0], buf, sizeof buf, 0) == 3);
	printf("seqpacket %.3s\n", buf);
	CHECK(read(acc, buf, 4) == 4);
	printf("accepted %.4s\n", buf);
	int c2 = unix_client(), a2 = accept(lis, NULL, NULL);
	CHECK(c2 >= 0 && a2 >= 0 && write(a2, "pong", 4) == 4 && read(c2, buf, 4) == 4);
	printf("unix listener answers %.4s\n", buf);
	int t2 = tcp_client(4242), ta = accept(tcp, NULL, NULL);
	CHECK(ta >= 0 && write(t2, "tcp", 3) == 3 && read(ta, buf, 3) == 3);
	printf("tcp listener answers %.3s\n", buf);
	struct winsize ws;
	CHECK(write(pm, "x\n", 2) == 2 && read(ps, buf, 2) == 2 && ioctl(ps, TIOCGWINSZ, &ws) == 0);
	printf("pty %c window %dx%d\n", buf[0], ws.ws_row, ws.ws_col);
}

/* a state a snapshot refuses, held while the guest steps */
static void set_up_refused(const char *mode)
{
	if (!strcmp(mode, "tcp-established")) {
		tcp = tcp_listener(4243);
		cli = tcp_client(4243);
		CHECK((acc = accept(tcp, NULL, NULL)) >= 0);
	} else if (!strcmp(mode, "tcp-pending")) {
		tcp = tcp_listener(4244);
		cli = tcp_client(4244);
	} else if (!strcmp(mode, "unix-pending")) {
		lis = unix_listener();
		cli = unix_client();
	} else if (!strcmp(mode, "scm-rights")) {
		char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &byte, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof cbuf };
		memset(cbuf, 0, sizeof cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		int one = 1;
		memcpy(CMSG_DATA(cm), &one, sizeof one);
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0 && sendmsg(sp[0], &m, 0) == 1);
	} else if (!strcmp(mode, "pty-buffered")) {
		open_pty();
		CHECK(write(ps, "out", 3) == 3);
	} else if (!strcmp(mode, "dgram-unconnected")) {
		socklen_t len;
		struct sockaddr_un a = unix_addr(&len);
		CHECK((lis = socket(AF_UNIX, SOCK_DGRAM, 0)) >= 0 &&
		      bind(lis, (struct sockaddr *)&a, len) == 0);
		CHECK((cli = socket(AF_UNIX, SOCK_DGRAM, 0)) >= 0 &&
		      sendto(cli, "d", 1, 0, (struct sockaddr *)&a, len) == 1);
	} else if (!strcmp(mode, "udp")) {
		CHECK((cli = socket(AF_INET, SOCK_DGRAM, 0)) >= 0);
	} else if (!strcmp(mode, "pty-orphan")) {
		open_pty();
		CHECK(close(pm) == 0);
	} else if (!strcmp(mode, "epoll-stale")) {
		/* the watch names descriptor ev, which now holds another eventfd */
		CHECK((ep = epoll_create1(0)) >= 0 && (ev = eventfd(0, 0)) >= 0);
		watch(ev, EPOLLIN, 1);
		CHECK((tfd = dup(ev)) >= 0 && close(ev) == 0 && eventfd(0, 0) == ev);
	} else if (!strcmp(mode, "sysv-partial")) {
		int id = shmget(IPC_PRIVATE, 3 * 4096, IPC_CREAT | 0600);
		char *p = shmat(id, NULL, 0);
		/* marked for removal at once: no segment outlives a native run */
		CHECK(id >= 0 && p != (void *)-1 && munmap(p + 4096, 4096) == 0 &&
		      shmctl(id, IPC_RMID, NULL) == 0);
	} else if (!strcmp(mode, "sysv-unattached")) {
		CHECK(shmget(0x5eed, 4096, IPC_CREAT | 0600) >= 0);
	} else if (!strcmp(mode, "inotify")) {
		CHECK((cli = inotify_init1(0)) >= 0);
	} else {
		printf("unknown mode %s\n", mode);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";
	int all = !strcmp(mode, "all");
	if (all)
		set_up_all();
	else
		set_up_refused(mode);
	close(open("ready", O_CREAT | O_WRONLY, 0644));
	uint64_t h = 1469598103934665603ull;
	for (int s = 0; s < 40; s++) {
		h = (h ^ (uint64_t)s) * 1099511628211ull;
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	if (all)
		check_all();
	if (!strcmp(mode, "sysv-unattached"))
		CHECK(shmctl(shmget(0x5eed, 0, 0), IPC_RMID, NULL) == 0);
	printf("done %s %016llx\n", mode, (unsigned long long)h);
	return 0;
}
