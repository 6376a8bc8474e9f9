/* THE ptrace loop: one waitpid(-1, __WALL | __WNOTHREAD) loop over every tracee
 * of this thread (another thread's run, or the host's children, are not ours), one place
 * where a thread's state is created (tstate_get) and one where it is freed
 * (tstate_free), separate entry and exit handlers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "trace/tracee/tracee.h"
#include "trace/sv/sv-internal.h"

#define TICK_MS 250
#define TICK_MIN_US 1000       /* the shortest tick a hook may ask for */

struct tstate *trace_sv_find(struct trace_supervisor *sv, pid_t tid)
{
	for (struct tstate *t = sv->bucket[(unsigned)tid % NBUCKET]; t; t = t->next)
		if (t->tid == tid)
			return t;
	return NULL;
}

/* The one place a thread's state is created: stops of unknown tids are new
 * children whose fork event has not been seen yet. */
static struct tstate *tstate_get(struct trace_supervisor *sv, pid_t tid)
{
	struct tstate *t = trace_sv_find(sv, tid);
	if (t)
		return t;
	t = common_xcalloc(1, sizeof *t);
	t->tid = tid;
	t->next = sv->bucket[(unsigned)tid % NBUCKET];
	sv->bucket[(unsigned)tid % NBUCKET] = t;
	sv->ntids++;
	return t;
}

/* The one place it is freed. */
static void tstate_free(struct trace_supervisor *sv, pid_t tid)
{
	struct tstate **pp = &sv->bucket[(unsigned)tid % NBUCKET];
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->tid == tid) {
			struct tstate *t = *pp;
			if (t->nest || t->tracer)
				trace_nest_forget(sv, t, t->wstatus);
			*pp = t->next;
			if (t->sgid)
				close(t->sgid_fd);
			EACH_LAYER(sv, l)
				if (t->slot[l - sv->l] && l->slot_free)
					l->slot_free(l->ctx, t->slot[l - sv->l]);
			sv->nheld -= t->held;
			sv->ndead -= t->dead;
			free(t);
			sv->ntids--;
			return;
		}
	}
}

/* A task met without its parent's fork event (an orphan let go): its thread
 * group and parent from one read of /proc/TID/status (the hooks would each
 * read it again). */
static void proc_ids(struct tstate *t)
{
	struct trace_status st;
	unsigned long long v;
	if (trace_status_read(t->tid, &st) < 0)
		return;
	if (!t->tgid && trace_status_num(&st, "Tgid", 10, &v) == 0)
		t->tgid = (pid_t)v;
	if (!t->ppid && trace_status_num(&st, "PPid", 10, &v) == 0)
		t->ppid = (pid_t)v;
	trace_status_free(&st);
}

static pid_t tgid_of(struct tstate *t)
{
	if (!t->tgid)
		proc_ids(t);
	return t->tgid ? t->tgid : t->tid;
}

pid_t trace_sv_tgid(struct tstate *t)
{
	return tgid_of(t);
}

static ssize_t trace_guest_read_str(struct trace_guest *g, uint64_t addr, char *buf, size_t max)
{
	return trace_mem_read_str(g->ts->tid, addr, buf, max);
}

int trace_sv_watch(struct trace_supervisor *sv, int fd)
{
	if (sv->nwatch >= MAX_WATCH)
		return -ENOSPC;
	sv->watch[sv->nwatch++] = fd;
	return 0;
}

void trace_sv_stop(struct trace_supervisor *sv, const char *reason)
{
	if (!sv->stopping && reason)
		snprintf(sv->reason, sizeof sv->reason, "%s", reason);
	sv->stopping = 1;
}

static void kill_all(struct trace_supervisor *sv);

void trace_sv_kill_now(struct trace_supervisor *sv, const char *reason)
{
	trace_sv_stop(sv, reason);
	kill_all(sv);
}

void trace_sv_tick_within(struct trace_supervisor *sv, uint64_t us)
{
	if (us < TICK_MIN_US)
		us = TICK_MIN_US;
	if (us < sv->tick_us)
		sv->tick_us = us;
}

size_t trace_sv_pids(const struct trace_supervisor *sv, pid_t *out, size_t max)
{
	size_t n = 0;
	for (size_t b = 0; b < NBUCKET; b++)
		for (const struct tstate *t = sv->bucket[b]; t; t = t->next) {
			/* sbx's own init is not the guest; the dead are gone; one past its
			 * exit event (a leader waiting for its threads) had its figures
			 * taken there: sampled again it would be counted twice */
			if (t->tid == sv->init || t->dead || t->exit_told)
				continue;
			if (n < max)
				out[n] = t->tid;
			n++;
		}
	return n;
}

