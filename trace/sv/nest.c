/* ptrace served to a guest tracer (a debugger, strace, LeakSanitizer's
 * stop-the-world), as PRoot's ptrace extension does: the supervisor is the real
 * tracer of every task, so the kernel would refuse a second one. A guest
 * tracer's requests on tasks of its own run are answered here from the real
 * stops the supervisor holds; its wait4/waitid see the stops it asked for.
 * While a task traces, its syscalls stop (PTRACE_SYSCALL) so its waits can be
 * served; a run without a guest tracer has no extra stop. Tasks outside the
 * run cannot be named (the PID namespace), sbx's init is refused, and
 * everything a tracee does after it is resumed meets the filter and the
 * inspector as it is then. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"
#include "trace/tracee/tracee.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL              /* linux/pidfd.h of 6.9 */
#define PIDFD_SIGNAL_THREAD (1u << 0)
#endif
#define REGSET_MAX 16384 /* the largest register set copied (XSAVE is 2.5 KiB here) */
#define VM_IOV_MAX 1024       /* process_vm_readv's iovec counts (UIO_MAXIOV) */
#define VM_CHUNK 65536        /* bytes copied at a time */
#define VM_READ_MAX (16u << 20) /* bytes one process_vm_readv copies at most */

enum nest_hold { NEST_RUNNING, NEST_AT_EVENT, NEST_AT_SIGNAL, NEST_AT_SYSCALL };
#define GONE_MAX 64 /* ends of tracees not its children kept for a tracer's waits */
enum nest_wait { WAIT_NONE, WAIT_IN_KERNEL, WAIT_HERE };

struct trace_nest_task {
	pid_t tracer;        /* host tid of the guest tracer thread */
	enum nest_hold held; /* the real stop it is held in for its tracer */
	int want;            /* a stop asked (ATTACH, INTERRUPT): the status it reports */
	int status;          /* the wait status its tracer has not taken yet */
	int unreported;
	int syscall;         /* resumed with PTRACE_SYSCALL: its syscalls stop for its tracer */
	int seized;
	unsigned long options;
	unsigned long msg;   /* PTRACE_GETEVENTMSG's */
};

struct trace_nest_tracer {
	enum nest_wait waiting;
	long wnr;            /* the wait call in progress: wait4 or waitid */
	uint64_t wargs[6];
	size_t ngone;        /* tracees that ended, their real parent another task */
	struct { pid_t nspid; int status; } gone[GONE_MAX];
};

/* sig to a task of the run through a pidfd, as the supervisor signals every
 * task (never a bare pid): to its process, or to the thread alone. */
static void signal_task(pid_t tid, int sig, int thread)
{
	int pfd = (int)syscall(SYS_pidfd_open, tid, thread ? PIDFD_THREAD : 0);
	if (pfd < 0 && errno == EINVAL && thread) /* a kernel before 6.9: its process then */
		pfd = (int)syscall(SYS_pidfd_open, tid, 0), thread = 0;
	if (pfd < 0)
		return; /* gone: its end comes through the loop */
	syscall(SYS_pidfd_send_signal, pfd, sig, NULL, thread ? PIDFD_SIGNAL_THREAD : 0);
	close(pfd);
}

static pid_t nspid_of(struct tstate *t)
{
	struct trace_status st;
	if (!t->nspid && trace_status_read(t->tid, &st) == 0) {
		t->nspid = trace_status_nspid(&st);
		trace_status_free(&st);
	}
	return t->nspid;
}

/* A live task of the run by its pid in the run's namespace, or NULL: one that
 * stopped here, or a new child whose fork event was seen (its creator's fork()
 * returned only after it). */
static struct tstate *by_nspid(struct trace_supervisor *sv, pid_t pid)
{
	if (pid <= 0)
		return NULL;
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct tstate *t = sv->bucket[b]; t; t = t->next)
			if ((t->seen || t->announced) && !t->dead && nspid_of(t) == pid)
				return t;
	return NULL;
}

/* The syscall at this stop is skipped (entry) or done (exit) and returns v. */
static void set_result(pid_t tid, long v)
{
	struct user_regs_struct r;
	if (trace_regs_get(tid, &r) < 0)
		return;
	r.orig_rax = (unsigned long long)-1; /* no restart of an interrupted call either */
	r.rax = (unsigned long long)v;
	trace_regs_set(tid, &r);
}

