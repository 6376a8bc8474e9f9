/* snap: the skeleton of a restored process tree (version 4): the pipes, then
 * every process and thread created in id order, each with the id it had,
 * before any process is rebuilt into its state (restore.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "snap/snap-internal.h"

/* The path and mode of pipe i when it is a named FIFO ("" otherwise). */
static const struct snap_fd *fifo_of(const struct snap_state *st, size_t i)
{
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		for (size_t j = 0; !p->zombie && j < p->nfds; j++)
			if (p->fds[j].kind == SNAP_FD_PIPE && p->fds[j].pos == i)
				return p->fds[j].path[0] ? &p->fds[j] : NULL;
	}
	return NULL;
}

/* Pipe i's two ends in the root: a new pipe, or a named FIFO made again at
 * its path (kept when one is there) and opened once for each end. */
static int open_pipe(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		     size_t i, int32_t fds[2], struct common_err *e)
{
	const struct snap_fd *f = fifo_of(st, i);
	int64_t got;
	if (!f)
		return snap_inject(root, "pipe2", SYS_pipe2, scratch, 0, 0, 0, NULL, e) < 0 ||
		       trace_tracee_read(root, scratch, fds, 2 * sizeof *fds, e) < 0 ? -1 : 0;
	char what[SNAP_STR_MAX + 32];
	snprintf(what, sizeof what, "mkfifo %s", f->path);
	uint64_t a[6] = { (uint64_t)AT_FDCWD, scratch, S_IFIFO | f->size, 0, 0, 0 };
	if (trace_tracee_write(root, scratch, f->path, strlen(f->path) + 1, e) < 0 ||
	    trace_tracee_inject(root, SYS_mknodat, a, &got, e) < 0)
		return -1;
	if (got < 0 && got != -EEXIST)
		return common_errf(e, "restore", "%s: %s", what, strerror((int)-got));
	snprintf(what, sizeof what, "open FIFO %s", f->path);
	for (int end = 0; end < 2; end++) {
		if (snap_inject(root, what, SYS_openat, (uint64_t)AT_FDCWD, scratch,
				(end ? O_WRONLY : O_RDONLY) | O_NONBLOCK, 0, &got, e) < 0)
			return -1;
		fds[end] = (int32_t)got;
	}
	return 0;
}

/* Holders of every pipe's two ends and of the root's standard descriptors,
 * in the root at h->base and up (inherited by every process forked from it,
 * exec included): pipes sized and filled from here. */
static int make_holders(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
			struct snap_hosts *h, struct common_err *e)
{
	uint32_t base = 3;
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		for (size_t i = 0; i < p->nfds; i++)
			if (p->fds[i].fd >= base)
				base = p->fds[i].fd + 1;
	}
	/* above every descriptor the root has open, and two more: pipe2 hands out
	 * the lowest free ones, always below the holders */
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)root->tid);
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && (uint32_t)atoi(de->d_name) + 3 > base)
			base = (uint32_t)atoi(de->d_name) + 3;
	if (d)
		closedir(d);
	h->base = base;
	for (size_t i = 0; i < st->npipes; i++) {
		int32_t fds[2];
		int64_t got;
		if (open_pipe(root, scratch, st, i, fds, e) < 0)
			return -1;
		for (int end = 0; end < 2; end++) {
			uint32_t want = base + 2 * (uint32_t)i + (uint32_t)end;
			if (snap_inject(root, "fcntl(F_DUPFD)", SYS_fcntl, (uint64_t)fds[end], F_DUPFD, want, 0,
				   &got, e) < 0 ||
			    snap_inject(root, "close", SYS_close, (uint64_t)fds[end], 0, 0, 0, NULL, e) < 0)
				return -1;
			if (got != want)
				return common_errf(e, "restore", "pipe holder landed on fd %lld, not %u",
						   (long long)got, want);
		}
		char p[64];
		snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)root->tid, base + 2 * (uint32_t)i + 1);
		int w = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		const struct snap_pipe *q = &st->pipes[i];
		int rc = w < 0 ? common_errno(e, errno, "open %s", p) : 0;
		if (rc == 0 && fcntl(w, F_SETPIPE_SZ, (int)q->capacity) != (int)q->capacity)
			rc = common_errno(e, errno, "pipe %zu: capacity %u", i, q->capacity);
		if (rc == 0 && q->len && write(w, q->bytes, (size_t)q->len) != (ssize_t)q->len)
			rc = common_errno(e, errno, "pipe %zu: refill its %llu bytes", i,
					  (unsigned long long)q->len);
		if (w >= 0)
			close(w);
		if (rc < 0)
			return -1;
	}
	for (uint32_t k = 0; k < 3; k++) {
		int64_t got;
		uint32_t want = base + 2 * (uint32_t)st->npipes + k;
		/* a standard descriptor the root does not have is not copied either */
		if (snap_inject(root, "fcntl(F_DUPFD)", SYS_fcntl, k, F_DUPFD, want, 0, &got, NULL) == 0 &&
		    got != want)
			return common_errf(e, "restore", "holder landed on fd %lld, not %u",
					   (long long)got, want);
	}
	return snap_shm_holders(root, scratch, st, h, e) < 0 ||
	       snap_kobjs_holders(root, scratch, st, h, e) < 0 ? -1 : 0;
}

