/* The trace reader: hostile input, so lines are bounded, types checked, and
 * the chain and canonical form verified line by line. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/record/reader/reader.h"
#include "trace/record/record.h"

#define TAIL_LEN 72 /* ,"h":"<64 hex>"} */
static const char domain[] = TRACE_DOMAIN;

struct trace_reader {
	int fd, own;
	char name[256];
	char *buf;
	size_t len, off, cap;
	int eof;
	uint64_t line, events;
	int64_t last_seq;
	uint8_t h[32];
	json_t *header, *cur;
	char *canon;
	size_t canon_cap;
	int complete, partial, excerpt;
};

static int rd_err(struct trace_reader *t, struct common_err *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int rd_err(struct trace_reader *t, struct common_err *e, const char *fmt, ...)
{
	char what[400], why[600];
	va_list ap;

	snprintf(what, sizeof what, "%s:%llu", t->name, (unsigned long long)t->line);
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return common_errf(e, what, "%s", why);
}

struct trace_reader *trace_reader_open(const char *path, struct common_err *e)
{
	struct trace_reader *t;
	int fd;

	if (!strcmp(path, "-")) {
		fd = 0;
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			common_errno(e, errno, "%s", path);
			return NULL;
		}
	}
	t = common_xcalloc(1, sizeof *t);
	t->fd = fd;
	t->own = fd != 0;
	snprintf(t->name, sizeof t->name, "%s", strcmp(path, "-") ? path : "<stdin>");
	t->cap = 65536; /* grows to TRACE_LINE_MAX + 64 KiB for long lines */
	t->buf = common_xmalloc(t->cap);
	t->last_seq = -1;
	return t;
}

void trace_reader_close(struct trace_reader *t)
{
	if (!t)
		return;
	if (t->own)
		close(t->fd);
	json_decref(t->header);
	json_decref(t->cur);
	free(t->buf);
	free(t->canon);
	free(t);
}

const json_t *trace_reader_header(const struct trace_reader *t)
{
	return t->header;
}

int trace_reader_complete(const struct trace_reader *t)
{
	return t->complete;
}

const char *trace_reader_name(const struct trace_reader *t)
{
	return t->name;
}

uint64_t trace_reader_events(const struct trace_reader *t)
{
	return t->events;
}

int trace_reader_partial(const struct trace_reader *t)
{
	return t->partial;
}

/* Next complete line (without '\n') or NULL at end / error (*err set). */
static char *rd_line(struct trace_reader *t, size_t *len, int *err, struct common_err *e)
{
	*err = 0;
	for (;;) {
		char *nl = memchr(t->buf + t->off, '\n', t->len - t->off);
		if (nl) {
			char *s = t->buf + t->off;
			*len = (size_t)(nl - s);
			t->off += *len + 1;
			if (*len > TRACE_LINE_MAX) {
				t->line++;
				*err = rd_err(t, e, "line longer than %u bytes", TRACE_LINE_MAX);
				return NULL;
			}
			return s;
		}
		if (t->len - t->off > TRACE_LINE_MAX) {
			t->line++;
			*err = rd_err(t, e, "line longer than %u bytes", TRACE_LINE_MAX);
			return NULL;
		}
		if (t->eof) {
			if (t->len > t->off)
				t->partial = 1; /* a killed writer's unterminated last line */
			t->off = t->len;
			return NULL;
		}
		memmove(t->buf, t->buf + t->off, t->len - t->off);
		t->len -= t->off;
		t->off = 0;
		if (t->len == t->cap) {
			t->cap *= 2;
			t->buf = common_xrealloc(t->buf, t->cap);
		}
		ssize_t n = read(t->fd, t->buf + t->len, t->cap - t->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = common_errno(e, errno, "read %s", t->name);
			return NULL;
		}
		if (n == 0)
			t->eof = 1;
		t->len += (size_t)n;
	}
}

static int is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

enum ftype { F_INT, F_STR, F_ARR, F_OBJ, F_BOOL, F_HEX };

static int field(struct trace_reader *t, json_t *o, const char *k, enum ftype ty, int need,
		 struct common_err *e)
{
	json_t *v = json_object_get(o, k);
	static const char *const tn[] = {"integer", "string", "array", "object", "boolean",
					 "64 hex digits"};
	int ok;