pid_t trace_sv_guest_pid(const struct trace_supervisor *sv)
{
	return sv->guest;
}

/* Running tasks are interrupted so that their next resume is PTRACE_SYSCALL;
 * every task resumed later (new children too) is resumed so. */
void trace_sv_every_call(struct trace_supervisor *sv)
{
	if (sv->every_call)
		return;
	sv->every_call = 1;
	for (size_t b = 0; b < NBUCKET; b++)
		for (const struct tstate *t = sv->bucket[b]; t; t = t->next)
			if (!t->dead && t->seen && !t->held)
				ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
}

int trace_sv_every_call_on(const struct trace_supervisor *sv)
{
	return sv->every_call;
}

const struct trace_prio *trace_sv_prio(const struct trace_supervisor *sv)
{
	return sv->prio;
}

void trace_sv_unhurried(struct trace_supervisor *sv, int on)
{
	trace_prio_unhurried(sv->prio, on);
}

void trace_sv_every_call_rearm(struct trace_supervisor *sv, pid_t tid)
{
	if (sv->every_call)
		ptrace(PTRACE_INTERRUPT, tid, 0, 0); /* ESRCH: its exit comes through the loop */
}

struct tstate *trace_sv_tstate_new(struct trace_supervisor *sv, pid_t tid)
{
	return tstate_get(sv, tid);
}

void trace_sv_spawned(struct trace_supervisor *sv, pid_t parent, pid_t child,
		      unsigned long flags)
{
	trace_sv_layers_spawn(sv, parent, child, flags);
}

uint64_t trace_sv_peak_rss(const struct trace_supervisor *sv)
{
	return sv->res->maxrss;
}

static void kill_all(struct trace_supervisor *sv)
{
	/* init's death empties the PID namespace (the kernel kills every task in
	 * it); no tid is signalled by number, the host may have reused it */
	if (!sv->init_gone)
		trace_sandbox_kill(sv->p);
	/* init kills the rest only once it runs, which a loaded host delays: each
	 * live tracee's group is killed now too, through a pidfd (a tracee this
	 * loop has not reaped keeps its pid) */
	for (size_t b = 0; b < NBUCKET; b++)
		for (const struct tstate *t = sv->bucket[b]; t; t = t->next) {
			if (t->dead || !t->seen || t->tid == sv->init)
				continue;
			int pfd = (int)syscall(SYS_pidfd_open, t->tgid ? t->tgid : t->tid, 0);
			if (pfd >= 0) {
				syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
				close(pfd);
			}
		}
}

/* A task reaped before its parent's fork event: the hooks hear its spawn (if
 * that event comes) and then its exit, in that order, and it is forgotten. A
 * child of sbx-run's that never stopped here (none of the guest's) is not told. */
static void forget_dead(struct trace_supervisor *sv, struct tstate *t, int spawned)
{
	if (spawned || t->seen || t->exit_kept)
		trace_sv_layers_proc_exit(sv, t->tid, t->wstatus);
	tstate_free(sv, t->tid);
}

void trace_sv_resume(struct trace_supervisor *sv, pid_t tid, int req, int sig)
{
	if (req == PTRACE_CONT && sv->every_call)
		req = PTRACE_SYSCALL;
	/* a guest tracer's syscalls stop: its waits are served here (nest.c) */
	struct tstate *t;
	if (req == PTRACE_CONT && sv->ntracers && (t = trace_sv_find(sv, tid)) &&
	    trace_nest_syscalls(t))
		req = PTRACE_SYSCALL;
	if (sv->sched && tid != sv->init && (t = trace_sv_find(sv, tid)) &&
	    trace_sched_resume(sv->sched, t, req, sig))
		return;
	/* ESRCH: the tracee was killed meanwhile; its exit arrives through waitpid */
	ptrace(req, tid, NULL, (void *)(long)sig);
}

/* A parent killed at its fork never reports the fork event (a fatal signal
 * skips the stop): its held child is let go once a tick has passed, and a
 * dead one forgotten. */
