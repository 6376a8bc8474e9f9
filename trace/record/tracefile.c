/* The trace reader (hostile input: bounded lines, checked types, chain and
 * canonical form verified line by line) and the commands built directly on
 * it: verify, filter, stats, diff, bisect, adjudicate. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "trace/record/record.h"

#define TAIL_LEN 72 /* ,"h":"<64 hex>"} */
static const char domain[] = "sbx/trace/v1"; /* hashed with its NUL */

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

/* An event as one text line: canonical JSON, with what JSON leaves raw (DEL,
 * C1 controls) escaped too; JSON's own backslash escapes stay as they are. */
static char *json_text(const json_t *j)
{
	char *c = common_json_canonical(j);
	char *x = common_escape(c, strlen(c), COMMON_ESC_KEEP_BACKSLASH);
	free(c);
	return x;
}

static int print_json(json_t *j)
{
	int rc = common_json_print(j, 0);
	json_decref(j);
	return rc;
}

int trace_cmd_verify(const char *path, int require_complete, const char *expect_head,
		     enum trace_fmt f, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	int r;
	char hex[COMMON_SHA256_HEX] = "";
	json_t *o;

	if (!t)
		return -1;
	while ((r = trace_reader_next(t, &ev, e)) > 0)
		common_hex(ev.h, 32, hex);
	if (r < 0) {
		trace_reader_close(t);
		return 1;
	}
	if (expect_head && strcmp(expect_head, hex) != 0) {
		common_errf(e, t->name, "head %s, expected %s (events missing at the end?)", hex,
			    expect_head);
		trace_reader_close(t);
		return 1;
	}
	o = json_pack("{s:s, s:b, s:I, s:b, s:b, s:b, s:s, s:s}", "trace", t->name, "ok", 1,
		      "events", (json_int_t)t->events, "complete", t->complete, "truncated",
		      !t->complete, "partial_line", t->partial, "head", hex, "level",
		      common_jstr(t->header, "level", ""));
	if (f == TRACE_FMT_JSON) {
		print_json(o);
	} else {
		common_escape_print(stdout, t->name);
		printf(": chain ok, %llu events, head %s, %s%s\n", (unsigned long long)t->events, hex,
		       t->complete ? "complete" : "TRUNCATED (no end event: the run was killed)",
		       t->partial ? ", unterminated last line ignored" : "");
		json_decref(o);
	}
	r = !t->complete && require_complete;
	if (r)
		common_errf(e, t->name, "trace is truncated (no end event)");
	trace_reader_close(t);
	return r;
}

struct pidset {
	long long *v;
	size_t n, cap;
};

static int pid_in(const struct pidset *s, long long p)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == p)
			return 1;
	return 0;
}

static void pid_add(struct pidset *s, long long p)
{
	if (pid_in(s, p))
		return;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = common_xrealloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = p;
}

static int class_match(const json_t *ev, const char *kind, unsigned classes)
{
	if (strcmp(kind, "sys") != 0)
		return (classes & TRACE_CLASS_PROCESS) != 0;
	const struct trace_sysinfo *si = trace_sys_by_name(common_jstr(ev, "name", ""));
	return si && (si->classes & classes);
}

static int keep(const struct trace_filter *f, struct pidset *tree, const json_t *ev,
		const char *kind)
{
	long long pid = common_jint(ev, "pid", 0);

	if (!strcmp(kind, "end"))
		return 1;
	if (f->pid_tree) {
		if (!strcmp(kind, "spawn") && pid_in(tree, pid))
			pid_add(tree, common_jint(ev, "child", 0));
		if (!pid_in(tree, pid))
			return 0;
	}
	if (f->classes && !class_match(ev, kind, f->classes))
		return 0;
	if (f->name && strcmp(f->name, !strcmp(kind, "sys") ? common_jstr(ev, "name", "") : kind) != 0)
		return 0;
	if (f->glob) {
		const char *p1 = json_string_value(json_object_get(ev, "path"));
		const char *p2 = json_string_value(json_object_get(ev, "path2"));
		if (!(p1 && !fnmatch(f->glob, p1, 0)) && !(p2 && !fnmatch(f->glob, p2, 0)))
			return 0;
	}
	return 1;
}

