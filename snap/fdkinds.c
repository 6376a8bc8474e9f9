/* snap: descriptors that are kernel objects rather than files (eventfd,
 * timerfd, signalfd, epoll sets, Unix sockets and pairs with their queued
 * bytes, listening TCP sockets, the run's ptys): what each holds, read through
 * /proc and a copy of the descriptor (pidfd_getfd), and their encoding. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/kcmp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#include <asm/termbits.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"
#include "trace/sv/sv.h"

#define TCP_LISTEN_STATE 10
#define TCP_ESTABLISHED_STATE 1
#define PTY_SLAVE_MAJOR 136 /* UNIX98_PTY_SLAVE_MAJOR .. + 7 */

int snap_fd_is_object(const struct stat *sb)
{
	if (S_ISSOCK(sb->st_mode))
		return 1;
	if (!S_ISCHR(sb->st_mode))
		return !S_ISREG(sb->st_mode) && !S_ISDIR(sb->st_mode) && !S_ISFIFO(sb->st_mode);
	unsigned maj = major(sb->st_rdev), min = minor(sb->st_rdev);
	return (maj == 5 && min == 2) || (maj >= PTY_SLAVE_MAJOR && maj < PTY_SLAVE_MAJOR + 8);
}

void snap_fdctx_init(struct snap_fdctx *c, pid_t pid)
{
	memset(c, 0, sizeof *c);
	c->pid = pid;
	c->pidfd = -1;
	c->diag = -1;
}

void snap_fdctx_close(struct snap_fdctx *c)
{
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->diag >= 0)
		close(c->diag);
	c->pidfd = c->diag = -1;
}

/* A copy of the tracee's descriptor fd in this process (its open file, shared). */
int snap_fd_copy(struct snap_fdctx *c, uint32_t fd, struct common_err *e)
{
	if (c->pidfd < 0 && (c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0)) < 0)
		return common_errno(e, errno, "pidfd_open %d", (int)c->pid);
	int d = (int)syscall(SYS_pidfd_getfd, c->pidfd, (int)fd, 0);
	if (d < 0)
		return common_errno(e, errno, "pidfd_getfd of fd %u", fd);
	return d;
}

/* One "key: value" number of an fdinfo text (base 0: as written), or -1. */
static int info_num(const char *buf, const char *key, int base, uint64_t *v)
{
	const char *p = strstr(buf, key);
	if (!p)
		return -1;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	char *end;
	errno = 0;
	*v = strtoull(p, &end, base);
	return end == p || errno ? -1 : 0;
}

static int read_info(pid_t pid, uint32_t fd, char **buf, struct common_err *e)
{
	char p[64];
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/fdinfo/%u", (int)pid, fd);
	return common_read_file(p, 1 << 20, buf, &len, e);
}

static int capture_eventfd(const char *info, struct snap_object *o, struct common_err *e)
{
	uint64_t sem = 0;
	if (info_num(info, "eventfd-count:", 16, &o->count) < 0)
		return common_errf(e, "capture", "fd %u: eventfd without a counter", o->fd);
	info_num(info, "eventfd-semaphore:", 10, &sem);
	o->semaphore = sem != 0;
	return 0;
}

/* "it_value: (S, NS)": the time left, relative, so it runs on wherever restored */
static int info_pair(const char *buf, const char *key, uint64_t v[2])
{
	const char *p = strstr(buf, key);
	unsigned long long s, ns;
	if (!p || sscanf(p + strlen(key), " (%llu, %llu)", &s, &ns) != 2)
		return -1;
	v[0] = s;
	v[1] = ns;
	return 0;
}

static int capture_timerfd(const char *info, struct snap_object *o, struct common_err *e)
{
	uint64_t clock;
	if (info_num(info, "clockid:", 10, &clock) < 0 || info_num(info, "ticks:", 10, &o->ticks) < 0 ||
	    info_pair(info, "it_value:", o->value) < 0 ||
	    info_pair(info, "it_interval:", o->interval) < 0)
		return common_errf(e, "capture", "fd %u: timerfd state unreadable", o->fd);
	o->clock = (uint32_t)clock;
	return 0;
}

static int capture_signalfd(const char *info, struct snap_object *o, struct common_err *e)
{
	if (info_num(info, "sigmask:", 16, &o->mask) < 0)
		return common_errf(e, "capture", "fd %u: signalfd without a mask", o->fd);
	return 0;
}

static int cmp_watch(const void *a, const void *b)
{
	const struct snap_watch *x = a, *y = b;
	return x->fd < y->fd ? -1 : x->fd > y->fd;
}

/* The first watch of set o that pid's descriptor of that number no longer
 * holds (a tfd + 1), refused once it is known which processes hold the set. */
static void epoll_stale(pid_t pid, struct snap_object *o)
{
	o->stale = 0;
	for (size_t i = 0; i < o->nwatch && !o->stale; i++) {
		struct { uint32_t efd, tfd, toff; } slot = { o->fd, o->watch[i].fd, 0 };
		if (syscall(SYS_kcmp, pid, pid, KCMP_EPOLL_TFD, o->watch[i].fd, &slot) != 0)
			o->stale = o->watch[i].fd + 1;
	}
}

/* Every registration, each checked to be the file the tracee's descriptor of
 * that number holds now (an epoll set remembers a closed descriptor's file). */
