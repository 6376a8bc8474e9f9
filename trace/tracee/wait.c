/* trace/tracee: waiting for one thread's stops, and syscalls injected into it. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sys/sys.h"
#include "trace/tracee/tracee.h"

/* The stop trace_wait_for resumes tid towards. */
enum trace_want {
	TRACE_WANT_TRAP,    /* a syscall-entry/exit stop or a single-step trap */
	TRACE_WANT_SECCOMP, /* a seccomp stop */
};

int trace_wait_stop(pid_t tid, int *status)
{
	siginfo_t si;
	int st, rc;
	/* a look first (WNOWAIT): an exit is the supervisor's to reap */
	do {
		memset(&si, 0, sizeof si);
		rc = waitid(P_PID, (id_t)tid, &si, WEXITED | WSTOPPED | WNOWAIT | __WALL | __WNOTHREAD);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)
		return -ESRCH;
	while (waitpid(tid, &st, __WALL | __WNOTHREAD) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFSTOPPED(st))
		return -ESRCH;
	if (st >> 16 == PTRACE_EVENT_EXIT) {
		ptrace(PTRACE_CONT, tid, 0, 0);
		return -ESRCH;
	}
	*status = st;
	return 0;
}

static int wanted(enum trace_want want, int sig, int ev)
{
	if (want == TRACE_WANT_SECCOMP)
		return sig == SIGTRAP && ev == PTRACE_EVENT_SECCOMP;
	return sig == (SIGTRAP | 0x80) || (sig == SIGTRAP && ev == 0);
}

/* Stops on the way are resumed with op; a signal met is not delivered but kept
 * in *sig (the last one) for the caller to send again. 0, -ESRCH or -errno. */
static int trace_wait_for(pid_t tid, enum trace_want want, int op, int *sig)
{
	for (;;) {
		int st, rc = trace_wait_stop(tid, &st);
		if (rc < 0)
			return rc;
		int s = WSTOPSIG(st), ev = st >> 16;
		if (wanted(want, s, ev))
			return 0;
		if (ev == 0 && s != SIGTRAP && s != (SIGTRAP | 0x80))
			*sig = s; /* a signal-delivery-stop: deliver it later */
		if (ptrace((enum __ptrace_request)op, tid, 0, 0) < 0)
			return -errno;
	}
}

static void send_again(pid_t tid, int sig)
{
	/* tkill is safe: tid is our tracee, so its id is not reused before we reap it */
	if (sig)
		syscall(SYS_tkill, tid, sig);
}

int trace_syscall_op(pid_t tid)
{
	struct __ptrace_syscall_info info;
	memset(&info, 0, sizeof info);
	if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, &info) < 0)
		return -errno;
	return info.op;
}

int trace_inject_at_entry(pid_t tid, long nr, const uint64_t a[6], int64_t *ret)
{
	struct user_regs_struct r0, r;
	int sig = 0, rc;
	if (trace_regs_get(tid, &r0) < 0)
		return -EIO;
	r = r0;
	r.orig_rax = (uint64_t)nr;
	trace_regs_set_args(&r, a);
	if (trace_regs_set(tid, &r) < 0)
		return -EIO;
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) < 0)
		return -errno;
	if ((rc = trace_wait_for(tid, TRACE_WANT_TRAP, PTRACE_SYSCALL, &sig)) < 0)
		return rc;
	if (trace_regs_get(tid, &r) < 0)
		return -EIO;
	*ret = (int64_t)r.rax;
	/* back to the syscall instruction: the kernel traps it again, unchanged */
	return trace_seccomp_again(tid, &r0);
}

int trace_seccomp_again(pid_t tid, const struct user_regs_struct *at)
{
	struct user_regs_struct r = *at;
	int sig = 0, rc;
	/* back onto the syscall instruction: the filter traps the call again */
	r.rip -= 2;
	r.rax = at->orig_rax;
	r.orig_rax = (uint64_t)-1;
	if (trace_regs_set(tid, &r) < 0)
		return -EIO;
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
		return -errno;
	if ((rc = trace_wait_for(tid, TRACE_WANT_SECCOMP, PTRACE_CONT, &sig)) < 0)
		return rc;
	send_again(tid, sig);
	return 0;
}

int trace_inject_at_exit(pid_t tid, long nr, const uint64_t a[6], int64_t *ret)
{
	struct user_regs_struct r0, r;
	int sig = 0, rc;
	if (trace_regs_get(tid, &r0) < 0)
		return -EIO;
	r = r0;
	r.rip -= 2;
	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)nr;
	trace_regs_set_args(&r, a);
	if (trace_regs_set(tid, &r) < 0)
		return -EIO;
	/* its entry stop (a seccomp stop on the way is resumed), then its exit */
	for (int steps = 0;; steps++) {
		if (steps == 3)
			return -EIO;
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0) < 0)
			return -errno;
		if ((rc = trace_wait_for(tid, TRACE_WANT_TRAP, PTRACE_SYSCALL, &sig)) < 0)
			return rc;
		if (trace_syscall_op(tid) == PTRACE_SYSCALL_INFO_EXIT)
			break;
	}
	if (trace_regs_get(tid, &r) < 0)
		return -EIO;
	*ret = (int64_t)r.rax;
	if (trace_regs_set(tid, &r0) < 0)
		return -EIO;
	send_again(tid, sig);
	return 0;
}