static void chain_line(uint8_t h[32], const char *canon, size_t len, int first, FILE *out)
{
	struct common_sha256 c;
	char hex[COMMON_SHA256_HEX];

	common_sha256_init(&c);
	if (first)
		common_sha256_update(&c, domain, sizeof domain);
	else
		common_sha256_update(&c, h, 32);
	common_sha256_update(&c, canon, len);
	common_sha256_final(&c, h);
	common_hex(h, 32, hex);
	fwrite(canon, 1, len - 1, out);
	fprintf(out, ",\"h\":\"%s\"}\n", hex);
}

int trace_cmd_filter(const char *path, const struct trace_filter *f, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	struct pidset tree = {0};
	uint8_t h[32];
	int r;

	if (!t)
		return -1;
	if (f->pid_tree)
		pid_add(&tree, f->pid_tree);
	while ((r = trace_reader_next(t, &ev, e)) > 0) {
		if (ev.line == 1) {
			char hex[COMMON_SHA256_HEX], *canon;
			json_t *hd = json_deep_copy(ev.ev), *x = json_object();
			common_hex(ev.h, 32, hex);
			json_object_set_new(x, "of", json_string(hex));
			if (f->pid_tree)
				json_object_set_new(x, "pid_tree", json_integer(f->pid_tree));
			if (f->glob)
				json_object_set_new(x, "glob", json_string(f->glob));
			if (f->name)
				json_object_set_new(x, "name", json_string(f->name));
			if (f->classes)
				json_object_set_new(x, "classes", json_integer(f->classes));
			json_object_set_new(hd, "excerpt", x);
			canon = common_json_canonical(hd);
			chain_line(h, canon, strlen(canon), 1, stdout);
			free(canon);
			json_decref(hd);
			continue;
		}
		if (keep(f, &tree, ev.ev, ev.kind))
			chain_line(h, ev.canon, ev.canon_len, 0, stdout);
	}
	free(tree.v);
	fflush(stdout);
	trace_reader_close(t);
	return r < 0 ? -1 : 0;
}

struct scount {
	char name[32];
	long long count, errors, time_us, timed;
};

struct pcount {
	long long pid, ppid, syscalls, errors, time_us;
	char exe[256];
	int exited, status, signaled;
};

/* The process pid's counts, a new entry if it has none (bounded work on hostile input). */
static struct pcount *pcount_get(struct pcount **pc, size_t *npc, long long pid)
{
	for (size_t i = *npc; i-- > 0;)
		if ((*pc)[i].pid == pid)
			return &(*pc)[i];
	if (*npc >= 16384)
		return &(*pc)[*npc - 1];
	*pc = common_xrealloc(*pc, (*npc + 1) * sizeof **pc);
	struct pcount *p = &(*pc)[(*npc)++];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	return p;
}

