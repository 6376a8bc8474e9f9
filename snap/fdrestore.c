/* snap: descriptor objects rebuilt in a restored process by injected calls
 * (each made, then moved to its descriptor numbers), their state put back
 * through a copy of the new descriptor: counters, timers, queued bytes,
 * termios; epoll watches last, once every watched descriptor is open. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <asm/termbits.h>
#include "snap/snap-internal.h"

#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)

struct fr {
	struct trace_tracee *t;
	uint64_t scratch;
	const struct snap_state *st;
	struct snap_fdctx c;
	struct common_err *e;
};

static int must(struct fr *f, const char *what, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		uint64_t a3, int64_t *ret)
{
	uint64_t a[6] = { a0, a1, a2, a3, 0, 0 };
	int64_t r;
	if (trace_tracee_inject(f->t, nr, a, &r, f->e) < 0)
		return -1;
	if (r < 0 && r > -4096)
		return common_errf(f->e, "restore", "%s: %s", what, strerror((int)-r));
	if (ret)
		*ret = r;
	return 0;
}

static int scratch_put(struct fr *f, const void *p, size_t n)
{
	return trace_tracee_write(f->t, f->scratch, p, n, f->e);
}

static const struct snap_fd *fd_rec(const struct snap_state *st, uint32_t fd)
{
	for (size_t i = 0; i < st->nfds; i++)
		if (st->fds[i].fd == fd)
			return &st->fds[i];
	return NULL;
}

/* Close-on-exec of the descriptor, O_NONBLOCK of its open file. */
static int set_flags(struct fr *f, uint32_t fd)
{
	const struct snap_fd *r = fd_rec(f->st, fd);
	uint32_t fl = r ? r->flags : 0;
	return must(f, "fcntl(F_SETFD)", SYS_fcntl, fd, F_SETFD, fl & O_CLOEXEC ? FD_CLOEXEC : 0, 0,
		    NULL) < 0 ||
	       must(f, "fcntl(F_SETFL)", SYS_fcntl, fd, F_SETFL, fl & O_NONBLOCK, 0, NULL) < 0 ? -1 : 0;
}

/* New descriptors tmp[i] moved to target[i]: first out of each other's way
 * (above every target), then each to its number. */
static int place(struct fr *f, int64_t *tmp, const uint32_t *target, int n)
{
	uint32_t top = 0;
	for (int i = 0; i < n; i++)
		top = target[i] > top ? target[i] : top;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			if (j == i || tmp[i] == (int64_t)target[i] || tmp[i] != (int64_t)target[j])
				continue;
			int64_t moved;
			if (must(f, "fcntl(F_DUPFD)", SYS_fcntl, (uint64_t)tmp[i], F_DUPFD, top + 1, 0,
				 &moved) < 0 ||
			    must(f, "close", SYS_close, (uint64_t)tmp[i], 0, 0, 0, NULL) < 0)
				return -1;
			tmp[i] = moved;
		}
	for (int i = 0; i < n; i++) {
		if (tmp[i] != (int64_t)target[i] &&
		    (must(f, "dup3", SYS_dup3, (uint64_t)tmp[i], target[i], 0, 0, NULL) < 0 ||
		     must(f, "close", SYS_close, (uint64_t)tmp[i], 0, 0, 0, NULL) < 0))
			return -1;
		if (set_flags(f, target[i]) < 0)
			return -1;
	}
	return 0;
}

/* Every other descriptor that holds the object at fd. */
static int dup_rest(struct fr *f, uint32_t fd)
{
	for (size_t i = 0; i < f->st->nfds; i++) {
		const struct snap_fd *d = &f->st->fds[i];
		if (d->kind != SNAP_FD_OBJECT || d->size != fd || d->fd == fd)
			continue;
		if (must(f, "dup3", SYS_dup3, fd, d->fd, d->flags & O_CLOEXEC, 0, NULL) < 0)
			return -1;
	}
	return 0;
}

/* Run op on a copy of the restored descriptor fd. */
static int with_copy(struct fr *f, uint32_t fd, int (*op)(int d, const struct snap_object *o),
		     const struct snap_object *o, const char *what)
{
	int d = snap_fd_copy(&f->c, fd, f->e);
	if (d < 0)
		return -1;
	int rc = op(d, o);
	int err = errno;
	close(d);
	return rc < 0 ? common_errno(f->e, err, "fd %u: %s", fd, what) : 0;
}