static void release_orphans(struct trace_supervisor *sv, uint64_t now)
{
	for (size_t b = 0; b < NBUCKET && (sv->nheld || sv->ndead); b++)
		for (struct tstate *t = sv->bucket[b], *next; t; t = next) {
			next = t->next;
			if (t->dead && now - t->held_us >= TICK_MS * 1000)
				forget_dead(sv, t, 0);
			else if (t->held && now - t->held_us >= TICK_MS * 1000 &&
				 !(sv->sched && trace_sv_parent_alive(t->tid))) {
				/* under the schedule a held child waits for its
				 * creator however loaded the host: released by a clock,
				 * it would take a place in the schedule by timing */
				t->held = 0;
				t->announced = 1;
				sv->nheld--;
				trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
			}
		}
}

/* At a seccomp stop: skip the call, which returns rax; or, again, which makes
 * the thread issue it once more (a call that must wait). */
void trace_sv_answer(pid_t tid, long rax, int again)
{
	struct user_regs_struct r;
	if (trace_regs_get(tid, &r) < 0)
		return;
	r.rax = again ? r.orig_rax : (unsigned long long)rax;
	r.rip -= again ? 2 : 0; /* back onto the syscall instruction */
	r.orig_rax = (unsigned long long)-1; /* skip the call */
	trace_regs_set(tid, &r);
}

static void deny(pid_t tid, int err)
{
	trace_sv_answer(tid, -err, 0);
}

/* Decode path arguments, absolute in the guest's view (relative ones joined
 * onto the cwd or the dirfd, as /proc shows them from inside). */
void trace_sv_decode_paths(struct trace_guest *g, struct trace_stop *st)
{
	struct tstate *t = g->ts;
	int k = 0;
	for (int a = 0; a < 6 && k < 2 && st->sys; a++) {
		if (st->sys->arg[a] != TRACE_ARG_PATH)
			continue;
		char *out = t->path[k], *raw = t->raw[k];
		ssize_t n = trace_guest_read_str(g, st->args[a], raw, PATH_MAX);
		if (n < 0) {
			st->raw[k] = NULL;
			st->path[k++] = NULL;
			continue;
		}
		st->raw[k] = raw;
		if (raw[0] == '/' || (raw[0] == 0)) {
			memcpy(out, raw, (size_t)n + 1);
		} else {
			char link[64], base[PATH_MAX];
			int dirfd = (a > 0 && st->sys->arg[a - 1] == TRACE_ARG_DIRFD) ? (int)st->args[a - 1]
										  : AT_FDCWD;
			if (dirfd == AT_FDCWD)
				snprintf(link, sizeof link, "/proc/%d/cwd", (int)t->tid);
			else
				snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)t->tid, dirfd);
			ssize_t bl = readlink(link, base, sizeof base - 1);
			if (bl < 0)
				bl = 0;
			base[bl] = 0;
			size_t pre = strcmp(base, "/") == 0 ? 0 : (size_t)bl, len = (size_t)n;
			if (pre + 1 + len >= PATH_MAX) /* cut as snprintf would */
				len = pre + 1 < PATH_MAX ? PATH_MAX - 1 - pre - 1 : 0;
			memcpy(out, base, pre);
			out[pre] = '/';
			memcpy(out + pre + 1, raw, len);
			out[pre + 1 + len] = 0;
		}
		st->path[k++] = out;
	}
}

/* The result's stops by call: where a run's stops go (at=0 entry, 1 exit). */
static void count_stop(struct trace_supervisor *sv, const struct trace_stop *st, int at)
{
	if (st->sys && st->nr >= 0 && st->nr < TRACE_STOPS_NR)
		sv->res->stops_by_nr[st->nr][at]++;
}