int trace_cmd_stats(const char *path, enum trace_fmt f, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	struct scount *sc = NULL;
	struct pcount *pc = NULL;
	size_t nsc = 0, npc = 0;
	long long last_t = 0, execs = 0, spawns = 0;
	int r;

	if (!t)
		return -1;
	while ((r = trace_reader_next(t, &ev, e)) > 0) {
		json_t *o = ev.ev;
		long long pid = common_jint(o, "pid", 0);
		struct pcount *p;
		if (json_object_get(o, "t"))
			last_t = common_jint(o, "t", 0);
		if (ev.line == 1 || !strcmp(ev.kind, "end"))
			continue;
		p = pcount_get(&pc, &npc, pid);
		if (!p->ppid)
			p->ppid = common_jint(o, "ppid", 0);
		if (!strcmp(ev.kind, "exec")) {
			execs++;
			snprintf(p->exe, sizeof p->exe, "%s", common_jstr(o, "path", ""));
		} else if (!strcmp(ev.kind, "spawn")) {
			spawns++;
			/* the child's parent is named here, whether or not it makes a call */
			if (strcmp(common_jstr(o, "kind", ""), "thread") != 0) {
				struct pcount *c = pcount_get(&pc, &npc, common_jint(o, "child", 0));
				if (!c->ppid)
					c->ppid = pid;
			}
		} else if (!strcmp(ev.kind, "exit")) {
			if (common_jint(o, "tid", 0) == pid) {
				p->exited = 1;
				p->signaled = json_object_get(o, "signal") != NULL;
				p->status = (int)(p->signaled ? common_jint(o, "signal", 0) : common_jint(o, "exit", 0));
			}
		} else {
			struct scount *s = NULL;
			const char *nm = common_jstr(o, "name", "");
			int err = json_object_get(o, "errno") != NULL;
			for (size_t i = 0; i < nsc; i++)
				if (!strcmp(sc[i].name, nm))
					s = &sc[i];
			if (!s && nsc >= 1024) /* a hostile trace's invented names */
				s = &sc[nsc - 1];
			if (!s) {
				sc = common_xrealloc(sc, (nsc + 1) * sizeof *sc);
				s = &sc[nsc++];
				memset(s, 0, sizeof *s);
				snprintf(s->name, sizeof s->name, "%s", nm);
			}
			s->count++;
			s->errors += err;
			p->syscalls++;
			p->errors += err;
			if (json_object_get(o, "dt")) {
				s->time_us += common_jint(o, "dt", 0);
				s->timed++;
				p->time_us += common_jint(o, "dt", 0);
			}
		}
	}
	if (r == 0) {
		json_t *js = json_object(), *jp = json_array(), *o;
		for (size_t i = 0; i < nsc; i++)
			json_object_set_new(js, sc[i].name,
					    json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)sc[i].count,
						      "errors", (json_int_t)sc[i].errors, "time_us",
						      (json_int_t)sc[i].time_us, "timed", (json_int_t)sc[i].timed));
		for (size_t i = 0; i < npc; i++) {
			json_t *p = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I}", "pid", (json_int_t)pc[i].pid,
					      "ppid", (json_int_t)pc[i].ppid, "exe", pc[i].exe,
					      "syscalls", (json_int_t)pc[i].syscalls, "errors",
					      (json_int_t)pc[i].errors, "time_us", (json_int_t)pc[i].time_us);
			if (pc[i].exited)
				json_object_set_new(p, pc[i].signaled ? "signal" : "exit",
						    json_integer(pc[i].status));
			json_array_append_new(jp, p);
		}
		o = json_pack("{s:I, s:b, s:I, s:I, s:I, s:o, s:o}", "events", (json_int_t)t->events,
			      "complete", t->complete, "duration_us", (json_int_t)last_t, "execs",
			      (json_int_t)execs, "spawns", (json_int_t)spawns, "syscalls", js,
			      "processes", jp);
		if (f == TRACE_FMT_JSON) {
			print_json(o);
		} else {
			printf("%llu events%s, %lld execs, %lld spawns, %.3f s\n",
			       (unsigned long long)t->events, t->complete ? "" : " (TRUNCATED)", execs,
			       spawns, (double)last_t / 1e6);
			printf("%-20s %10s %10s %12s\n", "syscall", "count", "errors", "time_us");
			for (size_t i = 0; i < nsc; i++) {
				char *nm = common_escape(sc[i].name, strlen(sc[i].name), 0);
				printf("%-20s %10lld %10lld %12lld\n", nm, sc[i].count, sc[i].errors,
				       sc[i].time_us);
				free(nm);
			}
			printf("%-8s %-8s %10s %10s  %s\n", "pid", "ppid", "syscalls", "errors", "exe");
			for (size_t i = 0; i < npc; i++) {
				printf("%-8lld %-8lld %10lld %10lld  ", pc[i].pid, pc[i].ppid,
				       pc[i].syscalls, pc[i].errors);
				common_escape_print(stdout, pc[i].exe);
				putchar('\n');
			}
			json_decref(o);
		}
	}
	free(sc);
	free(pc);
	trace_reader_close(t);
	return r < 0 ? -1 : 0;
}

/* Commands that read a trace more than once copy "-" to a memory file first. */
#define SPOOL_MAX (1ull << 30)
struct spool {
	int fd;
	char path[64];
};

