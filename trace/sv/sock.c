/* The run's socket rule for connect(2) of a Unix socket. The supervisor makes
 * the connection itself, on the socket object it took from the guest, to the
 * socket file it resolved and checked in the guest's view: the check and the
 * connection name the same objects, so no descriptor number or path a sibling
 * thread moves can lead anywhere else. A pathname socket is the run's when a
 * socket of the run's network namespace is bound at that file: the kernel's
 * sock_diag lists them (whoever holds them now); abstract sockets are per
 * network namespace, so always the run's; a host socket named with --socket is
 * allowed by its inode. Anything else is refused before any host listener sees
 * a connection. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "trace/tracee/tracee.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9 */
#endif
#define SETTLE_MS 5
#define TCP_LISTEN_STATE 10 /* a stream or seqpacket listener (the kernel's TCP_LISTEN) */

/* Send fd over the socket s (SCM_RIGHTS): 0 or -1. */
static int send_fd(int s, int fd)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof cbuf };
	memset(cbuf, 0, sizeof cbuf);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	return sendmsg(s, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int s)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof cbuf };
	int fd = -1;
	if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

/* A sock_diag socket in tid's network namespace, made by a short-lived child
 * that joins tid's user and network namespaces (a thread cannot join a user
 * namespace; an unprivileged invoker has rights on the netns only from inside
 * the user namespace that owns it). The fd, or -errno. */
int trace_sock_diag_open(pid_t tid)
{
	char path[64];
	int pair[2], ns[2], err = 0;
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)tid);
	ns[0] = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)tid);
	ns[1] = open(path, O_RDONLY | O_CLOEXEC);
	if (ns[0] < 0 || ns[1] < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
		err = -errno;
		goto out;
	}
	/* raw: glibc's fork() takes locks the host's other threads may have held */
	pid_t c = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (c == 0) {
		int s = -1;
		if (setns(ns[0], CLONE_NEWUSER) == 0 && setns(ns[1], CLONE_NEWNET) == 0)
			s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		_exit(s >= 0 && send_fd(pair[1], s) == 0 ? 0 : 1);
	}
	close(pair[1]);
	int fd = c < 0 ? -1 : recv_fd(pair[0]);
	err = fd < 0 ? -ECONNREFUSED : fd;
	if (c > 0)
		while (waitpid(c, NULL, __WALL) < 0 && errno == EINTR)
			;
	close(pair[0]);
out:
	for (int i = 0; i < 2; i++)
		if (ns[i] >= 0)
			close(ns[i]);
	return err;
}

/* One reply message of the dump: 1 when it is a socket of type bound at (dev, ino). */
static int diag_match(const struct nlmsghdr *h, int type, dev_t dev, ino_t ino)
{
	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
		return 0;
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	if ((type == SOCK_DGRAM) != (m->udiag_type == SOCK_DGRAM))
		return 0; /* a listener's type is the kernel's to check (EPROTOTYPE) */
	int left = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
	for (const struct rtattr *a = (const void *)(m + 1); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
		if (a->rta_type != UNIX_DIAG_VFS || RTA_PAYLOAD(a) < (int)sizeof(struct unix_diag_vfs))
			continue;
		const struct unix_diag_vfs *v = RTA_DATA(a);
		return v->udiag_vfs_ino == ino && (v->udiag_vfs_dev >> 20) == major(dev) &&
		       (v->udiag_vfs_dev & 0xfffff) == minor(dev);
	}
	return 0;
}

/* 1 when a socket of the run's network namespace (diag's) of this type is bound at
 * the file (dev, ino): a listener for a stream or seqpacket socket, any bound
 * datagram socket; 0 when none; -errno. The whole dump is read (the kernel ends it). */
int trace_sock_bound_in_run(int diag, int type, dev_t dev, ino_t ino)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req = {
		.h = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.r = { .sdiag_family = AF_UNIX, .udiag_show = UDIAG_SHOW_VFS,
		       .udiag_states = type == SOCK_DGRAM ? ~0u : 1u << TCP_LISTEN_STATE },
	};
	static char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
	int found = 0;
	if (send(diag, &req, sizeof req, 0) != (ssize_t)sizeof req)
		return -errno;
	for (;;) {
		ssize_t n = recv(diag, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		int left = (int)n;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return found;
			if (h->nlmsg_type == NLMSG_ERROR)
				return -EIO;
			found = found || diag_match(h, type, dev, ino);
		}
	}
}

/* path (the guest's, as connect(2) reads it) resolved in tid's view, the last
 * link followed as connect follows it: an O_PATH descriptor in *fd, or an errno. */