static long to_tracer(struct tstate *t, uint64_t addr, const void *buf, size_t len)
{
	return trace_mem_write(t->tid, addr, buf, len) == (ssize_t)len ? 0 : -EFAULT;
}

static long from_tracer(struct tstate *t, uint64_t addr, void *buf, size_t len)
{
	return trace_mem_read(t->tid, addr, buf, len) == (ssize_t)len ? 0 : -EFAULT;
}

/* Does a wait of tracer tr for pid (wait4's convention) match tracee c? */
static int wait_matches(struct tstate *tr, struct tstate *c, pid_t pid)
{
	return c->nest && c->nest->tracer == tr->tid && (pid <= 0 || nspid_of(c) == pid);
}

/* The pid a wait in progress asks for, in wait4's convention (-1: any). */
static pid_t wait_pid(long nr, const uint64_t a[6])
{
	if (nr == TRACE_SYS_wait4)
		return (pid_t)a[0];
	return (int)a[0] == P_PID ? (pid_t)a[1] : -1;
}

static int wait_nohang(long nr, const uint64_t a[6])
{
	return (int)(nr == TRACE_SYS_wait4 ? a[2] : a[3]) & WNOHANG;
}

/* Write a status where the wait asks and return what the call returns. */
static long wait_answer(struct tstate *tr, pid_t nspid, int status, long nr, const uint64_t a[6])
{
	if (nr == TRACE_SYS_wait4) {
		struct rusage ru;
		memset(&ru, 0, sizeof ru);
		if ((a[1] && to_tracer(tr, a[1], &status, sizeof status) < 0) ||
		    (a[3] && to_tracer(tr, a[3], &ru, sizeof ru) < 0))
			return -EFAULT;
		return nspid;
	}
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGCHLD;
	si.si_pid = nspid;
	si.si_uid = TRACE_GUEST_UID;
	if (WIFSTOPPED(status)) {
		si.si_code = CLD_TRAPPED;
		si.si_status = WSTOPSIG(status);
	} else {
		si.si_code = WIFEXITED(status) ? CLD_EXITED : CLD_KILLED;
		si.si_status = WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status);
	}
	return a[2] && to_tracer(tr, a[2], &si, sizeof si) < 0 ? -EFAULT : 0;
}

/* A tracee of tr with a status its waits have not taken, matching pid. */
static struct tstate *reportable(struct trace_supervisor *sv, struct tstate *tr, pid_t pid)
{
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct tstate *c = sv->bucket[b]; c; c = c->next)
			if (wait_matches(tr, c, pid) && c->nest->unreported)
				return c;
	return NULL;
}

/* The ended tracee a wait for pid takes, or -1. */
static int gone_at(const struct trace_nest_tracer *w, pid_t pid)
{
	for (size_t i = 0; i < w->ngone; i++)
		if (pid <= 0 || w->gone[i].nspid == pid)
			return (int)i;
	return -1;
}

/* What a wait of tr for pid may still report: tracees alive or ended. */
static size_t waitable(struct trace_supervisor *sv, struct tstate *tr, pid_t pid)
{
	size_t n = gone_at(tr->tracer, pid) >= 0;
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct tstate *c = sv->bucket[b]; c; c = c->next)
			n += wait_matches(tr, c, pid);
	return n;
}

/* The wait in progress of tr takes a status that is there: a stopped tracee's,
 * else an ended one's; the call returns it. 0 when there is none. */
static int wait_serve(struct trace_supervisor *sv, struct tstate *tr)
{
	struct trace_nest_tracer *w = tr->tracer;
	pid_t pid = wait_pid(w->wnr, w->wargs);
	int keep = w->wnr == TRACE_SYS_waitid && ((int)w->wargs[3] & WNOWAIT);
	struct tstate *c = reportable(sv, tr, pid);
	int g = c ? -1 : gone_at(w, pid);
	long rc;
	if (c) {
		rc = wait_answer(tr, nspid_of(c), c->nest->status, w->wnr, w->wargs);
		c->nest->unreported = rc < 0 || keep;
	} else if (g >= 0) {
		rc = wait_answer(tr, w->gone[g].nspid, w->gone[g].status, w->wnr, w->wargs);
		if (rc >= 0 && !keep)
			w->gone[g] = w->gone[--w->ngone];
	} else {
		return 0;
	}
	set_result(tr->tid, rc);
	w->waiting = WAIT_NONE;
	return 1;
}