	if (!v)
		return need ? rd_err(t, e, "field \"%s\": missing", k) : 0;
	switch (ty) {
	case F_INT: ok = json_is_integer(v); break;
	case F_STR: ok = json_is_string(v); break;
	case F_ARR: ok = json_is_array(v); break;
	case F_OBJ: ok = json_is_object(v); break;
	case F_BOOL: ok = json_is_boolean(v); break;
	default:
		ok = json_is_string(v) && json_string_length(v) == 64 &&
		     is_lower_hex(json_string_value(v), 64);
	}
	if (!ok)
		return rd_err(t, e, "field \"%s\": expected %s", k, tn[ty]);
	return 0;
}

static int arr_of(struct trace_reader *t, json_t *o, const char *k, int ints, struct common_err *e)
{
	json_t *a = json_object_get(o, k), *v;
	size_t i;

	json_array_foreach(a, i, v)
		if (ints ? !json_is_integer(v) : !json_is_string(v))
			return rd_err(t, e, "field \"%s\": expected an array of %s", k,
				      ints ? "integers" : "strings");
	return 0;
}

#define F(k, ty, need) do { if (field(t, o, k, ty, need, e) < 0) return -1; } while (0)

static int check_header(struct trace_reader *t, json_t *o, struct common_err *e)
{
	json_t *v = json_object_get(o, "sbx_trace");

	if (!v)
		return rd_err(t, e, "not an sbx trace (no \"sbx_trace\" header)");
	if (!json_is_integer(v) || json_integer_value(v) != TRACE_FORMAT)
		return rd_err(t, e, "unsupported trace format (this reader knows version %d)",
			      TRACE_FORMAT);
	F("argv", F_ARR, 1);
	F("level", F_STR, 1);
	F("env_sha256", F_HEX, 1);
	F("start_batch", F_INT, 1);
	F("deterministic", F_BOOL, 1);
	F("mounts", F_ARR, 1);
	F("image", F_OBJ, 1);
	F("excerpt", F_OBJ, 0);
	if (arr_of(t, o, "argv", 0, e) < 0)
		return -1;
	t->excerpt = json_object_get(o, "excerpt") != NULL;
	return 0;
}

static int check_event(struct trace_reader *t, json_t *o, const char **kind, struct common_err *e)
{
	const char *ev;
	int64_t seq;

	F("ev", F_STR, 1);
	F("seq", F_INT, 1);
	F("t", F_INT, 0);
	ev = json_string_value(json_object_get(o, "ev"));
	seq = json_integer_value(json_object_get(o, "seq"));
	if (t->excerpt ? seq <= t->last_seq : seq != t->last_seq + 1)
		return rd_err(t, e, "field \"seq\": %lld out of order (expected %lld)",
			      (long long)seq, (long long)t->last_seq + 1);
	t->last_seq = seq;
	if (!strcmp(ev, "sys")) {
		*kind = "sys";
		F("action", F_STR, 1); F("args", F_ARR, 1); F("name", F_STR, 1); F("nr", F_INT, 1);
		F("pid", F_INT, 1); F("ppid", F_INT, 1); F("tid", F_INT, 1); F("created", F_BOOL, 0);
		F("dt", F_INT, 0); F("errno", F_STR, 0); F("exists", F_BOOL, 0); F("fd", F_INT, 0); F("path", F_STR, 0);
		F("path2", F_STR, 0); F("result", F_INT, 0); F("rewrite", F_STR, 0);
		F("rewrite2", F_STR, 0); F("sha256", F_HEX, 0);
		if (json_array_size(json_object_get(o, "args")) > 6)
			return rd_err(t, e, "field \"args\": more than 6 arguments");
		return arr_of(t, o, "args", 1, e);
	}
	if (!strcmp(ev, "exec")) {
		*kind = "exec";
		F("argv", F_ARR, 1); F("path", F_STR, 1); F("pid", F_INT, 1); F("ppid", F_INT, 1);
		F("tid", F_INT, 1); F("sha256", F_HEX, 0);
		return arr_of(t, o, "argv", 0, e);
	}
	if (!strcmp(ev, "spawn")) {
		*kind = "spawn";
		F("child", F_INT, 1); F("kind", F_STR, 1); F("pid", F_INT, 1);
		return 0;
	}
	if (!strcmp(ev, "exit") || !strcmp(ev, "end")) {
		*kind = !strcmp(ev, "exit") ? "exit" : "end";
		F("exit", F_INT, 0); F("signal", F_INT, 0);
		if (!strcmp(*kind, "exit")) {
			F("pid", F_INT, 1); F("tid", F_INT, 1);
		} else {
			F("events", F_INT, 1);
			if (!t->excerpt && json_integer_value(json_object_get(o, "events")) != seq)
				return rd_err(t, e, "field \"events\": %lld, but the end is event %lld",
					      (long long)json_integer_value(json_object_get(o, "events")),
					      (long long)seq);
		}
		return 0;
	}
	return rd_err(t, e, "field \"ev\": unknown event \"%.40s\"", ev);
}

