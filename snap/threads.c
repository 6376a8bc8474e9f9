/* snap: the threads of a process besides its leader — their encoding, their
 * capture by injected queries, and their rebuild by injected clones. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"

#define PR_GET_TID_ADDRESS 40
/* the smallest encoded thread: everything fixed, no component, no signal */
#define THREAD_MIN_BYTES (4 + 8 * 4 + 8 * SNAP_NREGS + SNAP_XLEGACY + 8 + 20 + 4 + 16)
#define SNAP_REG_RSP 19 /* struct user_regs_struct */
#define SNAP_BURN_MAX 4096 /* tids used up to reach one thread's */

static void put_pending(struct codec_buf *b, const struct snap_sigpend *p, size_t n)
{
	codec_put_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		codec_put_u32(b, p[i].sig);
		codec_put_u32(b, p[i].shared);
		codec_put_raw(b, p[i].info, 128);
	}
}

void snap_threads_put(struct codec_buf *b, const struct snap_state *st)
{
	codec_put_u32(b, st->tid);
	codec_put_u64(b, st->ctid);
	codec_put_u64(b, st->robust);
	codec_put_u64(b, st->robust_len);
	codec_put_u32(b, (uint32_t)st->nthreads);
	for (size_t i = 0; i < st->nthreads; i++) {
		const struct snap_thread *t = &st->threads[i];
		codec_put_u32(b, t->tid);
		codec_put_u64(b, t->ctid);
		codec_put_u64(b, t->robust);
		codec_put_u64(b, t->robust_len);
		codec_put_u64(b, t->xfeatures);
		for (int k = 0; k < SNAP_NREGS; k++)
			codec_put_u64(b, t->regs[k]);
		snap_put_xstate(b, t->xfeatures, t->xstate);
		codec_put_u64(b, t->sigmask);
		codec_put_u64(b, t->ss_sp);
		codec_put_u32(b, t->ss_flags);
		codec_put_u64(b, t->ss_size);
		put_pending(b, t->pending, t->npending);
		codec_put_u64(b, t->rseq_ptr);
		codec_put_u32(b, t->rseq_len);
		codec_put_u32(b, t->rseq_sig);
	}
}

static int get_pending(struct codec_rd *r, struct snap_thread *t)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_PENDING_MAX || (uint64_t)n * 136 > r->len - r->off)
		return codec_rd_fail(r, "thread pending signal count out of range");
	t->pending = common_xcalloc(n ? n : 1, sizeof *t->pending);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_sigpend *q = &t->pending[i];
		const uint8_t *p;
		t->npending = i + 1;
		if (codec_get_u32(r, &q->sig) < 0 || codec_get_u32(r, &q->shared) < 0 ||
		    codec_get_raw(r, &p, 128) < 0)
			return -1;
		memcpy(q->info, p, 128);
		if (q->sig < 1 || q->sig > SNAP_NSIG || q->shared)
			return codec_rd_fail(r, "thread pending signal invalid or process-wide");
	}
	return 0;
}

/* The checks the leader's fields get in snap_decode, for one thread. */
static int check_thread(struct codec_rd *r, const struct snap_thread *t)
{
	if (t->rseq_len ? (t->rseq_len < 32 || t->rseq_len > 1024 || t->rseq_ptr % 32 ||
			   t->rseq_ptr >= ((uint64_t)1 << 47))
			: (t->rseq_ptr || t->rseq_sig))
		return codec_rd_fail(r, "thread rseq registration out of range");
	if (t->ctid >= ((uint64_t)1 << 47) || t->robust >= ((uint64_t)1 << 47) ||
	    t->robust_len > 4096)
		return codec_rd_fail(r, "thread registration address out of range");
	if (t->regs[15] != (uint64_t)-1) /* orig_rax: never inside a syscall */
		return codec_rd_fail(r, "thread registers are inside a syscall");
	return 0;
}

