/* A self-contained HTML timeline of a trace: one row per process, indented by
 * the process tree, a bar from spawn to exit, and the files each touched in a
 * <details> list. No scripts, fonts or links: it opens offline. Every string
 * from the trace is escaped (a path may be "<script>"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/record/cmd/cmd-internal.h"

static void esc(FILE *f, const char *str)
{
	/* control bytes and invalid UTF-8 as visible escapes first (a saved page
	 * may be read with cat), then HTML's five */
	char *x = str ? common_escape(str, strlen(str), 0) : NULL;
	for (const char *s = x; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
	free(x);
}

struct row {
	json_t *p;
	int depth, done;
};

static void emit_files(FILE *f, json_t *a, const char *cls)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		fprintf(f, "<li class=\"%s\">", cls);
		esc(f, json_string_value(v));
		fputs("</li>\n", f);
	}
}

static void emit_row(FILE *f, struct row *r, long long t0, long long span, size_t idx, size_t n)
{
	json_t *p = r->p, *argv = json_object_get(p, "argv"), *v;
	const char *exe = json_string_value(json_object_get(p, "exe"));
	const char *base = exe ? strrchr(exe, '/') : NULL;
	int has_t = json_object_get(p, "t_start") != NULL;
	double left, width;
	int failed = (json_object_get(p, "exit") && common_jint(p, "exit", 0) != 0) ||
		     json_object_get(p, "signal");
	size_t i;

	if (has_t && span > 0) {
		long long s = common_jint(p, "t_start", 0) - t0;
		long long e = json_object_get(p, "t_end") ? common_jint(p, "t_end", 0) - t0 : span;
		left = 100.0 * (double)s / (double)span;
		width = 100.0 * (double)(e > s ? e - s : 0) / (double)span;
	} else { /* no times (deterministic trace): order only */
		left = 100.0 * (double)idx / (double)(n ? n : 1);
		width = 100.0 - left;
	}
	if (width < 0.3)
		width = 0.3;
	fprintf(f, "<div class=\"row\"><div class=\"lab\" style=\"padding-left:%dem\">", r->depth < 40 ? r->depth : 40);
	fprintf(f, "%lld ", common_jint(p, "pid", 0));
	esc(f, base ? base + 1 : exe ? exe : "(no exec)");
	json_array_foreach(argv, i, v) /* the arguments say which step it is */
		if (i > 0) {
			fputc(' ', f);
			esc(f, json_string_value(v));
		}
	fprintf(f, "</div><div class=\"lane\"><div class=\"bar%s\" style=\"left:%.3f%%;width:%.3f%%\" title=\"",
		failed ? " fail" : "", left, width);
	json_array_foreach(argv, i, v) {
		esc(f, json_string_value(v));
		fputc(' ', f);
	}
	if (json_object_get(p, "exit"))
		fprintf(f, "&#10;exit %lld", common_jint(p, "exit", 0));
	if (json_object_get(p, "signal"))
		fprintf(f, "&#10;signal %lld", common_jint(p, "signal", 0));
	fputs("\"></div></div></div>\n", f);
	json_t *in = json_object_get(p, "inputs"), *out = json_object_get(p, "outputs");
	if (json_array_size(in) + json_array_size(out)) {
		fprintf(f, "<details style=\"margin-left:%dem\"><summary>%zu read, %zu written</summary><ul>\n",
			(r->depth < 40 ? r->depth : 40) + 1, json_array_size(in), json_array_size(out));
		emit_files(f, out, "w");
		emit_files(f, in, "r");
		fputs("</ul></details>\n", f);
	}
}

/* Depth-first over the process tree, children in start order. */
static void walk(FILE *f, struct row *rows, size_t n, size_t at, int depth, long long t0,
		 long long span, size_t *idx)
{
	rows[at].depth = depth;
	rows[at].done = 1;
	emit_row(f, &rows[at], t0, span, (*idx)++, n);
	if (depth >= 200) /* deeper descendants are shown as roots */
		return;
	for (size_t i = 0; i < n; i++)
		if (!rows[i].done && common_jint(rows[i].p, "ppid", 0) == common_jint(rows[at].p, "pid", 0))
			walk(f, rows, n, i, depth + 1, t0, span, idx);
}

/* The timeline as Chrome trace events (Perfetto, chrome://tracing): a track per
 * process named by its program, a slice for its life with its command line, and
 * its files as instant events (reads at its start, writes at its end). */
