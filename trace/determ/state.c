/* The determinism record of a snapshot (SPEC §8, §9): what a --deterministic
 * run holds beside its guest — the seed and epoch, the answered-call count,
 * the file table, each task's clock and PRNG stream — so that a restored run
 * answers the guest as the uninterrupted one would and continues its trace.
 *
 *   u32 version (1), str seed (u32 length <= 4096, no NUL), u64 epoch (signed),
 *   u64 emulated, u32 last_pid (the highest id a task of the run had, at least
 *   every task's: a restore hands out the ones after it), files (files.c), stdio[3] = {u64 dev, u64 ino}
 *   (the host objects behind the guest's descriptors 0-2, zeros: none),
 *   version 2 only: the schedule (trace/sv/sched_state.c), u64 length
 *   (<= QUEUED_MAX) and the events waiting for their task's turn (the
 *   recorder's section, trace/record/state.c, checked by the caller's check),
 *   u32 ntasks (1..TASKS_MAX), task[] sorted by
 *   namespace tid = {u32 tid, u32 nspid (its PRNG key), u32 parent tid (0:
 *   none), u64 ns (its clock), u64 tsc_reads, u64 ctr, u32 used (0..32), 32 block}
 *
 * Version 1 was taken only where the guest was one task with nothing queued;
 * version 2 anywhere the schedule can be saved, several processes and
 * threads alive. A task parked at a call it issues again once restored is
 * saved as before that call's entry (its answer, if any, not yet wanted).
 *
 * Tasks are named by their ids in the run's PID namespace, which a restore
 * hands out again; files by the host identities the run saw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "trace/determ/determ-internal.h"

#define STATE_VERSION 2u
#define STATE_VERSION_ONE_TASK 1u
#define SEED_MAX 4096u
#define QUEUED_MAX (16u << 20)
#define TASKS_MAX 1024u

#define STDIO 3

/* The host object behind the guest's descriptor fd: a restored run's differ. */
static void stdio_identity(pid_t guest, int fd, uint64_t id[2])
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)guest, fd);
	id[0] = id[1] = 0;
	if (stat(p, &st) == 0) {
		id[0] = (uint64_t)st.st_dev;
		id[1] = (uint64_t)st.st_ino;
	}
}

struct saved {
	uint32_t tid, parent;
	struct proc p;
};

/* Whether a parked call's entry left the run's state as it found it: issued
 * again once restored, its entry runs again. */
static int entry_again(const struct trace_sv_again *a, size_t n, const char **why)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].nr == TRACE_SYS_close || a[i].nr == TRACE_SYS_dup2 || a[i].nr == TRACE_SYS_dup3)
			return *why = "a parked close changed the file table at its entry", -1;
	return 0;
}

static int parked(const struct trace_sv_again *a, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].tid == tid)
			return 1;
	return 0;
}

/* The schedule and the queued events (b: sched, then the recorder's section
 * with its length), and the tasks parked at a call they issue again; -1 and
 * e while they cannot be saved. */
static int save_run(struct trace_supervisor *sv, trace_determ_queued_fn queued, void *ctx,
		    struct codec_buf *b, struct trace_sv_again *again, size_t *nagain,
		    struct common_err *e)
{
	const char *why = NULL;
	struct codec_buf q;
	codec_buf_init(&q);
	if (trace_sv_sched_save(sv, trace_determ_nspid, b, again, TASKS_MAX, nagain, &why) < 0 ||
	    entry_again(again, *nagain, &why) < 0 ||
	    (queued && queued(ctx, sv, trace_determ_nspid, again, *nagain, &q, &why) < 0) ||
	    (q.len > QUEUED_MAX && (why = "too many events wait for their turn"))) {
		codec_buf_free(&q);
		return common_errf(e, "determinism", "not at a point a snapshot holds: %s", why);
	}
	codec_put_u64(b, q.len);
	codec_put_raw(b, q.p, q.len);
	codec_buf_free(&q);
	return 0;
}

