/* The one-pass sbx-trace commands: verify, filter (an excerpt with its own
 * chain) and stats. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/record/cmd/cmd-internal.h"
#include "trace/sys/sys.h"
#include "trace/record/record.h"

static const char domain[] = TRACE_DOMAIN;

char *trace_json_text(const json_t *j)
{
	char *c = common_json_canonical(j);
	char *x = common_escape(c, strlen(c), COMMON_ESC_KEEP_BACKSLASH);
	free(c);
	return x;
}

int trace_json_print(json_t *j)
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
	int r, complete, partial;
	char hex[COMMON_SHA256_HEX] = "";
	const char *name;
	unsigned long long events;
	json_t *o;

	if (!t)
		return -1;
	while ((r = trace_reader_next(t, &ev, e)) > 0)
		common_hex(ev.h, 32, hex);
	if (r < 0) {
		trace_reader_close(t);
		return 1;
	}
	name = trace_reader_name(t);
	if (expect_head && strcmp(expect_head, hex) != 0) {
		common_errf(e, name, "head %s, expected %s (events missing at the end?)", hex,
			    expect_head);
		trace_reader_close(t);
		return 1;
	}
	events = trace_reader_events(t);
	complete = trace_reader_complete(t);
	partial = trace_reader_partial(t);
	o = json_pack("{s:s, s:b, s:I, s:b, s:b, s:b, s:s, s:s}", "trace", name, "ok", 1,
		      "events", (json_int_t)events, "complete", complete, "truncated",
		      !complete, "partial_line", partial, "head", hex, "level",
		      common_jstr(trace_reader_header(t), "level", ""));
	if (f == TRACE_FMT_JSON) {
		trace_json_print(o);
	} else {
		common_escape_print(stdout, name);
		printf(": chain ok, %llu events, head %s, %s%s\n", events, hex,
		       complete ? "complete" : "TRUNCATED (no end event: the run was killed)",
		       partial ? ", unterminated last line ignored" : "");
		json_decref(o);
	}
	r = !complete && require_complete;
	if (r)
		common_errf(e, name, "trace is truncated (no end event)");
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

struct stats {
	struct scount *sc;
	struct pcount *pc;
	size_t nsc, npc;
	long long last_t, execs, spawns;
};

/* The process pid's counts, a new entry if it has none (bounded work on hostile input). */
static struct pcount *pcount_get(struct stats *st, long long pid)
{
	for (size_t i = st->npc; i-- > 0;)
		if (st->pc[i].pid == pid)
			return &st->pc[i];
	if (st->npc >= 16384)
		return &st->pc[st->npc - 1];
	st->pc = common_xrealloc(st->pc, (st->npc + 1) * sizeof *st->pc);
	struct pcount *p = &st->pc[st->npc++];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	return p;
}

/* The syscall name's counts, a new entry if it has none. */
static struct scount *scount_get(struct stats *st, const char *nm)
{
	struct scount *s = NULL;

	for (size_t i = 0; i < st->nsc; i++)
		if (!strcmp(st->sc[i].name, nm))
			s = &st->sc[i];
	if (!s && st->nsc >= 1024) /* a hostile trace's invented names */
		s = &st->sc[st->nsc - 1];
	if (!s) {
		st->sc = common_xrealloc(st->sc, (st->nsc + 1) * sizeof *st->sc);
		s = &st->sc[st->nsc++];
		memset(s, 0, sizeof *s);
		snprintf(s->name, sizeof s->name, "%s", nm);
	}
	return s;
}

