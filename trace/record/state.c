/* The recorder's section of a snapshot's determinism record (trace/determ/state.c,
 * version 2, which holds it as bytes this file checks): the events of a
 * deterministic run that wait for their task's next turn, so that a restored
 * run puts them in the chain where the uninterrupted one did.
 *
 *   u32 nqueues (<= QUEUES_MAX), queue[] in the order made = {u32 tid (namespace
 *   id, distinct), u32 nlines (1..), line[] = {u32 seq_at, u32 len
 *   (<= TRACE_LINE_MAX), bytes: an event without its "seq" value and closing
 *   brace, the value's place at seq_at, just after "seq":}},
 *   u32 nskip, skip[] ascending = u32 tid (a task whose call is issued again
 *   once restored, its event already in the chain),
 *   u32 nthreads, thread[] = {u32 tid, u32 tgid} (which process a thread's
 *   exit names) */
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "trace/record/record-internal.h"
#include "trace/record/record.h"

#define QUEUES_MAX 1024u
#define ID_MAX 4194304u

struct saved_line {
	uint32_t seq_at, len;
	const uint8_t *bytes;   /* into the record */
};
struct saved_queue {
	pid_t tid;
	size_t n;
	struct saved_line *l;
};
struct saved {
	struct saved_queue *q;
	size_t nq;
	pid_t *skip;
	size_t nskip;
	struct { pid_t tid, tgid; } *thr;
	size_t nthr;
};

int trace_rec_skipped(struct trace_rec *r, pid_t tid)
{
	for (size_t i = 0; i < r->nskip; i++)
		if (r->skip[i] == tid) {
			r->skip[i] = r->skip[--r->nskip];
			return 1;
		}
	return 0;
}

static const struct trace_sv_again *again_of(const struct trace_sv_again *a, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].tid == tid)
			return &a[i];
	return NULL;
}

/* The lines of queue b up to its last one (keep: whether that one stays). */
static void put_queue(struct codec_buf *b, pid_t ns, const struct sb *q, int keep)
{
	uint32_t n = 0;
	size_t last = 0;
	for (size_t at = 0; at + 2 * sizeof(size_t) <= q->n; n++) {
		size_t hdr[2];
		memcpy(hdr, q->p + at, sizeof hdr);
		last = at;
		at += sizeof hdr + hdr[0];
	}
	size_t end = keep ? q->n : last;
	if (!keep && --n == 0)
		return;
	codec_put_u32(b, (uint32_t)ns);
	codec_put_u32(b, n);
	for (size_t at = 0; at < end;) {
		size_t hdr[2];
		memcpy(hdr, q->p + at, sizeof hdr);
		codec_put_u32(b, (uint32_t)hdr[1]);
		codec_put_u32(b, (uint32_t)hdr[0]);
		codec_put_raw(b, q->p + at + sizeof hdr, hdr[0]);
		at += sizeof hdr + hdr[0];
	}
}

/* How many queues put_queue writes: one whose only line is taken back none. */
static uint32_t queues_kept(const struct trace_rec *r, const uint8_t *drop)
{
	uint32_t k = 0;
	for (size_t i = 0; i < r->q.n; i++) {
		size_t hdr[2];
		memcpy(hdr, r->q.v[i].b.p, sizeof hdr);
		k += !drop[i] || sizeof hdr + hdr[0] < r->q.v[i].b.n;
	}
	return k;
}