static void on_seccomp(struct trace_supervisor *sv, struct tstate *t)
{
	struct __ptrace_syscall_info info;
	memset(&info, 0, sizeof info);
	if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof info, &info) <= 0 ||
	    info.op != PTRACE_SYSCALL_INFO_SECCOMP) {
		trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
		return;
	}
	if ((t->tracer || t->nest) && (long)info.seccomp.nr == -1) {
		/* a call skipped at its entry stop (a wait nest.c answered, or a guest
		 * tracer's choice): nothing runs, its result stays */
		trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
		return;
	}
	if (sv->p->cfg->notify_files && !sv->notify && t->tid == sv->guest &&
	    trace_notify_attach(sv, t->tid) < 0)
		trace_sv_stop(sv, "user notification failed");
	if (t->notify_redo)
		trace_notify_unmark(sv, t, (long)info.seccomp.nr, info.seccomp.args);
	sv->res->stops++;
	struct trace_stop *st = &t->st;
	memset(st, 0, sizeof *st);
	st->tid = t->tid;
	st->pid = tgid_of(t);
	st->ppid = t->ppid;
	st->nr = (long)info.seccomp.nr;
	st->arch_ok = info.arch == AUDIT_ARCH_X86_64 && !(info.seccomp.nr & 0x40000000);
	st->sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	count_stop(sv, st, 0);
	memcpy(st->args, info.seccomp.args, sizeof st->args);
	st->action = TRACE_ALLOWED;
	struct trace_guest g = { sv, t };
	struct trace_conn conn = { .sock = -1, .target = -1 };
	int conn_err = 0;

	trace_nest_untraced(sv, t, st);
	/* the boundary decides from the stopped registers, not from the filter's tag;
	 * a guest tracer's ptrace is served once the inspector let it through */
	int nested = trace_nest_verdict(sv, t, st);
	int refuse = nested >= 0 ? nested : trace_boundary_errno(st->arch_ok, st->nr, st->args);
	int dir_mode = refuse == EPERM && nested < 0 ? trace_boundary_dir_mode(st->nr, st->args) : -1;
	trace_sv_sgid_drop(t);
	if ((sv->has_entry || dir_mode >= 0) && st->sys)
		trace_sv_decode_paths(&g, st);
	if (dir_mode >= 0 && trace_sv_sgid_entry(t, st) == 0)
		refuse = 0; /* a directory: S_ISGID is given at the call's exit */
	if (!refuse && st->arch_ok && st->nr == TRACE_SYS_connect) {
		refuse = trace_sv_connect_decide(sv, t, &conn, st->args, &conn_err);
		st->outside = conn.outside;
	} else if (!refuse && st->arch_ok && trace_sv_is_send(st->nr))
		refuse = trace_sv_send_decide(sv, t, st->args, &conn_err);
	if (refuse) {
		sv->res->refused++;
		st->action = TRACE_DENIED;
		st->deny_errno = refuse;
	}
	if (sv->has_entry && trace_sv_layers_entry(sv, &g, st) < 0)
		trace_sv_stop(sv, "inspector failed");
	if (refuse) {
		st->action = TRACE_DENIED; /* a hook cannot lift the boundary's refusal */
		st->deny_errno = refuse;
	}
	if (t->sgid && st->action != TRACE_DENIED && trace_sv_sgid_strip(t, st, dir_mode) < 0) {
		st->action = TRACE_DENIED;
		st->deny_errno = EPERM;
	}
	if (st->action == TRACE_DENIED && st->again && !refuse) {
		trace_sv_answer(t->tid, 0, 1);
		st->want_exit = 0;
		trace_sv_sgid_drop(t);
	} else if (st->action == TRACE_DENIED) {
		sv->res->refused += !refuse; /* a layer's refusal counts as the boundary's */
		deny(t->tid, st->deny_errno > 0 ? st->deny_errno : EPERM);
		st->want_exit = 0;
		trace_sv_sgid_drop(t);
	} else if (nested == 0) {
		trace_nest_call(sv, t, st);
	} else if (st->arch_ok && st->nr == TRACE_SYS_connect) {
		trace_sv_connect_run(sv, t, &conn, conn_err);
	} else if (conn_err) {
		trace_sv_answer(t->tid, -conn_err, 0); /* as the kernel would: the path is not there */
	}
	trace_sock_close(&conn);
	t->want_exit = st->want_exit && sv->has_exit;
	t->sched_call = st->action == TRACE_ALLOWED && st->arch_ok && nested != 0;
	trace_sv_resume(sv, t->tid, t->want_exit || t->sgid || t->notify_redo ? PTRACE_SYSCALL
									       : PTRACE_CONT, 0);
}

/* A syscall-entry stop, met only in every-call mode: the hook sees the call
 * before the kernel (and its seccomp filter) does, and may rewrite it. */
static void on_syscall_entry(struct trace_supervisor *sv, struct tstate *t,
			     const struct __ptrace_syscall_info *info)
{
	struct trace_stop *st = &t->st;
	memset(st, 0, sizeof *st);
	st->tid = t->tid;
	st->pid = tgid_of(t);
	st->ppid = t->ppid;
	st->nr = (long)info->entry.nr;
	st->arch_ok = info->arch == AUDIT_ARCH_X86_64 && !(info->entry.nr & 0x40000000);
	st->sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	memcpy(st->args, info->entry.args, sizeof st->args);
	st->action = TRACE_ALLOWED;
	struct trace_guest g = { sv, t };
	if (sv->has_call && t->tid != sv->init && trace_sv_layers_call(sv, &g, st) < 0)
		trace_sv_stop(sv, "inspector failed");
	t->want_exit = st->want_exit && sv->has_exit;
	trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
}

