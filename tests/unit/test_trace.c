/* trace records: writer bytes are canonical, completion records, the chain
 * catches edits/removals/reorders/wrong headers, truncation, hostile lines,
 * and the build record. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/record/reader/reader.h"
#include "trace/record/record.h"
#include "tests/unit/unit.h"


static char dir[] = "/tmp/test_trace.XXXXXX";

static char *tmp(const char *name)
{
	return common_xasprintf("%s/%s", dir, name);
}

static struct trace_stop stop(const char *name, const char *p1, const char *p2)
{
	struct trace_stop s;

	memset(&s, 0, sizeof s);
	s.pid = s.tid = getpid();
	s.ppid = getppid();
	s.sys = trace_sys_by_name(name);
	s.nr = s.sys ? s.sys->nr : 999;
	s.path[0] = p1;
	s.path[1] = p2;
	return s;
}

/* entry + exit of one syscall through the recorder */
static void call(struct trace_rec *r, struct trace_stop s, int64_t result)
{
	trace_rec_syscall(r, &s);
	if (trace_rec_want_exit(r, &s)) {
		s.has_result = 1;
		s.result = result;
		trace_rec_syscall(r, &s);
	}
}

static struct trace_rec *open_rec(const char *path, enum trace_level lvl)
{
	char *argv[] = {"make", "-j2", "we\"ird\\ \x01 \xc3\xa9 \xff", NULL};
	char *envp[] = {"A=1", NULL};
	struct trace_rec_info in = {
		.lease = "L1", .image_path = "/usr/bin/make", .image_sha256 = "00",
		.argv = argv, .envp = envp, .level = lvl,
	};
	struct common_err e;
	struct trace_rec *r = trace_rec_open(path, -1, &in, &e);

	if (!r)
		common_report(&e);
	return r;
}

/* A representative trace: returns its path. */
static char *make_trace(const char *name, int finish)
{
	char *path = tmp(name), *in = tmp("input.c"), *out = tmp("out.o");
	struct trace_rec *r = open_rec(path, TRACE_LEVEL_FILE);
	struct trace_stop s;
	int fd;

	common_write_atomic(in, "int x;\n", 7, 0644, NULL);
	unlink(out);
	trace_rec_spawn(r, getpid(), getpid() + 1, "fork");
	trace_rec_exec(r, getpid(), getppid(), NULL, NULL);
	/* read an input: recorded with its hash */
	fd = open(in, O_RDONLY);
	s = stop("openat", in, NULL);
	s.args[0] = (uint64_t)AT_FDCWD;
	s.args[2] = O_RDONLY;
	call(r, s, fd);
	/* failed open: errno */
	s = stop("openat", "/nonexistent/include/x.h", NULL);
	s.args[2] = O_RDONLY;
	call(r, s, -ENOENT);
	/* creating open: created + fd */
	s = stop("openat", out, NULL);
	s.args[2] = O_WRONLY | O_CREAT | O_TRUNC;
	trace_rec_syscall(r, &s); /* entry sees the file absent */
	int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	s.has_result = 1;
	s.result = ofd;
	trace_rec_syscall(r, &s);
	/* rename both paths + result; unlink of a missing file */
	s = stop("rename", out, "/tmp/final.o");
	call(r, s, 0);
	s = stop("unlink", "/tmp/missing", NULL);
	call(r, s, -ENOENT);
	/* readlink at level file: entry only */
	s = stop("readlink", "/usr", NULL);
	call(r, s, -EINVAL);
	/* path with characters that need escaping */
	s = stop("stat", "/tmp/we\"ird\\\n\t\x1f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff\xc0\xaf", NULL);
	call(r, s, -ENOENT);
	/* a denied call is recorded with its errno without an exit */
	s = stop("mount", "/mnt", NULL);
	s.action = TRACE_DENIED;
	s.deny_errno = EPERM;
	call(r, s, 0);
	trace_rec_exit(r, getpid() + 1, getpid() + 1, 0);
	close(fd);
	close(ofd);
	if (finish)
		CHECK(trace_rec_close(r, 0, NULL, NULL) == 0);
	else
		trace_rec_abort(r);
	free(in);
	free(out);
	return path;
}