static int put_count(int d, const struct snap_object *o)
{
	return write(d, &o->count, 8) == 8 ? 0 : -1;
}

static int put_ticks(int d, const struct snap_object *o)
{
	uint64_t t = o->ticks;
	return ioctl(d, TFD_IOC_SET_TICKS, &t);
}

static int put_master(int d, const struct snap_object *o)
{
	struct winsize ws = { o->winsize[0], o->winsize[1], o->winsize[2], o->winsize[3] };
	int unlock = 0;
	return ioctl(d, TIOCSPTLCK, &unlock) < 0 || ioctl(d, TCSETS2, o->termios[0]) < 0 ||
	       ioctl(d, TIOCSWINSZ, &ws) < 0 ? -1 : 0;
}

static int put_slave(int d, const struct snap_object *o)
{
	return ioctl(d, TCSETS2, o->termios[1]);
}

static int put_lock(int d, const struct snap_object *o)
{
	int lock = (int)o->locked;
	return ioctl(d, TIOCSPTLCK, &lock);
}

/* Each message sent from the other end arrives queued at this one. */
static int send_queue(struct fr *f, const struct snap_object *to, uint32_t from)
{
	if (!to->nmsgs)
		return 0;
	int d = snap_fd_copy(&f->c, from, f->e);
	if (d < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < to->nmsgs && rc == 0; i++) {
		ssize_t n = send(d, to->msgs[i].data, to->msgs[i].len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n != (ssize_t)to->msgs[i].len)
			rc = common_errno(f->e, n < 0 ? errno : EMSGSIZE, "fd %u: queue %u bytes again",
					  to->fd, to->msgs[i].len);
	}
	close(d);
	return rc;
}

static const struct snap_object *object_at(const struct snap_state *st, uint32_t fd)
{
	for (size_t i = 0; i < st->nobjects; i++)
		if (st->objects[i].fd == fd)
			return &st->objects[i];
	return NULL;
}

/* A Unix socket's path (sa, len at scratch) taken by a socket file nobody
 * listens on (a connect is refused): the file a listener left, as in a directory
 * the run binds that outlives it (a chain's next link), unlinked. 1 when it was. */
static int unlink_stale(struct fr *f, const struct snap_object *o, size_t len)
{
	uint64_t sk[6] = { AF_UNIX, o->type | SOCK_CLOEXEC, 0, 0, 0, 0 }, at[6] = { 0 };
	int64_t s, r = 0, ign;
	if (o->addr[0] == 0 || trace_tracee_inject(f->t, SYS_socket, sk, &s, f->e) < 0 || s < 0)
		return 0;
	uint64_t c[6] = { (uint64_t)s, f->scratch, len, 0, 0, 0 }, cl[6] = { (uint64_t)s, 0, 0, 0, 0, 0 };
	if (trace_tracee_inject(f->t, SYS_connect, c, &r, f->e) < 0 ||
	    trace_tracee_inject(f->t, SYS_close, cl, &ign, f->e) < 0 || r != -ECONNREFUSED)
		return 0;
	at[0] = (uint64_t)AT_FDCWD;
	at[1] = f->scratch + offsetof(struct sockaddr_un, sun_path);
	return trace_tracee_inject(f->t, SYS_unlinkat, at, &r, f->e) == 0 && r == 0;
}

static int bind_listen(struct fr *f, const struct snap_object *o, uint32_t fd)
{
	uint8_t sa[128];
	size_t len;
	memset(sa, 0, sizeof sa);
	if (o->family == AF_UNIX) {
		struct sockaddr_un *u = (void *)sa;
		u->sun_family = AF_UNIX;
		memcpy(u->sun_path, o->addr, o->addrlen);
		len = offsetof(struct sockaddr_un, sun_path) + o->addrlen;
	} else if (o->family == AF_INET) {
		struct sockaddr_in *a = (void *)sa;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)o->port);
		memcpy(&a->sin_addr, o->addr, 4);
		len = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (void *)sa;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)o->port);
		memcpy(&a->sin6_addr, o->addr, 16);
		len = sizeof *a;
	}
	int one = 1;
	uint64_t a[6] = { fd, SOL_SOCKET, SO_REUSEADDR, f->scratch, sizeof one, 0 };
	int64_t r = 0;
	if (o->reuse && (scratch_put(f, &one, sizeof one) < 0 ||
			 trace_tracee_inject(f->t, SYS_setsockopt, a, &r, f->e) < 0))
		return -1;
	if (r < 0)
		return common_errf(f->e, "restore", "setsockopt(SO_REUSEADDR): %s", strerror((int)-r));
	uint64_t b[6] = { fd, f->scratch, len, 0, 0, 0 };
	if (o->addrlen && (scratch_put(f, sa, sizeof sa) < 0 ||
			   trace_tracee_inject(f->t, SYS_bind, b, &r, f->e) < 0))
		return -1;
	if (o->addrlen && r == -EADDRINUSE && o->family == AF_UNIX && unlink_stale(f, o, len) &&
	    trace_tracee_inject(f->t, SYS_bind, b, &r, f->e) < 0)
		return -1;
	if (o->addrlen && r < 0)
		return common_errf(f->e, "restore", "bind: %s", strerror((int)-r));
	if (o->state == SNAP_SOCK_LISTENING &&
	    must(f, "listen", SYS_listen, fd, o->backlog, 0, 0, NULL) < 0)
		return -1;
	return 0;
}

