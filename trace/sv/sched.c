/* The parallel schedule (sbx-run --deterministic, SPEC §9): the tasks of the
 * guest tree run at once, and only the events through which one task can
 * observe another are put in one order, decided by what the guest did, never
 * by when it did it (Kendo's deterministic logical clocks, with a task's count
 * of system-call stops for the instruction counter this host lacks).
 *
 * Each task has a logical time (its stops so far; a child starts at its
 * parent's) and a spawn order; (time, order) is its key. A stop at an ordered
 * event (TRACE_FACT_ORDERED: a fork, a wait, a signal, a futex, a changed path;
 * TRACE_FACT_FD_ORDERED on a pipe, socket or device; an exclusive create; an
 * exit; every stop of a thread of a multi-threaded process) is parked until
 * its key is the least of every task that is not blocked, and then it alone
 * runs the call, until its next stop: "the turn". Every other stop (an open, a
 * stat, a regular file's bytes, the clock) goes on at once. A parked
 * call that would wait (ready.c) blocks instead, and leaves the minimum; each
 * end of a turn looks again, and one it made ready takes the time after it.
 * Threads of a process run only while they hold the turn, one at a time.
 *
 * The trace follows the same order: each layer's on_order is told when a task
 * takes and ends a turn, and the recorder appends the task's events of its
 * own since then at that point (trace/record/record.c).
 *
 * What falls back: a task that sleeps in the kernel for something not modelled
 * (a full pipe, a lock) for two ticks is let loose: it leaves the minimum until
 * its next stop, counted in the result's "unscheduled". When every task is
 * blocked, the least runs anyway: what it waits for comes from outside. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"

/* S_ZOMBIE: a leader exited before its threads, out of the order until reaped */
enum sstate { S_RUN = 1, S_EXPECTED, S_PARKED, S_BLOCKED, S_TURN, S_LOOSE, S_ZOMBIE };

struct sent {
	pid_t tid, tgid;
	uint64_t order;    /* spawn order: the key's tie-break */
	uint64_t clock;    /* logical time: stops so far */
	enum sstate state;
	int req, sig;      /* the resume the loop asked for */
	int at_call;       /* parked at a seccomp stop of an allowed call */
	int exiting;       /* parked at its exit: the turn lasts until it is reaped */
	int answer;        /* parked at a call's exit whose answer is the event (on_turn) */
	int quiet;         /* whether it is ordered depends on timing: its turn leaves no mark */
	int woken;         /* a FUTEX_WAKE chose it while it was blocked */
	long nr;
	uint64_t args[6];
	pid_t vfork_child; /* blocked until this child execs or exits */
	uint64_t since_us; /* running, or parked, since */
	int asleep;        /* ticks it was found asleep, in a row */
};

struct trace_sched {
	struct trace_supervisor *sv;
	struct sent *v;
	size_t n, cap;
	uint64_t next_order;
	pid_t turn;        /* the task holding the turn, 0 none */
	int turn_quiet;    /* that turn's events wait for its next turn that is not quiet */
	unsigned classes;  /* calls that stop in every deterministic run: the clock's */
	struct trace_sched_stats st;
};

struct trace_sched *trace_sched_new(struct trace_supervisor *sv, unsigned classes)
{
	struct trace_sched *s = common_xcalloc(1, sizeof *s);
	s->sv = sv;
	s->classes = classes;
	return s;
}

/* Whether a call's stop counts on the clock: one that every deterministic run
 * stops at, whatever else it meters, inspects or records (a stop only some
 * runs make would move every later key). */
static int counted(const struct trace_sched *s, long nr)
{
	const struct trace_sysinfo *sys = trace_sys_by_nr(nr);
	unsigned f = trace_sys_facts(nr);
	if (!sys || (f & TRACE_FACT_LINK_READ))
		return 0;
	return (sys->classes & s->classes) || (f & (TRACE_FACT_DETERM | TRACE_FACT_EXEC));
}

void trace_sched_free(struct trace_sched *s)
{
	if (s) {
		free(s->v);
		free(s);
	}
}

static struct sent *find(struct trace_sched *s, pid_t tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].tid == tid)
			return &s->v[i];
	return NULL;
}