int trace_reader_next(struct trace_reader *t, struct trace_event *out, struct common_err *e)
{
	size_t len;
	int err;
	char *s = rd_line(t, &len, &err, e);
	uint8_t want[32], got[32];
	struct common_sha256 c;
	json_t *o;
	char *canon;
	const char *kind = "header";

	if (!s) {
		if (err)
			return -1;
		if (t->line == 0)
			return rd_err(t, e, "empty: not an sbx trace");
		return 0;
	}
	t->line++;
	if (t->complete)
		return rd_err(t, e, "data after the end event");
	if (t->events >= TRACE_EVENTS_MAX)
		return rd_err(t, e, "more than %u events", TRACE_EVENTS_MAX);
	if (len < TAIL_LEN + 2 || memcmp(s + len - TAIL_LEN, ",\"h\":\"", 6) != 0 ||
	    memcmp(s + len - 2, "\"}", 2) != 0 || !is_lower_hex(s + len - 66, 64) || s[0] != '{')
		return rd_err(t, e, t->line == 1 ? "not an sbx trace (no chained header line)"
						 : "no chain hash at the end of the line");
	{
		char hex[COMMON_SHA256_HEX];
		memcpy(hex, s + len - 66, 64);
		hex[64] = 0;
		common_unhex(hex, want, 32);
	}
	if (t->canon_cap < len + 1) {
		t->canon_cap = len + 1;
		t->canon = common_xrealloc(t->canon, t->canon_cap);
	}
	memcpy(t->canon, s, len - TAIL_LEN);
	t->canon[len - TAIL_LEN] = '}';
	t->canon[len - TAIL_LEN + 1] = 0;
	common_sha256_init(&c);
	if (t->line == 1)
		common_sha256_update(&c, domain, sizeof domain);
	else
		common_sha256_update(&c, t->h, 32);
	common_sha256_update(&c, t->canon, len - TAIL_LEN + 1);
	common_sha256_final(&c, got);
	if (memcmp(got, want, 32) != 0)
		return rd_err(t, e, t->line == 1 ? "header hash mismatch: the header was edited"
			      : "chain hash mismatch: a line was edited, removed or reordered");
	{
		char nm[300];
		snprintf(nm, sizeof nm, "%s:%llu", t->name, (unsigned long long)t->line);
		o = common_json_load(s, len, nm, e);
	}
	if (!o)
		return -1;
	if (!json_is_object(o)) {
		json_decref(o);
		return rd_err(t, e, "expected a JSON object");
	}
	json_object_del(o, "h");
	canon = common_json_canonical(o);
	if (strcmp(canon, t->canon) != 0) {
		free(canon);
		json_decref(o);
		return rd_err(t, e, "not in canonical form (sorted keys, compact)");
	}
	free(canon);
	if ((t->line == 1 ? check_header(t, o, e) : check_event(t, o, &kind, e)) < 0) {
		json_decref(o);
		return -1;
	}
	memcpy(t->h, got, 32);
	if (t->line == 1) {
		json_decref(t->header);
		t->header = json_incref(o);
	} else {
		t->events++;
	}
	if (!strcmp(kind, "end"))
		t->complete = 1;
	json_decref(t->cur);
	t->cur = o;
	out->line = t->line;
	out->ev = o;
	memcpy(out->h, got, 32);
	out->kind = kind;
	out->canon = t->canon;
	out->canon_len = len - TAIL_LEN + 1;
	return 1;
}