int trace_determ_save(const struct trace_determ *d, struct trace_supervisor *sv,
		      trace_determ_queued_fn queued, void *ctx, uint8_t **out, size_t *len,
		      struct common_err *e)
{
	pid_t tids[TASKS_MAX];
	size_t n = trace_sv_pids(sv, tids, TASKS_MAX), nagain = 0;
	struct codec_buf b, run;
	struct saved *v;
	struct trace_sv_again again[TASKS_MAX];

	if (n == 0 || n > TASKS_MAX)
		return common_errf(e, "determinism", "%zu tasks: a record holds 1 to %u", n, TASKS_MAX);
	codec_buf_init(&run);
	if (save_run(sv, queued, ctx, &run, again, &nagain, e) < 0) {
		codec_buf_free(&run);
		return -1;
	}
	v = common_xcalloc(n, sizeof *v);
	for (size_t i = 0; i < n; i++) {
		void **slot = trace_sv_slot(sv, tids[i], TRACE_LAYER_DETERM);
		const struct proc *p = slot ? *slot : NULL;
		v[i].tid = (uint32_t)trace_determ_nspid(tids[i]);
		if (p && p->pend.kind != P_NONE && !parked(again, nagain, tids[i])) {
			codec_buf_free(&run);
			free(v);
			return common_errf(e, "determinism", "task %d is inside an answered call", tids[i]);
		}
		if (p) {
			v[i].p = *p;
			v[i].parent = p->parent ? (uint32_t)trace_determ_nspid(p->parent) : 0;
		} else { /* never stopped yet: its state is the fresh one */
			v[i].p.nspid = trace_determ_nspid(tids[i]);
			v[i].p.blk_used = sizeof v[i].p.blk;
		}
		for (size_t k = 0; k <= i; k++)
			if ((k < i && v[k].tid == v[i].tid) || !v[i].tid) {
				codec_buf_free(&run);
				free(v);
				return common_errf(e, "determinism", "task %d has no distinct namespace id",
						   tids[i]);
			}
	}
	/* sorted by namespace id: the same bytes whatever the host's ids */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && v[k - 1].tid > v[k].tid; k--) {
			struct saved t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	codec_buf_init(&b);
	codec_put_u32(&b, STATE_VERSION);
	codec_put_u32(&b, (uint32_t)strlen(d->seed));
	codec_put_raw(&b, d->seed, strlen(d->seed));
	codec_put_u64(&b, (uint64_t)d->epoch);
	codec_put_u64(&b, d->emulated);
	uint32_t last = d->last_pid;
	for (size_t i = 0; i < n; i++)
		last = v[i].tid > last ? v[i].tid : last;
	codec_put_u32(&b, last);
	trace_determ_files_save(d->files, &b);
	for (int fd = 0; fd < STDIO; fd++) {
		uint64_t id[2];
		stdio_identity(trace_sv_guest_pid(sv), fd, id);
		codec_put_u64(&b, id[0]);
		codec_put_u64(&b, id[1]);
	}
	codec_put_raw(&b, run.p, run.len);
	codec_buf_free(&run);
	codec_put_u32(&b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		codec_put_u32(&b, v[i].tid);
		codec_put_u32(&b, (uint32_t)v[i].p.nspid);
		codec_put_u32(&b, v[i].parent);
		codec_put_u64(&b, v[i].p.ns);
		codec_put_u64(&b, v[i].p.tsc_reads);
		codec_put_u64(&b, v[i].p.ctr);
		codec_put_u32(&b, (uint32_t)v[i].p.blk_used);
		codec_put_raw(&b, v[i].p.blk, sizeof v[i].p.blk);
	}
	free(v);
	*out = b.p;
	*len = b.len;
	return 0;
}