static const char *spool_open(const char *path, struct spool *sp, struct common_err *e)
{
	char *buf = common_xmalloc(1 << 16);
	uint64_t total = 0;

	sp->fd = -1;
	if (strcmp(path, "-") != 0) {
		free(buf);
		return path;
	}
	sp->fd = memfd_create("sbx-trace-stdin", MFD_CLOEXEC);
	if (sp->fd < 0) {
		free(buf);
		common_errno(e, errno, "<stdin>: memfd_create");
		return NULL;
	}
	for (;;) {
		ssize_t n = read(0, buf, 1 << 16);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (total += (uint64_t)(n > 0 ? n : 0)) > SPOOL_MAX ||
		    (n > 0 && common_write_all(sp->fd, buf, (size_t)n) < 0)) {
			if (n < 0)
				common_errno(e, errno, "<stdin>");
			else
				common_errf(e, "<stdin>", "larger than %llu bytes",
					    (unsigned long long)SPOOL_MAX);
			free(buf);
			close(sp->fd);
			sp->fd = -1;
			return NULL;
		}
		if (n == 0)
			break;
	}
	free(buf);
	snprintf(sp->path, sizeof sp->path, "/proc/self/fd/%d", sp->fd);
	return sp->path;
}

static void spool_close(struct spool *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	sp->fd = -1;
}

/* Two runs of one build interleave their processes differently and get other
 * host pids, so diff compares per process: a process is named by its place
 * in the tree ("r1" the first root, "r1.3" its third child, in the parent's
 * own spawn order), and each process's events are compared in order. */
struct pkey {
	long long pid;
	char key[120];
	int nchild;
	size_t sidx;        /* its stream in pt_digest, index + 1 */
};

struct ptree {
	struct pkey *v;
	size_t n, cap;
	int nroots;
	size_t *ix, icap;   /* open addressing: pid -> index + 1 (a hostile trace has many pids) */
};

static size_t pt_slot(const struct ptree *t, long long pid)
{
	size_t i = ((size_t)pid * 2654435761u) & (t->icap - 1);

	while (t->ix[i] && t->v[t->ix[i] - 1].pid != pid)
		i = (i + 1) & (t->icap - 1);
	return i;
}

static struct pkey *pt_find(struct ptree *t, long long pid)
{
	if (!t->icap)
		return NULL;
	size_t i = pt_slot(t, pid);
	return t->ix[i] ? &t->v[t->ix[i] - 1] : NULL;
}

static struct pkey *pt_add(struct ptree *t, long long pid)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->v = common_xrealloc(t->v, t->cap * sizeof *t->v);
	}
	if (2 * (t->n + 1) > t->icap) { /* rehash at half full */
		size_t old = t->icap, *oix = t->ix;
		t->icap = old ? 2 * old : 128;
		t->ix = common_xcalloc(t->icap, sizeof *t->ix);
		for (size_t k = 0; k < old; k++)
			if (oix[k])
				t->ix[pt_slot(t, t->v[oix[k] - 1].pid)] = oix[k];
		free(oix);
	}
	memset(&t->v[t->n], 0, sizeof t->v[0]);
	t->v[t->n].pid = pid;
	t->ix[pt_slot(t, pid)] = t->n + 1; /* a reused pid now names the newer process */
	return &t->v[t->n++];
}

/* Pass 1: names for every pid from the spawn events. */
static int pt_build(const char *path, struct ptree *t, struct common_err *e)
{
	struct trace_reader *r = trace_reader_open(path, e);
	struct trace_event ev;
	int rc;

	if (!r)
		return -1;
	while ((rc = trace_reader_next(r, &ev, e)) > 0) {
		if (strcmp(ev.kind, "spawn") != 0 && strcmp(ev.kind, "exec") != 0 &&
		    strcmp(ev.kind, "sys") != 0)
			continue;
		long long pid = common_jint(ev.ev, "pid", 0);
		struct pkey *p = pt_find(t, pid);
		if (!p) {
			p = pt_add(t, pid);
			snprintf(p->key, sizeof p->key, "r%d", ++t->nroots);
		}
		if (!strcmp(ev.kind, "spawn")) {
			long long child = common_jint(ev.ev, "child", 0);
			int idx = ++p->nchild;
			char key[120];
			snprintf(key, sizeof key, "%.100s.%d", p->key, idx);
			struct pkey *c = pt_find(t, child);
			if (!c)
				c = pt_add(t, child);
			snprintf(c->key, sizeof c->key, "%s", key);
		}
	}
	trace_reader_close(r);
	return rc;
}