static int capture_epoll(pid_t pid, const char *info, struct snap_object *o, struct common_err *e)
{
	size_t cap = 8;
	o->watch = common_xcalloc(cap, sizeof *o->watch);
	for (const char *p = info; (p = strstr(p, "tfd:")); p += 4) {
		unsigned tfd, ev;
		unsigned long long data;
		if (sscanf(p, "tfd: %u events: %x data: %llx", &tfd, &ev, &data) != 3)
			return common_errf(e, "capture", "fd %u: epoll entry unreadable", o->fd);
		if (o->nwatch == SNAP_OBJ_MAX)
			return common_errf(e, "capture", "fd %u: more than %u epoll watches", o->fd,
					   SNAP_OBJ_MAX);
		if (o->nwatch == cap)
			o->watch = common_xrealloc(o->watch, (cap *= 2) * sizeof *o->watch);
		o->watch[o->nwatch++] = (struct snap_watch){ tfd, ev, data };
	}
	epoll_stale(pid, o); /* the first in the set's order names it */
	qsort(o->watch, o->nwatch, sizeof *o->watch, cmp_watch);
	for (size_t i = 1; i < o->nwatch; i++)
		if (o->watch[i].fd == o->watch[i - 1].fd)
			return common_errf(e, "capture", "fd %u: epoll set watches two files under "
					   "descriptor %u (added by different processes): not supported",
					   o->fd, o->watch[i].fd);
	return 0;
}

struct unix_info {
	uint32_t state, ino, peer, rq, wq;
	int has_peer, has_rq;
};

/* sock_diag of one Unix socket by inode, in the run's network namespace. */
static int unix_diag(struct snap_fdctx *c, uint32_t ino, struct unix_info *u, struct common_err *e)
{
	if (c->diag < 0 && (c->diag = trace_sock_diag_open(c->pid)) < 0)
		return common_errno(e, -c->diag, "sock_diag in the run's network namespace");
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req = {
		.h = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_family = AF_UNIX, .udiag_ino = ino, .udiag_states = ~0u,
		       .udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN,
		       .udiag_cookie = { ~0u, ~0u } },
	};
	static char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	if (send(c->diag, &req, sizeof req, 0) != (ssize_t)sizeof req)
		return common_errno(e, errno, "sock_diag request");
	ssize_t n = recv(c->diag, buf, sizeof buf, 0);
	if (n < 0)
		return common_errno(e, errno, "sock_diag reply");
	struct nlmsghdr *h = (void *)buf;
	if (!NLMSG_OK(h, (int)n) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
		return common_errf(e, "capture", "socket %u: not found by sock_diag", ino);
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	memset(u, 0, sizeof *u);
	u->state = m->udiag_state;
	u->ino = m->udiag_ino;
	int left = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
	for (const struct rtattr *a = (const void *)(m + 1); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
		if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= 4) {
			memcpy(&u->peer, RTA_DATA(a), 4);
			u->has_peer = 1;
		} else if (a->rta_type == UNIX_DIAG_RQLEN &&
			   RTA_PAYLOAD(a) >= (int)sizeof(struct unix_diag_rqlen)) {
			const struct unix_diag_rqlen *q = RTA_DATA(a);
			u->rq = q->udiag_rqueue;
			u->wq = q->udiag_wqueue;
			u->has_rq = 1;
		}
	}
	return 0;
}

static void add_msg(struct snap_object *o, const uint8_t *p, size_t n)
{
	o->msgs = common_xrealloc(o->msgs, (o->nmsgs + 1) * sizeof *o->msgs);
	o->msgs[o->nmsgs].len = (uint32_t)n;
	o->msgs[o->nmsgs].data = common_xmalloc(n ? n : 1);
	memcpy(o->msgs[o->nmsgs].data, p, n);
	o->nmsgs++;
}

/* The bytes waiting to be read, peeked through the copy d: a stream's as one
 * run, each datagram on its own (SO_PEEK_OFF walks the queue; put back after). */
static int peek_queue(int d, struct snap_object *o, struct common_err *e)
{
	size_t cap = (size_t)SNAP_QUEUE_MAX + 1, total = 0;
	uint8_t *buf = common_xmalloc(cap);
	int rc = 0, orig = -1, zero = 0;
	socklen_t sl = sizeof orig;
	if (o->type != SOCK_STREAM) {
		if (getsockopt(d, SOL_SOCKET, SO_PEEK_OFF, &orig, &sl) < 0 ||
		    setsockopt(d, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) < 0) {
			free(buf);
			return common_errno(e, errno, "fd %u: SO_PEEK_OFF", o->fd);
		}
	}
	for (;;) {
		struct iovec iov = { buf, cap };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(d, &mh, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN)
				rc = common_errno(e, errno, "fd %u: peek at the queued bytes", o->fd);
			break;
		}
		if (o->type == SOCK_STREAM && n == 0)
			break;
		if ((mh.msg_flags & MSG_TRUNC) || (total += (size_t)n) > SNAP_QUEUE_MAX ||
		    o->nmsgs == SNAP_MSGS_MAX) {
			rc = common_errf(e, "capture", "fd %u: more than %u bytes or %u datagrams "
					 "queued in a socket", o->fd, SNAP_QUEUE_MAX, SNAP_MSGS_MAX);
			break;
		}
		add_msg(o, buf, (size_t)n);
		if (o->type == SOCK_STREAM)
			break;
	}
	if (o->type != SOCK_STREAM)
		setsockopt(d, SOL_SOCKET, SO_PEEK_OFF, &orig, sizeof orig);
	free(buf);
	return rc;
}