static void on_syscall_exit(struct trace_supervisor *sv, struct tstate *t)
{
	if (sv->every_call) {
		struct __ptrace_syscall_info info;
		memset(&info, 0, sizeof info);
		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof info, &info) > 0 &&
		    info.op == PTRACE_SYSCALL_INFO_ENTRY) {
			on_syscall_entry(sv, t, &info);
			return;
		}
	}
	if (t->tracer && !sv->every_call && trace_nest_tracer_stop(sv, t))
		return; /* a guest tracer's own syscall stop: not a result sbx asked for */
	sv->res->exit_stops++;
	count_stop(sv, &t->st, 1);
	if (t->notify_redo)
		trace_notify_unmark(sv, t, 0, NULL);
	if (t->sgid) {
		struct __ptrace_syscall_info info;
		memset(&info, 0, sizeof info);
		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof info, &info) > 0 &&
		    info.op == PTRACE_SYSCALL_INFO_EXIT)
			trace_sv_sgid_exit(t, info.exit.rval);
		trace_sv_sgid_drop(t);
	}
	if (t->want_exit) {
		struct __ptrace_syscall_info info;
		memset(&info, 0, sizeof info);
		t->want_exit = 0;
		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof info, &info) > 0 &&
		    info.op == PTRACE_SYSCALL_INFO_EXIT) {
			struct trace_guest g = { sv, t };
			t->st.has_result = 1;
			t->st.result = info.exit.rval;
			if (trace_sv_layers_exit(sv, &g, &t->st) < 0)
				trace_sv_stop(sv, "inspector failed");
			t->sched_answer = t->st.answer_at_turn && sv->sched;
		}
	}
	if (t->nest && trace_nest_task_stop(sv, t, 0, SIGTRAP | 0x80))
		return; /* a syscall stop its guest tracer asked for, after sbx's own */
	trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
}

/* init forks once, so its child is the guest: known from init's fork event or
 * from the child's own first report, whichever the kernel delivers first (a
 * run stopped early may never see the other) */
static void note_guest(struct trace_supervisor *sv, pid_t tid)
{
	if (!sv->guest && tid != sv->init) {
		sv->guest = tid;
		sv->res->guest_pid = tid;
	}
}