static const char *pt_key(struct ptree *t, long long pid)
{
	struct pkey *p = pt_find(t, pid);
	return p ? p->key : "?";
}

/* An event with run-specific values removed: time, hash, host pids (as tree
 * names), and pointer arguments (addresses move between runs). */
static json_t *normalize(const json_t *ev, struct ptree *t)
{
	json_t *o = json_deep_copy(ev), *args;
	static const char *const pidkeys[] = {"pid", "tid", "ppid", "child", NULL};

	json_object_del(o, "h");
	json_object_del(o, "t");
	json_object_del(o, "dt");
	json_object_del(o, "seq");
	for (int i = 0; pidkeys[i]; i++)
		if (json_object_get(o, pidkeys[i]))
			json_object_set_new(o, pidkeys[i], json_string(pt_key(t, common_jint(o, pidkeys[i], 0))));
	args = json_object_get(o, "args");
	if (args) {
		const struct trace_sysinfo *si = trace_sys_by_name(common_jstr(o, "name", ""));
		size_t i;
		json_t *v;
		json_array_foreach(args, i, v) {
			int k = si && i < 6 ? si->arg[i] : TRACE_ARG_PTR;
			if (k == TRACE_ARG_PTR || k == TRACE_ARG_PATH)
				json_array_set_new(args, i, json_null());
		}
	}
	return o;
}

/* The stream an event belongs to: its process, or "run" for the end. */
static const char *stream_of(struct ptree *t, const struct trace_event *ev)
{
	if (!strcmp(ev->kind, "end") || !strcmp(ev->kind, "header"))
		return "run";
	return pt_key(t, common_jint(ev->ev, "pid", 0));
}

struct pstream {
	char key[120];
	long long n;
	struct common_sha256 c;
	uint8_t h[32];
};

/* Pass 2: per process, the count and digest of its normalized events. */
static int pt_digest(const char *path, struct ptree *t, json_t *streams, struct common_err *e)
{
	struct trace_reader *r = trace_reader_open(path, e);
	struct trace_event ev;
	struct pstream *ps = NULL;
	size_t n = 0, cap = 0;
	int rc;

	if (!r)
		return -1;
	while ((rc = trace_reader_next(r, &ev, e)) > 0) {
		if (ev.line == 1)
			continue;
		const char *k = stream_of(t, &ev);
		struct pkey *pk = strcmp(k, "run") && strcmp(k, "?") ? pt_find(t, common_jint(ev.ev, "pid", 0))
								 : NULL;
		struct pstream *p = NULL;
		if (pk && pk->sidx)
			p = &ps[pk->sidx - 1];
		for (size_t i = 0; !pk && !p && i < n; i++) /* "run" and "?" only */
			if (!strcmp(ps[i].key, k))
				p = &ps[i];
		if (!p) {
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				ps = common_xrealloc(ps, cap * sizeof *ps);
			}
			p = &ps[n++];
			memset(p, 0, sizeof *p);
			snprintf(p->key, sizeof p->key, "%s", k);
			common_sha256_init(&p->c);
			if (pk)
				pk->sidx = n;
		}
		json_t *o = normalize(ev.ev, t);
		char *c = common_json_canonical(o);
		common_sha256_update(&p->c, c, strlen(c) + 1);
		free(c);
		json_decref(o);
		p->n++;
	}
	for (size_t i = 0; i < n; i++) {
		char hex[COMMON_SHA256_HEX];
		common_sha256_final(&ps[i].c, ps[i].h);
		common_hex(ps[i].h, 32, hex);
		json_object_set_new(streams, ps[i].key, json_pack("{s:I, s:s}", "events",
								 (json_int_t)ps[i].n, "digest", hex));
	}
	free(ps);
	trace_reader_close(r);
	return rc;
}