static int get_thread(struct codec_rd *r, struct snap_thread *t)
{
	if (codec_get_u32(r, &t->tid) < 0 || codec_get_u64(r, &t->ctid) < 0 ||
	    codec_get_u64(r, &t->robust) < 0 || codec_get_u64(r, &t->robust_len) < 0 ||
	    codec_get_u64(r, &t->xfeatures) < 0)
		return -1;
	for (int k = 0; k < SNAP_NREGS; k++)
		if (codec_get_u64(r, &t->regs[k]) < 0)
			return -1;
	t->xstate = common_xcalloc(1, SNAP_XCANON_SIZE);
	if (snap_get_xstate(r, t->xfeatures, t->xstate) < 0 ||
	    codec_get_u64(r, &t->sigmask) < 0 || codec_get_u64(r, &t->ss_sp) < 0 ||
	    codec_get_u32(r, &t->ss_flags) < 0 || codec_get_u64(r, &t->ss_size) < 0 ||
	    get_pending(r, t) < 0 || codec_get_u64(r, &t->rseq_ptr) < 0 ||
	    codec_get_u32(r, &t->rseq_len) < 0 || codec_get_u32(r, &t->rseq_sig) < 0)
		return -1;
	return check_thread(r, t);
}

int snap_threads_get(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &st->tid) < 0 || codec_get_u64(r, &st->ctid) < 0 ||
	    codec_get_u64(r, &st->robust) < 0 || codec_get_u64(r, &st->robust_len) < 0 ||
	    codec_get_u32(r, &n) < 0)
		return -1;
	if (!st->tid || st->tid > (1u << 22))
		return codec_rd_fail(r, "leader tid out of range");
	if (st->ctid >= ((uint64_t)1 << 47) || st->robust >= ((uint64_t)1 << 47) ||
	    st->robust_len > 4096)
		return codec_rd_fail(r, "leader registration address out of range");
	if (n > SNAP_THREADS_MAX || (uint64_t)n * THREAD_MIN_BYTES > r->len - r->off)
		return codec_rd_fail(r, "thread count out of range");
	st->threads = common_xcalloc(n ? n : 1, sizeof *st->threads);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_thread *t = &st->threads[i];
		st->nthreads = i + 1;
		if (get_thread(r, t) < 0)
			return -1;
		if (!t->tid || t->tid > (1u << 22) || t->tid == st->tid ||
		    (i && t->tid <= st->threads[i - 1].tid))
			return codec_rd_fail(r, "thread tids are not distinct and sorted");
	}
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

int snap_thread_ids(pid_t pid, pid_t **out, size_t *n, struct common_err *e)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/task", (int)pid);
	DIR *d = opendir(p);
	if (!d)
		return common_errno(e, errno, "open %s", p);
	size_t cap = 8;
	*out = common_xcalloc(cap, sizeof **out);
	*n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		if (de->d_name[0] == '.' || tid == pid)
			continue;
		if (*n == cap)
			*out = common_xrealloc(*out, (cap *= 2) * sizeof **out);
		(*out)[(*n)++] = tid;
	}
	closedir(d);
	qsort(*out, *n, sizeof **out, cmp_pid);
	return 0;
}

/* A thread's id in the run's PID namespace (what the guest and clone see). */
static int ns_tid(pid_t tid, uint32_t *out, struct common_err *e)
{
	struct trace_status s;
	int rc = trace_status_read(tid, &s);
	if (rc < 0)
		return common_errno(e, -rc, "/proc/%d/status", (int)tid);
	pid_t v = trace_status_nspid(&s);
	trace_status_free(&s);
	if (v <= 0)
		return common_errf(e, "capture", "thread %d has no NSpid", (int)tid);
	*out = (uint32_t)v;
	return 0;
}

static int robust_of(pid_t tid, uint64_t *head, uint64_t *len, struct common_err *e)
{
	size_t l = 0;
	void *h = NULL;
	if (syscall(SYS_get_robust_list, tid, &h, &l) < 0)
		return common_errno(e, errno, "get_robust_list of %d", (int)tid);
	*head = (uint64_t)(uintptr_t)h;
	*len = h ? l : 0;
	return 0;
}