/* Tracer tr has something new for its waits: a wait held here takes it now, a
 * wait in the kernel (for its real children too) is interrupted to take it. */
static void wake(struct trace_supervisor *sv, struct tstate *tr)
{
	if (!tr || !tr->tracer)
		return;
	signal_task(trace_sv_tgid(tr), SIGCHLD, 0); /* as the kernel tells a tracer (gdb waits for it) */
	if (tr->tracer->waiting == WAIT_HERE && wait_serve(sv, tr))
		trace_sv_resume(sv, tr->tid, PTRACE_CONT, 0);
	else if (tr->tracer->waiting == WAIT_IN_KERNEL)
		ptrace(PTRACE_INTERRUPT, tr->tid, 0, 0);
}

/* c stops for its tracer with status. */
static void post(struct trace_supervisor *sv, struct tstate *c, int status)
{
	c->nest->status = status;
	c->nest->unreported = 1;
	wake(sv, trace_sv_find(sv, c->nest->tracer));
}

/* Stop c for its tracer: at its next step boundary (PTRACE_INTERRUPT), or now
 * when the supervisor holds it already. */
static void ask_stop(struct trace_supervisor *sv, struct tstate *c, int status)
{
	if (c->nest->held != NEST_RUNNING) {
		post(sv, c, status);
		return;
	}
	c->nest->want = status;
	ptrace(PTRACE_INTERRUPT, c->tid, 0, 0);
}

/* c is traced by tr from now on; tr's syscalls stop (trace_sv_resume). */
static void link_tracee(struct trace_supervisor *sv, struct tstate *tr, struct tstate *c,
			int seized, unsigned long options)
{
	if (!tr->tracer) {
		tr->tracer = common_xcalloc(1, sizeof *tr->tracer);
		sv->ntracers++;
	}
	c->nest = common_xcalloc(1, sizeof *c->nest);
	c->nest->tracer = tr->tid;
	c->nest->seized = seized;
	c->nest->options = options;
	nspid_of(c); /* known while /proc shows it: its end is reported by it */
}

static long attach(struct trace_supervisor *sv, struct tstate *t, struct tstate *c, long req,
		   uint64_t addr, uint64_t data)
{
	if (req == PTRACE_SEIZE && (addr || (data & ~(uint64_t)PTRACE_O_MASK)))
		return -EIO;
	if (c->held || !c->announced)
		return -EPERM; /* not yet a task of its own (its parent's fork event pends) */
	link_tracee(sv, t, c, req == PTRACE_SEIZE, req == PTRACE_SEIZE ? data : 0);
	if (req == PTRACE_ATTACH)
		ask_stop(sv, c, W_STOPCODE(SIGSTOP)); /* ATTACH's SIGSTOP, without a signal sent */
	return 0;
}

/* PTRACE_TRACEME: its parent (a task of the run, not sbx's init) traces it. */
static long traceme(struct trace_supervisor *sv, struct tstate *t)
{
	struct tstate *p = trace_sv_find(sv, t->ppid);
	if (!p || p->dead)
		return -EPERM;
	link_tracee(sv, p, t, 0, 0);
	return 0;
}

/* The tracee leaves its tracer: its record goes, a held stop is resumed by the caller. */
static void release(struct tstate *c)
{
	free(c->nest);
	c->nest = NULL;
}

/* CONT, SYSCALL, SINGLESTEP, DETACH, KILL on a held tracee: data is the signal
 * to deliver. */
static long resume_req(struct trace_supervisor *sv, struct tstate *c, long req, uint64_t data)
{
	struct trace_nest_task *n = c->nest;
	if (data >= _NSIG)
		return -EIO;
	if (req == PTRACE_KILL) {
		signal_task(c->tid, SIGKILL, 1);
		if (n->held == NEST_RUNNING)
			return 0;
		data = 0;
	}
	int sig = (int)data;
	enum nest_hold was = n->held;
	n->held = NEST_RUNNING;
	/* a signal at a stop that is not a signal's own is sent, as the kernel queues it */
	if ((was == NEST_AT_EVENT || was == NEST_AT_SYSCALL) && sig && sig != SIGSTOP)
		signal_task(c->tid, sig, 1);
	n->syscall = req == PTRACE_SYSCALL; /* its syscalls stop for its tracer now */
	if (req == PTRACE_DETACH)
		release(c);
	trace_sv_resume(sv, c->tid, req == PTRACE_SINGLESTEP ? PTRACE_SINGLESTEP : PTRACE_CONT,
			was == NEST_AT_SIGNAL ? sig : 0);
	return 0;
}