/* Pass 3: the normalized events of one process. */
static json_t *pt_events(const char *path, struct ptree *t, const char *key, struct common_err *e)
{
	struct trace_reader *r = trace_reader_open(path, e);
	struct trace_event ev;
	json_t *a = json_array();

	if (!r)
		return a;
	while (trace_reader_next(r, &ev, e) > 0)
		if (ev.line > 1 && !strcmp(stream_of(t, &ev), key))
			json_array_append_new(a, normalize(ev.ev, t));
	trace_reader_close(r);
	return a;
}

static void set_diff(json_t *out, const char *key, json_t *a, json_t *b, const char *what)
{
	json_t *oa = json_array(), *ob = json_array(), *chg = json_array();
	size_t i, j;
	json_t *x, *y;

	json_array_foreach(a, i, x) {
		int found = 0;
		json_array_foreach(b, j, y) {
			if (!strcmp(common_jstr(x, "path", ""), common_jstr(y, "path", ""))) {
				found = 1;
				if (!json_equal(json_object_get(x, what), json_object_get(y, what)))
					json_array_append_new(chg, json_string(common_jstr(x, "path", "")));
			}
		}
		if (!found)
			json_array_append_new(oa, json_string(common_jstr(x, "path", "")));
	}
	json_array_foreach(b, j, y) {
		int found = 0;
		json_array_foreach(a, i, x)
			if (!strcmp(common_jstr(x, "path", ""), common_jstr(y, "path", "")))
				found = 1;
		if (!found)
			json_array_append_new(ob, json_string(common_jstr(y, "path", "")));
	}
	json_object_set_new(out, key, json_pack("{s:o, s:o, s:o}", "only_a", oa, "only_b", ob,
						"changed", chg));
}

/* Header fields that bind what ran (not when, nor under which lease). */
static json_t *header_core(const char *path, struct common_err *e)
{
	struct trace_reader *r = trace_reader_open(path, e);
	struct trace_event ev;
	json_t *h = NULL;
	static const char *const drop[] = {"start_ms", "lease", "start_batch", "h", NULL};

	if (!r)
		return NULL;
	if (trace_reader_next(r, &ev, e) > 0) {
		h = json_deep_copy(ev.ev);
		for (int i = 0; drop[i]; i++)
			json_object_del(h, drop[i]);
	}
	trace_reader_close(r);
	return h;
}

static int diff_paths(const char *a, const char *b, enum trace_fmt f, struct common_err *e);

int trace_cmd_diff(const char *a, const char *b, enum trace_fmt f, struct common_err *e)
{
	struct spool sa, sb;
	const char *pa, *pb;
	int rc = -1;

	if (!strcmp(a, "-") && !strcmp(b, "-"))
		return common_errf(e, "diff", "only one of the traces can be standard input");
	pa = spool_open(a, &sa, e);
	pb = pa ? spool_open(b, &sb, e) : NULL;
	if (pa && pb)
		rc = diff_paths(pa, pb, f, e);
	if (pa)
		spool_close(&sa);
	if (pb)
		spool_close(&sb);
	return rc;
}

