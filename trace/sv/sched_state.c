/* The schedule of a --deterministic run in a snapshot's determinism record
 * (trace/determ/state.c, version 2): with it a restored tree of several tasks
 * takes its turns in the order the uninterrupted run did.
 *
 *   u64 next_order (the spawn order the next task gets), u32 ntasks
 *   (1..SCHED_TASKS_MAX), task[] sorted by namespace tid = {u32 tid, u32 tgid
 *   (a tid of the record), u64 order (distinct, below next_order), u64 clock}
 *
 * A task parked at the seccomp stop of a call is saved as it was before that
 * stop: the snapshot rewinds the call, the restored task issues it again, and
 * the stop counts then. */
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>
#include "codec/codec.h"
#include "trace/sv/sv-internal.h"
#include "trace/tracee/tracee.h"

#define SCHED_TASKS_MAX 1024u
#define ID_MAX 4194304u /* PID_MAX_LIMIT */

struct trace_sched_saved {
	uint64_t next_order;
	size_t n;
	struct trace_sched_task v[];
};

/* What /proc says of a task no snapshot of a deterministic run carries: a
 * signal pending (its delivery point is the schedule's, and a restore would
 * queue it again elsewhere), or a process that outlived its parent (the run's
 * init adopted it: not in the guest's tree). */
static const char *status_unsaved(const struct trace_supervisor *sv, const struct tstate *t)
{
	struct trace_status st;
	unsigned long long pp = 0, pnd = 0, shd = 0;
	if (trace_status_read(t->tid, &st) < 0)
		return "a task's status cannot be read";
	int rc = trace_status_num(&st, "PPid", 10, &pp) | trace_status_num(&st, "SigPnd", 16, &pnd) |
		 trace_status_num(&st, "ShdPnd", 16, &shd);
	trace_status_free(&st);
	if (rc < 0 || pnd || shd)
		return "a task has a signal pending";
	if (t->tid == t->tgid && t->tid != sv->guest && (pid_t)pp == sv->init)
		return "a process outlived its parent (a snapshot holds the guest's tree)";
	return NULL;
}

/* Where the supervisor holds a task in a way no snapshot carries. */
static const char *task_unsaved(const struct trace_supervisor *sv, const struct tstate *t,
				const struct trace_sched_task *k)
{
	struct user_regs_struct r;
	if (!t)
		return "a task of the schedule is unknown to the supervisor";
	const char *why = status_unsaved(sv, t);
	if (why)
		return why;
	if (t->sgid || t->notify_redo || t->conn_waits || t->nest || t->tracer || t->held)
		return "a task is inside a call the supervisor completes for it";
	if (!k->again && t->want_exit)
		return "a task in flight is inside a call whose exit is awaited";
	/* a call answered at its entry was skipped: issued again it would run */
	if (k->again && (trace_regs_get(t->tid, &r) < 0 || (long)r.orig_rax != k->nr))
		return "a parked call was answered at its entry";
	return NULL;
}

static int by_tid(const void *a, const void *b)
{
	const struct trace_sched_task *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

int trace_sv_sched_save(struct trace_supervisor *sv, pid_t (*ns)(pid_t), struct codec_buf *b,
			struct trace_sv_again *again, size_t max, size_t *nagain, const char **why)
{
	pid_t live[SCHED_TASKS_MAX];
	size_t n, na = 0;
	uint64_t next;
	*why = !sv->sched ? "the run has no schedule" : sv->nheld || sv->ndead || sv->ntracers ?
	       "a task is starting, or a guest tracer traces the run" : NULL;
	if (*why)
		return -1;
	struct trace_sched_task *v = common_xcalloc(SCHED_TASKS_MAX, sizeof *v);
	if (trace_sched_export(sv->sched, v, SCHED_TASKS_MAX, &n, &next, why) == 0 &&
	    trace_sv_pids(sv, live, SCHED_TASKS_MAX) != n)
		*why = "a task of the run is not in the schedule yet";
	for (size_t i = 0; !*why && i < n; i++) {
		if ((*why = task_unsaved(sv, trace_sv_find(sv, v[i].tid), &v[i])))
			break;
		if (v[i].again && na == max)
			*why = "too many parked tasks";
		else if (v[i].again)
			again[na++] = (struct trace_sv_again){ v[i].tid, v[i].nr };
		v[i].tid = ns(v[i].tid);
		v[i].tgid = ns(v[i].tgid);
		if (v[i].tid <= 0 || v[i].tgid <= 0)
			*why = "a task has no namespace id";
	}
	if (*why) {
		free(v);
		return -1;
	}
	qsort(v, n, sizeof *v, by_tid);
	codec_put_u64(b, next);
	codec_put_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		codec_put_u32(b, (uint32_t)v[i].tid);
		codec_put_u32(b, (uint32_t)v[i].tgid);
		codec_put_u64(b, v[i].order);
		codec_put_u64(b, v[i].clock);
	}
	free(v);
	*nagain = na;
	return 0;
}

