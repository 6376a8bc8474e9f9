/* Policy rules: parsing (every invalid rule refused and named) and decisions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/inspect/inspect.h"
#include "trace/tracee/tracee.h"

static int passed, failed;

#define CHECK(c) do { if (c) passed++; else { failed++; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static struct trace_policy *parse(const char *s, struct common_err *e)
{
	struct trace_policy *p = NULL;

	memset(e, 0, sizeof *e);
	if (trace_policy_parse(s, strlen(s), "p.json", &p, e) < 0)
		return NULL;
	return p;
}

static void refused(const char *s, const char *what, const char *why)
{
	struct common_err e;
	struct trace_policy *p = parse(s, &e);

	CHECK(p == NULL);
	CHECK(strstr(e.what, what) != NULL);
	CHECK(strstr(e.why, why) != NULL);
	if (p || !strstr(e.what, what) || !strstr(e.why, why))
		fprintf(stderr, "  policy %s\n  wanted \"%s\" / \"%s\", got \"%s: %s\"\n", s,
			what, why, e.what, e.why);
	trace_policy_free(p);
}

static struct trace_stop stop(const char *name, const char *p0, const char *p1)
{
	struct trace_stop st;

	memset(&st, 0, sizeof st);
	st.sys = trace_sys_by_name(name);
	st.nr = st.sys ? st.sys->nr : -1;
	st.path[0] = p0;
	st.path[1] = p1;
	return st;
}

static void test_invalid(void)
{
	refused("[]", "p.json", "expected a JSON object");
	refused("{\"rules\": 3}", "p.json", "expected an array");
	refused("{\"rulez\": []}", "p.json", "unknown field \"rulez\"");
	refused("{\"version\": 2, \"rules\": []}", "p.json", "only version 1");
	refused("{\"rules\": [1]}", "rule 1", "expected a JSON object");
	refused("{\"rules\": [{\"action\": \"allow\"}, {\"name\": \"bad\", \"action\": \"zap\"}]}",
		"rule 2 (\"bad\")", "unknown action \"zap\"");
	refused("{\"rules\": [{\"name\": \"x\"}]}", "rule 1 (\"x\")", "field \"action\"");
	refused("{\"rules\": [{\"syscall\": \"opnat\", \"action\": \"deny\"}]}", "rule 1",
		"unknown syscall \"opnat\"");
	refused("{\"rules\": [{\"syscall\": [], \"action\": \"deny\"}]}", "rule 1",
		"non-empty array");
	refused("{\"rules\": [{\"syscall\": [\"openat\", 4], \"action\": \"deny\"}]}", "rule 1",
		"expected a name");
	refused("{\"rules\": [{\"class\": \"fyle\", \"action\": \"deny\"}]}", "rule 1",
		"unknown class \"fyle\"");
	refused("{\"rules\": [{\"path\": \"etc/*\", \"action\": \"deny\"}]}", "rule 1",
		"not absolute");
	refused("{\"rules\": [{\"path\": \"/etc/[ab\", \"action\": \"deny\"}]}", "rule 1",
		"unterminated [");
	refused("{\"rules\": [{\"path\": \"\", \"action\": \"deny\"}]}", "rule 1", "glob of 1");
	refused("{\"rules\": [{\"action\": \"deny\", \"errno\": \"EWHAT\"}]}", "rule 1",
		"errno name");
	refused("{\"rules\": [{\"action\": \"deny\", \"errno\": 0}]}", "rule 1", "errno name");
	refused("{\"rules\": [{\"action\": \"deny\", \"errno\": 5000}]}", "rule 1", "errno name");
	refused("{\"rules\": [{\"action\": \"allow\", \"errno\": 1}]}", "rule 1",
		"only a deny rule");
	refused("{\"rules\": [{\"action\": \"rewrite\", \"from\": \"/a\"}]}", "rule 1",
		"needs \"from\" and \"to\"");
	refused("{\"rules\": [{\"action\": \"rewrite\", \"from\": \"a\", \"to\": \"/b\"}]}",
		"rule 1", "absolute paths");
	refused("{\"rules\": [{\"action\": \"rewrite\", \"from\": \"/a\", \"to\": \"/b/../c\"}]}",
		"rule 1", "without \"..\"");
	refused("{\"rules\": [{\"action\": \"deny\", \"to\": \"/b\"}]}", "rule 1",
		"only a rewrite rule");
	refused("{\"rules\": [{\"syscall\": \"close\", \"action\": \"rewrite\", \"from\": \"/a\","
		" \"to\": \"/b\"}]}", "rule 1", "none of its syscalls takes a path");
	refused("{\"rules\": [{\"syscall\": [\"openat\", \"getpid\"], \"action\": \"deny\"}]}",
		"rule 1", "\"getpid\" is never trapped");
	refused("{\"rules\": [{\"syscall\": \"read\", \"path\": \"/x\", \"action\": \"deny\"}]}",
		"rule 1", "none of its syscalls takes a path");
	refused("{\"rules\": [{\"action\": \"deny\", \"extra\": 1}]}", "rule 1",
		"unknown field \"extra\"");
	refused("{\"rules\": [{\"action\": \"deny\"}, {\"action\": \"deny\"}, "
		"{\"action\": \"deny\", \"name\": 7}]}", "rule 3", "field \"name\"");
	refused("{\"rules\": [{\"action\": \"deny\"}", "p.json:1", "");
	refused("{\"rules\": [], \"rules\": []}", "p.json", "duplicate");
}

static void test_decide(void)
{
	struct common_err e;
	struct trace_decision d;
	struct trace_stop st;
	struct trace_policy *p = parse(
		"{\"version\": 1, \"rules\": ["
		" {\"name\": \"secret\", \"syscall\": [\"openat\", \"open\"], \"path\": \"/etc/shadow\","
		"  \"action\": \"deny\", \"errno\": \"EACCES\"},"
		" {\"name\": \"swap\", \"class\": \"file\", \"action\": \"rewrite\","
		"  \"from\": \"/src/hello.txt\", \"to\": \"/src/other.txt\"},"
		" {\"name\": \"move\", \"action\": \"rewrite\", \"from\": \"/old/\", \"to\": \"/new\"},"
		" {\"name\": \"logs\", \"class\": [\"file\"], \"path\": \"/var/**/*.log\", \"action\": \"record\"},"
		" {\"name\": \"one\", \"path\": \"/d/?.[ch]\", \"action\": \"deny\", \"errno\": 2},"
		" {\"name\": \"neg\", \"path\": \"/n/[!a]x\", \"action\": \"deny\"},"
		" {\"name\": \"star\", \"path\": \"/s/*\", \"action\": \"deny\", \"errno\": \"EROFS\"},"
		" {\"name\": \"dot\", \"path\": \"/q/a.b\", \"action\": \"deny\"},"
		" {\"syscall\": \"unlink\", \"action\": \"deny\", \"errno\": \"ENOSYS\"}"
		"]}", &e);

	CHECK(p != NULL);
	if (!p) {
		common_report(&e);
		return;
	}
	memset(&d, 0, sizeof d);
	st = stop("openat", "/etc/shadow", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1);
	CHECK(d.deny_errno == EACCES && strcmp(d.rule, "secret") == 0);
	trace_decision_clear(&d);

	st = stop("stat", "/etc/shadow", NULL); /* other syscalls pass the first rule */
	CHECK(trace_policy_decide(p, &st, &d) == 0 && d.deny_errno == 0);
	trace_decision_clear(&d);

	st = stop("openat", "/src/hello.txt", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1);
	CHECK(d.path[0] && strcmp(d.path[0], "/src/other.txt") == 0 && !d.path[1]);
	CHECK(d.deny_errno == 0 && strcmp(d.rule, "swap") == 0);
	trace_decision_clear(&d);
	CHECK(d.path[0] == NULL);

	st = stop("openat", "/src/hello.txt.bak", NULL); /* prefix ends at a component */
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);

	st = stop("renameat", "/x", "/old/a/b");
	CHECK(trace_policy_decide(p, &st, &d) == 1);
	CHECK(!d.path[0] && d.path[1] && strcmp(d.path[1], "/new/a/b") == 0);
	trace_decision_clear(&d);

	st = stop("openat", "/old", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && strcmp(d.path[0], "/new") == 0);
	trace_decision_clear(&d);

	st = stop("openat", "/var/a/b/c.log", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.record && !d.deny_errno);
	trace_decision_clear(&d);
	st = stop("openat", "/var/c.log", NULL); /* "**" + "/" matches no directory too */
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.record);
	trace_decision_clear(&d);
	st = stop("openat", "/var/c.logx", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);

	st = stop("access", "/d/x.c", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.deny_errno == ENOENT);
	trace_decision_clear(&d);
	st = stop("access", "/d/xy.c", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);
	st = stop("access", "/n/ax", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);
	st = stop("access", "/n/bx", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.deny_errno == EPERM);
	trace_decision_clear(&d);

	st = stop("openat", "/s/f", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.deny_errno == EROFS);
	trace_decision_clear(&d);
	st = stop("openat", "/s/d/f", NULL); /* "*" stays inside one component */
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);
	st = stop("openat", "/q/aXb", NULL); /* "." is literal */
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	trace_decision_clear(&d);

	st = stop("unlink", "/z", NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 1 && d.deny_errno == ENOSYS);
	CHECK(strcmp(d.rule, "rule 9") == 0);
	trace_decision_clear(&d);

	CHECK(trace_policy_traps(p, trace_sys_by_name("unlink")) == 1);
	CHECK(trace_policy_traps(p, trace_sys_by_name("getpid")) == 0);
	CHECK(trace_policy_traps(p, trace_sys_by_name("openat")) == 1);
	CHECK(trace_policy_traps(p, trace_sys_by_name("read")) == 0);
	trace_policy_free(p);
}