static int make_socket(struct fr *f, const struct snap_object *o)
{
	int64_t t[2];
	if (o->state == SNAP_SOCK_PAIRED) {
		if (o->peer < o->fd)
			return 0; /* made with its pair's first end */
		int32_t pair[2];
		uint32_t target[2] = { o->fd, o->peer };
		if (must(f, "socketpair", SYS_socketpair, AF_UNIX, o->type, 0, f->scratch, NULL) < 0 ||
		    trace_tracee_read(f->t, f->scratch, pair, sizeof pair, f->e) < 0)
			return -1;
		t[0] = pair[0];
		t[1] = pair[1];
		const struct snap_object *p = object_at(f->st, o->peer);
		return place(f, t, target, 2) < 0 || dup_rest(f, o->fd) < 0 || dup_rest(f, o->peer) < 0 ||
		       send_queue(f, o, o->peer) < 0 || send_queue(f, p, o->fd) < 0 ? -1 : 0;
	}
	if (must(f, "socket", SYS_socket, o->family, o->type, 0, 0, &t[0]) < 0 ||
	    place(f, t, &o->fd, 1) < 0)
		return -1;
	return bind_listen(f, o, o->fd) < 0 ? -1 : dup_rest(f, o->fd);
}

/* /dev/ptmx opened until it hands out pty number index (a fresh devpts
 * numbers from 0), the ones before closed again. */
static int make_master(struct fr *f, const struct snap_object *o, int64_t *fd)
{
	int64_t held[64];
	int nheld = 0, rc = 0;
	static const char ptmx[] = "/dev/ptmx";
	for (;;) {
		int64_t m;
		uint32_t idx;
		if (scratch_put(f, ptmx, sizeof ptmx) < 0 ||
		    must(f, "open /dev/ptmx", SYS_openat, (uint64_t)AT_FDCWD, f->scratch,
			 O_RDWR | O_NOCTTY, 0, &m) < 0 ||
		    must(f, "ioctl(TIOCGPTN)", SYS_ioctl, (uint64_t)m, TIOCGPTN, f->scratch, 0, NULL) < 0 ||
		    trace_tracee_read(f->t, f->scratch, &idx, sizeof idx, f->e) < 0) {
			rc = -1;
			break;
		}
		if (idx == o->index) {
			*fd = m;
			break;
		}
		if (idx > o->index || nheld == (int)(sizeof held / sizeof held[0])) {
			rc = common_errf(f->e, "restore", "fd %u: pty %u is not free (the run's devpts "
					 "gave %u)", o->fd, o->index, idx);
			held[nheld++] = m;
			break;
		}
		held[nheld++] = m;
	}
	for (int i = 0; i < nheld; i++)
		if (must(f, "close", SYS_close, (uint64_t)held[i], 0, 0, 0, NULL) < 0)
			rc = -1;
	return rc;
}

