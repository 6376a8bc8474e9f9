/* A trace across a chain's links (sbx-run --chain --trace, SPEC §8.4): one file,
 * one hash chain. A link's recorder stops at the snapshot that ends it and
 * leaves the file without an end event; the next link's goes on after it (same
 * descriptor, same chain, same time base) and first writes a link event naming
 * its lease, the lease before, the snapshot restored and how the restored
 * tasks' ids map, so a reader checks the whole chain and follows each process
 * across links. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/record/record-internal.h"
#include "trace/record/record.h"

void trace_rec_handed_over(struct trace_rec *r, const pid_t (*ended)[3], size_t nended)
{
	if (!r)
		return;
	for (size_t i = 0; i < nended; i++)
		trace_rec_exit(r, ended[i][0], ended[i][1], (int)ended[i][2]);
	trace_rec_flush(r);
	trace_rec_pend_drop_all(r); /* each is made again by the next link */
	r->handed = 1;
}

/* The restored threads' processes, so their exits name them. */
static void link_threads(struct trace_rec *r, const json_t *tgids)
{
	size_t i;
	json_t *p;

	json_array_foreach(tgids, i, p) {
		pid_t tid = (pid_t)json_integer_value(json_array_get(p, 0));
		pid_t tgid = (pid_t)json_integer_value(json_array_get(p, 1));
		if (tid == tgid || tid <= 0)
			continue;
		if (r->nthr == r->capthr) {
			r->capthr = r->capthr ? 2 * r->capthr : 16;
			r->thr = common_xrealloc(r->thr, r->capthr * sizeof *r->thr);
		}
		r->thr[r->nthr].tid = tid;
		r->thr[r->nthr++].tgid = tgid;
	}
}

int trace_rec_link(struct trace_rec *r, const json_t *fields, const json_t *tgids)
{
	if (r->failed)
		return -1;
	link_threads(r, tgids);
	json_t *ev = json_deep_copy(fields);
	json_object_set_new(ev, "ev", json_string("link"));
	json_object_set_new(ev, "seq", json_integer((json_int_t)r->seq));
	if (!r->deterministic)
		json_object_set_new(ev, "t", json_integer((json_int_t)(common_mono_us() - r->t_start)));
	char *canon = common_json_canonical(ev);
	json_decref(ev);
	sb_begin(&r->line);
	sb_cstr(&r->line, canon);
	free(canon);
	r->line.n--; /* reopen the object: the chain hash goes in */
	if (trace_rec_chain_line(r) < 0)
		return -1;
	return trace_rec_flush(r);
}

int trace_rec_hand_close(struct trace_rec *r, uint8_t head[32], uint64_t *seq, uint64_t *t_start,
			 struct common_err *e)
{
	int rc = trace_rec_flush(r);

	if (rc < 0 && e)
		*e = r->err;
	memcpy(head, r->h, 32);
	*seq = r->seq;
	*t_start = r->t_start;
	trace_rec_free(r);
	return rc;
}