static struct sent *add(struct trace_sched *s, pid_t tid, pid_t tgid, uint64_t clock,
			enum sstate st)
{
	struct sent *e = find(s, tid);
	if (e)
		return e;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = common_xrealloc(s->v, s->cap * sizeof *s->v);
	}
	e = &s->v[s->n++];
	memset(e, 0, sizeof *e);
	e->tid = tid;
	e->tgid = tgid ? tgid : tid;
	e->order = s->next_order++;
	e->clock = clock;
	e->state = st;
	e->since_us = common_mono_us();
	return e;
}

static int before(const struct sent *a, const struct sent *b)
{
	return a->clock < b->clock || (a->clock == b->clock && a->order < b->order);
}

/* Threads of its process the schedule knows, itself included. */
static int threads(const struct trace_sched *s, const struct sent *e)
{
	int k = 0;
	for (size_t i = 0; i < s->n; i++)
		k += s->v[i].tgid == e->tgid && s->v[i].state != S_ZOMBIE;
	return k;
}

static void go(struct sent *e, enum sstate st, int req)
{
	e->state = st;
	e->asleep = 0;
	e->since_us = common_mono_us();
	ptrace(req, e->tid, NULL, (void *)(long)e->sig);
}

/* e waited, parked, until now: the schedule's cost, told by what waited. */
static void parked_until(struct trace_sched *s, struct sent *e, uint64_t now)
{
	uint64_t us = now - e->since_us;
	s->st.parked_us += us;
	if (e->exiting)
		s->st.parked_exit_us += us;
	else if (e->answer)
		s->st.parked_answer_us += us;
	else if (e->at_call && e->nr >= 0 && e->nr < TRACE_SCHED_NR)
		s->st.parked_call_us[e->nr] += us;
	else
		s->st.parked_other_us += us;
	e->since_us = now;
}

/* At a FUTEX_WAKE's turn: up to n blocked waiters on its word, least key
 * first, are woken (their wait returns 0 when they run); the kernel wakes
 * none, they are not in it. Requeues wake every waiter (a spurious wake-up,
 * which futex callers allow). */
static void futex_wake(struct trace_sched *s, const struct sent *by)
{
	int op = (int)(by->args[1] & FUTEX_CMD_MASK);
	long n = op == FUTEX_WAKE || op == FUTEX_WAKE_BITSET ? (long)(uint32_t)by->args[2] : -1;
	if (op != FUTEX_WAKE && op != FUTEX_WAKE_BITSET && op != FUTEX_WAKE_OP &&
	    op != FUTEX_REQUEUE && op != FUTEX_CMP_REQUEUE)
		return;
	for (; n != 0; n--) {
		struct sent *w = NULL;
		for (size_t i = 0; i < s->n; i++) {
			struct sent *e = &s->v[i];
			if (e->state == S_BLOCKED && e->at_call && e->nr == TRACE_SYS_futex &&
			    e->tgid == by->tgid && !e->woken && (!w || before(e, w)) &&
			    (n < 0 || e->args[0] == by->args[0]))
				w = e;
		}
		if (!w)
			return;
		w->woken = 1;
	}
}

/* An ordered call gets its exit stop, where its turn ends; a thread's turn
 * lasts until its next stop whatever it is. An answer due at the turn
 * (on_turn) is the whole event of a lone task: it ends with it, and the
 * task's events wait for its next turn (whether an answer waits depends on
 * what the others had answered when it came, so its turn leaves no mark). */
static void take_turn(struct trace_sched *s, struct sent *e)
{
	s->st.turns++;
	parked_until(s, e, common_mono_us());
	int req = e->req;
	if (e->answer) {
		e->answer = 0;
		s->st.answered++;
		trace_sv_layers_turn(s->sv, e->tid);
		if (threads(s, e) == 1) {
			go(e, S_RUN, req);
			return;
		}
	}
	s->turn = e->tid;
	s->turn_quiet = e->quiet;
	if (!e->quiet)
		trace_sv_layers_order(s->sv, e->tid);
	if (e->at_call && e->nr == TRACE_SYS_futex)
		futex_wake(s, e);
	if (e->at_call && e->woken) {
		trace_sv_answer(e->tid, 0, 0); /* its FUTEX_WAKE came while it was parked */
		e->woken = 0;
	} else if (e->at_call && !e->exiting && threads(s, e) == 1) {
		req = PTRACE_SYSCALL;
	}
	go(e, S_TURN, req);
}

/* Would the parked call of e wait? */
static int ready(const struct sent *e)
{
	if (!e->at_call || e->woken)
		return 1;
	if (e->nr == TRACE_SYS_futex)
		return trace_sv_futex_ready(e->tid, e->args);
	return trace_sv_call_ready(e->tid, e->nr, e->args);
}