/* A register set through a bounded buffer: data is the tracer's struct iovec. */
static long regset(struct tstate *t, struct tstate *c, long req, uint64_t type, uint64_t data)
{
	struct iovec io;
	unsigned char buf[REGSET_MAX]; /* on the stack: supervisors of several runs share no buffer */
	if (from_tracer(t, data, &io, sizeof io) < 0)
		return -EFAULT;
	struct iovec mine = { buf, io.iov_len < sizeof buf ? io.iov_len : sizeof buf };
	if (req == PTRACE_SETREGSET && from_tracer(t, (uint64_t)io.iov_base, buf, mine.iov_len) < 0)
		return -EFAULT;
	if (ptrace(req, c->tid, (void *)type, &mine) < 0)
		return -errno;
	if (req == PTRACE_GETREGSET &&
	    (to_tracer(t, (uint64_t)io.iov_base, buf, mine.iov_len) < 0 ||
	     to_tracer(t, data + offsetof(struct iovec, iov_len), &mine.iov_len, sizeof mine.iov_len) < 0))
		return -EFAULT;
	return 0;
}

/* A fixed-size block the kernel copies (GETREGS, GETFPREGS, ...) through ours. */
static long regblock(struct tstate *t, struct tstate *c, long req, uint64_t data)
{
	union { struct user_regs_struct r; struct user_fpregs_struct f; } u;
	size_t len = req == PTRACE_GETREGS || req == PTRACE_SETREGS ? sizeof u.r : sizeof u.f;
	int set = req == PTRACE_SETREGS || req == PTRACE_SETFPREGS;
	if (set && from_tracer(t, data, &u, len) < 0)
		return -EFAULT;
	if (ptrace(req, c->tid, NULL, &u) < 0)
		return -errno;
	return set ? 0 : to_tracer(t, data, &u, len);
}

/* A word of the tracee's memory through /proc/TID/mem, as PEEKTEXT's FOLL_FORCE. */
static long peek(struct tstate *t, struct tstate *c, uint64_t addr, uint64_t data)
{
	struct trace_tracee tt;
	uint64_t word;
	if (trace_tracee_open(&tt, c->tid, NULL) < 0)
		return -EIO;
	int rc = trace_tracee_read(&tt, addr, &word, sizeof word, NULL);
	trace_tracee_close(&tt);
	return rc < 0 ? -EIO : to_tracer(t, data, &word, sizeof word);
}

/* A word written into the tracee: where it may write itself, or into its text
 * (a breakpoint). Never into a page it may not write that is not text: sbx's
 * scratch pages, which hold what the inspector judged, are such pages. */