static void set_call(struct user_regs_struct *r, uint64_t insn, long nr, const uint64_t a[6])
{
	r->rip = insn;
	r->rax = (uint64_t)nr;
	r->orig_rax = (uint64_t)-1; /* no syscall-restart fix-up of the stop we are in */
	trace_regs_set_args(r, a);
}

/* One single step from insn: 1 when the syscall ran, 0 when the trap reported
 * the end of the syscall the thread was stopped in (ours has not run yet). */
static int step_call(struct trace_tracee *t, long nr, struct user_regs_struct *r, int *sig,
		     struct common_err *e)
{
	int rc;
	if ((rc = trace_regs_set(t->tid, r)) < 0)
		return common_errno(e, -rc, "inject syscall %ld: PTRACE_SETREGS", nr);
	if (ptrace(PTRACE_SINGLESTEP, t->tid, 0, 0) < 0)
		return common_errno(e, errno, "inject syscall %ld: PTRACE_SINGLESTEP", nr);
	if ((rc = trace_wait_for(t->tid, TRACE_WANT_TRAP, PTRACE_SINGLESTEP, sig)) < 0)
		return common_errno(e, -rc, "inject syscall %ld: wait", nr);
	if ((rc = trace_regs_get(t->tid, r)) < 0)
		return common_errno(e, -rc, "inject syscall %ld: PTRACE_GETREGS", nr);
	if (r->rip == t->insn + 2)
		return 1;
	if (r->rip != t->insn)
		return common_errf(e, "inject syscall", "tracee stepped to %#llx",
				   (unsigned long long)r->rip);
	return 0;
}

int trace_tracee_inject(struct trace_tracee *t, long nr, const uint64_t a[6], int64_t *ret,
			struct common_err *e)
{
	struct user_regs_struct r;
	int rc, sig = 0;
	if ((rc = trace_regs_get(t->tid, &r)) < 0)
		return common_errno(e, -rc, "inject syscall %ld: PTRACE_GETREGS", nr);
	for (int tries = 0; tries < 16; tries++) {
		set_call(&r, t->insn, nr, a);
		if ((rc = step_call(t, nr, &r, &sig, e)) < 0)
			return -1;
		if (rc == 1) {
			*ret = (int64_t)r.rax;
			send_again(t->tid, sig);
			return 0;
		}
	}
	return common_errf(e, "inject syscall", "syscall %ld never ran", nr);
}

/* The first 0f 05 in [start, start+len) of t, or 0. */
static uint64_t find_insn(struct trace_tracee *t, uint64_t start, size_t len)
{
	uint64_t at = 0;
	if (len > (64u << 20))
		len = 64u << 20;
	uint8_t *buf = common_xmalloc(len);
	if (trace_tracee_read(t, start, buf, len, NULL) == 0)
		for (size_t k = 0; k + 1 < len && !at; k++)
			if (buf[k] == 0x0f && buf[k + 1] == 0x05)
				at = start + k;
	free(buf);
	return at;
}

int trace_tracee_find_syscall(struct trace_tracee *t, struct common_err *e)
{
	struct trace_map *m;
	size_t n;
	if (trace_proc_maps(t->tid, &m, &n, e) < 0)
		return -1;
	/* the vdso first: it is never part of a snapshot and never moves */
	for (int pass = 0; pass < 2 && !t->insn; pass++) {
		for (size_t i = 0; i < n && !t->insn; i++) {
			int vdso = !strcmp(m[i].path, "[vdso]");
			if (pass == 0 ? !vdso : (vdso || m[i].perms[2] != 'x'))
				continue;
			t->insn = find_insn(t, m[i].start, (size_t)(m[i].end - m[i].start));
		}
	}
	free(m);
	if (!t->insn)
		return common_errf(e, "inject syscall", "no syscall instruction in the tracee's text");
	return 0;
}

/* A seccomp stop met while stopping: rewind the syscall so it is trapped again. */
static void rewind_syscall(pid_t tid)
{
	struct user_regs_struct r;
	if (trace_regs_get(tid, &r) == 0) {
		r.rip -= 2;
		r.rax = r.orig_rax;
		r.orig_rax = (uint64_t)-1;
		trace_regs_set(tid, &r);
	}
}

int trace_tracee_resume(pid_t tid)
{
	return ptrace(PTRACE_CONT, tid, 0, 0) < 0 ? -errno : 0;
}