/* The least key not blocked takes the turn, if it is parked and none holds it. */
static void schedule(struct trace_sched *s)
{
	while (!s->turn) {
		struct sent *best = NULL, *blocked = NULL;
		for (size_t i = 0; i < s->n; i++) {
			struct sent *e = &s->v[i];
			if (e->state == S_BLOCKED && !e->vfork_child && (!blocked || before(e, blocked)))
				blocked = e;
			if (e->state != S_BLOCKED && e->state != S_LOOSE && e->state != S_ZOMBIE &&
			    (!best || before(e, best)))
				best = e;
		}
		if (!best) {
			if (blocked) /* every task waits: for something from outside the run */
				take_turn(s, blocked);
			return;
		}
		if (best->state != S_PARKED)
			return; /* it runs: its next stop is the next thing in order */
		if (ready(best)) {
			take_turn(s, best);
			continue; /* an answer's turn is over at once */
		}
		best->state = S_BLOCKED;
		s->st.blocked++;
		parked_until(s, best, common_mono_us());
	}
}

/* An event at time c is over: blocked calls it made ready go on after it. */
static void wake_ready(struct trace_sched *s, uint64_t c)
{
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if (e->state != S_BLOCKED || e->vfork_child || !ready(e))
			continue;
		e->state = S_PARKED;
		uint64_t now = common_mono_us();
		s->st.blocked_us += now - e->since_us;
		e->since_us = now;
		if (e->clock <= c)
			e->clock = c + 1;
	}
}

/* The turn of tid ended at its time c. */
static void end_turn(struct trace_sched *s, pid_t tid, uint64_t c)
{
	s->turn = 0;
	if (!s->turn_quiet)
		trace_sv_layers_order(s->sv, tid);
	wake_ready(s, c);
}

void trace_sched_spawn(struct trace_sched *s, pid_t parent, pid_t child, pid_t child_tgid)
{
	struct sent *p = find(s, parent);
	add(s, child, child_tgid, p ? p->clock : 0, S_EXPECTED);
}

/* Whether a process of the run other than e's holds what e's fd refers to. A
 * dropped reference is seen only as the last (a pipe's reader gets end of
 * file, its writer EPIPE): held by no other, the drop is seen by none, and
 * none can come to hold it while e is stopped (a fork, a descriptor passed,
 * are e's own calls). Whether another still holds it is timing's (it may be
 * dropping its own), hence a quiet turn when it does. */
static int held_elsewhere(const struct trace_sched *s, const struct sent *e, int fd)
{
	char path[64];
	struct stat o, x;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)e->tid, fd);
	if (stat(path, &o) < 0)
		return 0; /* EBADF: the call fails at once */
	for (size_t i = 0; i < s->n; i++) {
		const struct sent *p = &s->v[i];
		size_t j = 0;
		while (j < i && (s->v[j].tgid != p->tgid || s->v[j].state == S_ZOMBIE))
			j++;
		if (p->tgid == e->tgid || j < i || p->state == S_ZOMBIE)
			continue; /* its own, a process already looked at, none left */
		snprintf(path, sizeof path, "/proc/%d/fd", (int)p->tid);
		DIR *d = opendir(path);
		struct dirent *de;
		int found = 0;
		while (d && !found && (de = readdir(d)))
			found = de->d_name[0] != '.' && fstatat(dirfd(d), de->d_name, &x, 0) == 0 &&
				x.st_dev == o.st_dev && x.st_ino == o.st_ino;
		if (d)
			closedir(d);
		if (found)
			return 1;
	}
	return 0;
}

/* An ordered event: by its facts; a pipe's, a socket's or a device's bytes or
 * references (a dropped one when another process holds it too); a write to a
 * standard stream (the tree shares its offset); a futex other processes may
 * share; an exclusive create (a lock file: whether it fails depends on the
 * others). Any other open, for writing or creating, is not: a file's bytes are
 * as unordered as a read's (the model's assumption: tasks that share a file
 * synchronise through an ordered event). */