/* Each field checked (hostile input): ids ascending and in range, every
 * process one of the record's tasks, spawn orders distinct and issued. */
static int check_tasks(struct codec_rd *r, const struct trace_sched_saved *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct trace_sched_task *t = &s->v[i];
		size_t k = 0;
		if (!t->tid || (uint32_t)t->tid > ID_MAX || (i && s->v[i - 1].tid >= t->tid))
			return codec_rd_fail(r, "schedule: a task's id is out of range or out of order");
		while (k < s->n && s->v[k].tid != t->tgid)
			k++;
		if (k == s->n)
			return codec_rd_fail(r, "schedule: a task's process is not a task of the record");
		if (t->order >= s->next_order)
			return codec_rd_fail(r, "schedule: a task's spawn order was never handed out");
		for (k = 0; k < i; k++)
			if (s->v[k].order == t->order)
				return codec_rd_fail(r, "schedule: two tasks have one spawn order");
	}
	return 0;
}

struct trace_sched_saved *trace_sched_saved_load(struct codec_rd *r)
{
	uint64_t next;
	uint32_t n;
	if (codec_get_u64(r, &next) < 0 || codec_get_u32(r, &n) < 0)
		return NULL;
	if (n == 0 || n > SCHED_TASKS_MAX) {
		codec_rd_fail(r, "schedule: task count is not 1 to 1024");
		return NULL;
	}
	if ((uint64_t)n * 24 > r->len - r->off) {
		codec_rd_fail(r, "schedule: tasks truncated");
		return NULL;
	}
	struct trace_sched_saved *s = common_xcalloc(1, sizeof *s + n * sizeof s->v[0]);
	s->next_order = next;
	s->n = n;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t tid, tgid;
		if (codec_get_u32(r, &tid) < 0 || codec_get_u32(r, &tgid) < 0 ||
		    codec_get_u64(r, &s->v[i].order) < 0 || codec_get_u64(r, &s->v[i].clock) < 0)
			break;
		s->v[i].tid = tid > ID_MAX ? 0 : (pid_t)tid;
		s->v[i].tgid = tgid > ID_MAX ? 0 : (pid_t)tgid;
	}
	if (r->why || check_tasks(r, s) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

void trace_sched_saved_free(struct trace_sched_saved *s)
{
	free(s);
}

/* The host id of namespace id ns in map (0: none). */
static pid_t host_of(const struct trace_sv_idmap *map, size_t n, pid_t ns)
{
	for (size_t i = 0; i < n; i++)
		if (map[i].ns == ns)
			return map[i].host;
	return 0;
}

int trace_sv_sched_resume(struct trace_supervisor *sv, const struct trace_sched_saved *s,
			  const struct trace_sv_idmap *map, size_t nmap, struct common_err *e)
{
	if (!sv->sched)
		return common_errf(e, "determinism", "the restored run has no schedule");
	if (nmap != s->n)
		return common_errf(e, "determinism", "the restored run has %zu tasks, the "
				   "schedule %zu", nmap, s->n);
	struct trace_sched_task *v = common_xcalloc(s->n, sizeof *v);
	for (size_t i = 0; i < s->n; i++) {
		v[i] = s->v[i];
		v[i].tid = host_of(map, nmap, s->v[i].tid);
		v[i].tgid = host_of(map, nmap, s->v[i].tgid);
		if (!v[i].tid || !v[i].tgid) {
			free(v);
			return common_errf(e, "determinism", "task %d of the schedule is not in the "
					   "restored run", (int)s->v[i].tid);
		}
	}
	trace_sched_import(sv->sched, v, s->n, s->next_order);
	free(v);
	return 0;
}

const struct trace_stop *trace_sv_entry_stop(struct trace_supervisor *sv, pid_t tid)
{
	const struct tstate *t = trace_sv_find(sv, tid);
	return t ? &t->st : NULL;
}