/* The tasks of a record, each checked: ids in strictly ascending order. */
static int load_tasks(struct codec_rd *r, struct saved **out, size_t *nout)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n == 0 || n > TASKS_MAX)
		return codec_rd_fail(r, "task count is not 1 to 1024");
	if ((uint64_t)n * 72 > r->len - r->off)
		return codec_rd_fail(r, "tasks truncated");
	struct saved *v = common_xcalloc(n, sizeof *v);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t nspid, used;
		const uint8_t *blk;
		if (codec_get_u32(r, &v[i].tid) < 0 || codec_get_u32(r, &nspid) < 0 ||
		    codec_get_u32(r, &v[i].parent) < 0 || codec_get_u64(r, &v[i].p.ns) < 0 ||
		    codec_get_u64(r, &v[i].p.tsc_reads) < 0 || codec_get_u64(r, &v[i].p.ctr) < 0 ||
		    codec_get_u32(r, &used) < 0 || codec_get_raw(r, &blk, 32) < 0)
			break;
		if (!v[i].tid || v[i].tid > 4194304 || nspid > 4194304 || v[i].parent > 4194304 ||
		    used > 32 || (i && v[i - 1].tid >= v[i].tid)) {
			codec_rd_fail(r, "a task's ids or PRNG position are out of range or out of order");
			break;
		}
		v[i].p.nspid = (pid_t)nspid;
		v[i].p.blk_used = used;
		memcpy(v[i].p.blk, blk, 32);
		if (i + 1 == n) {
			*out = v;
			*nout = n;
			return 0;
		}
	}
	free(v);
	return -1;
}

/* Version 2's recorder section: its bytes kept, checked by check. */
static int load_queued(struct codec_rd *r, struct trace_determ *d, trace_determ_check_fn check)
{
	uint64_t n;
	const uint8_t *p;
	if (codec_get_u64(r, &n) < 0)
		return -1;
	if (n > QUEUED_MAX || n > r->len - r->off)
		return codec_rd_fail(r, "queued events exceed their bound or the input");
	if (codec_get_raw(r, &p, (size_t)n) < 0)
		return -1;
	const char *why = check ? check(p, (size_t)n) : NULL;
	if (why)
		return codec_rd_fail(r, why);
	d->queued = common_xmalloc((size_t)n + 1);
	memcpy(d->queued, p, (size_t)n);
	d->nqueued = (size_t)n;
	return 0;
}

/* The record in p (n bytes) decoded into a fresh run's state; NULL and r failed
 * when it is malformed. */
static struct trace_determ *load(struct codec_rd *r, int tsc, trace_determ_check_fn check)
{
	uint32_t ver, sl;
	const uint8_t *seed;
	uint64_t epoch, emulated;
	if (codec_get_u32(r, &ver) < 0)
		return NULL;
	if (ver != STATE_VERSION && ver != STATE_VERSION_ONE_TASK) {
		codec_rd_fail(r, "unsupported determinism record version");
		return NULL;
	}
	if (codec_get_u32(r, &sl) < 0)
		return NULL;
	if (sl > SEED_MAX) {
		codec_rd_fail(r, "seed longer than 4096 bytes");
		return NULL;
	}
	uint32_t last;
	if (codec_get_raw(r, &seed, sl) < 0 || codec_get_u64(r, &epoch) < 0 ||
	    codec_get_u64(r, &emulated) < 0 || codec_get_u32(r, &last) < 0)
		return NULL;
	if (memchr(seed, 0, sl)) {
		codec_rd_fail(r, "NUL byte inside the seed");
		return NULL;
	}
	/* not trace_determ_new: the file table and its start come from the record */
	struct trace_determ *d = common_xcalloc(1, sizeof *d);
	d->seed = common_xmalloc(sl + 1);
	memcpy(d->seed, seed, sl);
	d->seed[sl] = 0;
	d->epoch = (int64_t)epoch;
	d->tsc = tsc;
	d->named = json_array();
	d->fell_back = json_array();
	d->emulated = emulated;
	d->last_pid = last;
	d->files = trace_determ_files_load(r);
	for (int fd = 0; fd < STDIO; fd++)
		if (codec_get_u64(r, &d->stdio[fd][0]) < 0 || codec_get_u64(r, &d->stdio[fd][1]) < 0)
			break;
	if (d->files && ver == STATE_VERSION && !r->why &&
	    (!(d->sched = trace_sched_saved_load(r)) || load_queued(r, d, check) < 0))
		goto bad;
	if (d->files && load_tasks(r, &d->saved, &d->nsaved) == 0) {
		if (last < d->saved[d->nsaved - 1].tid)
			codec_rd_fail(r, "the last id is below a task's");
		else if (codec_rd_end(r) == 0)
			return d;
	}
bad:
	trace_determ_free(d);
	return NULL;
}