/* clear_child_tid and the altstack, asked by the thread itself */
static int query_thread(struct trace_tracee *tt, uint64_t scratch, uint64_t *ctid,
			struct snap_thread *th, struct common_err *e)
{
	uint64_t q[6] = { PR_GET_TID_ADDRESS, scratch, 0, 0, 0, 0 };
	uint8_t buf[24];
	int64_t ret;
	if (trace_tracee_inject(tt, SYS_prctl, q, &ret, e) < 0)
		return -1;
	if (ret < 0)
		return common_errf(e, "capture", "prctl(PR_GET_TID_ADDRESS) of thread %d: %s "
				   "(the kernel lacks CONFIG_CHECKPOINT_RESTORE?)", (int)tt->tid,
				   strerror((int)-ret));
	if (trace_tracee_read(tt, scratch, ctid, 8, e) < 0)
		return -1;
	if (!th)
		return 0;
	uint64_t a[6] = { 0, scratch, 0, 0, 0, 0 };
	if (trace_tracee_inject(tt, SYS_sigaltstack, a, &ret, e) < 0 ||
	    trace_tracee_read(tt, scratch, buf, sizeof buf, e) < 0)
		return -1;
	memcpy(&th->ss_sp, buf, 8);
	memcpy(&th->ss_flags, buf + 8, 4);
	memcpy(&th->ss_size, buf + 16, 8);
	return 0;
}

static int thread_pending(pid_t tid, struct snap_thread *th, struct common_err *e)
{
	th->pending = common_xcalloc(SNAP_PENDING_MAX, sizeof *th->pending);
	for (uint64_t off = 0;; off++) {
		uint8_t info[128];
		int n = trace_sigqueue_peek(tid, 0, off, info);
		if (n < 0)
			return common_errno(e, -n, "PTRACE_PEEKSIGINFO of %d", (int)tid);
		if (n == 0)
			return 0;
		if (th->npending == SNAP_PENDING_MAX)
			return common_errf(e, "capture", "more than %d pending signals",
					   SNAP_PENDING_MAX);
		struct snap_sigpend *q = &th->pending[th->npending++];
		int signo;
		memcpy(&signo, info, sizeof signo);
		q->sig = (uint32_t)signo;
		memcpy(q->info, info, sizeof info);
	}
}