static int resolve(pid_t tid, const char *path, int *fd)
{
	char abs[PATH_MAX], real[PATH_MAX], link[64];
	size_t n = 0;
	if (path[0] != '/') {
		snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
		ssize_t bl = readlink(link, abs, sizeof abs - 1);
		if (bl <= 0)
			return ENOENT;
		n = (size_t)bl;
	}
	if (n + 1 + strlen(path) >= sizeof abs)
		return ENAMETOOLONG;
	snprintf(abs + n, sizeof abs - n, "%s%s", n ? "/" : "", path);
	if (trace_path_real(tid, abs, 1, real) < 0)
		return ELOOP;
	snprintf(link, sizeof link, "/proc/%d/root", (int)tid);
	int root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ESRCH;
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	*fd = (int)syscall(SYS_openat2, root, real, &how, sizeof how);
	int err = *fd < 0 ? errno : 0;
	close(root);
	return err;
}

/* The file st is a host socket named with --socket. */
static int named(const struct trace_config *cfg, const struct stat *st)
{
	struct stat h;
	for (size_t i = 0; i < cfg->nsockets; i++)
		if (stat(cfg->sockets[i], &h) == 0 && S_ISSOCK(h.st_mode) && h.st_dev == st->st_dev &&
		    h.st_ino == st->st_ino)
			return 1;
	return 0;
}

/* A pathname address: the socket file resolved into c->target and judged. */
static int decide_path(int *diag, const struct trace_config *cfg, pid_t tid,
		       struct trace_conn *c, int *refused)
{
	char path[sizeof c->addr.un.sun_path + 1];
	size_t n = c->len - offsetof(struct sockaddr_un, sun_path);
	struct stat st;
	int type = 0;
	socklen_t tl = sizeof type;

	memcpy(path, c->addr.un.sun_path, n);
	path[n] = 0;
	int err = resolve(tid, path, &c->target);
	if (err)
		return err;
	if (fstat(c->target, &st) < 0 || !S_ISSOCK(st.st_mode))
		return ECONNREFUSED; /* as natively: no socket there */
	if (getsockopt(c->sock, SOL_SOCKET, SO_TYPE, &type, &tl) < 0)
		return ENOTSOCK;
	if (named(cfg, &st)) {
		c->outside = 1;
		return 0;
	}
	if (*diag < 0)
		*diag = trace_sock_diag_open(tid);
	if (*diag >= 0 && trace_sock_bound_in_run(*diag, type, st.st_dev, st.st_ino) == 1)
		return 0;
	*refused = 1;
	return ECONNREFUSED;
}

int trace_sock_decide(int *diag, const struct trace_config *cfg, pid_t tid, const uint64_t a[6],
		      struct trace_conn *c, int *refused)
{
	int dom = 0;
	socklen_t dl = sizeof dom;

	memset(c, 0, sizeof *c);
	c->sock = c->target = -1;
	*refused = 0;
	/* the thread's own descriptor table (a thread may have one of its own) */
	int pfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (pfd < 0)
		return ESRCH;
	c->sock = (int)syscall(SYS_pidfd_getfd, pfd, (int)a[0], 0);
	int err = c->sock < 0 ? errno : 0;
	close(pfd);
	if (err)
		return err;
	struct stat st;
	if (getsockopt(c->sock, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0 || fstat(c->sock, &st) < 0)
		return ENOTSOCK;
	c->ino = st.st_ino;
	if (a[2] > sizeof c->addr || (dom == AF_UNIX && a[2] > sizeof c->addr.un))
		return EINVAL;
	c->len = (socklen_t)a[2];
	if (c->len && trace_mem_read(tid, a[1], &c->addr, c->len) != (ssize_t)c->len)
		return EFAULT;
	/* IP in the run's own network namespace: nothing outside to reach, but made
	 * here too, so a socket swapped in under the number meanwhile is not the one */
	if (dom != AF_UNIX || c->len <= offsetof(struct sockaddr_un, sun_path) ||
	    c->addr.un.sun_family != AF_UNIX ||
	    c->addr.un.sun_path[0] == 0)
		return 0; /* abstract (the run's namespace), unnamed or AF_UNSPEC: the kernel's answer */
	return decide_path(diag, cfg, tid, c, refused);
}

/* One address a datagram is sent to (addr, len: the guest's): 0, or the errno
 * that answers the call, *refused set when it names a socket not the run's. */
static int judge_to(int *diag, const struct trace_config *cfg, pid_t tid, int sock, uint64_t addr,
		    uint64_t len, int *refused)
{
	struct trace_conn c = { .sock = sock, .target = -1 };
	if (!addr || len <= offsetof(struct sockaddr_un, sun_path) || len > sizeof c.addr)
		return 0; /* no address, or one the kernel refuses (EINVAL) */
	c.len = (socklen_t)len;
	if (trace_mem_read(tid, addr, &c.addr, c.len) != (ssize_t)c.len)
		return EFAULT;
	if (c.addr.un.sun_family != AF_UNIX || c.addr.un.sun_path[0] == 0)
		return 0; /* abstract: the run's namespace */
	int err = decide_path(diag, cfg, tid, &c, refused);
	if (c.target >= 0)
		close(c.target);
	return err;
}

/* The addresses of a sendmsg (n = 1) or sendmmsg (a vector of n) at v, judged. */
static int judge_msgs(int *diag, const struct trace_config *cfg, pid_t tid, int sock, uint64_t v,
		      uint64_t n, size_t stride, int *refused)
{
	for (uint64_t i = 0; i < n && i < UIO_MAXIOV && !*refused; i++) {
		struct msghdr m;
		if (trace_mem_read(tid, v + i * stride, &m, sizeof m) != (ssize_t)sizeof m)
			return EFAULT;
		int err = judge_to(diag, cfg, tid, sock, (uint64_t)(uintptr_t)m.msg_name, m.msg_namelen,
				   refused);
		if (err)
			return err;
	}
	return 0;
}

int trace_sock_send_decide(int *diag, const struct trace_config *cfg, pid_t tid, long nr,
			   const uint64_t a[6], int *refused)
{
	int dom = 0, type = 0, err = 0;
	socklen_t dl = sizeof dom, tl = sizeof type;

	*refused = 0;
	int pfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	int sock = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, (int)a[0], 0);
	if (pfd >= 0)
		close(pfd);
	/* only a Unix datagram socket goes where its address says (stream and
	 * seqpacket sockets ignore or refuse one); a bad descriptor is the kernel's */
	if (sock >= 0 && getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_UNIX &&
	    getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_DGRAM) {
		if (nr == TRACE_SYS_sendto)
			err = judge_to(diag, cfg, tid, sock, a[4], a[5], refused);
		else
			err = judge_msgs(diag, cfg, tid, sock, a[1], nr == TRACE_SYS_sendmsg ? 1 : a[2],
					 nr == TRACE_SYS_sendmsg ? sizeof(struct msghdr)
								 : sizeof(struct mmsghdr), refused);
	}
	if (sock >= 0)
		close(sock);
	return err;
}