static int capture_unix(struct snap_fdctx *c, int d, const char *info, struct snap_object *o,
			struct common_err *e)
{
	struct stat sb;
	struct unix_info u;
	uint64_t scm = 0;
	if (fstat(d, &sb) < 0)
		return common_errno(e, errno, "fd %u: fstat", o->fd);
	if (unix_diag(c, (uint32_t)sb.st_ino, &u, e) < 0)
		return -1;
	if (info_num(info, "scm_fds:", 10, &scm) == 0 && scm)
		return common_errf(e, "capture", "fd %u: descriptors in flight in a Unix socket "
				   "are not supported", o->fd);
	struct sockaddr_un a;
	socklen_t al = sizeof a;
	memset(&a, 0, sizeof a);
	if (getsockname(d, (struct sockaddr *)&a, &al) < 0)
		return common_errno(e, errno, "fd %u: getsockname", o->fd);
	o->ino = u.ino;
	o->peer_ino = u.peer;
	if (u.state == TCP_LISTEN_STATE) {
		if (!u.has_rq || u.rq)
			return common_errf(e, "capture", "fd %u: a Unix listener with %u connection(s) "
					   "not yet accepted is not supported", o->fd, u.rq);
		o->state = SNAP_SOCK_LISTENING;
		o->backlog = u.wq;
	} else if (u.has_peer && u.peer) {
		o->state = SNAP_SOCK_PAIRED;
	} else {
		o->state = SNAP_SOCK_UNCONNECTED;
	}
	/* a connected end carries the address it was accepted under: not restored */
	if (o->state != SNAP_SOCK_PAIRED && al > offsetof(struct sockaddr_un, sun_path)) {
		o->addrlen = al - (socklen_t)offsetof(struct sockaddr_un, sun_path);
		if (a.sun_path[0] && o->addrlen && !a.sun_path[o->addrlen - 1])
			o->addrlen = (uint32_t)strnlen(a.sun_path, o->addrlen);
		memcpy(o->addr, a.sun_path, o->addrlen);
	}
	if (o->state == SNAP_SOCK_LISTENING)
		return 0;
	if (peek_queue(d, o, e) < 0)
		return -1;
	if (o->state == SNAP_SOCK_UNCONNECTED && o->nmsgs)
		return common_errf(e, "capture", "fd %u: datagrams queued in an unconnected Unix "
				   "socket are not supported (their senders cannot be restored)",
				   o->fd);
	return 0;
}