int trace_rec_state_save(void *rec, struct trace_supervisor *sv, pid_t (*ns)(pid_t),
			 const struct trace_sv_again *again, size_t n, struct codec_buf *b,
			 const char **why)
{
	struct trace_rec *r = rec;
	*why = r->failed ? "the trace failed" : r->q.n > QUEUES_MAX ? "too many queues" : NULL;
	for (size_t i = 0; !*why && i < r->npend; i++)
		if (!again_of(again, n, r->pend[i].tid))
			*why = "a task in flight is inside a recorded call";
	if (*why)
		return -1;
	uint8_t *drop = common_xcalloc(r->q.n + 1, 1);
	pid_t *skip = common_xcalloc(n + 1, sizeof *skip);
	size_t nskip = 0;
	for (size_t i = 0; i < n; i++) {
		const struct trace_stop *st = trace_sv_entry_stop(sv, again[i].tid);
		if (!st || !trace_rec_at_entry(r, st))
			continue; /* its entry made no event (its exit would) */
		size_t k = trace_rq_find(&r->q, again[i].tid);
		if (k < r->q.n)
			drop[k] = 1; /* the event its entry made is made again */
		else
			skip[nskip++] = ns(again[i].tid); /* its turn ended there: in the chain */
	}
	codec_put_u32(b, queues_kept(r, drop));
	for (size_t i = 0; i < r->q.n; i++)
		put_queue(b, ns(r->q.v[i].tid), &r->q.v[i].b, !drop[i]);
	for (size_t i = 1; i < nskip; i++)
		for (size_t k = i; k > 0 && skip[k - 1] > skip[k]; k--) {
			pid_t t = skip[k];
			skip[k] = skip[k - 1];
			skip[k - 1] = t;
		}
	codec_put_u32(b, (uint32_t)nskip);
	for (size_t i = 0; i < nskip; i++)
		codec_put_u32(b, (uint32_t)skip[i]);
	codec_put_u32(b, (uint32_t)r->nthr);
	for (size_t i = 0; i < r->nthr; i++) {
		codec_put_u32(b, (uint32_t)ns(r->thr[i].tid));
		codec_put_u32(b, (uint32_t)ns(r->thr[i].tgid));
	}
	free(drop);
	free(skip);
	return 0;
}

static void saved_free(struct saved *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->q && i <= s->nq; i++) /* the one being loaded too */
		free(s->q[i].l);
	free(s->q);
	free(s->skip);
	free(s->thr);
	free(s);
}

/* One event line, checked: an object whose "seq" value goes at seq_at, on one line. */
static int load_line(struct codec_rd *r, struct saved_line *l)
{
	if (codec_get_u32(r, &l->seq_at) < 0 || codec_get_u32(r, &l->len) < 0)
		return -1;
	if (l->len > TRACE_LINE_MAX)
		return codec_rd_fail(r, "queued events: a line is longer than a trace line");
	if (codec_get_raw(r, &l->bytes, l->len) < 0)
		return -1;
	const uint8_t *p = l->bytes;
	if (l->len < 7 || p[0] != '{' || l->seq_at < 7 || l->seq_at > l->len ||
	    memcmp(p + l->seq_at - 6, "\"seq\":", 6) || (l->seq_at < l->len && p[l->seq_at] != ',') ||
	    memchr(p, '\n', l->len) || memchr(p, 0, l->len))
		return codec_rd_fail(r, "queued events: a line is not an event awaiting its seq");
	return 0;
}

static int load_id(struct codec_rd *r, pid_t *id)
{
	uint32_t v;
	if (codec_get_u32(r, &v) < 0)
		return -1;
	if (!v || v > ID_MAX)
		return codec_rd_fail(r, "queued events: a task id is out of range");
	*id = (pid_t)v;
	return 0;
}

static int load_queues(struct codec_rd *r, struct saved *s)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > QUEUES_MAX || (uint64_t)n * 8 > r->len - r->off)
		return codec_rd_fail(r, "queued events: queue count beyond its bound or the input");
	s->q = common_xcalloc(n + 1, sizeof *s->q);
	for (; s->nq < n; s->nq++) {
		struct saved_queue *q = &s->q[s->nq];
		uint32_t k;
		if (load_id(r, &q->tid) < 0 || codec_get_u32(r, &k) < 0)
			return -1;
		for (size_t i = 0; i < s->nq; i++)
			if (s->q[i].tid == q->tid)
				return codec_rd_fail(r, "queued events: two queues of one task");
		if (k == 0 || (uint64_t)k * 8 > r->len - r->off)
			return codec_rd_fail(r, "queued events: line count beyond its bound or the input");
		q->l = common_xcalloc(k, sizeof *q->l);
		for (; q->n < k; q->n++)
			if (load_line(r, &q->l[q->n]) < 0)
				return -1;
	}
	return 0;
}