/* A TCP handshake on the run's loopback takes microseconds: waited for here a
 * little (SETTLE_MS), its result; -EINPROGRESS when it takes longer (a SYN
 * dropped at a full backlog is sent again a second later). */
static long settle(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLOUT };
	int err = 0;
	socklen_t n = sizeof err;
	if (poll(&p, 1, SETTLE_MS) <= 0)
		return -EINPROGRESS;
	if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &n) < 0)
		return -errno;
	return -err;
}

/* This thread (only: raw calls) as the guest's host ids, so the listener's
 * SO_PEERCRED and the kernel's permission check see the guest's uid and gid, or
 * back as root (as_guest 0). A root invoker's only; the dumpable flag, which a
 * change of effective ids resets, is kept. */
static void guest_ids(uid_t uid, gid_t gid, int as_guest)
{
	static __thread int dumpable;
	if (as_guest) {
		dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
		syscall(SYS_setresgid, -1, gid, -1);
		syscall(SYS_setresuid, -1, uid, -1);
		return;
	}
	syscall(SYS_setresuid, -1, 0, -1);
	syscall(SYS_setresgid, -1, 0, -1);
	prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
}

long trace_sock_connect(struct trace_conn *c, uid_t uid, gid_t gid, int again, int *wait)
{
	int as_guest = geteuid() == 0 && uid != 0, err = 0;
	socklen_t el = sizeof err;
	/* the call run again after a wait: a handshake that failed meanwhile is its answer */
	if (again && getsockopt(c->sock, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
		return -err;
	struct sockaddr_storage a = c->addr.any;
	struct sockaddr_un *un = (struct sockaddr_un *)&a;
	socklen_t len = c->len;
	int type = 0;
	socklen_t tl = sizeof type;

	*wait = 0;
	if (c->target >= 0) {
		/* the file checked, by a name only our own descriptor table gives */
		un->sun_family = AF_UNIX;
		int n = snprintf(un->sun_path, sizeof un->sun_path, "/proc/self/fd/%d", c->target);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	}
	int fl = fcntl(c->sock, F_GETFL);
	int block = fl >= 0 && !(fl & O_NONBLOCK) &&
		    getsockopt(c->sock, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type != SOCK_DGRAM;
	/* the supervisor never waits long: the guest's call waits instead, run again */
	if (block)
		fcntl(c->sock, F_SETFL, fl | O_NONBLOCK);
	if (as_guest)
		guest_ids(uid, gid, 1);
	long rc = connect(c->sock, (struct sockaddr *)&a, len) < 0 ? -errno : 0;
	if (as_guest)
		guest_ids(uid, gid, 0);
	if (block && (rc == -EINPROGRESS || rc == -EALREADY))
		rc = settle(c->sock);
	if (block)
		fcntl(c->sock, F_SETFL, fl);
	*wait = block && (rc == -EAGAIN || rc == -EINPROGRESS || rc == -EALREADY);
	return again && rc == -EISCONN ? 0 : rc; /* done meanwhile */
}

void trace_sock_close(struct trace_conn *c)
{
	if (c->sock >= 0)
		close(c->sock);
	if (c->target >= 0)
		close(c->target);
	c->sock = c->target = -1;
}
