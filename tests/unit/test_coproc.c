/* Co-process protocol: event encoding, reply parsing, and live protocol errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/inspect/inspect.h"

static int passed, failed;

#define CHECK(c) do { if (c) passed++; else { failed++; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static struct trace_stop openat_stop(void)
{
	struct trace_stop st;

	memset(&st, 0, sizeof st);
	st.pid = 10;
	st.tid = 11;
	st.sys = trace_sys_by_name("openat");
	st.nr = st.sys->nr;
	st.args[0] = (uint64_t)-100;
	st.args[1] = 0x7000;
	st.path[0] = "/src/\"hello\".txt";
	return st;
}

static void test_event(void)
{
	struct trace_stop st = openat_stop();
	const char *real[2] = {"/src/real.txt", NULL};
	char *ev = trace_coproc_event(7, &st, real);
	json_t *j = json_loads(ev, 0, NULL);

	CHECK(j != NULL);
	CHECK(strchr(ev, '\n') == NULL);
	CHECK(json_integer_value(json_object_get(j, "id")) == 7);
	CHECK(strcmp(json_string_value(json_object_get(j, "name")), "openat") == 0);
	CHECK(json_integer_value(json_array_get(json_object_get(j, "args"), 0)) == -100);
	CHECK(strcmp(json_string_value(json_array_get(json_object_get(j, "path"), 0)),
		     "/src/\"hello\".txt") == 0);
	CHECK(json_is_null(json_array_get(json_object_get(j, "path"), 1)));
	CHECK(strcmp(json_string_value(json_array_get(json_object_get(j, "real"), 0)),
		     "/src/real.txt") == 0);
	CHECK(json_is_null(json_array_get(json_object_get(j, "real"), 1)));
	json_decref(j);
	free(ev);
}

static int parse(const char *s, uint64_t id, struct trace_decision *d, struct common_err *e)
{
	memset(e, 0, sizeof *e);
	return trace_coproc_parse_reply(s, strlen(s), id, d, e);
}

static void bad_reply(const char *s, const char *why)
{
	struct trace_decision d;
	struct common_err e;

	CHECK(parse(s, 3, &d, &e) < 0);
	CHECK(strstr(e.why, why) != NULL);
	if (!strstr(e.why, why))
		fprintf(stderr, "  reply %s: wanted \"%s\", got \"%s\"\n", s, why, e.why);
	CHECK(d.path[0] == NULL && d.deny_errno == 0);
}

static void test_replies(void)
{
	struct trace_decision d;
	struct common_err e;

	CHECK(parse("{\"id\":3,\"action\":\"allow\"}", 3, &d, &e) == 0);
	CHECK(!d.deny_errno && !d.set_nr && !d.set_args && !d.path[0]);
	trace_decision_clear(&d);
	CHECK(parse("{\"id\":3,\"action\":\"deny\",\"errno\":\"EACCES\"}", 3, &d, &e) == 0);
	CHECK(d.deny_errno == EACCES);
	trace_decision_clear(&d);
	CHECK(parse("{\"id\":3,\"action\":\"deny\"}", 3, &d, &e) == 0 && d.deny_errno == EPERM);
	trace_decision_clear(&d);
	CHECK(parse("{\"id\":3,\"action\":\"allow\",\"path\":[\"/src/other.txt\"],"
		    "\"args\":[null,null,5,null,null,-1],\"nr\":\"open\"}", 3, &d, &e) == 0);
	CHECK(d.path[0] && strcmp(d.path[0], "/src/other.txt") == 0);
	CHECK(d.set_args == ((1u << 2) | (1u << 5)) && d.args[2] == 5 &&
	      d.args[5] == UINT64_MAX);
	CHECK(d.set_nr && d.nr == 2);
	trace_decision_clear(&d);
	CHECK(parse("{\"id\":3,\"action\":\"record\"}", 3, &d, &e) == 0 && d.record);
	trace_decision_clear(&d);

	bad_reply("{\"id\":3,\"action\":\"allow\"", "malformed JSON");
	bad_reply("[3]", "expected a JSON object");
	bad_reply("{\"id\":4,\"action\":\"allow\"}", "\"id\" must be 3");
	bad_reply("{\"action\":\"allow\"}", "\"id\" must be 3");
	bad_reply("{\"id\":3,\"action\":\"maybe\"}", "allow, deny or record");
	bad_reply("{\"id\":3}", "allow, deny or record");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"x\":1}", "unknown field \"x\"");
	bad_reply("{\"id\":3,\"action\":\"deny\",\"errno\":\"ENOPE\"}", "errno");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"errno\":1}", "belongs to a deny");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"nr\":99999}", "no known syscall");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"args\":[1,2]}", "6 entries");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"args\":[1,2,3,4,5,\"6\"]}", "non-integer");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"path\":[\"/a\",\"\"]}", "bad path");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"path\":[]}", "1 or 2");
	bad_reply("{\"id\":3,\"action\":\"allow\",\"id\":3}", "duplicate");
}

/* A live co-process answering with the given shell snippet per event line. */
static int ask(const char *script, int timeout, struct trace_decision *d, struct common_err *e)
{
	struct trace_coproc *c;
	struct trace_stop st = openat_stop();
	int r;

	memset(e, 0, sizeof *e);
	memset(d, 0, sizeof *d);
	if (trace_coproc_start(script, timeout, &c, e) < 0)
		return -2;
	r = trace_coproc_ask(c, &st, NULL, d, e);
	if (r == 0)
		r = trace_coproc_ask(c, &st, NULL, d, e) == 0 ? 0 : -3;
	trace_coproc_stop(c);
	return r;
}

static void test_live(void)
{
	struct trace_decision d;
	struct common_err e;

	CHECK(ask("while read l; do id=${l#*\\\"id\\\":}; id=${id%%,*}; "
		  "echo \"{\\\"id\\\":$id,\\\"action\\\":\\\"deny\\\",\\\"errno\\\":2}\"; done",
		  2000, &d, &e) == 0);
	CHECK(d.deny_errno == ENOENT);
	trace_decision_clear(&d);
	CHECK(ask("read l; sleep 2", 200, &d, &e) == -1);
	CHECK(strstr(e.why, "late") != NULL);
	CHECK(ask("read l; exit 0", 2000, &d, &e) == -1);
	CHECK(strstr(e.why, "missing") != NULL);
	CHECK(ask("read l; printf '{\"id\":1,'; exit 0", 2000, &d, &e) == -1);
	CHECK(strstr(e.why, "mid-line") != NULL);
	CHECK(ask("read l; echo hello", 2000, &d, &e) == -1);
	CHECK(strstr(e.why, "malformed") != NULL);
	CHECK(ask("exit 0", 2000, &d, &e) == -1); /* gone before the first event */
	CHECK(e.what[0] != 0);
}

int main(void)
{
	test_event();
	test_replies();
	test_live();
	printf("test_coproc: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