static void on_event(struct trace_supervisor *sv, struct tstate *t, int event, int sig)
{
	unsigned long msg = 0;
	switch (event) {
	case PTRACE_EVENT_SECCOMP:
		on_seccomp(sv, t);
		return;
	case PTRACE_EVENT_EXEC: {
		/* a non-leader exec takes over the leader's tid; the old tid vanishes */
		ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg);
		pid_t former = (pid_t)msg;
		if (former != t->tid)
			tstate_free(sv, former);
		if (!t->ppid)
			proc_ids(t);
		t->tgid = t->tid;
		if (sv->sched)
			trace_sched_exec(sv->sched, t->tid, former);
		if (sv->l) {
			char link[64], exe[PATH_MAX];
			snprintf(link, sizeof link, "/proc/%d/exe", (int)t->tid);
			ssize_t n = readlink(link, exe, sizeof exe - 1);
			exe[n < 0 ? 0 : n] = 0;
			if (trace_sv_layers_exec(sv, t->tid, t->ppid, exe) < 0)
				trace_sv_stop(sv, "exec refused");
		}
		if (sv->stopping) { /* a hook refused what was exec'd: not one instruction of it */
			kill_all(sv);
			return;
		}
		if (t->nest && trace_nest_event(sv, t, event, 0))
			return;
		break;
	}
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
	case PTRACE_EVENT_CLONE: {
		ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg);
		pid_t child = (pid_t)msg;
		unsigned long flags = SIGCHLD;
		struct tstate *gone = trace_sv_find(sv, child);
		if (event == PTRACE_EVENT_VFORK)
			flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
		if (event == PTRACE_EVENT_CLONE) {
			struct user_regs_struct r;
			if (trace_regs_get(t->tid, &r) == 0)
				flags = r.rdi;
		}
		struct tstate *c = gone ? gone : tstate_get(sv, child);
		pid_t ptgid = tgid_of(t);
		c->announced = 1;
		if (flags & CLONE_THREAD) {
			c->tgid = ptgid;
			c->ppid = t->ppid;
		} else {
			c->tgid = child;
			c->ppid = (flags & CLONE_PARENT) ? t->ppid : ptgid;
		}
		if (t->tid == sv->init)
			note_guest(sv, child);
		if (sv->sched && !(gone && gone->dead)) /* a child held at its first stop too */
			trace_sched_spawn(sv->sched, t->tid, child, c->tgid);
		if (event == PTRACE_EVENT_VFORK)
			t->sched_vfork = child;
		if (t->tid != sv->init)
			trace_sv_layers_spawn(sv, ptgid, child, flags);
		if (gone && gone->dead) {
			forget_dead(sv, gone, t->tid != sv->init);
			break;
		}
		if (t->nest && trace_nest_spawn(sv, t, c, event))
			return; /* parent and child stop for their guest tracer */
		if (c->held) { /* the child runs only after this event */
			c->held = 0;
			sv->nheld--;
			trace_sv_resume(sv, child, PTRACE_CONT, 0);
		}
		break;
	}
	case PTRACE_EVENT_EXIT:
		ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg);
		if (!t->announced && t->tid != sv->init && t->tid != sv->guest) {
			t->exit_kept = 1; /* told after its spawn (forget_dead) */
			t->wstatus = (int)msg;
		} else if (t->tid != sv->init) {
			trace_sv_layers_proc_exit(sv, t->tid, (int)msg);
			t->exit_told = 1;
		}
		if (t->nest && trace_nest_event(sv, t, event, msg))
			return;
		t->sched_exit = 1;
		break;
	case PTRACE_EVENT_STOP:
		if (t->nest && trace_nest_task_stop(sv, t, event, sig))
			return; /* held for its guest tracer */
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
			/* a group-stop: stay stopped until SIGCONT, as without a tracer */
			trace_sv_resume(sv, t->tid, PTRACE_LISTEN, 0);
			return;
		}
		/* a child whose first stop beats its parent's fork event waits for it:
		 * the spawn is recorded before anything the child does (the guest has
		 * no spawn line, and a snapshot may want it stopped at a boundary) */
		if (!t->announced && t->tid != sv->init && t->tid != sv->guest && !t->held) {
			t->held = 1;
			t->held_us = common_mono_us();
			sv->nheld++;
			return;
		}
		if (t->notify_redo) /* a call the listener handed back: its restart is marked */
			trace_notify_mark(sv, t);
		break; /* a new child's first stop, or an interrupt */
	default:
		break;
	}
	trace_sv_resume(sv, t->tid, PTRACE_CONT, 0);
}