static int diff_paths(const char *a, const char *b, enum trace_fmt f, struct common_err *e)
{
	struct ptree ta = {0}, tb = {0};
	json_t *sa = json_object(), *sb = json_object(), *first = NULL, *out, *ba = NULL, *bb = NULL,
	       *files = json_object(), *ha = NULL, *hb = NULL, *only_a = json_array(),
	       *only_b = json_array();
	const char *k;
	json_t *v;
	int rc = -1;
	long long differing = 0;

	if (pt_build(a, &ta, e) < 0 || pt_build(b, &tb, e) < 0 || pt_digest(a, &ta, sa, e) < 0 ||
	    pt_digest(b, &tb, sb, e) < 0)
		goto done;
	ha = header_core(a, e);
	hb = header_core(b, e);
	if (!ha || !hb)
		goto done;
	if (!json_equal(ha, hb))
		first = json_pack("{s:s, s:I, s:O, s:O}", "process", "header", "index", (json_int_t)0,
				  "a", ha, "b", hb);
	json_object_foreach(sa, k, v) {
		json_t *w = json_object_get(sb, k);
		if (!w) {
			json_array_append_new(only_a, json_string(k));
			differing++;
		} else if (!json_equal(v, w)) {
			differing++;
		}
	}
	json_object_foreach(sb, k, v)
		if (!json_object_get(sa, k)) {
			json_array_append_new(only_b, json_string(k));
			differing++;
		}
	if (!first && differing) {
		/* the first differing process in tree order, then its first differing event */
		const char *fk = NULL;
		json_object_foreach(sa, k, v)
			if (!json_equal(v, json_object_get(sb, k)) && (!fk || strcmp(k, fk) < 0))
				fk = k;
		json_object_foreach(sb, k, v)
			if (!json_object_get(sa, k) && (!fk || strcmp(k, fk) < 0))
				fk = k;
		json_t *ea = pt_events(a, &ta, fk, e), *eb = pt_events(b, &tb, fk, e);
		size_t i = 0;
		while (i < json_array_size(ea) && i < json_array_size(eb) &&
		       json_equal(json_array_get(ea, i), json_array_get(eb, i)))
			i++;
		json_t *xa = json_array_get(ea, i), *xb = json_array_get(eb, i);
		first = json_pack("{s:s, s:I, s:O, s:O}", "process", fk, "index", (json_int_t)i, "a",
				  xa ? xa : json_null(), "b", xb ? xb : json_null());
		json_decref(ea);
		json_decref(eb);
	}
	ba = trace_buildrec(a, 1, e);
	bb = ba ? trace_buildrec(b, 1, e) : NULL;
	if (!bb)
		goto done;
	set_diff(files, "inputs", json_object_get(ba, "inputs"), json_object_get(bb, "inputs"), "sha256");
	set_diff(files, "outputs", json_object_get(ba, "outputs"), json_object_get(bb, "outputs"), "how");
	set_diff(files, "probes", json_object_get(ba, "probes"), json_object_get(bb, "probes"), "errno");
	set_diff(files, "tools", json_object_get(ba, "tools"), json_object_get(bb, "tools"), "sha256");
	rc = first ? 1 : 0;
	out = json_pack("{s:b, s:O, s:{s:O, s:O, s:I}, s:O}", "identical", !first,
			"first_difference", first ? first : json_null(), "processes", "only_a", only_a,
			"only_b", only_b, "differing", (json_int_t)differing, "files", files);
	if (f == TRACE_FMT_JSON) {
		print_json(out);
	} else {
		if (!first) {
			printf("traces are identical (per process; ignoring times, host pids, addresses "
			       "and the interleaving of processes)\n");
		} else {
			char *xa = json_text(json_object_get(first, "a"));
			char *xb = json_text(json_object_get(first, "b"));
			const char *proc = common_jstr(first, "process", "");
			char *pr = common_escape(proc, strlen(proc), 0);
			printf("first difference: %s, event %lld (%lld processes differ):\n< %s\n> %s\n",
			       pr, common_jint(first, "index", 0), differing, xa, xb);
			free(pr);
			free(xa);
			free(xb);
		}
		const char *sect[] = {"inputs", "outputs", "probes", "tools", NULL};
		for (int i = 0; sect[i]; i++) {
			json_t *s2 = json_object_get(files, sect[i]), *x;
			size_t j;
			const char *kind[] = {"only_a", "only_b", "changed"};
			const char *say[] = {"only in A", "only in B", "changed"};
			for (int k = 0; k < 3; k++)
				json_array_foreach(json_object_get(s2, kind[k]), j, x) {
					printf("%s %s: ", sect[i], say[k]);
					common_escape_print(stdout, json_string_value(x));
					putchar('\n');
				}
		}
		json_decref(out);
	}
done:
	json_decref(first);
	json_decref(files);
	json_decref(ba);
	json_decref(bb);
	json_decref(ha);
	json_decref(hb);
	json_decref(sa);
	json_decref(sb);
	json_decref(only_a);
	json_decref(only_b);
	free(ta.v);
	free(tb.v);
	free(ta.ix);
	free(tb.ix);
	return rc;
}

struct hlist {
	uint8_t (*h)[32];
	size_t n, cap;
};