static void test_root_rewrite(void)
{
	struct common_err e;
	struct trace_decision d;
	struct trace_stop st = stop("openat", "/a/b", NULL);
	struct trace_policy *p = parse("{\"rules\": [{\"action\": \"rewrite\", \"from\": \"/\","
				       " \"to\": \"/jail\"}]}", &e);

	memset(&d, 0, sizeof d);
	CHECK(p && trace_policy_decide(p, &st, &d) == 1);
	CHECK(d.path[0] && strcmp(d.path[0], "/jail/a/b") == 0);
	trace_decision_clear(&d);
	trace_policy_free(p);
	p = parse("{\"rules\": [{\"action\": \"rewrite\", \"from\": \"/a\", \"to\": \"/\"}]}", &e);
	CHECK(p && trace_policy_decide(p, &st, &d) == 1);
	CHECK(d.path[0] && strcmp(d.path[0], "/b") == 0);
	trace_decision_clear(&d);
	trace_policy_free(p);
}

static void test_empty(void)
{
	struct common_err e;
	struct trace_decision d;
	struct trace_stop st = stop("openat", "/a", NULL);
	struct trace_policy *p = parse("{\"rules\": []}", &e);

	memset(&d, 0, sizeof d);
	CHECK(p != NULL);
	CHECK(trace_policy_decide(p, &st, &d) == 0);
	CHECK(trace_policy_traps(p, st.sys) == 0);
	trace_policy_free(p);
}

