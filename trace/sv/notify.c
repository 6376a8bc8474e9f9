/* The open/stat family at level file through seccomp user notification: the
 * calls TRACE_FILTER_NOTIFY_PROG hands to the listener (a read-only open, a
 * stat, an access check) are served by a thread of the supervisor's own, which
 * takes sv->mu (the loop holds it but while it waits) and walks the same layers
 * as a seccomp stop. The call is never let run (SECCOMP_USER_NOTIF_FLAG_CONTINUE
 * is no security mechanism: another thread may change the path in between):
 * the supervisor looks up the very string it read and recorded, with the
 * guest's file system ids, an absolute one in the guest's root (RESOLVE_IN_ROOT
 * from /proc/GUEST/root), a relative one beneath the directory object its dirfd
 * or cwd names (RESOLVE_BENEATH), and hands over the descriptor
 * (SECCOMP_IOCTL_NOTIF_ADDFD) or writes the stat into the guest's buffer. What
 * it cannot serve as the guest's kernel would (magic links, /proc and kin, a
 * device, a symlink dangling for it, a relative path leaving its directory, an
 * error other than a name verified absent) goes back: the loop interrupts the
 * thread, the call restarts with a mark in a high bit the kernel ignores, and
 * the first program stops it as before. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "trace/tracee/tracee.h"
#include "trace/sv/sv-internal.h"

#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP /* 6.6, newer than the system headers */
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#define ERESTARTSYS 512     /* include/linux/errno.h: what an interrupted wait returns */
#define BACK 1              /* served by the ptrace stop instead */

struct trace_notify {
	struct trace_supervisor *sv;
	int listener, stopfd, selffd;
	struct trace_lookup lk;     /* the guest's root and ids (lookup.c) */
	pthread_t thread;
	pid_t *back;                /* threads handed back, for the loop to interrupt */
	size_t nback, capback;
};

/* What one served call yields: a descriptor to hand over, or a result. */
struct served {
	int fd;          /* ours, handed to the guest: -1 none */
	int64_t result;  /* a stat's or access check's result, or -errno */
	void *out;       /* written to the guest at out_addr when result is 0 */
	size_t out_len;
	uint64_t out_addr;
	struct trace_lookup_stat ls; /* a stat's */
	int exists;      /* 1: the path's lookup found it, 2: it is absent, 0: not looked up */
};

static int serve_open(struct trace_notify *nf, const struct trace_stop *st, struct served *o)
{
	uint32_t fl = (uint32_t)st->args[trace_sys_arg(st->sys, TRACE_ARG_OFLAGS)];
	int fd = trace_lookup_resolve(&nf->lk, st, !(fl & O_NOFOLLOW), fl & O_DIRECTORY);
	struct stat sb;
	if (fd == TRACE_LOOKUP_BACK)
		return BACK;
	if (fd < 0) {
		o->result = fd;
		return 0;
	}
	if (fstat(fd, &sb) < 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode) || S_ISLNK(sb.st_mode))) {
		close(fd); /* a device, fifo or socket: its open is the guest's to make */
		return BACK;
	}
	if (S_ISLNK(sb.st_mode)) { /* O_NOFOLLOW on a symlink */
		close(fd);
		o->result = -ELOOP;
		return 0;
	}
	char name[16];
	snprintf(name, sizeof name, "%d", fd);
	/* the object looked up, opened with the guest's flags and checked for them */
	int nfd = openat(nf->selffd, name, (int)((fl & ~(O_NOFOLLOW | O_NOCTTY)) | O_CLOEXEC));
	int err = errno;
	close(fd);
	if (nfd < 0 && (err == EMFILE || err == ENFILE || err == ENOMEM))
		return BACK; /* the supervisor's limits, not the guest's */
	if (nfd < 0)
		o->result = -err;
	o->fd = nfd;
	return 0;
}

/* stat, lstat, newfstatat and statx: the lookup, then the stat of what it found. */
static int serve_stat(struct trace_notify *nf, const struct trace_stop *st, struct served *o)
{
	if (trace_lookup_stat(&nf->lk, st, &o->ls) == TRACE_LOOKUP_BACK)
		return BACK;
	o->result = o->ls.result;
	o->exists = o->ls.exists;
	o->out_addr = st->args[trace_sys_arg(st->sys, TRACE_ARG_PTR)];
	o->out = st->nr == TRACE_SYS_statx ? (void *)&o->ls.sx : (void *)&o->ls.sb;
	o->out_len = st->nr == TRACE_SYS_statx ? sizeof o->ls.sx : sizeof o->ls.sb;
	return 0;
}