static int capture_inet(int d, int family, int type, struct snap_object *o, struct common_err *e)
{
	int listening = 0;
	socklen_t sl = sizeof listening;
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	memset(&ti, 0, sizeof ti);
	getsockopt(d, SOL_SOCKET, SO_ACCEPTCONN, &listening, &sl);
	if (type == SOCK_STREAM && !listening && getsockopt(d, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
	    ti.tcpi_state == TCP_ESTABLISHED_STATE)
		return common_errf(e, "capture", "fd %u: an established TCP connection cannot be "
				   "snapshotted (its peer and sequence state live outside the run)",
				   o->fd);
	if (type != SOCK_STREAM || !listening)
		return common_errf(e, "capture", "fd %u: only listening TCP sockets are supported "
				   "among inet sockets", o->fd);
	if (getsockopt(d, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0)
		return common_errno(e, errno, "fd %u: TCP_INFO", o->fd);
	/* a listener's TCP_INFO: unacked = connections waiting, sacked = backlog */
	if (ti.tcpi_unacked)
		return common_errf(e, "capture", "fd %u: a TCP listener with %u connection(s) not "
				   "yet accepted is not supported", o->fd, ti.tcpi_unacked);
	o->backlog = ti.tcpi_sacked;
	struct sockaddr_in6 a;
	socklen_t al = sizeof a;
	int reuse = 0;
	sl = sizeof reuse;
	if (getsockname(d, (struct sockaddr *)&a, &al) < 0 ||
	    getsockopt(d, SOL_SOCKET, SO_REUSEADDR, &reuse, &sl) < 0)
		return common_errno(e, errno, "fd %u: getsockname", o->fd);
	o->family = (uint32_t)family;
	o->reuse = reuse != 0;
	o->state = SNAP_SOCK_LISTENING;
	if (family == AF_INET) {
		const struct sockaddr_in *a4 = (const void *)&a;
		o->addrlen = 4;
		memcpy(o->addr, &a4->sin_addr, 4);
		o->port = ntohs(a4->sin_port);
	} else {
		o->addrlen = 16;
		memcpy(o->addr, &a.sin6_addr, 16);
		o->port = ntohs(a.sin6_port);
	}
	return 0;
}

static int capture_socket(struct snap_fdctx *c, int d, const char *info, struct snap_object *o,
			  struct common_err *e)
{
	int family = 0, type = 0;
	socklen_t l1 = sizeof family, l2 = sizeof type;
	if (getsockopt(d, SOL_SOCKET, SO_DOMAIN, &family, &l1) < 0 ||
	    getsockopt(d, SOL_SOCKET, SO_TYPE, &type, &l2) < 0)
		return common_errno(e, errno, "fd %u: socket family", o->fd);
	o->type = (uint32_t)type;
	if (family == AF_UNIX) {
		if (type != SOCK_STREAM && type != SOCK_DGRAM && type != SOCK_SEQPACKET)
			return common_errf(e, "capture", "fd %u: Unix socket type %d", o->fd, type);
		o->kind = SNAP_OBJ_UNIX;
		o->family = AF_UNIX;
		return capture_unix(c, d, info, o, e);
	}
	if (family == AF_INET || family == AF_INET6) {
		o->kind = SNAP_OBJ_TCP_LISTEN;
		return capture_inet(d, family, type, o, e);
	}
	return common_errf(e, "capture", "fd %u: sockets of family %d are not supported", o->fd,
			   family);
}

/* Bytes waiting in a tty's input (FIONREAD): not restorable, so refused. */
static int tty_quiet(int d, uint32_t fd, const char *side, struct common_err *e)
{
	int n = 0;
	if (ioctl(d, FIONREAD, &n) < 0)
		return common_errno(e, errno, "fd %u: FIONREAD", fd);
	if (n)
		return common_errf(e, "capture", "fd %u: %d byte(s) buffered in the pty's %s side "
				   "are not supported", fd, n, side);
	return 0;
}

static int capture_pty(int d, const struct stat *sb, struct snap_object *o, struct common_err *e)
{
	struct termios2 t;
	if (major(sb->st_rdev) != 5) {
		o->kind = SNAP_OBJ_PTY_SLAVE;
		o->index = minor(sb->st_rdev) + (major(sb->st_rdev) - PTY_SLAVE_MAJOR) * 256u;
		if (ioctl(d, TCGETS2, &t) < 0 && errno == EIO)
			return common_errf(e, "capture", "fd %u: a pty slave whose master the run does "
					   "not hold is not supported (it was hung up)", o->fd);
		if (ioctl(d, TCGETS2, &t) < 0)
			return common_errno(e, errno, "fd %u: TCGETS2", o->fd);
		memcpy(o->termios[1], &t, SNAP_TERMIOS);
		return tty_quiet(d, o->fd, "slave", e);
	}
	unsigned idx = 0;
	int locked = 0;
	struct winsize ws;
	o->kind = SNAP_OBJ_PTY_MASTER;
	if (ioctl(d, TIOCGPTN, &idx) < 0 || ioctl(d, TIOCGPTLCK, &locked) < 0 ||
	    ioctl(d, TCGETS2, &t) < 0 || ioctl(d, TIOCGWINSZ, &ws) < 0)
		return common_errno(e, errno, "fd %u: pty master state", o->fd);
	o->index = idx;
	o->locked = locked != 0;
	memcpy(o->termios[0], &t, SNAP_TERMIOS);
	o->winsize[0] = ws.ws_row;
	o->winsize[1] = ws.ws_col;
	o->winsize[2] = ws.ws_xpixel;
	o->winsize[3] = ws.ws_ypixel;
	return tty_quiet(d, o->fd, "master", e);
}

/* The object of one descriptor from its copy d and fdinfo. */
static int capture_object(struct snap_fdctx *c, int d, const char *link, const struct stat *sb,
			  struct snap_object *o, struct common_err *e)
{
	char *info = NULL;
	int rc;
	if (read_info(c->pid, o->fd, &info, e) < 0)
		return -1;
	if (S_ISSOCK(sb->st_mode))
		rc = capture_socket(c, d, info, o, e);
	else if (S_ISCHR(sb->st_mode))
		rc = capture_pty(d, sb, o, e);
	else if (!strcmp(link, "anon_inode:[eventfd]"))
		rc = (o->kind = SNAP_OBJ_EVENTFD, capture_eventfd(info, o, e));
	else if (!strcmp(link, "anon_inode:[timerfd]"))
		rc = (o->kind = SNAP_OBJ_TIMERFD, capture_timerfd(info, o, e));
	else if (!strcmp(link, "anon_inode:[signalfd]"))
		rc = (o->kind = SNAP_OBJ_SIGNALFD, capture_signalfd(info, o, e));
	else if (!strcmp(link, "anon_inode:[eventpoll]"))
		rc = (o->kind = SNAP_OBJ_EPOLL, capture_epoll(c->pid, info, o, e));
	else
		rc = common_errf(e, "capture", "fd %u: %s cannot be snapshotted", o->fd, link);
	free(info);
	return rc;
}

void snap_object_clear(struct snap_object *o)
{
	free(o->watch);
	for (size_t i = 0; i < o->nmsgs; i++)
		free(o->msgs[i].data);
	free(o->msgs);
	memset(o, 0, sizeof *o);
}

static struct snap_object *object_at(const struct snap_state *st, uint32_t fd)
{
	for (size_t i = 0; i < st->nobjects; i++)
		if (st->objects[i].fd == fd)
			return &st->objects[i];
	return NULL;
}

const char *snap_obj_name(uint32_t kind)
{
	static const char *const objs[] = { "eventfd", "timerfd", "signalfd", "epoll",
					    "unix-socket", "tcp-listener", "pty-master", "pty-slave" };
	return kind <= SNAP_OBJ_PTY_SLAVE ? objs[kind] : "object";
}

const char *snap_fd_kind_name(const struct snap_state *st, const struct snap_fd *f)
{
	static const char *const files[] = { "stream", "file", "directory", "device",
					     "pipe" };
	if (f->kind == SNAP_FD_SHM)
		return f->size < st->nshms && st->shms[f->size].kind == SNAP_SHM_FILE ? "deleted-file"
										       : "memfd";
	if (f->kind == SNAP_FD_SHARED)
		return f->size && f->size <= st->nkobjs ? snap_obj_name(st->kobjs[f->size - 1].kind)
							: "shared-object";
	if (f->kind < SNAP_FD_OBJECT)
		return files[f->kind];
	const struct snap_object *o = object_at(st, (uint32_t)f->size);
	return o ? snap_obj_name(o->kind) : "object";
}

/* Restore's re-check: a timer's time left and expirations moved with the
 * clock since it was set; the restored ones stand for them. */
static void expected_timer(const struct snap_fdctx *c, struct snap_object *o)
{
	const struct snap_object *x = c->expect ? object_at(c->expect, o->fd) : NULL;
	if (x && x->kind == SNAP_OBJ_TIMERFD && x->clock == o->clock &&
	    x->interval[0] == o->interval[0] && x->interval[1] == o->interval[1]) {
		o->ticks = x->ticks;
		memcpy(o->value, x->value, sizeof o->value);
	}
}

/* The object an earlier process of the tree captured that descriptor f of
 * this one is the same open file as, or NULL. */
static const struct snap_object *captured_before(const struct snap_fdctx *c, uint32_t fd)
{
	for (size_t j = 0; c->tree && j < c->k; j++) {
		const struct snap_state *q = j ? &c->tree->procs[j - 1] : c->tree;
		for (size_t i = 0; i < q->nobjects; i++)
			if (syscall(SYS_kcmp, c->hosts[j], c->pid, KCMP_FILE, q->objects[i].fd, fd) == 0)
				return &q->objects[i];
	}
	return NULL;
}

/* Another holder's object as this process's descriptor fd: what the tree's
 * table keeps is the first holder's (snap_kobjs_capture), so its queued bytes
 * are not copied; an epoll set's watches are, each holder's own stale one
 * found again (the set may be restored from another holder). */
static void held_again(struct snap_fdctx *c, const struct snap_object *x, uint32_t fd,
		       struct snap_object *o)
{
	*o = *x;
	o->fd = fd;
	o->msgs = NULL;
	o->nmsgs = 0;
	o->peer = o->remote = 0;
	o->watch = common_xcalloc(x->nwatch + 1, sizeof *o->watch);
	memcpy(o->watch, x->watch, x->nwatch * sizeof *o->watch);
	if (o->kind == SNAP_OBJ_EPOLL)
		epoll_stale(c->pid, o);
}

/* Descriptor f (an object kind, link its /proc link): the object an earlier
 * descriptor holds (the same open file), or a new one captured now, read from
 * the guest only if no earlier process of the tree holds it. */
int snap_fd_object(struct snap_fdctx *c, struct snap_fd *f, const char *link,
		   const struct stat *sb, struct snap_state *st, struct common_err *e)
{
	for (size_t i = 0; i < st->nobjects; i++)
		if (syscall(SYS_kcmp, c->pid, c->pid, KCMP_FILE, st->objects[i].fd, f->fd) == 0) {
			f->size = st->objects[i].fd;
			return 0;
		}
	if (st->nobjects == SNAP_OBJ_MAX)
		return common_errf(e, "capture", "more than %u descriptor objects", SNAP_OBJ_MAX);
	if (st->nobjects % 16 == 0)
		st->objects = common_xrealloc(st->objects, (st->nobjects + 16) * sizeof *st->objects);
	struct snap_object *o = &st->objects[st->nobjects];
	memset(o, 0, sizeof *o);
	o->fd = f->fd;
	f->size = f->fd;
	const struct snap_object *x = captured_before(c, f->fd);
	if (x) {
		held_again(c, x, f->fd, o);
		st->nobjects++;
		return 0;
	}
	int d = snap_fd_copy(c, f->fd, e);
	if (d < 0)
		return -1;
	int rc = capture_object(c, d, link, sb, o, e);
	close(d);
	if (rc == 0 && o->kind == SNAP_OBJ_TIMERFD)
		expected_timer(c, o);
	st->nobjects++;
	c->objects_read++;
	for (size_t i = 0; i < o->nmsgs; i++)
		c->bytes_read += o->msgs[i].len;
	return rc;
}

/* Once every descriptor is known: each socket pair's ends name each other by
 * descriptor (both must be the run's), each pty slave has its master, each
 * watched descriptor is open. Objects were made in ascending fd order. */
int snap_objects_link(struct snap_state *st, struct common_err *e)
{
	/* version 6: an end whose pair or master another process holds is tied
	 * up with the tree's objects (snap_kobjs_capture) */
	int tree = st->version >= 6, rc = 0;
	for (size_t i = 0; i < st->nobjects && rc == 0; i++) {
		struct snap_object *o = &st->objects[i];
		if (o->kind != SNAP_OBJ_UNIX || o->state != SNAP_SOCK_PAIRED)
			continue;
		size_t j = 0;
		while (j < st->nobjects && (j == i || st->objects[j].kind != SNAP_OBJ_UNIX ||
					    st->objects[j].ino != o->peer_ino))
			j++;
		if (j == st->nobjects && tree)
			o->remote = 1;
		else if (j == st->nobjects || st->objects[j].state != SNAP_SOCK_PAIRED ||
			 st->objects[j].peer_ino != o->ino || st->objects[j].type != o->type)
			rc = common_errf(e, "capture", "fd %u of process %u: a Unix socket connected "
					 "to one in another process or outside the run (or not back to "
					 "it) is not supported", o->fd, st->pid ? st->pid : st->tid);
		else
			o->peer = st->objects[j].fd;
	}
	for (size_t i = 0; i < st->nobjects && rc == 0; i++) {
		struct snap_object *o = &st->objects[i];
		int master = 0;
		for (size_t j = 0; o->kind == SNAP_OBJ_PTY_SLAVE && j < st->nobjects; j++)
			master |= st->objects[j].kind == SNAP_OBJ_PTY_MASTER && st->objects[j].index == o->index;
		if (o->kind == SNAP_OBJ_PTY_SLAVE && !master && tree)
			o->remote = 1;
		else if (o->kind == SNAP_OBJ_PTY_SLAVE && !master)
			rc = common_errf(e, "capture", "fd %u: a pty slave whose master the run does "
					 "not hold is not supported", o->fd);
		else if (o->stale && !tree)
			rc = snap_epoll_stale(o, e);
	}
	return rc;
}

int snap_epoll_stale(const struct snap_object *o, struct common_err *e)
{
	return common_errf(e, "capture", "fd %u: epoll set watches descriptor %u, which no "
			   "longer holds the watched file", o->fd, o->stale - 1);
}

int snap_objects_unshared(const struct snap_state *st, const pid_t *hosts, struct common_err *e)
{
	for (size_t k = 1; k <= st->nprocs; k++) {
		const struct snap_state *p = &st->procs[k - 1];
		for (size_t i = 0; i < p->nobjects; i++)
			for (size_t j = 0; j < k; j++) {
				const struct snap_state *q = j ? &st->procs[j - 1] : st;
				for (size_t m = 0; m < q->nobjects; m++)
					if (syscall(SYS_kcmp, hosts[k], hosts[j], KCMP_FILE, p->objects[i].fd,
						    q->objects[m].fd) == 0)
						return common_errf(e, "capture", "fd %u of process %u: %s "
								   "is also fd %u of %s: a kernel object "
								   "held by several processes is not "
								   "supported", p->objects[i].fd, p->pid,
								   snap_obj_name(p->objects[i].kind),
								   q->objects[m].fd, j ? "another process"
								   : "the root process");
			}
	}
	return 0;
}

void snap_object_put(struct codec_buf *b, const struct snap_object *o)
{
	codec_put_u32(b, o->kind);
	codec_put_u32(b, o->fd);
	switch (o->kind) {
	case SNAP_OBJ_EVENTFD:
		codec_put_u64(b, o->count);
		codec_put_u32(b, o->semaphore);
		break;
	case SNAP_OBJ_TIMERFD:
		codec_put_u32(b, o->clock);
		codec_put_u64(b, o->ticks);
		for (int i = 0; i < 2; i++)
			codec_put_u64(b, o->value[i]);
		for (int i = 0; i < 2; i++)
			codec_put_u64(b, o->interval[i]);
		break;
	case SNAP_OBJ_SIGNALFD:
		codec_put_u64(b, o->mask);
		break;
	case SNAP_OBJ_EPOLL:
		codec_put_u32(b, (uint32_t)o->nwatch);
		for (size_t i = 0; i < o->nwatch; i++) {
			codec_put_u32(b, o->watch[i].fd);
			codec_put_u32(b, o->watch[i].events);
			codec_put_u64(b, o->watch[i].data);
		}
		break;
	case SNAP_OBJ_UNIX:
	case SNAP_OBJ_TCP_LISTEN:
		codec_put_u32(b, o->family);
		codec_put_u32(b, o->type);
		codec_put_u32(b, o->state);
		codec_put_u32(b, o->peer);
		codec_put_u32(b, o->backlog);
		codec_put_u32(b, o->reuse);
		codec_put_u32(b, o->port);
		codec_put_u32(b, o->addrlen);
		codec_put_raw(b, o->addr, o->addrlen);
		codec_put_u32(b, (uint32_t)o->nmsgs);
		for (size_t i = 0; i < o->nmsgs; i++) {
			codec_put_u32(b, o->msgs[i].len);
			codec_put_raw(b, o->msgs[i].data, o->msgs[i].len);
		}
		break;
	case SNAP_OBJ_PTY_MASTER:
	case SNAP_OBJ_PTY_SLAVE:
		codec_put_u32(b, o->index);
		codec_put_u32(b, o->locked);
		codec_put_raw(b, o->termios[0], SNAP_TERMIOS);
		codec_put_raw(b, o->termios[1], SNAP_TERMIOS);
		for (int i = 0; i < 4; i++)
			codec_put_u32(b, o->winsize[i]);
		break;
	}
}

void snap_objects_put(struct codec_buf *b, const struct snap_state *st)
{
	codec_put_u32(b, (uint32_t)st->nobjects);
	for (size_t i = 0; i < st->nobjects; i++)
		snap_object_put(b, &st->objects[i]);
	codec_put_u32(b, (uint32_t)st->nsegments);
	for (size_t i = 0; i < st->nsegments; i++) {
		const struct snap_segment *g = &st->segments[i];
		codec_put_u32(b, g->id);
		codec_put_u32(b, g->key);
		codec_put_u32(b, g->mode);
		codec_put_u32(b, g->removed);
		codec_put_u32(b, g->uid);
		codec_put_u32(b, g->gid);
		codec_put_u64(b, g->size);
	}
}

static int get_u32s(struct codec_rd *r, uint32_t *v, int n)
{
	for (int i = 0; i < n; i++)
		if (codec_get_u32(r, &v[i]) < 0)
			return -1;
	return 0;
}

static int get_socket(struct codec_rd *r, struct snap_object *o)
{
	uint32_t v[8], n;
	const uint8_t *p;
	if (get_u32s(r, v, 8) < 0)
		return -1;
	o->family = v[0], o->type = v[1], o->state = v[2], o->peer = v[3];
	o->backlog = v[4], o->reuse = v[5], o->port = v[6], o->addrlen = v[7];
	int unix_ = o->kind == SNAP_OBJ_UNIX;
	if (unix_ ? (o->family != AF_UNIX || (o->type != SOCK_STREAM && o->type != SOCK_DGRAM &&
					      o->type != SOCK_SEQPACKET) ||
		     o->state > SNAP_SOCK_LISTENING || o->addrlen > SNAP_SOCKADDR_MAX || o->port ||
		     o->reuse || (o->state == SNAP_SOCK_PAIRED) != (o->peer != 0) ||
		     (o->state == SNAP_SOCK_PAIRED && o->addrlen) ||
		     (o->state == SNAP_SOCK_LISTENING && o->type == SOCK_DGRAM))
		  : (o->type != SOCK_STREAM || o->state != SNAP_SOCK_LISTENING || o->peer ||
		     o->reuse > 1 || o->port > 65535 ||
		     (o->family == AF_INET ? o->addrlen != 4 : o->family != AF_INET6 || o->addrlen != 16)))
		return codec_rd_fail(r, "socket family, type, state or address invalid");
	if (o->state != SNAP_SOCK_LISTENING && o->backlog)
		return codec_rd_fail(r, "backlog on a socket that does not listen");
	if (o->backlog > 65536)
		return codec_rd_fail(r, "listen backlog out of range");
	if (codec_get_raw(r, &p, o->addrlen) < 0 || codec_get_u32(r, &n) < 0)
		return -1;
	memcpy(o->addr, p, o->addrlen);
	uint64_t total = 0;
	if (n > SNAP_MSGS_MAX || (uint64_t)n * 4 > r->len - r->off ||
	    (n && o->state != SNAP_SOCK_PAIRED) || (o->type == SOCK_STREAM && n > 1))
		return codec_rd_fail(r, "queued message count out of range");
	o->msgs = common_xcalloc(n ? n : 1, sizeof *o->msgs);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len;
		if (codec_get_u32(r, &len) < 0)
			return -1;
		if ((total += len) > SNAP_QUEUE_MAX || (o->type == SOCK_STREAM && !len))
			return codec_rd_fail(r, "queued bytes out of range");
		if (codec_get_raw(r, &p, len) < 0)
			return -1;
		o->msgs[i].len = len;
		o->msgs[i].data = common_xmalloc(len ? len : 1);
		memcpy(o->msgs[i].data, p, len);
		o->nmsgs = i + 1;
	}
	return 0;
}

static int get_watches(struct codec_rd *r, struct snap_object *o)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_OBJ_MAX || (uint64_t)n * 16 > r->len - r->off)
		return codec_rd_fail(r, "epoll watch count out of range");
	o->watch = common_xcalloc(n ? n : 1, sizeof *o->watch);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_watch *w = &o->watch[i];
		if (codec_get_u32(r, &w->fd) < 0 || codec_get_u32(r, &w->events) < 0 ||
		    codec_get_u64(r, &w->data) < 0)
			return -1;
		o->nwatch = i + 1;
		if (i && w->fd <= o->watch[i - 1].fd)
			return codec_rd_fail(r, "epoll watches are not sorted");
	}
	return 0;
}

