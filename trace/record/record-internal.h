/* trace/record: the event line the recorder builds by hand in canonical JSON
 * (record.c says why), shared by record.c and line.c. */
#ifndef SBX_TRACE_RECORD_INTERNAL_H
#define SBX_TRACE_RECORD_INTERNAL_H

#include <string.h>
#include <sys/types.h>
#include "libcommon/common.h"

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

/* A restored run's trace begins with the first seq events (and the header) of
 * from, checked through the reader and to end at head, appended to out as
 * written (trace/record/resume.c). */
int trace_rec_prefix(const char *from, uint64_t seq, const uint8_t head[32], struct sb *out,
		     struct common_err *e);

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

#endif