/* access, faccessat, faccessat2: the check on what the lookup found, with the
 * guest's ids (its real ids are its effective ones). */
static int serve_access(struct trace_notify *nf, const struct trace_stop *st, struct served *o)
{
	int ma = trace_sys_arg(st->sys, TRACE_ARG_MODE), fa = trace_sys_arg(st->sys, TRACE_ARG_FLAGS);
	uint32_t mode = (uint32_t)st->args[ma], fl = fa >= 0 ? (uint32_t)st->args[fa] : 0;
	if ((mode & ~(uint32_t)S_IRWXO) || (fl & ~(uint32_t)(AT_EACCESS | AT_SYMLINK_NOFOLLOW)))
		return BACK;
	if (!*st->raw[0]) {
		o->result = -ENOENT;
		return 0;
	}
	int fd = trace_lookup_resolve(&nf->lk, st, !(fl & AT_SYMLINK_NOFOLLOW), 0);
	if (fd == TRACE_LOOKUP_BACK)
		return BACK;
	/* the trace looks up the path string, following, as access(2) does */
	if (!(fl & AT_SYMLINK_NOFOLLOW) && st->raw[0][0] == '/')
		o->exists = fd >= 0 ? 1 : 2;
	if (fd < 0) {
		o->result = fd;
		return 0;
	}
	o->result = syscall(SYS_faccessat2, fd, "", (int)mode, AT_EACCESS | AT_EMPTY_PATH) < 0 ? -errno : 0;
	close(fd);
	return 0;
}

/* Serve the call with the guest's file system ids (a root supervisor's file
 * capabilities go while they are not 0): 0 with *o filled, or BACK. */
static int serve(struct trace_notify *nf, const struct trace_stop *st, struct served *o)
{
	if (!st->raw[0] || !st->path[0])
		return BACK; /* an unreadable path: the kernel's EFAULT or ENAMETOOLONG */
	trace_lookup_as_guest(&nf->lk, 1);
	int how;
	if (trace_sys_arg(st->sys, TRACE_ARG_OFLAGS) >= 0)
		how = serve_open(nf, st, o);
	else if (trace_sys_arg(st->sys, TRACE_ARG_MODE) >= 0)
		how = serve_access(nf, st, o);
	else
		how = serve_stat(nf, st, o);
	trace_lookup_as_guest(&nf->lk, 0);
	return how;
}

/* Back to the loop: the thread is interrupted there (only the tracer thread
 * may), which the waker's signal wakes from its wait. */
static void hand_back(struct trace_notify *nf, pid_t tid)
{
	if (nf->nback == nf->capback) {
		nf->capback = nf->capback ? 2 * nf->capback : 16;
		nf->back = common_xrealloc(nf->back, nf->capback * sizeof *nf->back);
	}
	nf->back[nf->nback++] = tid;
	struct trace_waker *wk = nf->sv->wk;
	if (wk->started && atomic_load(&wk->in_wait))
		syscall(SYS_tgkill, getpid(), wk->tracer, wk->sig);
}