static void on_wait(struct trace_supervisor *sv, pid_t tid, int status, const struct rusage *ru)
{
	note_guest(sv, tid);
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (sv->sched) /* reaped: its parent may wait for it now */
			trace_sched_gone(sv->sched, tid);
		/* the reaped task's peak resident set (do_exit folded it into ru_maxrss):
		 * cheaper than reading /proc/TID/status at every exit stop */
		if ((uint64_t)ru->ru_maxrss * 1024 > sv->res->maxrss)
			sv->res->maxrss = (uint64_t)ru->ru_maxrss * 1024;
		if (tid == sv->guest) {
			sv->guest_gone = 1;
			sv->res->wstatus = status;
			sv->res->exited = WIFEXITED(status);
			sv->res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
			sv->res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
		}
		if (tid == sv->init) {
			/* init reaped every task of the run: its rusage is the tree's (the
			 * process's RUSAGE_CHILDREN would count the host's other children) */
			sv->init_gone = 1;
			sv->res->cpu_us = (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 +
					  (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
		}
		struct tstate *d = trace_sv_find(sv, tid);
		if (tid != sv->init && tid != sv->guest && (!d || !d->announced)) {
			/* its parent's fork event is still to come: keep it for that, briefly */
			d = d ? d : tstate_get(sv, tid);
			if (!d->exit_kept)
				d->wstatus = status;
			sv->nheld -= d->held;
			d->held = 0;
			sv->ndead += !d->dead;
			d->dead = 1;
			d->held_us = common_mono_us();
			return;
		}
		if (d)
			d->wstatus = status; /* a guest tracer of it hears it (nest.c) */
		tstate_free(sv, tid);
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	struct tstate *t = trace_sv_find(sv, tid);
	if (t && t->dead) /* a new task with a dead one's tid: the old one is over */
		forget_dead(sv, t, 0);
	t = tstate_get(sv, tid);
	t->seen = 1;
	t->exit_told = 0; /* live again: a thread that execs takes its leader's tid */
	int sig = WSTOPSIG(status);
	int event = (status >> 16) & 0xff;
	if (sig == (SIGTRAP | 0x80))
		on_syscall_exit(sv, t);
	else if (event)
		on_event(sv, t, event, sig);
	else {
		struct trace_guest g = { sv, t };
		if (trace_sv_layers_fault(sv, &g, sig)) {
			trace_sv_resume(sv, tid, PTRACE_CONT, 0); /* handled: not delivered */
			return;
		}
		if (t->nest && trace_nest_task_stop(sv, t, 0, sig))
			return; /* its guest tracer decides whether it is delivered */
		if (tid == sv->guest || (sv->guest && tgid_of(t) == sv->guest))
			trace_sv_layers_signal(sv, tid, sig);
		trace_sv_resume(sv, tid, PTRACE_CONT, sig); /* signal-delivery-stop: re-inject */
	}
}

static void read_setup_pipe(struct trace_supervisor *sv, int *fd)
{
	char buf[2048];
	ssize_t n = read(*fd, buf, sizeof buf - 1);
	if (n < 0 && errno == EINTR)
		return;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	buf[n] = 0;
	char *tab = strchr(buf, '\t');
	if (tab)
		*tab++ = 0;
	if (strcmp(buf, "exec") == 0 && tab) {
		sv->res->exec_failed = atoi(tab);
		return;
	}
	sv->setup_failed = 1;
	snprintf(sv->setup_what, sizeof sv->setup_what, "sandbox set-up: %s", buf);
	snprintf(sv->setup_why, sizeof sv->setup_why, "%s", tab ? tab : "failed");
}

static void on_signal(struct trace_supervisor *sv)
{
	struct signalfd_siginfo si;
	while (read(sv->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		/* from a process or the terminal (the guest has its own session and no
		 * terminal): the run ends, its result recorded, as 128+N */
		if (!sv->res->host_signal)
			sv->res->host_signal = (int)si.ssi_signo;
		char why[64];
		snprintf(why, sizeof why, "signal SIG%s", sigabbrev_np((int)si.ssi_signo));
		trace_sv_stop(sv, why);
	}
}

/* The host's signals, the set-up pipe and the layers' watched fds, read when the
 * waker said so; without the waker (it failed to start), this poll paces the loop. */
static void poll_fds(struct trace_supervisor *sv, const struct trace_waker *wk, int *errfd)
{
	struct pollfd pf[2 + MAX_WATCH];
	nfds_t n = 0;
	trace_sv_woken = 0;
	pf[n++] = (struct pollfd){ .fd = sv->sfd, .events = POLLIN };
	pf[n++] = (struct pollfd){ .fd = *errfd, .events = POLLIN };
	for (size_t i = 0; i < sv->nwatch; i++)
		pf[n++] = (struct pollfd){ .fd = sv->watch[i], .events = POLLIN };
	pthread_mutex_unlock(&sv->mu); /* the listener's turn while the loop waits */
	int ready = poll(pf, n, wk->started ? 0 : WAKE_MS);
	pthread_mutex_lock(&sv->mu);
	if (ready <= 0)
		return;
	if (pf[0].revents)
		on_signal(sv);
	if (pf[1].revents)
		read_setup_pipe(sv, errfd);
	for (nfds_t i = 2; i < n; i++)
		if (pf[i].revents && trace_sv_layers_fd(sv, pf[i].fd) < 0)
			trace_sv_stop(sv, "control failed");
}

/* One stop waited for and handled (the waker interrupts a blocking wait at the
 * next tick); 0 once no child is left. */
static int wait_stop(struct trace_supervisor *sv, struct trace_waker *wk)
{
	int status, err = 0;
	struct rusage ru;
	pid_t w;
	if (wk->started) {
		atomic_store(&wk->in_wait, 1);
		pthread_mutex_unlock(&sv->mu); /* the listener's turn while the loop waits */
		w = trace_sv_woken ? 0 : wait4(-1, &status, __WALL | __WNOTHREAD, &ru);
		err = errno;
		pthread_mutex_lock(&sv->mu);
		atomic_store(&wk->in_wait, 0);
	} else {
		w = wait4(-1, &status, __WALL | __WNOTHREAD | WNOHANG, &ru);
		err = errno;
	}
	if (w > 0)
		on_wait(sv, w, status, &ru);
	return w < 0 && err == ECHILD ? 0 : 1;
}

int trace_supervise(struct trace_plan *p, pid_t init_pid, struct trace_result *res,
		    struct trace_prio *pr, struct common_err *e)
{
	struct trace_supervisor sv;
	memset(&sv, 0, sizeof sv);
	sv.prio = pr;
	sv.p = p;
	sv.l = p->cfg->layers;
	EACH_LAYER(&sv, l) {
		sv.has_entry |= !!l->on_entry;
		sv.has_exit |= !!l->on_exit;
		sv.has_call |= !!l->on_call;
	}
	sv.res = res;
	sv.init = init_pid;
	sv.diag = -1;
	pthread_mutex_init(&sv.mu, NULL);
	pthread_mutex_lock(&sv.mu);
	tstate_get(&sv, init_pid)->tgid = init_pid;

	sigset_t mask, old, sfmask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sfmask = mask;
	sigaddset(&mask, SIGCHLD); /* blocked, unread: stops are taken by waitpid */
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	/* only a tool's own process: a library's host keeps its signals */
	sv.sfd = -1;
	if (p->cfg->host_signals &&
	    (sv.sfd = signalfd(-1, &sfmask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		common_errno(e, errno, "signalfd");
		trace_sandbox_kill(p);
	}
	struct trace_waker wk;
	memset(&wk, 0, sizeof wk);
	wk.prio = pr;
	sv.wk = &wk;
	int werr = trace_sv_waker_start(&wk);
	if (werr < 0) {
		common_errno(e, -werr, "supervisor wake-up thread");
		trace_sandbox_kill(p);
	}

	sv.tick_us = TICK_MS * 1000;
	if (trace_sv_layers_start(&sv) < 0)
		trace_sv_stop(&sv, "start hook failed");
	int errfd = p->err_fd[0];
	p->err_fd[0] = -1;
	uint64_t next_tick = common_mono_us() + sv.tick_us;
	trace_sv_waker_due(&wk, next_tick);
	int killed = 0;
	trace_sv_woken = 1; /* look at the fds once before the first wait */

	for (;;) {
		if ((sv.stopping || sv.setup_failed) && !killed) {
			trace_sched_off(&sv);
			kill_all(&sv);
			killed = 1;
		}
		if (sv.notify)
			trace_notify_interrupts(&sv);
		uint64_t now = common_mono_us();
		trace_prio_duty(pr, now);
		if (now >= next_tick) {
			sv.tick_us = TICK_MS * 1000;
			if (!killed && trace_sv_layers_tick(&sv))
				trace_sv_stop(&sv, NULL);
			if (sv.nheld || sv.ndead)
				release_orphans(&sv, now);
			if (sv.sched)
				trace_sched_tick(sv.sched, now, TICK_MS * 1000);
			/* counted from the tick's end, and the fds and waits come next: a
			 * tick longer than the period cannot starve the loop */
			next_tick = common_mono_us() + sv.tick_us;
			trace_sv_waker_due(&wk, next_tick);
			trace_sv_woken = 1;
			if ((sv.stopping || sv.setup_failed) && !killed)
				continue;
		}
		if (trace_sv_woken || !wk.started) {
			poll_fds(&sv, &wk, &errfd);
			if ((sv.stopping || sv.setup_failed) && !killed)
				continue;
		}
		if (wait_stop(&sv, &wk) == 0)
			break;
	}
	trace_notify_end(&sv);
	trace_sv_lookup_end(&sv);
	trace_sv_waker_stop(&wk);
	trace_sched_off(&sv);
	if (errfd >= 0) {
		while (errfd >= 0)
			read_setup_pipe(&sv, &errfd);
	}
	trace_sv_layers_tick(&sv);
	if (sv.stopping)
		snprintf(res->stop_reason, sizeof res->stop_reason, "%s", sv.reason[0] ? sv.reason : "hook");
	for (size_t b = 0; b < NBUCKET; b++)
		while (sv.bucket[b])
			tstate_free(&sv, sv.bucket[b]->tid);
	if (sv.sfd >= 0)
		close(sv.sfd);
	if (sv.diag >= 0)
		close(sv.diag);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_unlock(&sv.mu);
	pthread_mutex_destroy(&sv.mu);
	if (sv.setup_failed)
		return common_errf(e, sv.setup_what, "%s", sv.setup_why);
	if (!sv.guest)
		return common_errf(e, "sandbox set-up", "the guest never started");
	return 0;
}