static long poke(struct tstate *c, uint64_t addr, uint64_t word)
{
	if (trace_mem_write(c->tid, addr, &word, sizeof word) == (ssize_t)sizeof word)
		return 0;
	struct trace_map *m = NULL;
	size_t n = 0;
	int text = 0;
	if (trace_proc_maps(c->tid, &m, &n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			if (addr >= m[i].start && addr + sizeof word <= m[i].end)
				text = m[i].perms[2] == 'x' && m[i].perms[3] == 'p' && m[i].path[0] == '/';
	free(m);
	if (!text)
		return -EIO;
	return trace_mem_poke(c->tid, addr, &word, sizeof word) == (ssize_t)sizeof word ? 0 : -EIO;
}

static long getsiginfo(struct tstate *t, struct tstate *c, uint64_t data)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (c->nest->held == NEST_AT_SIGNAL) {
		if (trace_siginfo(c->tid, &si) < 0)
			return -EINVAL;
	} else {
		si.si_signo = WSTOPSIG(c->nest->status);
		si.si_code = SI_USER;
	}
	return to_tracer(t, data, &si, sizeof si);
}

/* The real stop's syscall information, which is the tracee's: addr bytes of it. */
static long syscall_info(struct tstate *t, struct tstate *c, uint64_t addr, uint64_t data)
{
	struct __ptrace_syscall_info info;
	memset(&info, 0, sizeof info);
	long n = ptrace(PTRACE_GET_SYSCALL_INFO, c->tid, (void *)sizeof info, &info);
	if (n < 0)
		return -errno;
	if (c->nest->held != NEST_AT_SYSCALL)
		info.op = PTRACE_SYSCALL_INFO_NONE; /* not at a syscall stop for its tracer */
	size_t len = addr < (uint64_t)n ? (size_t)addr : (size_t)n;
	return to_tracer(t, data, &info, len) < 0 ? -EFAULT : n;
}

/* A request on a tracee of t's, stopped for it. */
static long stopped_req(struct tstate *t, struct tstate *c, long req, uint64_t addr, uint64_t data)
{
	unsigned long msg = c->nest->msg;
	switch (req) {
	case PTRACE_GETREGS: case PTRACE_SETREGS: case PTRACE_GETFPREGS: case PTRACE_SETFPREGS:
		return regblock(t, c, req, data);
	case PTRACE_GETREGSET: case PTRACE_SETREGSET:
		return regset(t, c, req, addr, data);
	case PTRACE_PEEKTEXT: case PTRACE_PEEKDATA:
		return peek(t, c, addr, data);
	case PTRACE_POKETEXT: case PTRACE_POKEDATA:
		return poke(c, addr, data);
	case PTRACE_PEEKUSER:
		errno = 0;
		msg = (unsigned long)ptrace(PTRACE_PEEKUSER, c->tid, (void *)addr, NULL);
		return errno ? -errno : to_tracer(t, data, &msg, sizeof msg);
	case PTRACE_POKEUSER:
		return ptrace(PTRACE_POKEUSER, c->tid, (void *)addr, (void *)data) < 0 ? -errno : 0;
	case PTRACE_SETOPTIONS:
		if (data & ~(uint64_t)PTRACE_O_MASK)
			return -EINVAL;
		c->nest->options = data;
		return 0;
	case PTRACE_GETEVENTMSG:
		return to_tracer(t, data, &msg, sizeof msg);
	case PTRACE_GETSIGINFO:
		return getsiginfo(t, c, data);
	case PTRACE_GET_SYSCALL_INFO:
		return syscall_info(t, c, addr, data);
	default:
		return -EIO;
	}
}

/* One ptrace request of guest task t, as the kernel would answer it. */
static long request(struct trace_supervisor *sv, struct tstate *t, const uint64_t a[6])
{
	long req = (long)a[0];
	struct tstate *c = by_nspid(sv, (pid_t)a[1]);
	if (req == PTRACE_TRACEME)
		return traceme(sv, t);
	if (req == PTRACE_ATTACH || req == PTRACE_SEIZE)
		return attach(sv, t, c, req, a[2], a[3]);
	if (!c->nest || c->nest->tracer != t->tid)
		return -ESRCH;
	if (req == PTRACE_INTERRUPT) {
		if (c->nest->held == NEST_RUNNING)
			ask_stop(sv, c, W_STOPCODE(SIGTRAP | PTRACE_EVENT_STOP << 8));
		return 0;
	}
	if (req == PTRACE_KILL)
		return resume_req(sv, c, req, 0);
	if (c->nest->held == NEST_RUNNING)
		return -ESRCH; /* not stopped for its tracer */
	if (req == PTRACE_CONT || req == PTRACE_SYSCALL || req == PTRACE_SINGLESTEP ||
	    req == PTRACE_DETACH)
		return resume_req(sv, c, req, a[3]);
	return stopped_req(t, c, req, a[2], a[3]);
}

/* Does a thread of t's process trace c? */
static int traces(struct trace_supervisor *sv, struct tstate *t, struct tstate *c)
{
	struct tstate *tr = c->nest ? trace_sv_find(sv, c->nest->tracer) : NULL;
	return tr && trace_sv_tgid(tr) == trace_sv_tgid(t);
}

/* The boundary's part: what a request may reach, decided before the inspector
 * sees the call, so a refusal is recorded and counted as the boundary's. */
static int reach(struct trace_supervisor *sv, struct tstate *t, const struct trace_stop *st)
{
	struct tstate *c = by_nspid(sv, (pid_t)st->args[st->nr == TRACE_SYS_ptrace]);
	if (st->nr == TRACE_SYS_ptrace && (long)st->args[0] == PTRACE_TRACEME) {
		struct tstate *p = t->ppid ? trace_sv_find(sv, t->ppid) : NULL;
		return !p || p->tid == sv->init || t->nest ? EPERM : 0; /* init would trace it */
	}
	if (!c)
		return ESRCH; /* not a task of this run: none other can be named */
	if (c->tid == sv->init)
		return EPERM; /* sbx's own init */
	if (st->nr == TRACE_SYS_process_vm_readv)
		return traces(sv, t, c) ? 0 : EPERM; /* a tracee's memory only */
	long req = (long)st->args[0];
	if ((req == PTRACE_ATTACH || req == PTRACE_SEIZE) &&
	    (trace_sv_tgid(c) == trace_sv_tgid(t) || c->nest))
		return EPERM; /* as the kernel: not its own thread group, one tracer */
	return 0;
}

int trace_nest_verdict(struct trace_supervisor *sv, struct tstate *t, const struct trace_stop *st)
{
	/* every-call mode takes the syscall stops, and a deterministic run schedules
	 * its tasks itself: neither can share them with a guest tracer */
	int shared = sv->every_call || (sv->l && sv->l[TRACE_LAYER_DETERM].ctx);
	if (shared || !st->arch_ok ||
	    (st->nr != TRACE_SYS_ptrace && st->nr != TRACE_SYS_process_vm_readv))
		return -1;
	return reach(sv, t, st);
}

/* A process_vm_readv's buffers, on the heap: supervisors of several runs share none. */
struct vm_bufs {
	struct iovec lv[VM_IOV_MAX], rv[VM_IOV_MAX];
	unsigned char buf[VM_CHUNK];
};

/* Copy c's memory at rv into t's at lv, in order, until either ends, the
 * tracee's memory does or VM_READ_MAX: bytes copied, or -errno for none. */
static long vm_copy(struct tstate *t, struct tstate *c, struct vm_bufs *m, uint64_t nl, uint64_t nr)
{
	size_t li = 0, ri = 0, loff = 0, roff = 0, done = 0;
	while (li < nl && ri < nr && done < VM_READ_MAX) {
		size_t n = m->lv[li].iov_len - loff;
		if (n > m->rv[ri].iov_len - roff)
			n = m->rv[ri].iov_len - roff;
		n = n < sizeof m->buf ? n : sizeof m->buf;
		uint64_t from = (uint64_t)m->rv[ri].iov_base + roff, to = (uint64_t)m->lv[li].iov_base + loff;
		ssize_t got = n ? trace_mem_read(c->tid, from, m->buf, n) : 0;
		if (got < 0 || (got > 0 && to_tracer(t, to, m->buf, (size_t)got) < 0))
			return done ? (long)done : (got < 0 ? got : -EFAULT);
		done += (size_t)got;
		loff += (size_t)got;
		roff += (size_t)got;
		if ((size_t)got < n)
			break; /* the tracee's memory ends here */
		li += loff == m->lv[li].iov_len ? (loff = 0, 1) : 0;
		ri += roff == m->rv[ri].iov_len ? (roff = 0, 1) : 0;
	}
	return (long)done;
}

/* process_vm_readv of a tracee's memory: copied through the supervisor, at
 * most VM_READ_MAX bytes a call (a short read, as the call may return). */
static long vm_read(struct trace_supervisor *sv, struct tstate *t, const uint64_t a[6])
{
	struct tstate *c = by_nspid(sv, (pid_t)a[0]);
	if (a[5] || a[2] > VM_IOV_MAX || a[4] > VM_IOV_MAX)
		return -EINVAL;
	struct vm_bufs *m = common_xcalloc(1, sizeof *m);
	long rc = !c ? -ESRCH
		: from_tracer(t, a[1], m->lv, a[2] * sizeof m->lv[0]) < 0 ||
		  from_tracer(t, a[3], m->rv, a[4] * sizeof m->rv[0]) < 0 ? -EFAULT
		: vm_copy(t, c, m, a[2], a[4]);
	free(m);
	return rc;
}


void trace_nest_call(struct trace_supervisor *sv, struct tstate *t, const struct trace_stop *st)
{
	long rc = st->nr == TRACE_SYS_ptrace ? request(sv, t, st->args) : vm_read(sv, t, st->args);
	set_result(t->tid, rc);
}

int trace_nest_untraced(struct trace_supervisor *sv, struct tstate *t, struct trace_stop *st)
{
	struct user_regs_struct r;
	if (sv->every_call || !st->arch_ok || st->nr != TRACE_SYS_clone ||
	    !((uint32_t)st->args[0] & CLONE_UNTRACED) || trace_regs_get(t->tid, &r) < 0)
		return 0;
	/* its child is traced as every other: the supervisor serves its ptrace */
	r.rdi &= ~(unsigned long long)CLONE_UNTRACED;
	st->args[0] = r.rdi;
	return trace_regs_set(t->tid, &r) == 0;
}

/* The entry of a wait of tracer t: served at once from a status there, else
 * run by the kernel (t may have real children), looked at again at its exit. */
static int wait_entry(struct trace_supervisor *sv, struct tstate *t, long nr, const uint64_t a[6])
{
	struct trace_nest_tracer *w = t->tracer;
	w->wnr = nr;
	memcpy(w->wargs, a, sizeof w->wargs);
	/* in the kernel even with nothing to report yet: a child that calls
	 * PTRACE_TRACEME meanwhile is waited for from then on */
	w->waiting = WAIT_IN_KERNEL;
	if (waitable(sv, t, wait_pid(nr, a)))
		wait_serve(sv, t);
	trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
	return 1;
}

/* Its exit: the kernel had no child for it (ECHILD, or 0 with WNOHANG) or was
 * interrupted (ERESTARTSYS...) for a tracee's status. */
static int wait_exit(struct trace_supervisor *sv, struct tstate *t, int64_t rval)
{
	struct trace_nest_tracer *w = t->tracer;
	int nohang = wait_nohang(w->wnr, w->wargs);
	int restart = rval <= -512 && rval >= -516; /* ERESTARTSYS .. ERESTART_RESTARTBLOCK */
	if (rval != -ECHILD && !restart && !(rval == 0 && nohang)) {
		w->waiting = WAIT_NONE; /* a real child's status */
		return 0;
	}
	if (wait_serve(sv, t) || restart) {
		w->waiting = WAIT_NONE; /* served, or run again by the kernel: a new entry */
	} else if (nohang) {
		set_result(t->tid, 0); /* tracees, none with news */
		w->waiting = WAIT_NONE;
	} else if (waitable(sv, t, wait_pid(w->wnr, w->wargs))) {
		w->waiting = WAIT_HERE; /* held at this stop until a tracee stops */
		return 1;
	} else {
		w->waiting = WAIT_NONE;
	}
	trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
	return 1;
}

int trace_nest_tracer_stop(struct trace_supervisor *sv, struct tstate *t)
{
	struct __ptrace_syscall_info info;
	memset(&info, 0, sizeof info);
	if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof info, &info) <= 0)
		return 0;
	if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
		long nr = (long)info.entry.nr;
		if (nr == TRACE_SYS_wait4 || nr == TRACE_SYS_waitid)
			return wait_entry(sv, t, nr, (const uint64_t *)info.entry.args);
		trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
		return 1;
	}
	if (info.op == PTRACE_SYSCALL_INFO_EXIT && t->tracer->waiting == WAIT_IN_KERNEL)
		return wait_exit(sv, t, info.exit.rval);
	return 0;
}