/* The section checked whole into s (its lines point into it); NULL, r failed. */
static struct saved *load(struct codec_rd *r)
{
	struct saved *s = common_xcalloc(1, sizeof *s);
	uint32_t n = 0;
	if (load_queues(r, s) < 0 || codec_get_u32(r, &n) < 0)
		goto bad;
	if ((uint64_t)n * 4 > r->len - r->off) {
		codec_rd_fail(r, "queued events: skip count beyond the input");
		goto bad;
	}
	s->skip = common_xcalloc(n + 1, sizeof *s->skip);
	for (; s->nskip < n; s->nskip++) {
		if (load_id(r, &s->skip[s->nskip]) < 0)
			goto bad;
		if (s->nskip && s->skip[s->nskip - 1] >= s->skip[s->nskip]) {
			codec_rd_fail(r, "queued events: skipped tasks out of order");
			goto bad;
		}
	}
	if (codec_get_u32(r, &n) < 0)
		goto bad;
	if ((uint64_t)n * 8 > r->len - r->off) {
		codec_rd_fail(r, "queued events: thread count beyond the input");
		goto bad;
	}
	s->thr = common_xcalloc(n + 1, sizeof *s->thr);
	for (; s->nthr < n; s->nthr++)
		if (load_id(r, &s->thr[s->nthr].tid) < 0 || load_id(r, &s->thr[s->nthr].tgid) < 0)
			goto bad;
	if (codec_rd_end(r) == 0)
		return s;
bad:
	saved_free(s);
	return NULL;
}

static pid_t host_of(const struct trace_sv_idmap *map, size_t n, pid_t ns)
{
	for (size_t i = 0; i < n; i++)
		if (map[i].ns == ns)
			return map[i].host;
	return 0;
}

static int resume(struct trace_rec *r, const struct saved *s, const struct trace_sv_idmap *map,
		  size_t nmap, struct common_err *e)
{
	for (size_t i = 0; i < s->nq; i++) {
		pid_t tid = host_of(map, nmap, s->q[i].tid);
		if (!tid)
			return common_errf(e, "determinism", "task %d of the queued events is not in "
					   "the restored run", (int)s->q[i].tid);
		for (size_t k = 0; k < s->q[i].n; k++) {
			const struct saved_line *l = &s->q[i].l[k];
			struct sb line = { (char *)l->bytes, l->len, l->len, 0 };
			trace_rq_push(&r->q, tid, &line, l->seq_at);
		}
	}
	r->skip = common_xcalloc(s->nskip + 1, sizeof *r->skip);
	for (size_t i = 0; i < s->nskip; i++)
		if ((r->skip[r->nskip] = host_of(map, nmap, s->skip[i])))
			r->nskip++;
	for (size_t i = 0; i < s->nthr; i++) {
		pid_t tid = host_of(map, nmap, s->thr[i].tid), tgid = host_of(map, nmap, s->thr[i].tgid);
		if (!tid || !tgid)
			continue; /* a thread gone before the snapshot */
		r->thr = common_xrealloc(r->thr, (r->nthr + 1) * sizeof *r->thr);
		r->thr[r->nthr].tid = tid;
		r->thr[r->nthr++].tgid = tgid;
	}
	r->capthr = r->nthr;
	return 0;
}

const char *trace_rec_state_why(const uint8_t *p, size_t n)
{
	struct codec_rd r;
	codec_rd_init(&r, p, n);
	struct saved *s = load(&r);
	saved_free(s);
	return s ? NULL : r.why ? r.why : "queued events: malformed";
}

int trace_rec_state_resume(struct trace_rec *r, const uint8_t *p, size_t n,
			   const struct trace_sv_idmap *map, size_t nmap, struct common_err *e)
{
	struct codec_rd rd;
	if (!r || !p)
		return 0;
	codec_rd_init(&rd, p, n);
	struct saved *s = load(&rd);
	if (!s)
		return codec_rd_err(&rd, "queued events", e);
	int rc = resume(r, s, map, nmap, e);
	saved_free(s);
	return rc;
}
