/* The sbx-trace commands that compare two traces: diff (by process tree,
 * build record and header) and bisect (the first diverging event). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "trace/record/cmd/cmd-internal.h"
#include "trace/sys/sys.h"

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

typedef int compare_fn(const char *a, const char *b, enum trace_fmt f, struct common_err *e);

/* cmp over traces a and b, of which one at most may be "-" (spooled first). */
static int compare_spooled(const char *what, compare_fn *cmp, const char *a, const char *b,
			   enum trace_fmt f, struct common_err *e)
{
	struct spool sa, sb;
	const char *pa, *pb;
	int rc = -1;

	if (!strcmp(a, "-") && !strcmp(b, "-"))
		return common_errf(e, what, "only one of the traces can be standard input");
	pa = spool_open(a, &sa, e);
	pb = pa ? spool_open(b, &sb, e) : NULL;
	if (pa && pb)
		rc = cmp(pa, pb, f, e);
	if (pa)
		spool_close(&sa);
	if (pb)
		spool_close(&sb);
	return rc;
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
	return compare_spooled("diff", diff_paths, a, b, f, e);
}

/* Process streams in one trace and not the other go to only_a and only_b;
 * returns how many processes differ, those included. */
static long long diff_processes(json_t *sa, json_t *sb, json_t *only_a, json_t *only_b)
{
	const char *k;
	json_t *v;
	long long differing = 0;

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
	return differing;
}

/* The first differing process in tree order, then its first differing event. */
static json_t *first_event_difference(const char *a, const char *b, struct ptree *ta,
				      struct ptree *tb, json_t *sa, json_t *sb,
				      struct common_err *e)
{
	const char *k, *fk = NULL;
	json_t *v;
	size_t i = 0;

	json_object_foreach(sa, k, v)
		if (!json_equal(v, json_object_get(sb, k)) && (!fk || strcmp(k, fk) < 0))
			fk = k;
	json_object_foreach(sb, k, v)
		if (!json_object_get(sa, k) && (!fk || strcmp(k, fk) < 0))
			fk = k;
	json_t *ea = pt_events(a, ta, fk, e), *eb = pt_events(b, tb, fk, e);
	while (i < json_array_size(ea) && i < json_array_size(eb) &&
	       json_equal(json_array_get(ea, i), json_array_get(eb, i)))
		i++;
	json_t *xa = json_array_get(ea, i), *xb = json_array_get(eb, i);
	json_t *first = json_pack("{s:s, s:I, s:O, s:O}", "process", fk, "index", (json_int_t)i,
				  "a", xa ? xa : json_null(), "b", xb ? xb : json_null());
	json_decref(ea);
	json_decref(eb);
	return first;
}

/* The build records' inputs, outputs, probes and tools compared into files. */
static int diff_files(const char *a, const char *b, json_t *files, struct common_err *e)
{
	json_t *ba = trace_buildrec(a, 1, e);
	json_t *bb = ba ? trace_buildrec(b, 1, e) : NULL;

	if (!bb) {
		json_decref(ba);
		return -1;
	}
	set_diff(files, "inputs", json_object_get(ba, "inputs"), json_object_get(bb, "inputs"), "sha256");
	set_diff(files, "outputs", json_object_get(ba, "outputs"), json_object_get(bb, "outputs"), "how");
	set_diff(files, "probes", json_object_get(ba, "probes"), json_object_get(bb, "probes"), "errno");
	set_diff(files, "tools", json_object_get(ba, "tools"), json_object_get(bb, "tools"), "sha256");
	json_decref(ba);
	json_decref(bb);
	return 0;
}

static void diff_print_text(const json_t *first, const json_t *files, long long differing)
{
	if (!first) {
		printf("traces are identical (per process; ignoring times, host pids, addresses "
		       "and the interleaving of processes)\n");
	} else {
		char *xa = trace_json_text(json_object_get(first, "a"));
		char *xb = trace_json_text(json_object_get(first, "b"));
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
}

static int diff_paths(const char *a, const char *b, enum trace_fmt f, struct common_err *e)
{
	struct ptree ta = {0}, tb = {0};
	json_t *sa = json_object(), *sb = json_object(), *first = NULL, *out,
	       *files = json_object(), *ha = NULL, *hb = NULL, *only_a = json_array(),
	       *only_b = json_array();
	int rc = -1;
	long long differing;

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
	differing = diff_processes(sa, sb, only_a, only_b);
	if (!first && differing)
		first = first_event_difference(a, b, &ta, &tb, sa, sb, e);
	if (diff_files(a, b, files, e) < 0)
		goto done;
	rc = first ? 1 : 0;
	out = json_pack("{s:b, s:O, s:{s:O, s:O, s:I}, s:O}", "identical", !first,
			"first_difference", first ? first : json_null(), "processes", "only_a", only_a,
			"only_b", only_b, "differing", (json_int_t)differing, "files", files);
	if (f == TRACE_FMT_JSON) {
		trace_json_print(out);
	} else {
		diff_print_text(first, files, differing);
		json_decref(out);
	}
done:
	json_decref(first);
	json_decref(files);
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
	return compare_spooled("bisect", bisect_paths, a, b, f, e);
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
		trace_json_print(o);
	} else {
		if (rc == 0) {
			printf("identical: %lld events, %zu comparisons\n", (long long)la.n - 1, cmp);
		} else {
			char *sa = trace_json_text(json_object_get(o, "a"));
			char *sb = trace_json_text(json_object_get(o, "b"));
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