int trace_tracee_reap(pid_t tid)
{
	int st;
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
		return -errno;
	for (;;) {
		if (waitpid(tid, &st, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return 0;
		ptrace(PTRACE_CONT, tid, 0, 0); /* its exit stop */
	}
}

#define INTERRUPT_POLL_US 200
#define INTERRUPT_WAIT_US 10000000 /* a task never stopping (a hung disk) is refused */

/* The event of tid's pending ptrace stop, not consumed; *none when it has not
 * stopped (nor exited) yet. */
static int pending_event(pid_t tid, int *none, int *sig)
{
	siginfo_t si;
	int rc;
	do {
		memset(&si, 0, sizeof si);
		rc = waitid(P_PID, (id_t)tid, &si, WSTOPPED | WEXITED | WNOWAIT | WNOHANG | __WALL |
			    __WNOTHREAD);
	} while (rc < 0 && errno == EINTR);
	*none = rc == 0 && si.si_pid == 0;
	*sig = rc == 0 && si.si_code == CLD_TRAPPED ? si.si_status & 0xff : 0;
	return rc == 0 && si.si_code == CLD_TRAPPED ? si.si_status >> 8 : 0;
}

/* 1 when tid waits in the kernel for its vfork child (vfork, or clone or clone3
 * with CLONE_VFORK) to exec or exit: no interrupt stops it before, and the child
 * may be waiting for the supervisor (its exec event), which waits here. */
static int in_vfork(pid_t tid)
{
	char p[64], buf[256];
	long nr;
	unsigned long long a0;
	uint64_t flags = 0;
	snprintf(p, sizeof p, "/proc/%d/syscall", (int)tid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (sscanf(buf, "%ld %llx", &nr, &a0) != 2)
		return 0;
	if (nr == TRACE_SYS_vfork)
		return 1;
	if (nr == TRACE_SYS_clone)
		return (a0 & CLONE_VFORK) != 0;
	if (nr != TRACE_SYS_clone3)
		return 0;
	snprintf(p, sizeof p, "/proc/%d/mem", (int)tid); /* clone_args.flags, its first field */
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = pread(fd, &flags, sizeof flags, (off_t)a0);
	close(fd);
	return n == (ssize_t)sizeof flags && (flags & CLONE_VFORK);
}

int trace_tracee_interrupt(pid_t tid, int signals_left, struct common_err *e)
{
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
		return common_errno(e, errno, "interrupt guest %d", (int)tid);
	for (int i = 0, waited = 0; i < 10000; i++) {
		/* a fork, clone or exec event is the loop's to see (its child is held
		 * until it does), and its stop clears the interrupt: left pending */
		int none, psig, pev = pending_event(tid, &none, &psig);
		if (none && in_vfork(tid))
			return common_errf(e, "snapshot", "guest task %d waits for its vfork child to "
					   "start a program: try again", (int)tid);
		if (none && (waited += INTERRUPT_POLL_US) < INTERRUPT_WAIT_US) {
			usleep(INTERRUPT_POLL_US);
			i--;
			continue;
		}
		if (pev == PTRACE_EVENT_FORK || pev == PTRACE_EVENT_VFORK || pev == PTRACE_EVENT_CLONE ||
		    pev == PTRACE_EVENT_EXEC || pev == PTRACE_EVENT_VFORK_DONE)
			return common_errf(e, "snapshot", "guest task %d is starting a process or "
					   "a program: try again", (int)tid);
		/* a signal, its exit, a call's exit: stops the loop must see */
		if (signals_left && !none && pev != PTRACE_EVENT_STOP && pev != PTRACE_EVENT_SECCOMP)
			return common_errf(e, "snapshot", "guest task %d has a stop of its own to "
					   "report (signal %d, event %d): try again", (int)tid, psig, pev);
		int st, rc = trace_wait_stop(tid, &st);
		if (rc == -ESRCH)
			return common_errf(e, "snapshot", "the guest is exiting");
		if (rc < 0)
			return common_errno(e, -rc, "wait for guest %d", (int)tid);
		int ev = st >> 16, sig = WSTOPSIG(st);
		if (ev == PTRACE_EVENT_STOP)
			return 0;
		if (ev == PTRACE_EVENT_SECCOMP)
			rewind_syscall(tid);
		ptrace(PTRACE_CONT, tid, 0, ev || sig == SIGTRAP || sig == (SIGTRAP | 0x80) ? 0 : sig);
		/* any ptrace stop clears a pending interrupt (a seccomp stop, a signal's,
		 * the exit of a call resumed with PTRACE_SYSCALL): ask again, or a task
		 * that goes back to sleep in its call is waited for forever */
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
	}
	return common_errf(e, "snapshot", "the guest never reached a step boundary");
}

int trace_tracee_cont_reap(pid_t tid, int sig, int *status)
{
	if (ptrace(PTRACE_CONT, tid, 0, sig) < 0)
		return -errno;
	while (waitpid(tid, status, __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

int trace_tracee_syscall_step(pid_t tid, int *status)
{
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) < 0)
		return -errno;
	return trace_wait_stop(tid, status);
}