/* One thread's own state; its registers go back to the canonical ones. */
static int capture_thread(struct trace_tracee *lead, pid_t tid, uint64_t scratch,
			  const struct snap_xlayout *xl, struct snap_thread *th,
			  struct common_err *e)
{
	struct trace_tracee tt = { .memfd = -1 };
	struct user_regs_struct regs, entry;
	uint8_t xbuf[SNAP_XSTATE_MAX];
	size_t xlen = sizeof xbuf;
	int err, rc = -1;
	if ((err = trace_regs_get(tid, &entry)) < 0)
		return common_errno(e, -err, "capture registers of %d", (int)tid);
	if (ns_tid(tid, &th->tid, e) < 0 || snap_canon_regs(tid, &regs, e) < 0 ||
	    robust_of(tid, &th->robust, &th->robust_len, e) < 0)
		return -1;
	memcpy(th->regs, &regs, sizeof th->regs);
	memset(xbuf, 0, sizeof xbuf);
	if ((err = trace_xstate_get(tid, xbuf, &xlen)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGSET NT_X86_XSTATE of %d", (int)tid);
	th->xstate = common_xmalloc(SNAP_XCANON_SIZE);
	if (snap_xstate_from_host(xl, xbuf, xlen, &th->xfeatures, th->xstate, e) < 0)
		return -1;
	if ((err = trace_sigmask_get(tid, &th->sigmask)) < 0)
		return common_errno(e, -err, "PTRACE_GETSIGMASK of %d", (int)tid);
	if (thread_pending(tid, th, e) < 0)
		return -1;
	if (trace_rseq_get(tid, &th->rseq_ptr, &th->rseq_len, &th->rseq_sig) < 0 || !th->rseq_len)
		th->rseq_ptr = th->rseq_len = th->rseq_sig = 0;
	if ((err = trace_sigmask_set(tid, SNAP_INJECT_MASK)) < 0)
		return common_errno(e, -err, "PTRACE_SETSIGMASK of %d", (int)tid);
	if (trace_tracee_open(&tt, tid, e) == 0) {
		tt.insn = lead->insn;
		rc = query_thread(&tt, scratch, &th->ctid, th, e);
	}
	trace_tracee_close(&tt);
	trace_sigmask_set(tid, th->sigmask);
	if ((err = trace_regs_set(tid, rc == 0 ? &regs : &entry)) < 0 && rc == 0)
		rc = common_errno(e, -err, "PTRACE_SETREGS of %d", (int)tid);
	return rc;
}

int snap_threads_capture(struct trace_tracee *t, uint64_t scratch, struct snap_state *st,
			 struct common_err *e)
{
	struct snap_xlayout xl;
	pid_t *ids = NULL;
	size_t n = 0;
	uint8_t saved[64];
	int rc = -1;
	if (ns_tid(t->tid, &st->tid, e) < 0 || robust_of(t->tid, &st->robust, &st->robust_len, e) < 0 ||
	    snap_xlayout_host(&xl, e) < 0 || snap_thread_ids(t->tid, &ids, &n, e) < 0)
		goto out;
	if (n && st->version < 3) {
		common_errf(e, "capture", "a version %u snapshot holds one thread, the guest has %zu",
			    st->version, n + 1);
		goto out;
	}
	if (n > SNAP_THREADS_MAX) {
		common_errf(e, "capture", "guest has %zu threads, at most %u are held", n + 1,
			    SNAP_THREADS_MAX + 1);
		goto out;
	}
	if (trace_tracee_read(t, scratch, saved, sizeof saved, e) < 0)
		goto out;
	st->threads = common_xcalloc(n ? n : 1, sizeof *st->threads);
	rc = query_thread(t, scratch, &st->ctid, NULL, e);
	for (size_t i = 0; i < n && rc == 0; i++) {
		st->nthreads = i + 1;
		rc = capture_thread(t, ids[i], scratch, &xl, &st->threads[i], e);
	}
	if (trace_tracee_write(t, scratch, saved, sizeof saved, rc ? NULL : e) < 0)
		rc = -1;
	/* host tids ascend with namespace tids in one namespace: still sorted */
	for (size_t i = 1; i < st->nthreads && rc == 0; i++)
		if (st->threads[i].tid <= st->threads[i - 1].tid)
			rc = common_errf(e, "capture", "thread ids out of order");
out:
	free(ids);
	return rc;
}

/* One call made by t, its failure an error naming what. */
int snap_inject(struct trace_tracee *t, const char *what, long nr, uint64_t a0, uint64_t a1,
		  uint64_t a2, uint64_t a3, int64_t *ret, struct common_err *e)
{
	uint64_t a[6] = { a0, a1, a2, a3, 0, 0 };
	int64_t r;
	if (trace_tracee_inject(t, nr, a, &r, e) < 0)
		return -1;
	if (r < 0 && r > -4096)
		return common_errf(e, "restore", "%s: %s", what, strerror((int)-r));
	if (ret)
		*ret = r;
	return 0;
}

/* The host tid of the thread the guest knows as ns, just created. */
static pid_t host_tid(pid_t leader, uint32_t ns, struct common_err *e)
{
	pid_t *ids, found = 0;
	size_t n;
	if (snap_thread_ids(leader, &ids, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && !found; i++) {
		uint32_t v;
		if (ns_tid(ids[i], &v, NULL) == 0 && v == ns)
			found = ids[i];
	}
	free(ids);
	if (!found)
		common_errf(e, "restore", "the new thread %u is not in /proc", ns);
	return found ? found : -1;
}

/* What the thread registers itself: clear_child_tid, robust list, altstack,
 * rseq. */
static int thread_registrations(struct trace_tracee *tt, uint64_t scratch,
				const struct snap_thread *th, struct common_err *e)
{
	uint8_t ss[24];
	uint32_t fl = th->ss_flags & ~(uint32_t)SS_ONSTACK; /* derived from the sp */
	memset(ss, 0, sizeof ss);
	memcpy(ss, &th->ss_sp, 8);
	memcpy(ss + 8, &fl, 4);
	memcpy(ss + 16, &th->ss_size, 8);
	if (snap_inject(tt, "set_tid_address", SYS_set_tid_address, th->ctid, 0, 0, 0, NULL, e) < 0)
		return -1;
	if (th->robust && snap_inject(tt, "set_robust_list", SYS_set_robust_list, th->robust,
				 th->robust_len, 0, 0, NULL, e) < 0)
		return -1;
	if (trace_tracee_write(tt, scratch, ss, sizeof ss, e) < 0 ||
	    snap_inject(tt, "sigaltstack", SYS_sigaltstack, scratch, 0, 0, 0, NULL, e) < 0)
		return -1;
	if (th->rseq_len && snap_inject(tt, "rseq registration", SYS_rseq, th->rseq_ptr, th->rseq_len,
				   0, th->rseq_sig, NULL, e) < 0)
		return -1;
	return 0;
}

static int thread_cpu(pid_t tid, const struct snap_thread *th, const struct snap_xlayout *xl,
		      struct common_err *e)
{
	uint8_t cur[SNAP_XSTATE_MAX];
	size_t xlen = sizeof cur;
	uint64_t xf = th->xfeatures;
	struct user_regs_struct regs;
	int err;
	memset(cur, 0, sizeof cur);
	if ((err = trace_xstate_get(tid, cur, &xlen)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGSET NT_X86_XSTATE of %d", (int)tid);
	if (snap_xstate_fit(xl, &xf, th->xstate, e) < 0 ||
	    snap_xstate_to_host(xl, xf, th->xstate, cur, xlen, e) < 0)
		return -1;
	if ((err = trace_xstate_set(tid, cur, xlen)) < 0)
		return common_errno(e, -err, "PTRACE_SETREGSET NT_X86_XSTATE of %d", (int)tid);
	if ((err = trace_sigmask_set(tid, th->sigmask)) < 0)
		return common_errno(e, -err, "PTRACE_SETSIGMASK of %d", (int)tid);
	memcpy(&regs, th->regs, sizeof regs);
	if ((err = trace_regs_set(tid, &regs)) < 0)
		return common_errno(e, -err, "PTRACE_SETREGS of %d", (int)tid);
	return 0;
}

/* A thread cloned from the leader (which runs with every signal blocked, so
 * the child starts so too) and stopped by its automatic attach: its host tid,
 * *ns its id in the guest's namespace. */
static pid_t clone_stopped(struct trace_tracee *lead, uint64_t fl, uint64_t sp, uint64_t ctid,
			   int64_t *ns, struct common_err *e)
{
	int status, err;
	if (snap_inject(lead, "clone a thread", SYS_clone, fl, sp, 0, ctid, ns, e) < 0)
		return -1;
	pid_t tid = *ns > 0 ? host_tid(lead->tid, (uint32_t)*ns, e) : -1;
	if (tid > 0 && (err = trace_wait_stop(tid, &status)) < 0)
		return common_errno(e, -err, "wait for the new thread %d", (int)tid);
	return tid;
}

/* A thread made only to use up a tid the snapshot's process had let go of:
 * it exits at once and is reaped here, so the supervisor never meets it. */
static int burn_thread(struct trace_tracee *lead, pid_t tid, struct common_err *e)
{
	struct user_regs_struct r;
	int err;
	if ((err = trace_regs_get(tid, &r)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGS of %d", (int)tid);
	r.rip = lead->insn;
	r.rax = SYS_exit;
	r.orig_rax = (uint64_t)-1;
	r.rdi = 0;
	if ((err = trace_regs_set(tid, &r)) < 0 || (err = trace_tracee_reap(tid)) < 0)
		return common_errno(e, -err, "let thread %d exit", (int)tid);
	return 0;
}

int snap_thread_burn(struct trace_tracee *lead, int64_t *got, struct common_err *e)
{
	pid_t tid = clone_stopped(lead, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
				  CLONE_THREAD | CLONE_SYSVSEM, 0, 0, got, e);
	return tid < 0 ? -1 : burn_thread(lead, tid, e);
}

/* One thread, with its own tid: the namespace hands tids out in order, so the
 * ones the process let go of before the snapshot are used up first. */
pid_t snap_thread_create(struct trace_tracee *lead, const struct snap_thread *th,
			 struct common_err *e)
{
	uint64_t fl = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
		      CLONE_SYSVSEM;
	int64_t got;
	pid_t tid;
	for (int burnt = 0;; burnt++) {
		int last = burnt == SNAP_BURN_MAX;
		/* no CLONE_CHILD_CLEARTID: a thread used up would clear the word
		 * on its exit; the kept one calls set_tid_address itself */
		tid = clone_stopped(lead, fl, th->regs[SNAP_REG_RSP], 0, &got, e);
		if (tid < 0)
			return -1;
		if ((uint64_t)got >= th->tid || last)
			break;
		if (burn_thread(lead, tid, e) < 0)
			return -1;
	}
	if ((uint64_t)got != th->tid)
		return common_errf(e, "restore", "thread %u was recreated as tid %lld: the run's "
				   "PID namespace hands out tids in order, and choosing one needs "
				   "CAP_SYS_ADMIN over it", th->tid, (long long)got);
	return tid;
}

/* A created thread set to its state. */
static int restore_thread(struct trace_tracee *lead, uint64_t scratch, int64_t tgid,
			  const struct snap_thread *th, pid_t tid, const struct snap_xlayout *xl,
			  struct common_err *e)
{
	struct trace_tracee tt = { .memfd = -1 };
	int rc = trace_tracee_open(&tt, tid, e);
	tt.insn = lead->insn;
	if (rc == 0)
		rc = thread_registrations(&tt, scratch, th, e);
	trace_tracee_close(&tt);
	for (size_t i = 0; i < th->npending && rc == 0; i++) {
		const struct snap_sigpend *q = &th->pending[i];
		if (trace_tracee_write(lead, scratch, q->info, sizeof q->info, e) < 0 ||
		    snap_inject(lead, "rt_tgsigqueueinfo", SYS_rt_tgsigqueueinfo, (uint64_t)tgid, th->tid,
			   q->sig, scratch, NULL, e) < 0)
			rc = -1;
	}
	return rc == 0 ? thread_cpu(tid, th, xl, e) : -1;
}

int snap_threads_restore(struct trace_tracee *t, uint64_t scratch, const struct snap_state *st,
			 const struct snap_xlayout *xl, const pid_t *made, struct common_err *e)
{
	int64_t tgid;
	if (st->version < 3)
		return 0;
	if (st->robust && snap_inject(t, "set_robust_list", SYS_set_robust_list, st->robust,
				 st->robust_len, 0, 0, NULL, e) < 0)
		return -1;
	if (snap_inject(t, "set_tid_address", SYS_set_tid_address, st->ctid, 0, 0, 0, NULL, e) < 0 ||
	    snap_inject(t, "getpid", SYS_getpid, 0, 0, 0, 0, &tgid, e) < 0)
		return -1;
	for (size_t i = 0; i < st->nthreads; i++) {
		pid_t tid = made ? made[i] : snap_thread_create(t, &st->threads[i], e);
		if (tid < 0 || restore_thread(t, scratch, tgid, &st->threads[i], tid, xl, e) < 0)
			return -1;
	}
	return 0;
}
