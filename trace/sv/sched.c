/* The serial schedule (sbx-run --deterministic, SPEC §9): one task of the guest
 * tree runs at a time, and the supervisor decides which at each of its stops, by
 * a rule that reads only what the guest did, never when it did it.
 *
 * Every stopped task the loop would resume is parked instead. The task that
 * held the turn goes on unless its call would wait (ready.c) or it is a vfork
 * parent; else, once no task is in flight (running, or a new child still to
 * report its first stop), the oldest parked task (by spawn order, itself
 * decided by the schedule) whose call would not wait is resumed. So the trace's
 * order, the namespace pids, which child a wait reports, how many bytes a pipe
 * read returns and where a signal arrives follow from the schedule alone.
 *
 * What falls back: a task that waits in the kernel for something the schedule
 * does not model (a full pipe, a futex, a lock) is found asleep at a tick and
 * let loose (it runs beside the schedule until it stops again); each time is
 * counted in the result's "unscheduled". When every parked call would wait,
 * the oldest is resumed anyway: what it waits for comes from outside. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include "trace/sv/sv-internal.h"

enum sstate { S_PARKED = 1, S_RUNNING, S_EXPECTED, S_LOOSE };

struct sent {
	pid_t tid;
	uint64_t order;   /* spawn order: the schedule's tie-break */
	enum sstate state;
	int req, sig;     /* the resume the loop asked for */
	int at_call;      /* parked at a seccomp stop of an allowed call */
	long nr;
	uint64_t args[6];
	pid_t vfork_child; /* parked at its vfork event until this child execs or exits */
	uint64_t since_us; /* running or expected since */
	int asleep;        /* ticks it was found asleep in flight, in a row */
};

struct trace_sched {
	struct sent *v;
	size_t n, cap;
	uint64_t next_order;
	uint64_t loose;   /* tasks let loose: waits the schedule did not model */
};

struct trace_sched *trace_sched_new(void)
{
	return common_xcalloc(1, sizeof(struct trace_sched));
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

static struct sent *add(struct trace_sched *s, pid_t tid, enum sstate st)
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
	e->order = s->next_order++;
	e->state = st;
	e->since_us = common_mono_us();
	return e;
}

static void go(struct sent *e)
{
	e->state = S_RUNNING;
	e->at_call = 0;
	e->asleep = 0;
	e->since_us = common_mono_us();
	ptrace(e->req, e->tid, NULL, (void *)(long)e->sig);
}

/* Resume the next task if none is in flight. */
static void pick(struct trace_sched *s)
{
	struct sent *best = NULL, *any = NULL;
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if (e->state == S_RUNNING || e->state == S_EXPECTED)
			return;
	}
	int others = 0;
	for (size_t i = 0; i < s->n; i++)
		others += s->v[i].state == S_PARKED;
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if (e->state != S_PARKED || e->vfork_child)
			continue;
		if (!any || e->order < any->order)
			any = e;
		if (best && e->order > best->order)
			continue;
		/* alone, it need not be asked: nothing else could run meanwhile */
		if (others == 1 || !e->at_call || trace_sv_call_ready(e->tid, e->nr, e->args))
			best = e;
	}
	if (best || any)
		go(best ? best : any);
}

void trace_sched_spawn(struct trace_sched *s, pid_t child)
{
	add(s, child, S_EXPECTED);
}

int trace_sched_resume(struct trace_sched *s, struct tstate *t, int req, int sig)
{
	struct sent *e = add(s, t->tid, S_PARKED);
	if (req != PTRACE_CONT && req != PTRACE_SYSCALL) {
		/* PTRACE_LISTEN: a group-stop stays stopped, outside the schedule */
		e->state = S_LOOSE;
		pick(s);
		return 0;
	}
	e->req = req;
	e->sig = sig;
	/* the parent of a vfork stays at its event stop until the child has exec'd
	 * or exited: resumed earlier it would wait in the kernel, and the child's
	 * exec would wake it beside the schedule */
	e->vfork_child = t->sched_vfork;
	t->sched_vfork = 0;
	int was_running = e->state == S_RUNNING;
	e->state = S_PARKED;
	e->at_call = t->sched_call;
	if (e->at_call) {
		e->nr = t->st.nr;
		memcpy(e->args, t->st.args, sizeof e->args);
	}
	t->sched_call = 0;
	/* the task that held the turn keeps it until its call would wait: asking
	 * the others at each of its stops would cost more than the stop */
	if (was_running && !e->vfork_child &&
	    (!e->at_call || trace_sv_call_ready(e->tid, e->nr, e->args)))
		go(e);
	else
		pick(s);
	return 1;
}

/* tid exec'd or is gone: a vfork parent waiting for it may run. */
static void vfork_done(struct trace_sched *s, pid_t tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].vfork_child == tid)
			s->v[i].vfork_child = 0;
}

void trace_sched_exec(struct trace_sched *s, pid_t tid)
{
	vfork_done(s, tid);
}

void trace_sched_gone(struct trace_sched *s, pid_t tid)
{
	struct sent *e = find(s, tid);
	vfork_done(s, tid);
	if (e)
		*e = s->v[--s->n];
	pick(s);
}

/* At a tick: a task in flight that sleeps in the kernel waits for something
 * the schedule does not model; it is let loose, and the schedule goes on. */
void trace_sched_tick(struct trace_sched *s, uint64_t now_us, uint64_t after_us)
{
	int freed = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct sent *e = &s->v[i];
		if ((e->state != S_RUNNING && e->state != S_EXPECTED) || now_us - e->since_us < after_us)
			continue;
		/* asleep at two ticks in a row: a brief sleep (a page of a file
		 * read, the output relay behind) is not a wait for another task */
		if (trace_sv_task_state(e->tid) != 'S') {
			e->asleep = 0;
			continue;
		}
		if (!e->asleep++)
			continue;
		e->state = S_LOOSE;
		s->loose++;
		freed = 1;
	}
	if (freed)
		pick(s);
}

/* The run is ending: every parked task is resumed, and the schedule is off. */
void trace_sched_release(struct trace_sched *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].state == S_PARKED)
			ptrace(s->v[i].req, s->v[i].tid, NULL, (void *)(long)s->v[i].sig);
	s->n = 0;
}

void trace_sv_serial(struct trace_supervisor *sv)
{
	if (!sv->sched)
		sv->sched = trace_sched_new();
}

void trace_sched_off(struct trace_supervisor *sv)
{
	if (!sv->sched)
		return;
	sv->res->unscheduled = sv->sched->loose;
	trace_sched_release(sv->sched);
	trace_sched_free(sv->sched);
	sv->sched = NULL;
}
