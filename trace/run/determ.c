/* sbx-run --deterministic's state across a snapshot (SPEC §8, §9): where a
 * snapshot that a restored run can continue the trace from is taken, and the
 * run's determinism, fresh from the lease or resumed from a snapshot's record. */
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"
#include "trace/run/run-internal.h"

/* Seeded by the lease; its clock starts when the lease was requested (rec: its
 * record, else receipts holds the request). A restore continues the record's. */
struct trace_determ *trace_run_determ_open(struct lease_store *s, const char *id, const json_t *rec,
					   const json_t *receipts, const struct trace_run_opts *o,
					   struct common_err *e)
{
	if (o->determ_resume)
		return trace_determ_resumed(o->determ_resume, o->determ_resume_len, trace_tsc_probe(),
					    trace_rec_state_why, "determinism record", e);
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	json_int_t batch = -1;
	size_t i;
	const json_t *r;
	if (l)
		batch = json_integer_value(json_object_get(l, "requested"));
	json_array_foreach(receipts, i, r) {
		const char *edge = json_string_value(json_object_get(r, "edge"));
		if (!l && edge && !strcmp(edge, "request"))
			batch = json_integer_value(json_object_get(r, "batch"));
	}
	json_t *clk = NULL;
	if (lease_clock_get(s, &clk, e) < 0)
		return NULL;
	int64_t epoch = trace_determ_epoch(clk, batch);
	json_decref(clk);
	if (epoch < 0) {
		common_errf(e, "determinism", "lease %s: no request time in its receipts", id);
		return NULL;
	}
	return trace_determ_new(id, epoch, trace_tsc_probe());
}

/* Where --snapshot-at-step K may be taken: an entry stop, before any feature
 * saw it, once the trace holds K events. It is taken at the first such stop
 * where the determinism record holds the whole run (trace_determ_save): the
 * schedule's keys, the events waiting for their turn, every task in flight or
 * parked at a call it issues again. None of that depends on timing, so the
 * restored run continues the trace as the uninterrupted one did. */
int trace_run_det_point(const struct trace_run_opts *o, const struct trace_rec *rec)
{
	return o->snapshot_at_step && rec && trace_rec_events(rec) >= o->snapshot_at_step;
}

/* Once the restore rebuilt the tree: each task's determinism and place in the
 * schedule, then the events that waited for their turns, by namespace id. */
int trace_run_determ_resume(struct trace_determ *d, struct trace_supervisor *sv,
			    struct trace_rec *rec, struct common_err *e)
{
	pid_t tids[1024];
	struct trace_sv_idmap map[1024];
	size_t n = trace_sv_pids(sv, tids, 1024), len;
	const uint8_t *q = trace_determ_queued(d, &len);
	if (trace_determ_resume_tasks(d, sv, e) < 0)
		return -1;
	for (size_t i = 0; i < n && i < 1024; i++)
		map[i] = (struct trace_sv_idmap){ tids[i], trace_determ_nspid(tids[i]) };
	return trace_rec_state_resume(rec, q, len, map, n < 1024 ? n : 1024, e);
}

int trace_run_determ_check(const struct trace_run_opts *o, struct common_err *e)
{
	if (o->snapshot_at_step && (!o->deterministic || !o->trace_path || !o->lease))
		return common_errf(e, "--snapshot-at-step", "needs --deterministic, --trace and --lease "
				   "(the step is the trace's; the snapshot is the lease's)");
	if (o->trace_from && !o->determ_resume)
		return common_errf(e, "--trace-from", "the snapshot carries no determinism record (take "
				   "it with sbx-run --deterministic --snapshot-at-step)");
	if (o->stop_after_events && !o->trace_path)
		return common_errf(e, "--stop-after-events", "needs --trace (it counts its events)");
	if (o->determ_resume && o->trace_path && !o->trace_from)
		return common_errf(e, "--trace", "a deterministic snapshot's run continues its trace: "
				   "give the trace it wrote with --trace-from FILE");
	return 0;
}