static int valid_clock(uint32_t c)
{
	return c == 0 || c == 1 || c == 7 || c == 8 || c == 9;
}

int snap_object_get(struct codec_rd *r, struct snap_object *o)
{
	uint32_t v[2];
	switch (o->kind) {
	case SNAP_OBJ_EVENTFD:
		if (codec_get_u64(r, &o->count) < 0 || codec_get_u32(r, &o->semaphore) < 0)
			return -1;
		if (o->count == UINT64_MAX || o->semaphore > 1)
			return codec_rd_fail(r, "eventfd counter or flag out of range");
		return 0;
	case SNAP_OBJ_TIMERFD:
		if (codec_get_u32(r, &o->clock) < 0 || codec_get_u64(r, &o->ticks) < 0 ||
		    codec_get_u64(r, &o->value[0]) < 0 || codec_get_u64(r, &o->value[1]) < 0 ||
		    codec_get_u64(r, &o->interval[0]) < 0 || codec_get_u64(r, &o->interval[1]) < 0)
			return -1;
		if (!valid_clock(o->clock) || o->value[1] >= 1000000000u || o->interval[1] >= 1000000000u ||
		    o->value[0] >> 40 || o->interval[0] >> 40)
			return codec_rd_fail(r, "timerfd clock or time out of range");
		return 0;
	case SNAP_OBJ_SIGNALFD:
		return codec_get_u64(r, &o->mask);
	case SNAP_OBJ_EPOLL:
		return get_watches(r, o);
	case SNAP_OBJ_UNIX:
	case SNAP_OBJ_TCP_LISTEN:
		return get_socket(r, o);
	default: {
		const uint8_t *p;
		if (get_u32s(r, v, 2) < 0)
			return -1;
		o->index = v[0];
		o->locked = v[1];
		for (int i = 0; i < 2; i++) {
			if (codec_get_raw(r, &p, SNAP_TERMIOS) < 0)
				return -1;
			memcpy(o->termios[i], p, SNAP_TERMIOS);
		}
		uint32_t ws[4];
		if (get_u32s(r, ws, 4) < 0)
			return -1;
		for (int i = 0; i < 4; i++) {
			if (ws[i] > 0xffff)
				return codec_rd_fail(r, "pty window size out of range");
			o->winsize[i] = (uint16_t)ws[i];
		}
		if (o->index >= SNAP_PTY_MAX || o->locked > 1)
			return codec_rd_fail(r, "pty number or lock out of range");
		return 0;
	}
	}
}

