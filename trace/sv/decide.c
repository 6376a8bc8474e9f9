/* trace/sv: the decisions the supervisor makes itself at a seccomp stop, before
 * the layers see the call: a connect or a datagram's address (the socket rule,
 * trace/sv/sock.c), and S_ISGID asked of a directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "trace/tracee/tracee.h"
#include "trace/sv/sv-internal.h"

/* A connect, judged before the layers see it (a refusal is recorded as one). */
int trace_sv_connect_decide(struct trace_supervisor *sv, struct tstate *t, struct trace_conn *c,
			  const uint64_t a[6], int *answer_errno)
{
	int refused = 0;
	*answer_errno = trace_sock_decide(&sv->diag, sv->p->cfg, t->tid, a, c, &refused);
	return refused ? *answer_errno : 0;
}

/* The connect the layers let through: made here for the guest, on the objects
 * decided (again, when a hook rewrote its arguments), or left to the kernel. */
void trace_sv_connect_run(struct trace_supervisor *sv, struct tstate *t, struct trace_conn *c,
			  int err)
{
	struct user_regs_struct r;
	const struct trace_stop *st = &t->st;
	if (trace_regs_get(t->tid, &r) < 0 || (long)r.orig_rax != TRACE_SYS_connect)
		return;
	if (r.rdi != st->args[0] || r.rsi != st->args[1] || r.rdx != st->args[2]) {
		uint64_t a[6] = { r.rdi, r.rsi, r.rdx, 0, 0, 0 };
		trace_sock_close(c);
		if (trace_sv_connect_decide(sv, t, c, a, &err))
			sv->res->refused++;
	}
	int wait = 0;
	long rc = err ? -err : 0;
	if (!err && c->sock >= 0) {
		rc = trace_sock_connect(c, sv->p->host_uid, sv->p->host_gid,
					t->conn_waits == c->ino, &wait);
		t->conn_waits = wait ? c->ino : 0;
	}
	if (err || c->sock >= 0)
		trace_sv_answer(t->tid, rc, wait);
}

int trace_sv_is_send(long nr)
{
	return nr == TRACE_SYS_sendto || nr == TRACE_SYS_sendmsg || nr == TRACE_SYS_sendmmsg;
}

/* A datagram's addresses, judged before the layers see the call. */
int trace_sv_send_decide(struct trace_supervisor *sv, struct tstate *t, const uint64_t a[6],
		       int *answer_errno)
{
	int refused = 0;
	*answer_errno = trace_sock_send_decide(&sv->diag, sv->p->cfg, t->tid, t->st.nr, a, &refused);
	return refused ? *answer_errno : 0;
}

void trace_sv_sgid_drop(struct tstate *t)
{
	if (t->sgid)
		close(t->sgid_fd);
	t->sgid = 0;
}

/* A chmod asking S_ISGID: the object it names, opened now (its type cannot
 * change under us). 0 when it is a directory, kept for sgid_exit; -1 when it is
 * anything else or cannot be named, and the boundary's refusal stands. */
int trace_sv_sgid_entry(struct tstate *t, const struct trace_stop *st)
{
	int path = trace_sys_arg(st->sys, TRACE_ARG_PATH), dir = trace_sys_arg(st->sys, TRACE_ARG_DIRFD);
	int flags = st->nr == TRACE_SYS_fchmodat2 ? (int)st->args[3] : 0, fd;
	struct stat sb;

	if (path < 0)
		fd = trace_fd_open(t->tid, (int)st->args[0]);
	else if (!st->raw[0] || !st->path[0])
		fd = -EFAULT;
	else if (!st->raw[0][0])
		fd = flags & AT_EMPTY_PATH ? trace_fd_open(t->tid, dir < 0 ? AT_FDCWD : (int)st->args[dir])
					   : -ENOENT;
	else
		fd = trace_path_open(t->tid, st->path[0], !(flags & AT_SYMLINK_NOFOLLOW));
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		close(fd);
		return -1;
	}
	t->sgid = 1;
	t->sgid_fd = fd;
	return 0;
}

/* The call runs without S_ISGID, so whatever its path names by then (a guest
 * may swap a file in) gets no setgid bit; 0 or -errno. */
int trace_sv_sgid_strip(struct tstate *t, const struct trace_stop *st, int mode_arg)
{
	struct user_regs_struct r;
	uint64_t a[6];
	int rc = trace_regs_get(t->tid, &r);
	if (rc < 0)
		return rc;
	memcpy(a, st->args, sizeof a);
	a[mode_arg] &= ~(uint64_t)S_ISGID;
	t->sgid_mode = (unsigned)st->args[mode_arg] & 07777;
	trace_regs_set_args(&r, a);
	return trace_regs_set(t->tid, &r);
}

/* The call ran: the directory named at its entry takes the mode asked for when
 * the guest could give it natively, its owner and group being the guest's own
 * (the kernel drops S_ISGID for another group). */
void trace_sv_sgid_exit(struct tstate *t, int64_t rval)
{
	struct trace_status s;
	struct stat sb;
	struct user_regs_struct r;
	unsigned long long u = 0, g = 0;
	char link[64];
	int ok = 0;

	if (rval == 0 && fstat(t->sgid_fd, &sb) == 0 && trace_status_read(t->tid, &s) == 0) {
		const char *uid = trace_status_field(&s, "Uid"), *gid = trace_status_field(&s, "Gid");
		ok = uid && gid && sscanf(uid, "%*u %*u %*u %llu", &u) == 1 &&
		     sscanf(gid, "%*u %*u %*u %llu", &g) == 1 && sb.st_uid == u && sb.st_gid == g;
		trace_status_free(&s);
	}
	snprintf(link, sizeof link, "/proc/self/fd/%d", t->sgid_fd);
	if (ok && chmod(link, t->sgid_mode) < 0 && trace_regs_get(t->tid, &r) == 0) {
		r.rax = (unsigned long long)(long long)-errno;
		trace_regs_set(t->tid, &r);
	}
	trace_sv_sgid_drop(t);
}