static int ordered(const struct trace_sched *s, struct sent *e)
{
	const struct trace_sysinfo *sys = trace_sys_by_nr(e->nr);
	unsigned f = trace_sys_facts(e->nr);
	const uint64_t *a = e->args;
	if (e->nr == TRACE_SYS_futex)
		return !(a[1] & FUTEX_PRIVATE_FLAG); /* a lone thread's own word otherwise */
	if (f & TRACE_FACT_ORDERED)
		return 1;
	if (e->nr == TRACE_SYS_close || e->nr == TRACE_SYS_dup2 || e->nr == TRACE_SYS_dup3) {
		int fd = (int)a[e->nr != TRACE_SYS_close]; /* the reference dropped */
		e->quiet = !trace_sv_fd_private(e->tid, fd) && held_elsewhere(s, e, fd);
		return e->quiet;
	}
	if (f & TRACE_FACT_FD_ORDERED)
		return ((int)a[0] <= 2 && (sys->classes & TRACE_CLASS_WRITE)) ||
		       !trace_sv_fd_private(e->tid, (int)a[0]) ||
		       (sys->arg[1] == TRACE_ARG_FD && !trace_sv_fd_private(e->tid, (int)a[1]));
	int k = sys ? trace_sys_arg(sys, TRACE_ARG_OFLAGS) : -1;
	return k >= 0 && (a[k] & O_CREAT) && (a[k] & O_EXCL) && (a[k] & O_TMPFILE) != O_TMPFILE;
}

int trace_sched_resume(struct trace_sched *s, struct tstate *t, int req, int sig)
{
	struct sent *e = add(s, t->tid, t->tgid, 0, S_RUN);
	int at_call = t->sched_call, exiting = t->sched_exit, answer = t->sched_answer;
	pid_t vchild = t->sched_vfork;
	t->sched_call = t->sched_exit = t->sched_answer = 0;
	t->sched_vfork = 0;
	if (s->turn == e->tid && !e->exiting)
		end_turn(s, e->tid, e->clock);
	if (req != PTRACE_CONT && req != PTRACE_SYSCALL) {
		/* PTRACE_LISTEN: a group-stop stays stopped, outside the schedule */
		e->state = S_LOOSE;
		schedule(s);
		return 0;
	}
	e->req = req;
	e->sig = sig;
	e->at_call = at_call;
	e->exiting = exiting;
	e->answer = answer;
	e->quiet = 0;
	if (at_call) {
		e->clock += counted(s, t->st.nr);
		e->nr = t->st.nr;
		memcpy(e->args, t->st.args, sizeof e->args);
	}
	int n = threads(s, e);
	if (exiting && n > 1 && e->tid == e->tgid) {
		/* a leader that leaves its threads behind is reaped only after them:
		 * it leaves the order now, its events in it */
		trace_sv_layers_order(s->sv, e->tid);
		e->req = req;
		e->sig = sig;
		go(e, S_ZOMBIE, req);
		schedule(s);
		return 1;
	}
	int order = exiting || n > 1 || (at_call && ordered(s, e)) || vchild ||
		    answer;
	if (!order) {
		s->st.free++;
		go(e, S_RUN, req);
		schedule(s);
		return 1;
	}
	s->st.ordered++;
	e->since_us = common_mono_us();
	e->vfork_child = vchild;
	e->state = vchild ? S_BLOCKED : S_PARKED;
	schedule(s);
	return 1;
}

/* Whether an answer of tid's put off for its turn (a first sight) would be
 * given at once, here: no turn is held, tid is a lone thread in flight, and
 * every other task stands still until then (blocked, a leader waiting for its
 * threads, or parked behind tid's key once this stop counts), so the table
 * holds at the answer what it holds now. */
int trace_sched_alone(struct trace_sched *s, pid_t tid, long nr)
{
	const struct sent *me = find(s, tid);
	if (s->turn || !me || me->state != S_RUN || threads(s, me) != 1)
		return 0;
	struct sent at = *me;
	at.clock += (uint64_t)counted(s, nr);
	for (size_t i = 0; i < s->n; i++) {
		const struct sent *e = &s->v[i];
		if (e != me && e->state != S_BLOCKED && e->state != S_ZOMBIE &&
		    !(e->state == S_PARKED && before(&at, e)))
			return 0;
	}
	return 1;
}

/* tid exec'd or is gone: a vfork parent waiting for it goes on after it. */
static void vfork_done(struct trace_sched *s, pid_t tid)
{
	struct sent *c = find(s, tid);
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if (e->vfork_child != tid)
			continue;
		e->vfork_child = 0;
		if (c && e->clock <= c->clock)
			e->clock = c->clock + 1;
		go(e, S_RUN, e->req); /* what it does next is its own */
	}
}

