/* The recorder's canonical JSON line builder: sorted keys are the caller's
 * job, strings and integers are written as jansson writes them. */
#include <stdio.h>
#include "trace/record/record-internal.h"

/* Length of one valid UTF-8 sequence at s (jansson's rules), 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0], cp;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A JSON string as jansson dumps it; invalid UTF-8 bytes become U+FFFD.
 * Runs of plain ASCII are copied at once (this is the writer's hot loop). */
void trace_sb_str(struct sb *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	char esc[8];

	sb_raw(b, "\"", 1);
	while (*s) {
		const unsigned char *run = s;
		while (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
			s++;
		if (s > run)
			sb_raw(b, (const char *)run, (size_t)(s - run));
		if (!*s)
			break;
		size_t n = utf8_len(s);
		if (n == 0) {
			sb_raw(b, "\xef\xbf\xbd", 3);
			s++;
			continue;
		}
		if (n > 1) {
			sb_raw(b, (const char *)s, n);
			s += n;
			continue;
		}
		switch (*s) {
		case '"': sb_raw(b, "\\\"", 2); break;
		case '\\': sb_raw(b, "\\\\", 2); break;
		case '\b': sb_raw(b, "\\b", 2); break;
		case '\f': sb_raw(b, "\\f", 2); break;
		case '\n': sb_raw(b, "\\n", 2); break;
		case '\r': sb_raw(b, "\\r", 2); break;
		case '\t': sb_raw(b, "\\t", 2); break;
		default:
			snprintf(esc, sizeof esc, "\\u%04X", *s);
			sb_raw(b, esc, 6);
		}
		s++;
	}
	sb_raw(b, "\"", 1);
}

void trace_sb_key(struct sb *b, const char *k)
{
	sb_raw(b, b->first ? "{\"" : ",\"", 2);
	b->first = 0;
	sb_cstr(b, k);
	sb_raw(b, "\":", 2);
}

void trace_sb_int(struct sb *b, long long v)
{
	char num[24], *p = num + sizeof num;
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	sb_raw(b, p, (size_t)(num + sizeof num - p));
}

void trace_kv_int(struct sb *b, const char *k, long long v)
{
	trace_sb_key(b, k);
	trace_sb_int(b, v);
}

void trace_kv_str(struct sb *b, const char *k, const char *v)
{
	trace_sb_key(b, k);
	trace_sb_str(b, v);
}

/* s with each invalid UTF-8 byte replaced by U+FFFD (malloc'd). */
char *trace_utf8_lossy(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	struct sb b = {0};

	sb_begin(&b);
	while (*s) {
		size_t n = utf8_len(s);
		if (n == 0) {
			sb_raw(&b, "\xef\xbf\xbd", 3);
			s++;
		} else {
			sb_raw(&b, (const char *)s, n);
			s += n;
		}
	}
	return b.p;
}


size_t trace_rq_find(const struct trace_rq_set *q, pid_t tid)
{
	size_t i = 0;
	while (i < q->n && q->v[i].tid != tid)
		i++;
	return i;
}

void trace_rq_push(struct trace_rq_set *q, pid_t tid, const struct sb *line, size_t seq_at)
{
	size_t i = trace_rq_find(q, tid);
	if (i == q->n) {
		if (q->n == q->cap) {
			q->cap = q->cap ? 2 * q->cap : 16;
			q->v = common_xrealloc(q->v, q->cap * sizeof *q->v);
		}
		memset(&q->v[q->n], 0, sizeof q->v[0]);
		q->v[q->n++].tid = tid;
	}
	size_t hdr[2] = { line->n, seq_at };
	sb_raw(&q->v[i].b, (const char *)hdr, sizeof hdr);
	sb_raw(&q->v[i].b, line->p, line->n);
}

struct sb trace_rq_remove(struct trace_rq_set *q, size_t i)
{
	struct sb b = q->v[i].b;
	memmove(q->v + i, q->v + i + 1, (q->n - i - 1) * sizeof *q->v);
	q->n--;
	return b;
}

void trace_rq_free(struct trace_rq_set *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].b.p);
	free(q->v);
}