/* The host pid of parent's child with namespace pid ns. */
static pid_t host_child(pid_t parent, uint32_t ns, struct common_err *e)
{
	struct snap_task *kids;
	size_t n;
	pid_t found = 0;
	if (snap_tree_list(parent, &kids, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && !found; i++)
		if (kids[i].ns == ns)
			found = kids[i].host;
	free(kids);
	if (!found)
		common_errf(e, "restore", "the new process %u is not in /proc", ns);
	return found ? found : -1;
}

/* A fork of parent (stopped by its automatic attach): its host pid. */
static pid_t fork_stopped(struct trace_tracee *parent, int64_t *ns, struct common_err *e)
{
	int status, err;
	if (snap_inject(parent, "fork a process", SYS_clone, SIGCHLD, 0, 0, 0, ns, e) < 0)
		return -1;
	pid_t pid = host_child(parent->tid, (uint32_t)*ns, e);
	if (pid > 0 && (err = trace_wait_stop(pid, &status)) < 0)
		return common_errno(e, -err, "wait for the new process %d", (int)pid);
	return pid;
}

/* pid ends as the zombie it was: exit_group(code), or killed by its signal;
 * reaped here as its tracer, it stays a zombie for its parent. */
static int make_zombie(pid_t pid, uint64_t insn, uint32_t ns, uint32_t wstatus,
		       struct common_err *e)
{
	struct user_regs_struct r;
	int err, sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0, st;
	if ((err = trace_regs_get(pid, &r)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGS of %d", (int)pid);
	r.rip = insn;
	r.orig_rax = (uint64_t)-1;
	r.rax = sig ? SYS_kill : SYS_exit_group;
	r.rdi = sig ? ns : (uint64_t)WEXITSTATUS(wstatus);
	r.rsi = (uint64_t)sig;
	if ((err = trace_regs_set(pid, &r)) < 0 || (err = trace_sigmask_set(pid, 0)) < 0)
		return common_errno(e, -err, "set process %d to exit", (int)pid);
	int deliver = 0;
	for (int steps = 0; steps < 64; steps++) {
		if ((err = trace_tracee_cont_reap(pid, deliver, &st)) < 0)
			return common_errno(e, -err, "let process %d exit", (int)pid);
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return (uint32_t)st == wstatus ? 0 :
				common_errf(e, "restore", "process %u ended with status %#x, not %#x",
					    ns, (unsigned)st, wstatus);
		deliver = (st >> 16) == 0 && WSTOPSIG(st) == sig ? sig : 0;
	}
	return common_errf(e, "restore", "process %u never exited", ns);
}

int snap_exec_program(struct trace_tracee *t, uint64_t scratch, const char *path,
		      struct common_err *e)
{
	size_t len = strlen(path) + 1, at = (len + 15) & ~(size_t)15;
	uint64_t argv[2] = { scratch, 0 };
	struct user_regs_struct r;
	int err, st, execd = 0;
	if (at + sizeof argv > SNAP_PAGE)
		return common_errf(e, "restore", "program path too long: %s", path);
	if (trace_tracee_write(t, scratch, path, len, e) < 0 ||
	    trace_tracee_write(t, scratch + at, argv, sizeof argv, e) < 0 ||
	    (err = trace_regs_get(t->tid, &r)) < 0)
		return -1;
	r.rip = t->insn;
	r.orig_rax = (uint64_t)-1;
	r.rax = SYS_execve;
	r.rdi = scratch;
	r.rsi = scratch + at;
	r.rdx = scratch + at + 8;
	if ((err = trace_regs_set(t->tid, &r)) < 0)
		return common_errno(e, -err, "PTRACE_SETREGS of %d", (int)t->tid);
	/* through its entry (and a seccomp stop) to the exec event and the exit */
	struct user_regs_struct call = r;
	for (int steps = 0, entered = 0; steps < 16; steps++) {
		if (trace_tracee_syscall_step(t->tid, &st) < 0)
			return common_errf(e, "restore", "exec %s: the process is gone", path);
		if (st >> 16 == PTRACE_EVENT_EXEC)
			execd = 1;
		int op = st >> 16 || WSTOPSIG(st) != (SIGTRAP | 0x80) ? -1 : trace_syscall_op(t->tid);
		entered |= op == PTRACE_SYSCALL_INFO_ENTRY;
		if (op != PTRACE_SYSCALL_INFO_EXIT)
			continue;
		if (!entered) {
			/* the end of the syscall it was stopped in (a fresh exec's own) */
			if ((err = trace_regs_set(t->tid, &call)) < 0)
				return common_errno(e, -err, "PTRACE_SETREGS of %d", (int)t->tid);
			continue;
		}
		if (execd)
			return 0;
		trace_regs_get(t->tid, &r);
		return common_errf(e, "restore", "exec %s: %s", path, strerror((int)-(int64_t)r.rax));
	}
	return common_errf(e, "restore", "exec %s never completed", path);
}

/* One id used up at a time until the next one handed out is want. */
static int burn_to(struct trace_tracee *root, uint32_t *last, uint32_t want,
		   struct common_err *e)
{
	while (*last + 1 < want) {
		int64_t got;
		if (snap_thread_burn(root, &got, e) < 0)
			return -1;
		if (got < 0 || (uint64_t)got >= want)
			return common_errf(e, "restore", "id %u is taken (the namespace handed "
					   "out %lld): ids are handed out in order, and choosing one "
					   "needs CAP_SYS_ADMIN over the run's PID namespace", want,
					   (long long)got);
		*last = (uint32_t)got;
	}
	return 0;
}

/* An id of the tree: process k's (k 0: the root) leader when j < 0, else its
 * thread j. */
struct slot {
	uint32_t id;
	size_t k;
	long j;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static struct slot *slots_of(const struct snap_state *st, size_t *n)
{
	size_t cap = st->nthreads + 1;
	for (size_t k = 0; k < st->nprocs; k++)
		cap += st->procs[k].nthreads + 1;
	struct slot *s = common_xcalloc(cap, sizeof *s);
	*n = 0;
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		if (k)
			s[(*n)++] = (struct slot){ p->pid, k, -1 };
		for (size_t j = 0; j < p->nthreads; j++)
			s[(*n)++] = (struct slot){ p->threads[j].tid, k, (long)j };
	}
	qsort(s, *n, sizeof *s, cmp_slot);
	return s;
}

/* Process k created from its parent (zombies made and left); tt[k] opened on it. */
static int make_process(struct trace_tracee *tt, uint64_t scratch, const struct snap_state *st,
			size_t k, const char *root_exe, struct snap_hosts *h, struct common_err *e)
{
	const struct snap_state *p = &st->procs[k - 1];
	size_t pk = 0;
	for (size_t i = 0; i + 1 < k; i++)
		if (st->procs[i].pid == p->ppid)
			pk = i + 1;
	int64_t got;
	pid_t pid = fork_stopped(&tt[pk], &got, e);
	if (pid < 0)
		return -1;
	if ((uint64_t)got != p->pid)
		return common_errf(e, "restore", "process %u was recreated as pid %lld: ids are "
				   "handed out in order, and choosing one needs CAP_SYS_ADMIN over "
				   "the run's PID namespace", p->pid, (long long)got);
	if (p->zombie)
		return make_zombie(pid, tt[pk].insn, p->pid, p->wstatus, e);
	h->proc[k - 1] = pid;
	if (trace_tracee_open(&tt[k], pid, e) < 0)
		return -1;
	tt[k].insn = tt[pk].insn;
	if (!strcmp(p->exe, root_exe))
		return 0;
	int64_t at;
	if (snap_exec_program(&tt[k], scratch, p->exe, e) < 0)
		return -1;
	/* its memory is a new one: /proc/PID/mem again */
	trace_tracee_close(&tt[k]);
	if (trace_tracee_open(&tt[k], pid, e) < 0)
		return -1;
	/* a scratch page where the root has its, for what is made from here */
	uint64_t a[6] = { scratch, SNAP_PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
	if (trace_tracee_find_syscall(&tt[k], e) < 0 ||
	    trace_tracee_inject(&tt[k], SYS_mmap, a, &at, e) < 0)
		return -1;
	return (uint64_t)at == scratch ? 0 : common_errf(e, "restore", "process %u: no scratch "
							  "page at %#llx", p->pid,
							  (unsigned long long)scratch);
}

int snap_tree_skeleton(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		       struct snap_hosts *h, struct common_err *e)
{
	size_t n;
	struct slot *s = slots_of(st, &n);
	struct trace_tracee *tt = common_xcalloc(st->nprocs + 1, sizeof *tt);
	char p[64], root_exe[SNAP_STR_MAX];
	int rc = 0;
	h->proc = common_xcalloc(st->nprocs + 1, sizeof *h->proc);
	h->threads = common_xcalloc(st->nprocs + 1, sizeof *h->threads);
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *q = k ? &st->procs[k - 1] : st;
		h->threads[k] = common_xcalloc(q->nthreads + 1, sizeof **h->threads);
		tt[k].memfd = -1;
	}
	h->nprocs = st->nprocs;
	tt[0] = *root;
	snprintf(p, sizeof p, "/proc/%d/exe", (int)root->tid);
	ssize_t len = readlink(p, root_exe, sizeof root_exe - 1);
	root_exe[len > 0 ? len : 0] = 0;
	if (make_holders(root, scratch, st, h, e) < 0)
		rc = -1;
	/* the root's pid was the last id handed out in the fresh namespace */
	uint32_t last = st->tid;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (burn_to(root, &last, s[i].id, e) < 0) {
			rc = -1;
			break;
		}
		size_t k = s[i].k;
		const struct snap_state *q = k ? &st->procs[k - 1] : st;
		if (s[i].j < 0) {
			rc = make_process(tt, scratch, st, k, root_exe, h, e);
		} else {
			pid_t tid = snap_thread_create(&tt[k], &q->threads[s[i].j], e);
			rc = tid < 0 ? -1 : 0;
			h->threads[k][s[i].j] = tid;
		}
		last = s[i].id;
	}
	tt[0].memfd = -1; /* the caller's */
	for (size_t k = 1; k <= st->nprocs; k++)
		trace_tracee_close(&tt[k]);
	free(tt);
	free(s);
	return rc;
}

void snap_hosts_free(struct snap_hosts *h)
{
	for (size_t k = 0; h->threads && k <= h->nprocs; k++)
		free(h->threads[k]);
	free(h->threads);
	free(h->proc);
	memset(h, 0, sizeof *h);
}