static int load_hashes(const char *path, struct hlist *l, json_t **hdr, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	int r;

	if (!t)
		return -1;
	while ((r = trace_reader_next(t, &ev, e)) > 0) {
		if (l->n == l->cap) {
			l->cap = l->cap ? 2 * l->cap : 1024;
			l->h = common_xrealloc(l->h, l->cap * 32);
		}
		memcpy(l->h[l->n++], ev.h, 32);
	}
	if (hdr)
		*hdr = json_incref((json_t *)trace_reader_header(t));
	trace_reader_close(t);
	return r;
}

static json_t *event_at(const char *path, size_t idx, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	json_t *o = NULL;
	int r;

	if (!t)
		return NULL;
	while ((r = trace_reader_next(t, &ev, e)) > 0)
		if (ev.line - 1 == idx) {
			o = json_incref(ev.ev);
			break;
		}
	trace_reader_close(t);
	return o ? o : json_null();
}

static int bisect_paths(const char *a, const char *b, enum trace_fmt f, struct common_err *e);

int trace_cmd_bisect(const char *a, const char *b, enum trace_fmt f, struct common_err *e)
{
	struct spool sa, sb;
	const char *pa, *pb;
	int rc = -1;

	if (!strcmp(a, "-") && !strcmp(b, "-"))
		return common_errf(e, "bisect", "only one of the traces can be standard input");
	pa = spool_open(a, &sa, e);
	pb = pa ? spool_open(b, &sb, e) : NULL;
	if (pa && pb)
		rc = bisect_paths(pa, pb, f, e);
	if (pa)
		spool_close(&sa);
	if (pb)
		spool_close(&sb);
	return rc;
}

static int bisect_paths(const char *a, const char *b, enum trace_fmt f, struct common_err *e)
{
	struct hlist la = {0}, lb = {0};
	size_t lo = 0, hi, cmp = 0;
	int rc = -1;
	json_t *o;

	if (load_hashes(a, &la, NULL, e) < 0 || load_hashes(b, &lb, NULL, e) < 0)
		goto done;
	/* chained hashes agree on a prefix and differ after it: binary search for
	 * the first index where they differ (index 0 is the header) */
	hi = la.n < lb.n ? la.n : lb.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		cmp++;
		if (!memcmp(la.h[mid], lb.h[mid], 32))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == la.n && lo == lb.n) {
		o = json_pack("{s:b, s:I, s:I}", "identical", 1, "events", (json_int_t)(la.n - 1),
			      "comparisons", (json_int_t)cmp);
		rc = 0;
	} else {
		json_t *ea = lo < la.n ? event_at(a, lo, e) : json_null();
		json_t *eb = lo < lb.n ? event_at(b, lo, e) : json_null();
		o = json_pack("{s:b, s:I, s:I, s:I, s:o, s:o}", "identical", 0, "agreed_events",
			      (json_int_t)(lo ? lo - 1 : 0), "first_divergent_line", (json_int_t)(lo + 1),
			      "comparisons", (json_int_t)cmp, "a", ea, "b", eb);
		if (lo == 0)
			json_object_set_new(o, "headers_differ", json_true());
		rc = 1;
	}
	if (f == TRACE_FMT_JSON) {
		print_json(o);
	} else {
		if (rc == 0) {
			printf("identical: %lld events, %zu comparisons\n", (long long)la.n - 1, cmp);
		} else {
			char *sa = json_text(json_object_get(o, "a"));
			char *sb = json_text(json_object_get(o, "b"));
			printf("first divergent line %zu (%s) after %zu comparisons:\n< %s\n> %s\n", lo + 1,
			       lo == 0 ? "the headers differ" : "events before it agree", cmp, sa, sb);
			free(sa);
			free(sb);
		}
		json_decref(o);
	}
done:
	free(la.h);
	free(lb.h);
	return rc;
}

int trace_class_parse(const char *list, unsigned *out, struct common_err *e)
{
	char *copy = common_xstrdup(list), *save = NULL, *tok;
	unsigned c = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned bit = trace_class_by_name(tok);
		if (!bit) {
			common_errf(e, "--class", "unknown class \"%s\" (" TRACE_CLASS_NAMES ")", tok);
			free(copy);
			return -1;
		}
		c |= bit;
	}
	free(copy);
	if (!c)
		return common_errf(e, "--class", "empty class list");
	*out = c;
	return 0;
}