static json_t *chrome_events(const json_t *br)
{
	json_t *ev = json_array(), *p;
	size_t i;
	json_array_foreach(json_object_get(br, "processes"), i, p) {
		json_int_t pid = common_jint(p, "pid", 0), t0 = common_jint(p, "t_start", 0);
		json_int_t t1 = common_jint(p, "t_end", 0);
		const char *exe = json_string_value(json_object_get(p, "exe"));
		const char *base = exe && strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe ? exe : "?";
		json_t *argv = json_object_get(p, "argv"), *a, *x;
		char *line = common_xstrdup("");
		size_t k;
		json_array_foreach(argv, k, a) {
			char *n = common_xasprintf("%s%s%s", line, k ? " " : "", json_string_value(a) ?: "");
			free(line);
			line = n;
		}
		if (t1 < t0)
			t1 = t0;
		x = json_pack("{s:s, s:s, s:I, s:I, s:{s:s}}", "ph", "M", "name", "process_name", "pid",
			      pid, "tid", pid, "args", "name", base);
		if (x)
			json_array_append_new(ev, x);
		x = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:{s:O?, s:O?}}", "ph", "X", "cat",
			      "process", "name", line, "pid", pid, "tid", pid, "ts", t0, "dur", t1 - t0,
			      "args", "argv", argv, "exit", json_object_get(p, "exit"));
		if (x)
			json_array_append_new(ev, x);
		free(line);
		for (int w = 0; w < 2; w++)
			json_array_foreach(json_object_get(p, w ? "outputs" : "inputs"), k, a) {
				x = json_pack("{s:s, s:s, s:s, s:s+, s:I, s:I, s:I}", "ph", "i", "s", "t",
					      "cat", w ? "write" : "read", "name", w ? "write " : "read ",
					      json_string_value(a) ?: "", "pid", pid, "tid", pid, "ts", w ? t1 : t0);
				if (x)
					json_array_append_new(ev, x);
			}
	}
	return ev;
}

static int write_out(const char *out, const char *buf, size_t len, struct common_err *e)
{
	if (!strcmp(out, "-"))
		return common_write_all(1, buf, len) < 0 ? common_errno(e, errno, "write stdout") : 0;
	return common_write_atomic(out, buf, len, 0644, e);
}

int trace_cmd_timeline(const char *path, const char *out, enum trace_fmt fmt, struct common_err *e)
{
	json_t *br = trace_buildrec(path, 0, e), *procs, *run;
	if (br && fmt == TRACE_FMT_CHROME) {
		json_t *doc = json_pack("{s:o, s:s}", "traceEvents", chrome_events(br), "displayTimeUnit", "ms");
		char *s = json_dumps(doc, JSON_COMPACT);
		int rc = write_out(out, s, strlen(s), e);
		free(s);
		json_decref(doc);
		json_decref(br);
		return rc;
	}
	char *buf = NULL;
	size_t len = 0, n, idx = 0;
	FILE *f;
	struct row *rows;
	long long t0 = -1, span;
	int rc;

	if (!br)
		return -1;
	procs = json_object_get(br, "processes");
	run = json_object_get(br, "run");
	n = json_array_size(procs);
	if (n > 20000) /* the page stays usable; the tree walk is quadratic */
		n = 20000;
	rows = common_xcalloc(n + 1, sizeof *rows);
	for (size_t i = 0; i < n; i++) {
		rows[i].p = json_array_get(procs, i);
		json_int_t t = common_jint(rows[i].p, "t_start", 0);
		if (json_object_get(rows[i].p, "t_start") && (t0 < 0 || t < t0))
			t0 = t;
	}
	if (t0 < 0)
		t0 = 0;
	span = common_jint(run, "duration_us", 0) - t0;
	f = open_memstream(&buf, &len);
	if (!f)
		abort();
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>sbx trace: ", f);
	esc(f, json_string_value(json_object_get(run, "trace")));
	fputs("</title>\n<style>\n"
	      "body{font:13px/1.4 sans-serif;margin:1em;color:#222}\n"
	      ".row{display:flex;align-items:center;height:20px}\n"
	      ".lab{width:28em;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;font-family:monospace}\n"
	      ".lane{position:relative;flex:1;height:14px;background:#f2f2f2}\n"
	      ".bar{position:absolute;top:0;height:14px;background:#4a7fc1;border-radius:2px}\n"
	      ".bar.fail{background:#c14a4a}\n"
	      "details{font-family:monospace;font-size:12px}\n"
	      "li.w{color:#a04000} li.r{color:#335}\n"
	      "</style></head><body>\n<h1>sbx trace timeline</h1>\n<p>", f);
	esc(f, json_string_value(json_object_get(run, "trace")));
	fprintf(f, " &middot; level %s &middot; %zu processes &middot; %.3f s &middot; %s</p>\n",
		json_string_value(json_object_get(run, "level")) ?: "?", n,
		(double)common_jint(run, "duration_us", 0) / 1e6,
		json_is_true(json_object_get(run, "complete")) ? "complete" : "TRUNCATED");
	fprintf(f, "<p>%zu inputs, %zu outputs, %zu absent paths probed, %zu tools. "
		"Hover a bar for its command line; open a row for its files (written in brown).</p>\n",
		json_array_size(json_object_get(br, "inputs")), json_array_size(json_object_get(br, "outputs")),
		json_array_size(json_object_get(br, "probes")), json_array_size(json_object_get(br, "tools")));
	for (size_t i = 0; i < n; i++) {
		int has_parent = 0;
		for (size_t j = 0; j < n; j++)
			if (j != i && common_jint(rows[j].p, "pid", 0) == common_jint(rows[i].p, "ppid", 0))
				has_parent = 1;
		if (!has_parent && !rows[i].done)
			walk(f, rows, n, i, 0, t0, span, &idx);
	}
	for (size_t i = 0; i < n; i++) /* cycles from pid reuse: still show them */
		if (!rows[i].done)
			walk(f, rows, n, i, 0, t0, span, &idx);
	fputs("</body></html>\n", f);
	fclose(f);
	rc = write_out(out, buf, len, e);
	free(buf);
	free(rows);
	json_decref(br);
	return rc;
}