/* The option under which a tracer hears of this event. */
static unsigned long event_option(int event)
{
	switch (event) {
	case PTRACE_EVENT_FORK:
		return PTRACE_O_TRACEFORK;
	case PTRACE_EVENT_VFORK:
		return PTRACE_O_TRACEVFORK;
	case PTRACE_EVENT_CLONE:
		return PTRACE_O_TRACECLONE;
	case PTRACE_EVENT_EXEC:
		return PTRACE_O_TRACEEXEC;
	case PTRACE_EVENT_EXIT:
		return PTRACE_O_TRACEEXIT;
	default:
		return 0;
	}
}

int trace_nest_syscalls(const struct tstate *t)
{
	return t->tracer || (t->nest && t->nest->syscall);
}

int trace_nest_spawn(struct trace_supervisor *sv, struct tstate *t, struct tstate *c, int event)
{
	struct trace_nest_task *n = t->nest;
	struct tstate *tr = trace_sv_find(sv, n->tracer);
	if (!(n->options & event_option(event)) || c->nest || !tr)
		return 0;
	link_tracee(sv, tr, c, n->seized, n->options);
	/* the child starts stopped for the tracer, as an auto-attached child does */
	int first = n->seized ? W_STOPCODE(SIGTRAP | PTRACE_EVENT_STOP << 8) : W_STOPCODE(SIGSTOP);
	if (c->held) { /* its first stop came already: it is the tracer's now */
		c->held = 0;
		sv->nheld--;
		c->nest->held = NEST_AT_EVENT;
		post(sv, c, first);
	} else {
		c->nest->want = first;
	}
	n->msg = (unsigned long)nspid_of(c);
	n->held = NEST_AT_EVENT;
	post(sv, t, W_STOPCODE(SIGTRAP | event << 8));
	return 1;
}