static int get_segments(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_OBJ_MAX || (uint64_t)n * 32 > r->len - r->off)
		return codec_rd_fail(r, "segment count out of range");
	st->segments = common_xcalloc(n ? n : 1, sizeof *st->segments);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_segment *g = &st->segments[i];
		if (codec_get_u32(r, &g->id) < 0 || codec_get_u32(r, &g->key) < 0 ||
		    codec_get_u32(r, &g->mode) < 0 || codec_get_u32(r, &g->removed) < 0 ||
		    codec_get_u32(r, &g->uid) < 0 || codec_get_u32(r, &g->gid) < 0 ||
		    codec_get_u64(r, &g->size) < 0)
			return -1;
		st->nsegments = i + 1;
		if ((i && g->id <= st->segments[i - 1].id) || g->mode > 0777 || g->removed > 1 ||
		    !g->size || g->size > SNAP_MAX_BYTES || (g->removed && g->key))
			return codec_rd_fail(r, "SysV segment invalid or out of order");
	}
	return 0;
}

int snap_objects_get(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_OBJ_MAX || (uint64_t)n * 8 > r->len - r->off)
		return codec_rd_fail(r, "object count out of range");
	st->objects = common_xcalloc(n ? n : 1, sizeof *st->objects);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_object *o = &st->objects[i];
		if (codec_get_u32(r, &o->kind) < 0 || codec_get_u32(r, &o->fd) < 0)
			return -1;
		st->nobjects = i + 1;
		if (o->kind > SNAP_OBJ_PTY_SLAVE || (i && o->fd <= st->objects[i - 1].fd))
			return codec_rd_fail(r, "object kind unknown or objects not sorted");
		if (snap_object_get(r, o) < 0)
			return -1;
	}
	return get_segments(r, st);
}