static int real_is(const char *path, int follow, const char *want)
{
	char out[PATH_MAX];
	int ok = trace_path_real(getpid(), path, follow, out) == 0 && strcmp(out, want) == 0;
	if (!ok)
		fprintf(stderr, "real(%s) = %s, want %s\n", path, out, want);
	return ok;
}

/* The spellings a glob meets: folded, and resolved the kernel's way (here in our
 * own root, with our own /proc/self). */
static void test_paths(void)
{
	char out[PATH_MAX], dir[] = "/tmp/sbx-paths.XXXXXX", p[PATH_MAX], q[PATH_MAX], cwd[PATH_MAX];

	trace_path_fold("//a/./b/../c//", out);
	CHECK(strcmp(out, "/a/c") == 0);
	trace_path_fold("/../..", out);
	CHECK(strcmp(out, "/") == 0);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(p, sizeof p, "%s/real", dir);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof p, "%s/abs", dir);
	snprintf(q, sizeof q, "%s/real", dir);
	CHECK(symlink(q, p) == 0);
	snprintf(p, sizeof p, "%s/rel", dir);
	CHECK(symlink("real/../real", p) == 0);
	snprintf(p, sizeof p, "%s/loop", dir);
	CHECK(symlink("loop", p) == 0);
	snprintf(p, sizeof p, "%s/abs/f", dir);
	snprintf(q, sizeof q, "%s/real/f", dir);
	CHECK(real_is(p, 1, q));
	snprintf(p, sizeof p, "%s/rel/../rel/f", dir);
	CHECK(real_is(p, 1, q));
	snprintf(p, sizeof p, "%s/abs/../real/f", dir); /* ".." of the link's target */
	CHECK(real_is(p, 1, q));
	snprintf(p, sizeof p, "/proc/self/root/%s/abs/f", dir);
	CHECK(real_is(p, 1, q));
	snprintf(p, sizeof p, "%s/abs", dir);
	CHECK(real_is(p, 0, p)); /* the last link kept when not followed */
	snprintf(p, sizeof p, "%s/loop/x", dir);
	CHECK(trace_path_real(getpid(), p, 1, out) < 0);
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	snprintf(q, sizeof q, "%s/x", strcmp(cwd, "/") ? cwd : "");
	CHECK(real_is("/proc/self/cwd/x", 1, q));
	CHECK(real_is("/proc/thread-self/cwd/./x", 1, q));
	snprintf(q, sizeof q, "%s/real/new", dir);
	snprintf(p, sizeof p, "%s/rel/new", dir);
	CHECK(real_is(p, 1, q)); /* a file being made: its directory resolved */
	for (const char *n = "abs\0rel\0loop\0real\0"; *n; n += strlen(n) + 1) {
		snprintf(p, sizeof p, "%s/%s", dir, n);
		(void)(strcmp(n, "real") ? unlink(p) : rmdir(p));
	}
	rmdir(dir);
}

int main(void)
{
	test_paths();
	test_invalid();
	test_decide();
	test_root_rewrite();
	test_empty();
	printf("test_policy: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