int trace_nest_event(struct trace_supervisor *sv, struct tstate *t, int event, unsigned long msg)
{
	struct trace_nest_task *n = t->nest;
	if (event == PTRACE_EVENT_EXEC && !(n->options & PTRACE_O_TRACEEXEC)) {
		if (!n->seized) /* an old-style tracer hears of an exec by a SIGTRAP */
			signal_task(t->tid, SIGTRAP, 1);
		return 0;
	}
	if (!(n->options & event_option(event)))
		return 0;
	n->msg = event == PTRACE_EVENT_EXEC ? (unsigned long)nspid_of(t) : msg;
	n->held = NEST_AT_EVENT;
	post(sv, t, W_STOPCODE(SIGTRAP | event << 8));
	return 1;
}

int trace_nest_task_stop(struct trace_supervisor *sv, struct tstate *t, int event, int sig)
{
	struct trace_nest_task *n = t->nest;
	if (event == PTRACE_EVENT_STOP && n->want) {
		n->held = NEST_AT_EVENT;
		int status = n->want;
		n->want = 0;
		post(sv, t, status);
		return 1;
	}
	if (sig == (SIGTRAP | 0x80)) {
		if (!n->syscall)
			return 0;
		n->held = NEST_AT_SYSCALL;
		post(sv, t, W_STOPCODE((n->options & PTRACE_O_TRACESYSGOOD) ? SIGTRAP | 0x80 : SIGTRAP));
		return 1;
	}
	if (event || !sig)
		return 0; /* its other events are the supervisor's own */
	n->held = NEST_AT_SIGNAL; /* a signal: its tracer decides whether it is delivered */
	post(sv, t, W_STOPCODE(sig));
	return 1;
}