void trace_sched_gone(struct trace_sched *s, pid_t tid)
{
	struct sent *e = find(s, tid);
	vfork_done(s, tid);
	if (e) {
		uint64_t c = e->clock;
		int zombie = e->state == S_ZOMBIE;
		*e = s->v[--s->n];
		if (s->turn == tid) {
			end_turn(s, tid, c);
		} else {
			trace_sv_layers_order(s->sv, tid);
			if (zombie) /* its process is over: its waiter may go */
				wake_ready(s, c);
		}
	}
	schedule(s);
}

void trace_sched_exec(struct trace_sched *s, pid_t tid, pid_t former)
{
	vfork_done(s, tid);
	if (former != tid) /* a thread's exec: it now has its leader's tid */
		trace_sched_gone(s, former);
	else
		schedule(s);
}

/* At a tick: a task in flight asleep in the kernel at two ticks in a row
 * waits for something the schedule does not model; it is let loose. */
void trace_sched_tick(struct trace_sched *s, uint64_t now_us, uint64_t after_us)
{
	int freed = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if ((e->state != S_RUN && e->state != S_EXPECTED && e->state != S_TURN) ||
		    now_us - e->since_us < after_us || e->exiting)
			continue;
		if (trace_sv_task_state(e->tid) != 'S') {
			e->asleep = 0;
			continue;
		}
		if (!e->asleep++)
			continue;
		if (s->turn == e->tid)
			end_turn(s, e->tid, e->clock);
		e->state = S_LOOSE;
		s->st.loose++;
		freed = 1;
	}
	if (freed)
		schedule(s);
}

/* The run is ending: every parked or blocked task is resumed, the schedule is off. */
void trace_sched_release(struct trace_sched *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].state == S_PARKED || s->v[i].state == S_BLOCKED)
			ptrace(s->v[i].req, s->v[i].tid, NULL, (void *)(long)s->v[i].sig);
	s->n = 0;
	s->turn = 0;
}

void trace_sv_scheduled(struct trace_supervisor *sv, unsigned classes)
{
	if (!sv->sched)
		sv->sched = trace_sched_new(sv, classes);
}

void trace_sched_off(struct trace_supervisor *sv)
{
	if (!sv->sched)
		return;
	sv->res->unscheduled = sv->sched->st.loose;
	sv->res->sched = sv->sched->st;
	trace_sched_release(sv->sched);
	trace_sched_free(sv->sched);
	sv->sched = NULL;
}


/* The schedule's tasks as a snapshot holds them (sched_state.c): no turn held,
 * each task in flight or parked at the seccomp stop of a call it issues again
 * once restored (its clock then without that stop). -1, *why: a task stands
 * where no snapshot holds it (starting, loose, at its exit, an answer, a vfork). */
int trace_sched_export(const struct trace_sched *s, struct trace_sched_task *v, size_t max,
		       size_t *n, uint64_t *next_order, const char **why)
{
	*why = s->turn ? "a task holds the schedule's turn" : s->n > max ? "too many tasks" : NULL;
	for (size_t i = 0; !*why && i < s->n; i++) {
		const struct sent *e = &s->v[i];
		int again = e->state == S_PARKED || e->state == S_BLOCKED;
		if (e->state != S_RUN && e->state != S_TURN && !again)
			*why = "a task is starting, let loose or a leader waiting for its threads";
		else if (again && (!e->at_call || e->exiting || e->answer || e->vfork_child || e->woken))
			*why = "a task waits at its exit, an answer, a vfork child or a futex wake";
		v[i] = (struct trace_sched_task){ .tid = e->tid, .tgid = e->tgid, .order = e->order,
			.clock = e->clock - (again ? (uint64_t)counted(s, e->nr) : 0),
			.again = again, .nr = again ? e->nr : -1 };
	}
	*n = s->n;
	*next_order = s->next_order;
	return *why ? -1 : 0;
}

/* A restored run's tasks take their keys back; each runs until its next stop. */
void trace_sched_import(struct trace_sched *s, const struct trace_sched_task *v, size_t n,
			uint64_t next_order)
{
	for (size_t i = 0; i < n; i++) {
		struct sent *e = add(s, v[i].tid, v[i].tgid, v[i].clock, S_RUN);
		e->tgid = v[i].tgid;
		e->order = v[i].order;
		e->clock = v[i].clock;
	}
	s->next_order = next_order;
}