static int reply(struct trace_notify *nf, uint64_t id, int64_t val)
{
	struct seccomp_notif_resp r = { .id = id };
	if (val < 0)
		r.error = (int32_t)val;
	else
		r.val = val;
	return ioctl(nf->listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

/* The result in the guest: the descriptor installed (its number) or the stat written. */
static int64_t deliver(struct trace_notify *nf, const struct seccomp_notif *n, const struct trace_stop *st,
		       struct served *o)
{
	if (o->fd >= 0) {
		uint32_t fl = (uint32_t)st->args[trace_sys_arg(st->sys, TRACE_ARG_OFLAGS)];
		struct seccomp_notif_addfd a = { .id = n->id, .srcfd = (uint32_t)o->fd,
						 .newfd_flags = fl & O_CLOEXEC };
		int gfd = ioctl(nf->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
		return gfd < 0 ? -errno : gfd; /* EMFILE: the guest's table is full, as its open would say */
	}
	if (o->result == 0 && o->out &&
	    trace_mem_write(st->tid, o->out_addr, o->out, o->out_len) != (ssize_t)o->out_len)
		return -EFAULT;
	return o->result;
}

static void on_notification(struct trace_notify *nf, const struct seccomp_notif *n)
{
	struct trace_supervisor *sv = nf->sv;
	struct tstate *t = trace_sv_find(sv, (pid_t)n->pid);
	if (!t) { /* every task stops once before it runs: none is unknown */
		reply(nf, n->id, -ENOSYS);
		return;
	}
	struct trace_guest g = { sv, t };
	struct trace_stop st;
	memset(&st, 0, sizeof st);
	st.tid = t->tid;
	st.pid = trace_sv_tgid(t);
	st.ppid = t->ppid;
	st.nr = n->data.nr;
	st.arch_ok = n->data.arch == AUDIT_ARCH_X86_64 && !(n->data.nr & 0x40000000);
	st.sys = st.arch_ok ? trace_sys_by_nr(st.nr) : NULL;
	memcpy(st.args, n->data.args, sizeof st.args);
	st.action = TRACE_ALLOWED;
	if (!st.sys || !(trace_sys_facts(st.nr) & TRACE_FACT_NOTIFY)) {
		hand_back(nf, t->tid);
		return;
	}
	trace_sv_decode_paths(&g, &st);
	/* what was read is the notifying thread's, not a task that took its tid */
	if (ioctl(nf->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &n->id) < 0)
		return;
	struct served o = { .fd = -1 };
	if (serve(nf, &st, &o) == BACK) {
		hand_back(nf, t->tid);
		return;
	}
	sv->res->notified++;
	int refuse = trace_boundary_errno(st.arch_ok, st.nr, st.args);
	if (refuse) {
		sv->res->refused++;
		st.action = TRACE_DENIED;
		st.deny_errno = refuse;
	}
	st.host_fd = o.fd;
	st.exists = o.exists;
	if (sv->has_entry && trace_sv_layers_entry(sv, &g, &st) < 0)
		trace_sv_stop(sv, "inspector failed");
	if (refuse || st.action == TRACE_REWRITTEN) { /* none rewrites without an inspector */
		st.action = TRACE_DENIED;
		st.deny_errno = refuse ? refuse : EPERM;
	}
	int64_t res = st.action == TRACE_DENIED ? -(int64_t)st.deny_errno : deliver(nf, n, &st, &o);
	if (st.action != TRACE_DENIED && st.want_exit && sv->has_exit) {
		st.has_result = 1;
		st.result = res;
		if (trace_sv_layers_exit(sv, &g, &st) < 0)
			trace_sv_stop(sv, "inspector failed");
	}
	reply(nf, n->id, res); /* ENOENT: the thread was interrupted or died meanwhile */
	if (o.fd >= 0)
		close(o.fd);
}

static void *notify_main(void *arg)
{
	struct trace_notify *nf = arg;
	struct trace_prio pr;
	pthread_setname_np(pthread_self(), "sbx-notify");
	(void)trace_prio_join(&pr, trace_sv_prio(nf->sv)); /* the guest waits on it as on the tracer */
	/* this thread's groups are the guest's: none (a root invoker's guest drops them) */
	if (nf->lk.fsids)
		syscall(SYS_setgroups, 0, NULL);
	for (;;) {
		struct pollfd pf[2] = { { .fd = nf->listener, .events = POLLIN },
					{ .fd = nf->stopfd, .events = POLLIN } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents || (pf[0].revents & (POLLHUP | POLLERR)))
			break; /* the run ends, or no task is left under the filter */
		struct seccomp_notif n;
		memset(&n, 0, sizeof n);
		if (ioctl(nf->listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
			continue; /* ENOENT: the thread went (a signal, its death) before it was read */
		pthread_mutex_lock(&nf->sv->mu);
		on_notification(nf, &n);
		pthread_mutex_unlock(&nf->sv->mu);
		/* a guest keeping it busy does not keep it real-time (its own budget) */
		trace_prio_duty(&pr, common_mono_us());
	}
	return NULL;
}

/* The listener the guest's set-up left open (close-on-exec) at its exec's stop. */
static int take_listener(pid_t guest)
{
	char dir[64], link[320], target[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)guest);
	DIR *d = opendir(dir);
	struct dirent *de;
	int fd = -1;
	while (d && fd < 0 && (de = readdir(d))) {
		snprintf(link, sizeof link, "%s/%s", dir, de->d_name);
		ssize_t n = readlink(link, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strcmp(target, "anon_inode:seccomp notify") != 0)
			continue;
		int pfd = (int)syscall(SYS_pidfd_open, guest, 0);
		if (pfd >= 0) {
			fd = (int)syscall(SYS_pidfd_getfd, pfd, atoi(de->d_name), 0);
			close(pfd);
		}
	}
	if (d)
		closedir(d);
	return fd;
}

int trace_notify_attach(struct trace_supervisor *sv, pid_t guest)
{
	struct trace_notify *nf = common_xcalloc(1, sizeof *nf);
	nf->sv = sv;
	nf->listener = take_listener(guest);
	trace_lookup_open(&nf->lk, sv, guest);
	nf->selffd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	nf->stopfd = eventfd(0, EFD_CLOEXEC);
	int ok = nf->listener >= 0 && nf->lk.rootfd >= 0 && nf->selffd >= 0 && nf->stopfd >= 0;
	if (ok) {
		/* the guest and this thread hand the CPU to each other, as at a ptrace stop */
		(void)ioctl(nf->listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		ok = pthread_create(&nf->thread, NULL, notify_main, nf) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!ok) {
		int fds[4] = { nf->listener, nf->lk.rootfd, nf->selffd, nf->stopfd };
		for (int i = 0; i < 4; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		free(nf);
		return -1;
	}
	sv->notify = nf;
	return 0;
}

void trace_notify_interrupts(struct trace_supervisor *sv)
{
	struct trace_notify *nf = sv->notify;
	for (size_t i = 0; i < nf->nback; i++) {
		struct tstate *t = trace_sv_find(sv, nf->back[i]);
		if (!t)
			continue;
		t->notify_redo = 1;
		ptrace(PTRACE_INTERRUPT, t->tid, 0, 0); /* ESRCH: its exit comes through the loop */
	}
	nf->nback = 0;
}

/* The ptrace register holding argument k. */
static unsigned long long *arg_reg(struct user_regs_struct *r, int k)
{
	unsigned long long *regs[6] = { &r->rdi, &r->rsi, &r->rdx, &r->r10, &r->r8, &r->r9 };
	return regs[k];
}

void trace_notify_mark(struct trace_supervisor *sv, struct tstate *t)
{
	struct user_regs_struct r;
	(void)sv;
	t->notify_redo = 0;
	if (trace_regs_get(t->tid, &r) < 0 || (long long)r.rax != -ERESTARTSYS)
		return; /* not stopped on its way back into the call */
	const struct trace_sysinfo *s = trace_sys_by_nr((long)r.orig_rax);
	if (!s || !(trace_sys_facts(s->nr) & TRACE_FACT_NOTIFY))
		return;
	*arg_reg(&r, trace_sys_notify_arg(s)) |= TRACE_NOTIFY_MARK;
	if (trace_regs_set(t->tid, &r) == 0)
		t->notify_redo = 2;
}

void trace_notify_unmark(struct trace_supervisor *sv, struct tstate *t, long nr, uint64_t args[6])
{
	(void)sv;
	if (args) { /* its seccomp stop: recorded without the mark, taken off at its exit */
		const struct trace_sysinfo *s = t->notify_redo == 2 ? trace_sys_by_nr(nr) : NULL;
		int k = s ? trace_sys_notify_arg(s) : -1;
		t->notify_redo = 0;
		if (k >= 0 && (args[k] & TRACE_NOTIFY_MARK)) {
			args[k] &= ~TRACE_NOTIFY_MARK;
			t->notify_redo = 3 + k;
		}
		return;
	}
	struct user_regs_struct r;
	if (t->notify_redo >= 3 && trace_regs_get(t->tid, &r) == 0) {
		*arg_reg(&r, t->notify_redo - 3) &= ~TRACE_NOTIFY_MARK;
		trace_regs_set(t->tid, &r);
	}
	t->notify_redo = 0;
}

void trace_notify_end(struct trace_supervisor *sv)
{
	struct trace_notify *nf = sv->notify;
	if (!nf)
		return;
	uint64_t one = 1;
	(void)!write(nf->stopfd, &one, sizeof one);
	pthread_mutex_unlock(&sv->mu); /* it may wait for its turn */
	pthread_join(nf->thread, NULL);
	pthread_mutex_lock(&sv->mu);
	close(nf->listener);
	trace_lookup_close(&nf->lk);
	close(nf->selffd);
	close(nf->stopfd);
	free(nf->back);
	free(nf);
	sv->notify = NULL;
}