void trace_nest_forget(struct trace_supervisor *sv, struct tstate *t, int wstatus)
{
	if (t->nest) {
		struct tstate *tr = trace_sv_find(sv, t->nest->tracer);
		struct trace_nest_tracer *w = tr ? tr->tracer : NULL;
		/* its tracer hears of its end from the kernel when it is its real
		 * parent (a leader, not a thread), else from here */
		int told = t->tid == trace_sv_tgid(t) && tr && t->ppid == trace_sv_tgid(tr);
		if (w && !told) {
			if (w->ngone == GONE_MAX)
				memmove(w->gone, w->gone + 1, --w->ngone * sizeof w->gone[0]);
			w->gone[w->ngone].nspid = nspid_of(t);
			w->gone[w->ngone++].status = wstatus;
		}
		release(t);
		if (w && !told)
			wake(sv, tr);
	}
	if (!t->tracer)
		return;
	/* its tracees are let go, as the kernel detaches them (or kills them: EXITKILL) */
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct tstate *c = sv->bucket[b]; c; c = c->next) {
			if (!c->nest || c->nest->tracer != t->tid)
				continue;
			if (c->nest->options & PTRACE_O_EXITKILL)
				signal_task(c->tid, SIGKILL, 1);
			int held = c->nest->held != NEST_RUNNING;
			release(c);
			if (held)
				trace_sv_resume(sv, c->tid, PTRACE_CONT, 0);
		}
	free(t->tracer);
	t->tracer = NULL;
	sv->ntracers--;
}