static void stats_sys(struct stats *st, struct pcount *p, const json_t *o)
{
	struct scount *s = scount_get(st, common_jstr(o, "name", ""));
	int err = json_object_get(o, "errno") != NULL;

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

static void stats_event(struct stats *st, const struct trace_event *ev)
{
	json_t *o = ev->ev;
	long long pid = common_jint(o, "pid", 0);
	struct pcount *p;

	if (json_object_get(o, "t"))
		st->last_t = common_jint(o, "t", 0);
	if (ev->line == 1 || !strcmp(ev->kind, "end"))
		return;
	p = pcount_get(st, pid);
	if (!p->ppid)
		p->ppid = common_jint(o, "ppid", 0);
	if (!strcmp(ev->kind, "exec")) {
		st->execs++;
		snprintf(p->exe, sizeof p->exe, "%s", common_jstr(o, "path", ""));
	} else if (!strcmp(ev->kind, "spawn")) {
		st->spawns++;
		/* the child's parent is named here, whether or not it makes a call */
		if (strcmp(common_jstr(o, "kind", ""), "thread") != 0) {
			struct pcount *c = pcount_get(st, common_jint(o, "child", 0));
			if (!c->ppid)
				c->ppid = pid;
		}
	} else if (!strcmp(ev->kind, "exit")) {
		if (common_jint(o, "tid", 0) == pid) {
			p->exited = 1;
			p->signaled = json_object_get(o, "signal") != NULL;
			p->status = (int)(p->signaled ? common_jint(o, "signal", 0) : common_jint(o, "exit", 0));
		}
	} else {
		stats_sys(st, p, o);
	}
}

static json_t *stats_json(const struct stats *st, const struct trace_reader *t)
{
	json_t *js = json_object(), *jp = json_array();

	for (size_t i = 0; i < st->nsc; i++) {
		const struct scount *s = &st->sc[i];
		json_object_set_new(js, s->name,
				    json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)s->count,
					      "errors", (json_int_t)s->errors, "time_us",
					      (json_int_t)s->time_us, "timed", (json_int_t)s->timed));
	}
	for (size_t i = 0; i < st->npc; i++) {
		const struct pcount *c = &st->pc[i];
		json_t *p = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I}", "pid", (json_int_t)c->pid,
				      "ppid", (json_int_t)c->ppid, "exe", c->exe,
				      "syscalls", (json_int_t)c->syscalls, "errors",
				      (json_int_t)c->errors, "time_us", (json_int_t)c->time_us);
		if (c->exited)
			json_object_set_new(p, c->signaled ? "signal" : "exit", json_integer(c->status));
		json_array_append_new(jp, p);
	}
	return json_pack("{s:I, s:b, s:I, s:I, s:I, s:o, s:o}", "events",
			 (json_int_t)trace_reader_events(t), "complete", trace_reader_complete(t),
			 "duration_us", (json_int_t)st->last_t, "execs", (json_int_t)st->execs,
			 "spawns", (json_int_t)st->spawns, "syscalls", js, "processes", jp);
}

static void stats_print_text(const struct stats *st, const struct trace_reader *t)
{
	printf("%llu events%s, %lld execs, %lld spawns, %.3f s\n",
	       (unsigned long long)trace_reader_events(t),
	       trace_reader_complete(t) ? "" : " (TRUNCATED)", st->execs, st->spawns,
	       (double)st->last_t / 1e6);
	printf("%-20s %10s %10s %12s\n", "syscall", "count", "errors", "time_us");
	for (size_t i = 0; i < st->nsc; i++) {
		const struct scount *s = &st->sc[i];
		char *nm = common_escape(s->name, strlen(s->name), 0);
		printf("%-20s %10lld %10lld %12lld\n", nm, s->count, s->errors, s->time_us);
		free(nm);
	}
	printf("%-8s %-8s %10s %10s  %s\n", "pid", "ppid", "syscalls", "errors", "exe");
	for (size_t i = 0; i < st->npc; i++) {
		const struct pcount *c = &st->pc[i];
		printf("%-8lld %-8lld %10lld %10lld  ", c->pid, c->ppid, c->syscalls, c->errors);
		common_escape_print(stdout, c->exe);
		putchar('\n');
	}
}

int trace_cmd_stats(const char *path, enum trace_fmt f, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	struct stats st = {0};
	int r;

	if (!t)
		return -1;
	while ((r = trace_reader_next(t, &ev, e)) > 0)
		stats_event(&st, &ev);
	if (r == 0 && f == TRACE_FMT_JSON)
		trace_json_print(stats_json(&st, t));
	else if (r == 0)
		stats_print_text(&st, t);
	free(st.sc);
	free(st.pc);
	trace_reader_close(t);
	return r < 0 ? -1 : 0;
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