static json_t *read_all(const char *path, int *rc, int *complete, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	json_t *a = json_array();

	*rc = -1;
	if (!t)
		return a;
	while ((*rc = trace_reader_next(t, &ev, e)) > 0)
		json_array_append(a, ev.ev);
	*complete = trace_reader_complete(t);
	trace_reader_close(t);
	return a;
}

static json_t *find(json_t *a, const char *key, const char *val)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		const char *s = json_string_value(json_object_get(v, key));
		if (s && !strcmp(s, val))
			return v;
	}
	return NULL;
}

static void test_roundtrip(void)
{
	char *p = make_trace("a.trace", 1), *in = tmp("input.c"), *out = tmp("out.o");
	struct common_err e = {"", ""};
	int rc, complete;
	json_t *a = read_all(p, &rc, &complete, &e), *v;

	if (rc < 0)
		common_report(&e);
	CHECK(rc == 0);
	CHECK(complete);
	CHECK(json_array_size(a) == 13); /* header + 12 */
	v = find(a, "path", in);
	CHECK(v && json_integer_value(json_object_get(v, "result")) >= 0);
	v = find(a, "path", "/nonexistent/include/x.h");
	CHECK(v && !strcmp(json_string_value(json_object_get(v, "errno")), "ENOENT"));
	CHECK(v && json_integer_value(json_object_get(v, "result")) == -ENOENT);
	v = find(a, "path", out);
	CHECK(v && json_is_true(json_object_get(v, "created")));
	CHECK(v && json_object_get(v, "fd") && json_integer_value(json_object_get(v, "fd")) ==
		  json_integer_value(json_object_get(v, "result")));
	v = find(a, "name", "rename");
	CHECK(v && !strcmp(json_string_value(json_object_get(v, "path2")), "/tmp/final.o"));
	CHECK(v && json_integer_value(json_object_get(v, "result")) == 0);
	v = find(a, "name", "unlink");
	CHECK(v && !strcmp(json_string_value(json_object_get(v, "errno")), "ENOENT"));
	v = find(a, "name", "readlink");
	CHECK(v && !json_object_get(v, "result"));
	/* level file: a stat is looked up by the recorder instead of a second stop */
	v = find(a, "name", "stat");
	CHECK(v && json_is_false(json_object_get(v, "exists")) && !json_object_get(v, "result"));
	v = find(a, "name", "mount");
	CHECK(v && !strcmp(json_string_value(json_object_get(v, "action")), "denied") &&
	      !strcmp(json_string_value(json_object_get(v, "errno")), "EPERM"));
	v = find(a, "ev", "exec");
	CHECK(v && strstr(json_string_value(json_object_get(v, "path")), "test_trace") &&
	      json_string_length(json_object_get(v, "sha256")) == 64);
	v = find(a, "ev", "spawn");
	CHECK(v && json_integer_value(json_object_get(v, "child")) == getpid() + 1);
	v = find(a, "ev", "end");
	CHECK(v && json_integer_value(json_object_get(v, "events")) == 11);
	/* the input's hash is the file's */
	{
		uint8_t d[32];
		char hex[65];
		common_sha256("int x;\n", 7, d);
		common_hex(d, 32, hex);
		CHECK_STR(json_string_value(json_object_get(find(a, "path", in), "sha256")), hex);
	}
	json_decref(a);
	free(p);
	free(in);
	free(out);
}

static char *slurp(const char *p, size_t *n)
{
	char *b;

	CHECK(common_read_file(p, 1 << 24, &b, n, NULL) == 0);
	return b;
}

static int verify_bytes(const char *name, const char *buf, size_t n, int *complete, char *why,
			size_t whylen)
{
	char *p = tmp(name);
	struct common_err e = {"", ""};
	int rc;
	json_t *a;

	common_write_atomic(p, buf, n, 0644, NULL);
	a = read_all(p, &rc, complete, &e);
	json_decref(a);
	snprintf(why, whylen, "%s: %s", e.what, e.why);
	free(p);
	return rc;
}