static int make_object(struct fr *f, const struct snap_object *o)
{
	int64_t t;
	switch (o->kind) {
	case SNAP_OBJ_EVENTFD:
		if (must(f, "eventfd2", SYS_eventfd2, 0, o->semaphore ? 1 : 0, 0, 0, &t) < 0 ||
		    place(f, &t, &o->fd, 1) < 0)
			return -1;
		return o->count ? with_copy(f, o->fd, put_count, o, "eventfd counter") : 0;
	case SNAP_OBJ_TIMERFD: {
		uint64_t its[4] = { o->interval[0], o->interval[1], o->value[0], o->value[1] };
		/* a periodic timer past its expiry (time left 0) is re-armed when
		 * read; here it fires at once, then the expirations are set */
		if (!o->value[0] && !o->value[1] && (o->interval[0] || o->interval[1]))
			its[3] = 1;
		if (must(f, "timerfd_create", SYS_timerfd_create, o->clock, 0, 0, 0, &t) < 0 ||
		    place(f, &t, &o->fd, 1) < 0 || scratch_put(f, its, sizeof its) < 0 ||
		    must(f, "timerfd_settime", SYS_timerfd_settime, o->fd, 0, f->scratch, 0, NULL) < 0)
			return -1;
		return o->ticks ? with_copy(f, o->fd, put_ticks, o, "timerfd expirations") : 0;
	}
	case SNAP_OBJ_SIGNALFD:
		return scratch_put(f, &o->mask, 8) < 0 ||
		       must(f, "signalfd4", SYS_signalfd4, (uint64_t)-1, f->scratch, 8, 0, &t) < 0 ||
		       place(f, &t, &o->fd, 1) < 0 ? -1 : 0;
	case SNAP_OBJ_EPOLL:
		return must(f, "epoll_create1", SYS_epoll_create1, 0, 0, 0, 0, &t) < 0 ||
		       place(f, &t, &o->fd, 1) < 0 ? -1 : 0;
	case SNAP_OBJ_UNIX:
	case SNAP_OBJ_TCP_LISTEN:
		return make_socket(f, o);
	case SNAP_OBJ_PTY_MASTER:
		return make_master(f, o, &t) < 0 || place(f, &t, &o->fd, 1) < 0 ||
		       with_copy(f, o->fd, put_master, o, "pty master state") < 0 ? -1 : 0;
	default: {
		char path[32];
		snprintf(path, sizeof path, "/dev/pts/%u", o->index);
		return scratch_put(f, path, strlen(path) + 1) < 0 ||
		       must(f, "open the pty slave", SYS_openat, (uint64_t)AT_FDCWD, f->scratch,
			    O_RDWR | O_NOCTTY, 0, &t) < 0 ||
		       place(f, &t, &o->fd, 1) < 0 ||
		       with_copy(f, o->fd, put_slave, o, "pty slave termios") < 0 ? -1 : 0;
	}
	}
}

/* Watches, then master locks: once every descriptor exists. */
static int finish_object(struct fr *f, const struct snap_object *o)
{
	if (o->kind == SNAP_OBJ_PTY_MASTER)
		return o->locked ? with_copy(f, o->fd, put_lock, o, "pty lock") : 0;
	for (size_t i = 0; o->kind == SNAP_OBJ_EPOLL && i < o->nwatch; i++) {
		uint8_t ev[12];
		memcpy(ev, &o->watch[i].events, 4);
		memcpy(ev + 4, &o->watch[i].data, 8);
		char what[48];
		snprintf(what, sizeof what, "epoll_ctl(fd %u)", o->watch[i].fd);
		if (scratch_put(f, ev, sizeof ev) < 0 ||
		    must(f, what, SYS_epoll_ctl, o->fd, 1 /* EPOLL_CTL_ADD */, o->watch[i].fd,
			 f->scratch, NULL) < 0)
			return -1;
	}
	return 0;
}

int snap_objects_restore(struct trace_tracee *t, uint64_t scratch, const struct snap_state *st,
			 struct common_err *e)
{
	struct fr f = { .t = t, .scratch = scratch, .st = st, .e = e };
	int rc = 0;
	snap_fdctx_init(&f.c, t->tid);
	/* slaves after every master: a slave opens the master's number */
	for (int pass = 0; pass < 2 && rc == 0; pass++)
		for (size_t i = 0; i < st->nobjects && rc == 0; i++) {
			const struct snap_object *o = &st->objects[i];
			if ((o->kind == SNAP_OBJ_PTY_SLAVE) != pass)
				continue;
			rc = make_object(&f, o);
			if (rc == 0 && o->kind != SNAP_OBJ_UNIX && o->kind != SNAP_OBJ_TCP_LISTEN)
				rc = dup_rest(&f, o->fd);
		}
	for (size_t i = 0; i < st->nobjects && rc == 0; i++)
		rc = finish_object(&f, &st->objects[i]);
	snap_fdctx_close(&f.c);
	return rc;
}