/* What decode checks across sections: every object descriptor names an
 * object, every object is its lowest descriptor, pairs name each other, a
 * slave has its master, a watch names an open descriptor. */
int snap_objects_check(struct codec_rd *r, const struct snap_state *st)
{
	for (size_t i = 0; i < st->nfds; i++) {
		const struct snap_fd *f = &st->fds[i];
		const struct snap_object *o = f->kind == SNAP_FD_OBJECT ? object_at(st, (uint32_t)f->size) : NULL;
		if (f->kind == SNAP_FD_OBJECT && (!o || o->fd > f->fd || f->size > UINT32_MAX))
			return codec_rd_fail(r, "descriptor names no object");
	}
	for (size_t i = 0; i < st->nobjects; i++) {
		const struct snap_object *o = &st->objects[i], *p;
		size_t k = 0;
		while (k < st->nfds && st->fds[k].fd != o->fd)
			k++;
		if (k == st->nfds || st->fds[k].kind != SNAP_FD_OBJECT || st->fds[k].size != o->fd)
			return codec_rd_fail(r, "object without its descriptor");
		if (o->kind == SNAP_OBJ_UNIX && o->state == SNAP_SOCK_PAIRED &&
		    (o->peer == o->fd || !(p = object_at(st, o->peer)) || p->kind != SNAP_OBJ_UNIX ||
		     p->state != SNAP_SOCK_PAIRED || p->peer != o->fd || p->type != o->type))
			return codec_rd_fail(r, "socket pair ends do not name each other");
		int master = o->kind != SNAP_OBJ_PTY_SLAVE;
		for (size_t j = 0; !master && j < st->nobjects; j++)
			master = st->objects[j].kind == SNAP_OBJ_PTY_MASTER &&
				 st->objects[j].index == o->index;
		if (!master)
			return codec_rd_fail(r, "pty slave without its master");
		for (size_t w = 0; o->kind == SNAP_OBJ_EPOLL && w < o->nwatch; w++) {
			k = 0;
			while (k < st->nfds && st->fds[k].fd != o->watch[w].fd)
				k++;
			if (k == st->nfds)
				return codec_rd_fail(r, "epoll watch of a descriptor not open");
		}
	}
	return 0;
}

void snap_objects_free(struct snap_state *st)
{
	for (size_t i = 0; i < st->nobjects; i++)
		snap_object_clear(&st->objects[i]);
	free(st->objects);
	free(st->segments);
	st->objects = NULL;
	st->segments = NULL;
	st->nobjects = st->nsegments = 0;
}