static void test_tamper(void)
{
	char *p = make_trace("b.trace", 1), *q = make_trace("c.trace", 1), why[2048];
	size_t n, m;
	char *b = slurp(p, &n), *b2 = slurp(q, &m), *x, *l2, *l3, *l4;
	int complete;

	CHECK(verify_bytes("ok", b, n, &complete, why, sizeof why) == 0 && complete);
	/* edit one byte of an event */
	x = common_xmalloc(n + 1);
	memcpy(x, b, n);
	l2 = strchr(x, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	l4 = strchr(l3, '\n') + 1;
	*strstr(l3, "\"pid\":") = '\'';
	CHECK(verify_bytes("edit", x, n, &complete, why, sizeof why) < 0);
	memcpy(x, b, n);
	{ /* change a number keeping JSON valid */
		char *d = strstr(l2, "\"child\":") + 8;
		*d = *d == '9' ? '8' : '9';
	}
	CHECK(verify_bytes("edit2", x, n, &complete, why, sizeof why) < 0);
	CHECK(strstr(why, "chain hash mismatch") != NULL);
	/* remove line 3 */
	memcpy(x, b, n);
	memmove(l3, l4, (size_t)(x + n - l4));
	CHECK(verify_bytes("remove", x, n - (size_t)(l4 - l3), &complete, why, sizeof why) < 0);
	/* swap lines 2 and 3 */
	{
		size_t a2 = (size_t)(l3 - l2), a3 = (size_t)(l4 - l3);
		char *y = common_xmalloc(n);
		memcpy(y, b, (size_t)(l2 - x));
		memcpy(y + (l2 - x), b + (l3 - x), a3);
		memcpy(y + (l2 - x) + a3, b + (l2 - x), a2);
		memcpy(y + (l4 - x), b + (l4 - x), n - (size_t)(l4 - x));
		CHECK(verify_bytes("swap", y, n, &complete, why, sizeof why) < 0);
		free(y);
	}
	/* wrong header: the other trace's header with this trace's events */
	{
		size_t h1 = (size_t)(strchr(b, '\n') + 1 - b), h2 = (size_t)(strchr(b2, '\n') + 1 - b2);
		char *y = common_xmalloc(n + h2);
		memcpy(y, b2, h2);
		memcpy(y + h2, b + h1, n - h1);
		CHECK(verify_bytes("hdr", y, h2 + n - h1, &complete, why, sizeof why) < 0);
		/* an edited header */
		memcpy(y, b, n);
		*strstr(y, "\"L1\"") = '\'';
		CHECK(verify_bytes("hdr2", y, n, &complete, why, sizeof why) < 0);
		memcpy(y, b, n);
		y[strstr(y, "\"L1\"") - y + 1] = 'X';
		CHECK(verify_bytes("hdr3", y, n, &complete, why, sizeof why) < 0);
		CHECK(strstr(why, "header") != NULL);
		free(y);
	}
	/* truncated: no end event -> valid prefix, not complete */
	{
		char *end = x + n - 1;
		memcpy(x, b, n);
		while (end > x && end[-1] != '\n')
			end--;
		CHECK(verify_bytes("trunc", x, (size_t)(end - x), &complete, why, sizeof why) == 0);
		CHECK(!complete);
		/* and a partial last line is ignored, still a prefix */
		CHECK(verify_bytes("trunc2", x, (size_t)(end - x) + 10, &complete, why, sizeof why) == 0);
		CHECK(!complete);
	}
	/* an aborted recorder leaves a valid truncated prefix */
	{
		char *r = make_trace("d.trace", 0);
		size_t k;
		char *rb = slurp(r, &k);
		CHECK(verify_bytes("abort", rb, k, &complete, why, sizeof why) == 0 && !complete);
		free(rb);
		free(r);
	}
	/* data after the end */
	{
		char *y = common_xmalloc(2 * n);
		memcpy(y, b, n);
		memcpy(y + n, l2, (size_t)(l3 - l2));
		CHECK(verify_bytes("after", y, n + (size_t)(l3 - l2), &complete, why, sizeof why) < 0);
		free(y);
	}
	free(x);
	free(b);
	free(b2);
	free(p);
	free(q);
}

/* A hostile line is refused with a message, never crashes. */
static void test_hostile(void)
{
	char why[2048];
	int complete;
	static const char *const bad[] = {
		"", "\n", "not json\n", "{}\n", "[1,2]\n",
		"{\"sbx_trace\":1,\"h\":\"zz\"}\n",
		"{\"sbx_trace\":2,\"h\":\"0000000000000000000000000000000000000000000000000000000000000000\"}\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(verify_bytes("bad", bad[i], strlen(bad[i]), &complete, why, sizeof why) < 0);
	/* an overlong line */
	size_t n = TRACE_LINE_MAX + 100;
	char *big = common_xmalloc(n);
	memset(big, 'a', n);
	big[n - 1] = '\n';
	CHECK(verify_bytes("big", big, n, &complete, why, sizeof why) < 0);
	CHECK(strstr(why, "longer than") != NULL);
	free(big);
	/* a well-chained line with the wrong types: build one by hand */
	{
		const char *hdr_c = "{\"argv\":[],\"deterministic\":false,\"env_sha256\":"
			"\"0000000000000000000000000000000000000000000000000000000000000000\","
			"\"image\":{},\"level\":\"file\",\"mounts\":[],\"sbx_trace\":1,\"start_batch\":0}";
		const char *ev_c = "{\"ev\":\"sys\",\"seq\":0}";
		static const char dom[] = "sbx/trace/v1";
		uint8_t h[32];
		char hex[65], buf[2048];
		struct common_sha256 c;
		common_sha256_init(&c);
		common_sha256_update(&c, dom, sizeof dom);
		common_sha256_update(&c, hdr_c, strlen(hdr_c));
		common_sha256_final(&c, h);
		common_hex(h, 32, hex);
		int k = snprintf(buf, sizeof buf, "%.*s,\"h\":\"%s\"}\n", (int)strlen(hdr_c) - 1, hdr_c, hex);
		CHECK(verify_bytes("hdronly", buf, (size_t)k, &complete, why, sizeof why) == 0 && !complete);
		common_sha256_init(&c);
		common_sha256_update(&c, h, 32);
		common_sha256_update(&c, ev_c, strlen(ev_c));
		common_sha256_final(&c, h);
		common_hex(h, 32, hex);
		k += snprintf(buf + k, sizeof buf - (size_t)k, "%.*s,\"h\":\"%s\"}\n", (int)strlen(ev_c) - 1,
			      ev_c, hex);
		CHECK(verify_bytes("types", buf, (size_t)k, &complete, why, sizeof why) < 0);
		CHECK(strstr(why, "missing") != NULL);
	}
}

static void test_buildrec(void)
{
	char *p = make_trace("e.trace", 1), *in = tmp("input.c");
	struct common_err e = {"", ""};
	json_t *b = trace_buildrec(p, 1, &e), *v;
	size_t i;
	int found_in = 0, found_out = 0, probe = 0;

	CHECK(b != NULL);
	json_array_foreach(json_object_get(b, "inputs"), i, v)
		if (!strcmp(json_string_value(json_object_get(v, "path")), in))
			found_in = json_string_length(json_object_get(v, "sha256")) == 64;
	json_array_foreach(json_object_get(b, "outputs"), i, v)
		if (!strcmp(json_string_value(json_object_get(v, "path")), "/tmp/final.o"))
			found_out = !strcmp(json_string_value(json_object_get(v, "how")), "renamed");
	json_array_foreach(json_object_get(b, "probes"), i, v)
		if (!strcmp(json_string_value(json_object_get(v, "path")), "/nonexistent/include/x.h"))
			probe = 1;
	CHECK(found_in);
	CHECK(found_out);
	CHECK(probe);
	CHECK(json_array_size(json_object_get(b, "tools")) == 1);
	json_decref(b);
	free(p);
	free(in);
}

static void test_levels(void)
{
	struct trace_stop s = stop("readlink", "/usr", NULL);
	struct trace_rec *r = open_rec("/dev/null", TRACE_LEVEL_EXEC);
	enum trace_level l;

	CHECK(trace_classes(TRACE_LEVEL_EXEC) == 0);
	CHECK(trace_classes(TRACE_LEVEL_FILE) == TRACE_CLASS_FILE);
	CHECK(!(trace_classes(TRACE_LEVEL_ALL) & TRACE_FILTER_NO_READLINK));
	CHECK(trace_level_parse("file", &l, NULL) == 0 && l == TRACE_LEVEL_FILE);
	CHECK(trace_level_parse("bogus", &l, NULL) < 0);
	CHECK(trace_rec_want_exit(r, &s) == 0);
	trace_rec_abort(r);
	r = open_rec("/dev/null", TRACE_LEVEL_FILE);
	CHECK(trace_rec_want_exit(r, &s) == 0); /* readlink: entry only at level file */
	s = stop("openat", "/x", NULL);
	CHECK(trace_rec_want_exit(r, &s) == 1);
	trace_rec_abort(r);
	r = open_rec("/dev/null", TRACE_LEVEL_ALL);
	s = stop("readlink", "/usr", NULL);
	CHECK(trace_rec_want_exit(r, &s) == 1);
	trace_rec_abort(r);
}

/* The hook adapters: a thread's exit names its process; kinds from flags. */
static void test_hooks(void)
{
	char *p = tmp("hooks.trace");
	struct trace_rec *r = open_rec(p, TRACE_LEVEL_EXEC);
	struct trace_layer l = trace_rec_layer(r);
	char *argv[] = {"cc", "-c", "x.c", NULL};
	struct trace_stop s = stop("openat", "/x", NULL);
	int rc, complete;
	struct common_err e;
	json_t *a, *v;

	CHECK(l.ctx == r && !trace_rec_layer(NULL).ctx);
	l.on_spawn(l.ctx, NULL, 100, 101, 0x11 /* SIGCHLD */);
	l.on_spawn(l.ctx, NULL, 101, 102, 0x3d0f00 /* CLONE_THREAD|CLONE_VM... */);
	trace_rec_exec(r, getpid(), 100, "/usr/bin/cc", argv);
	l.on_entry(l.ctx, NULL, &s); /* level exec: not recorded, no exit wanted */
	CHECK(s.want_exit == 0);
	{ /* a huge argv of control characters still fits one line */
		static char big[100000];
		char *hv[] = {"x", big, NULL};
		memset(big, 1, sizeof big - 1);
		trace_rec_exec(r, getpid(), 100, "/usr/bin/x", hv);
	}
	l.on_proc_exit(l.ctx, NULL, 102, 0);
	l.on_proc_exit(l.ctx, NULL, 101, 9); /* killed by SIGKILL */
	CHECK(trace_rec_close(r, 0, NULL, NULL) == 0);
	a = read_all(p, &rc, &complete, &e);
	CHECK(rc == 0 && complete && json_array_size(a) == 8);
	v = json_array_get(a, 2);
	CHECK_STR(json_string_value(json_object_get(v, "kind")), "thread");
	CHECK_STR(json_string_value(json_object_get(json_array_get(a, 1), "kind")), "fork");
	v = json_array_get(a, 3);
	CHECK_STR(json_string_value(json_object_get(v, "path")), "/usr/bin/cc");
	CHECK_STR(json_string_value(json_array_get(json_object_get(v, "argv"), 2)), "x.c");
	v = json_array_get(a, 4);
	CHECK_STR(json_string_value(json_array_get(json_object_get(v, "argv"), 1)), "[argv truncated]");
	v = json_array_get(a, 5);
	CHECK(json_integer_value(json_object_get(v, "pid")) == 101 &&
	      json_integer_value(json_object_get(v, "tid")) == 102);
	v = json_array_get(a, 6);
	CHECK(json_integer_value(json_object_get(v, "signal")) == 9 && !json_object_get(v, "exit"));
	json_decref(a);
	free(p);
}

int main(void)
{
	char *cmd;

	if (!mkdtemp(dir))
		return 1;
	test_roundtrip();
	test_tamper();
	test_hostile();
	test_buildrec();
	test_levels();
	test_hooks();
	cmd = common_xasprintf("rm -rf %s", dir);
	if (system(cmd) != 0)
		unit_failed++;
	free(cmd);
	return unit_finish("test_trace");
}
