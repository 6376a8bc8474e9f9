/* trace/record: the event line the recorder builds by hand in canonical JSON
 * (record.c says why), shared by record.c and line.c, and the recorder's state. */
#ifndef SBX_TRACE_RECORD_INTERNAL_H
#define SBX_TRACE_RECORD_INTERNAL_H

#include <string.h>
#include <sys/types.h>
#include <openssl/evp.h>
#include "libcommon/common.h"
#include "trace/sv/sv.h"
#include "trace/trace.h"

struct sb {
	char *p;
	size_t n, cap;
	int first;
};

/* Inline: appending bytes is the writer's hot path. */
static inline void sb_grow(struct sb *b, size_t more)
{
	if (b->n + more + 1 > b->cap) {
		size_t c = b->cap ? b->cap : 1024;
		while (c < b->n + more + 1)
			c *= 2;
		b->p = common_xrealloc(b->p, c);
		b->cap = c;
	}
}

static inline void sb_raw(struct sb *b, const char *s, size_t n)
{
	sb_grow(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static inline void sb_cstr(struct sb *b, const char *s)
{
	sb_raw(b, s, strlen(s));
}

static inline void sb_begin(struct sb *b)
{
	b->n = 0;
	b->first = 1;
	sb_grow(b, 0);
	b->p[0] = 0;
}

/* A JSON string as jansson dumps it; invalid UTF-8 bytes become U+FFFD. */
void trace_sb_str(struct sb *b, const char *str);
/* The next key of an object, opening it first. */
void trace_sb_key(struct sb *b, const char *k);
void trace_sb_int(struct sb *b, long long v);
void trace_kv_int(struct sb *b, const char *k, long long v);
void trace_kv_str(struct sb *b, const char *k, const char *v);
/* s with each invalid UTF-8 byte replaced by U+FFFD (malloc'd). */
char *trace_utf8_lossy(const char *str);

/* Events kept per task until the schedule orders them (record.c): each queue
 * holds lines as {size_t len, seq_at; bytes}, the "seq" value left out at
 * seq_at; queues in the order they were made. */
struct trace_rq { pid_t tid; struct sb b; };
struct trace_rq_set { struct trace_rq *v; size_t n, cap; };
void trace_rq_push(struct trace_rq_set *q, pid_t tid, const struct sb *line, size_t seq_at);
/* The index of tid's queue, or q->n. */
size_t trace_rq_find(const struct trace_rq_set *q, pid_t tid);
/* Queue i's bytes (the caller frees them), the queue dropped. */
struct sb trace_rq_remove(struct trace_rq_set *q, size_t i);
void trace_rq_free(struct trace_rq_set *q);

/* The recorder's state (record.c). */
struct pend {
	pid_t tid;
	struct trace_stop s;
	char *path[2], *rewrite[2];
	int existed;                /* O_CREAT target existed before the call */
	uint64_t t0;
};

struct trace_rec {
	int fd, own_fd, failed;
	int rootfd;                 /* the guest's root, for existence lookups */
	struct common_err err;
	enum trace_level level;
	int deterministic;
	uint64_t seq, t_start, last_flush;
	uint64_t bytes;             /* written to fd so far: metered as storage_write */
	uint8_t h[32];
	struct sb out;              /* pending bytes for fd */
	struct sb line;             /* the event being built */
	struct pend *pend;
	size_t npend, cappend;
	struct common_hashcache *hc; /* file identity -> SHA-256, so cc1 is hashed once */
	EVP_MD_CTX *md;             /* reused: a fresh context per event costs ~1 us */
	struct { pid_t tid, tgid; } *thr; /* threads, so exits name their process */
	size_t nthr, capthr;
	struct { pid_t pid, ppid; } *par; /* parents learned from /proc (see real_ppid) */
	size_t npar, cappar;
	/* deterministic: each task's events wait in its queue until the schedule
	 * puts them in the run's order (trace_rec_order) */
	int defer;
	int restoring;              /* a resumed trace: events start after the restore's exec */
	pid_t cur;                  /* the task the event being built is of */
	size_t seq_at;
	struct trace_rq_set q;
	pid_t *skip;                /* restored tasks whose next entry's event is in the chain */
	size_t nskip;
};

/* Whether the entry stop s makes its event then (no exit awaited). */
int trace_rec_at_entry(struct trace_rec *r, const struct trace_stop *s);
/* 1 once for a task of r->skip, which it leaves (state.c). */
int trace_rec_skipped(struct trace_rec *r, pid_t tid);

#endif
