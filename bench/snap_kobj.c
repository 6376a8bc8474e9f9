/* bench/snap_kobj.c: what reading a tree's shared kernel objects costs when
 * each is read at its first holder only (capture) against reading it at every
 * holder (as before): HOLDERS processes each holding both ends of a Unix socket
 * pair whose queues are full both ways (SO_SNDBUF as large as allowed), an
 * eventfd and an epoll set. Medians of ROUNDS, interleaved; one JSON line.
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I. -o build/bench/snap_kobj bench/snap_kobj.c \
 *     build/libsbx.a -lseccomp -lelf -ljansson -lcrypto -lpthread
 * Run as root (the tree lives in a user and network namespace of its own). */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include "snap/snap-internal.h"

#define HOLDERS 16
#define ROUNDS 9

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t fill(int fd)
{
	static char buf[1 << 16];
	int big = 1 << 30;
	uint64_t q = 0;
	ssize_t n;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	while ((n = send(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
		q += (uint64_t)n;
	return q;
}

/* The tree: its root writes the queued bytes, its host pids and descriptors to out. */
static void tree(int out)
{
	int sv[2], fds[4];
	pid_t kids[HOLDERS - 1];
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		_exit(1);
	uint64_t q = fill(sv[1]) + fill(sv[0]);
	int ev = eventfd(5, 0), ep = epoll_create1(0);
	struct epoll_event in = { .events = EPOLLIN };
	if (ev < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &in) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, ev, &in) < 0)
		_exit(1);
	fds[0] = sv[0], fds[1] = sv[1], fds[2] = ev, fds[3] = ep;
	for (int i = 0; i < HOLDERS - 1; i++)
		if ((kids[i] = fork()) == 0)
			for (;;)
				pause();
	if (write(out, &q, sizeof q) != sizeof q || write(out, kids, sizeof kids) != sizeof kids ||
	    write(out, fds, sizeof fds) != sizeof fds)
		_exit(1);
	for (;;)
		pause();
}

/* Seconds to read every holder's objects and make the tree's table. */
static double capture(const pid_t *hosts, const int *fds, int once)
{
	struct snap_state root;
	struct common_err e;
	memset(&root, 0, sizeof root);
	root.version = SNAP_VERSION;
	root.procs = common_xcalloc(HOLDERS, sizeof *root.procs);
	root.nprocs = HOLDERS - 1;
	double t0 = now();
	for (size_t k = 0; k < HOLDERS; k++) {
		struct snap_state *p = k ? &root.procs[k - 1] : &root;
		struct snap_fdctx c;
		snap_fdctx_init(&c, hosts[k]);
		c.tree = once ? &root : NULL;
		c.hosts = hosts;
		c.k = k;
		p->version = SNAP_VERSION;
		p->pid = (uint32_t)k + 1;
		p->fds = common_xcalloc(4, sizeof *p->fds);
		for (int i = 0; i < 4; i++) {
			char path[64], link[256];
			struct stat sb;
			struct snap_fd *f = &p->fds[p->nfds++];
			snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)hosts[k], fds[i]);
			ssize_t l = readlink(path, link, sizeof link - 1);
			link[l > 0 ? l : 0] = 0;
			f->fd = (uint32_t)fds[i];
			f->kind = SNAP_FD_OBJECT;
			f->path = common_xstrdup("");
			if (stat(path, &sb) < 0 || snap_fd_object(&c, f, link, &sb, p, &e) < 0) {
				fprintf(stderr, "snap_kobj: %s: %s\n", e.what, e.why);
				exit(1);
			}
		}
		snap_objects_link(p, &e);
		snap_fdctx_close(&c);
	}
	if (snap_kobjs_capture(&root, hosts, NULL, &e) < 0) {
		fprintf(stderr, "snap_kobj: %s: %s\n", e.what, e.why);
		exit(1);
	}
	double t = now() - t0;
	snap_state_free(&root);
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	int pp[2], fds[4];
	pid_t hosts[HOLDERS];
	uint64_t queued;
	double each[ROUNDS], once[ROUNDS];
	if (pipe(pp) < 0)
		return 1;
	if ((hosts[0] = fork()) == 0)
		tree(pp[1]);
	if (read(pp[0], &queued, sizeof queued) != sizeof queued ||
	    read(pp[0], hosts + 1, sizeof(pid_t) * (HOLDERS - 1)) != sizeof(pid_t) * (HOLDERS - 1) ||
	    read(pp[0], fds, sizeof fds) != sizeof fds)
		return 1;
	for (int i = 0; i < ROUNDS; i++) {
		each[i] = capture(hosts, fds, 0);
		once[i] = capture(hosts, fds, 1);
	}
	qsort(each, ROUNDS, sizeof *each, cmp_double);
	qsort(once, ROUNDS, sizeof *once, cmp_double);
	printf("{\"holders\":%d,\"queued_bytes\":%llu,\"every_holder_s\":%.3f,\"once_s\":%.3f}\n",
	       HOLDERS, (unsigned long long)queued, each[ROUNDS / 2], once[ROUNDS / 2]);
	for (int i = 1; i < HOLDERS; i++)
		kill(hosts[i], SIGKILL);
	kill(hosts[0], SIGKILL);
	waitpid(hosts[0], NULL, 0);
	return 0;
}