struct trace_determ *trace_determ_resumed(const uint8_t *p, size_t n, int tsc,
					  trace_determ_check_fn check, const char *name,
					  struct common_err *e)
{
	struct codec_rd r;
	codec_rd_init(&r, p, n);
	struct trace_determ *d = load(&r, tsc, check);
	if (!d)
		codec_rd_err(&r, name, e);
	else
		trace_determ_files_restart(d->files);
	return d;
}

uint32_t trace_determ_record_last_pid(const uint8_t *p, size_t n)
{
	struct codec_rd r;
	codec_rd_init(&r, p, n);
	struct trace_determ *d = load(&r, 0, NULL);
	uint32_t last = d ? d->last_pid : 0;
	trace_determ_free(d);
	return last;
}

const char *trace_determ_record_why(const uint8_t *p, size_t n, trace_determ_check_fn check)
{
	struct codec_rd r;
	codec_rd_init(&r, p, n);
	struct trace_determ *d = load(&r, 0, check);
	trace_determ_free(d);
	return d ? NULL : r.why ? r.why : "malformed";
}

/* The host id of the live task whose namespace id is ns (0: none). */
static pid_t host_of(const pid_t *tids, size_t n, uint32_t ns)
{
	for (size_t i = 0; ns && i < n; i++)
		if ((uint32_t)trace_determ_nspid(tids[i]) == ns)
			return tids[i];
	return 0;
}

/* Version 2: the schedule's keys back, by namespace id. */
static int resume_run(struct trace_determ *d, struct trace_supervisor *sv, const pid_t *tids,
		      size_t n, struct common_err *e)
{
	struct trace_sv_idmap map[TASKS_MAX];
	for (size_t i = 0; i < n; i++)
		map[i] = (struct trace_sv_idmap){ tids[i], trace_determ_nspid(tids[i]) };
	return d->sched ? trace_sv_sched_resume(sv, d->sched, map, n, e) : 0;
}

const uint8_t *trace_determ_queued(const struct trace_determ *d, size_t *n)
{
	*n = d->nqueued;
	return d->queued;
}

int trace_determ_resume_tasks(struct trace_determ *d, struct trace_supervisor *sv,
			      struct common_err *e)
{
	pid_t tids[TASKS_MAX];
	size_t n = trace_sv_pids(sv, tids, TASKS_MAX);
	if (n > TASKS_MAX || n != d->nsaved)
		return common_errf(e, "determinism", "the restored run has %zu tasks, the record %zu",
				   n, d->nsaved);
	if (resume_run(d, sv, tids, n, e) < 0)
		return -1;
	for (size_t i = 0; i < d->nsaved; i++) {
		const struct saved *s = &d->saved[i];
		pid_t host = host_of(tids, n, s->tid);
		void **slot = host ? trace_sv_slot(sv, host, TRACE_LAYER_DETERM) : NULL;
		if (!slot)
			return common_errf(e, "determinism", "task %u of the record is not in the "
					   "restored run", s->tid);
		free(*slot);
		struct proc *p = common_xmalloc(sizeof *p);
		*p = s->p;
		p->parent = host_of(tids, n, s->parent);
		*slot = p;
	}
	free(d->saved);
	d->saved = NULL;
	d->nsaved = 0;
	trace_sched_saved_free(d->sched);
	d->sched = NULL;
	for (int fd = 0; fd < STDIO; fd++) {
		uint64_t id[2];
		stdio_identity(trace_sv_guest_pid(sv), fd, id);
		if (d->stdio[fd][1] && id[1])
			trace_determ_files_rekey(d->files, d->stdio[fd][0], d->stdio[fd][1], id[0], id[1]);
	}
	return 0;
}
