/* The five command lines: every parser, every option, every error path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/front/front-internal.h"
#include "snap/snap.h"
#include "trace/trace.h"
#include "tests/unit/unit.h"

/* A mutable argv (getopt_long permutes it) from the words after the program. */
#define ARGV(...) ((char *[]){ "prog", __VA_ARGS__, NULL })

static int argc_of(char **v)
{
	int n = 0;

	while (v[n])
		n++;
	return n;
}

static struct common_err e;

/* -1 with exactly "WHAT: WHY" (WHY empty: "WHAT") in e. */
static int failed_with(int rc, const char *msg)
{
	char got[sizeof e.what + sizeof e.why + 2];

	snprintf(got, sizeof got, e.why[0] ? "%s: %s" : "%s", e.what, e.why);
	if (rc == -1 && !strcmp(got, msg))
		return 1;
	fprintf(stderr, "rc %d, message \"%s\", want \"%s\"\n", rc, got, msg);
	return 0;
}

static int run_parse(char **v, unsigned flags, struct trace_run_opts *o, const char **operand)
{
	trace_run_opts_free(o);
	memset(o, 0, sizeof *o);
	o->result_fd = -1;
	memset(&e, 0, sizeof e);
	return trace_run_parse(argc_of(v), v, flags, o, operand, &e);
}

static void test_common_verbs(void)
{
	static const struct common_verb v[] = {
		{ "one", NULL, "one X", 1, 1 }, { "any", NULL, "any [X [Y]]", 0, 2 },
	};

	CHECK(common_verb_find(v, 2, "any", &e) == &v[1]);
	CHECK(failed_with(common_verb_find(v, 2, "frob", &e) ? 0 : -1, "unknown command \"frob\""));
	CHECK(failed_with(common_verb_find(v, 2, NULL, &e) ? 0 : -1, "missing command"));
	CHECK(common_verb_args(&v[0], 1, &e) == 0 && common_verb_args(&v[1], 0, &e) == 0);
	CHECK(failed_with(common_verb_args(&v[0], 2, &e), "one: takes 1 operand, not 2"));
	CHECK(failed_with(common_verb_args(&v[1], 3, &e), "any: takes 0 to 2 operands, not 3"));
}

static FILE *usage_seen;
static void usage_probe(FILE *f)
{
	usage_seen = f;
}

/* Help goes to stdout with status 0, an error to stderr with the tool's code,
 * a parsed command line on to the command. */
static void test_common_parsed(void)
{
	struct common_err e = { "x", "bad" };

	usage_seen = NULL;
	CHECK(common_cli_parsed(1, &e, usage_probe, 2) == 0 && usage_seen == stdout);
	usage_seen = NULL;
	CHECK(common_cli_parsed(-1, &e, usage_probe, 2) == 2 && usage_seen == stderr);
	usage_seen = NULL;
	CHECK(common_cli_parsed(0, &e, usage_probe, 2) == -1 && usage_seen == NULL);
}

static void test_run(void)
{
	struct trace_run_opts o = { .result_fd = -1 };
	const char *digest;

	CHECK(run_parse(ARGV("--store", "/s", "--lease", "L1", "--env", "A=1", "--env-clear",
			     "--trace=t.jsonl", "--trace-level", "all", "--policy", "p.json",
			     "--inspect-exec", "x", "--inspect-timeout", "5", "--state-in", "i",
			     "--state-out", "o", "--max-procs", "9", "--deterministic",
			     "--snapshot-every-batches", "3", "--snapshot-on-exit-signal",
			     "--result", "r.json", "--chdir", "/tmp", "--socket", "/run/x.sock",
			     "--ro", "/etc:/e", "--rw", "/tmp", "--", "/bin/echo", "--store", "hi"),
		      0, &o, NULL) == 0);
	CHECK_STR(o.store, "/s");
	CHECK_STR(o.lease, "L1");
	CHECK(o.nenv_set == 1 && o.env_clear == 1 && o.deterministic && o.max_procs == 9);
	CHECK_STR(o.trace_path, "t.jsonl");
	CHECK(o.trace_level == TRACE_LEVEL_ALL);
	CHECK(o.inspect_timeout_ms == 5 && o.snapshot_every == 3 && o.snapshot_on_exit_signal);
	CHECK_STR(o.state_in, "i");
	CHECK_STR(o.state_out, "o");
	CHECK(o.nmounts == 2 && o.nsockets == 1);
	CHECK(o.argv && !strcmp(o.argv[0], "/bin/echo") && !strcmp(o.argv[1], "--store"));
	/* the program starts at the first word that is not an option */
	CHECK(run_parse(ARGV("--ephemeral", "--limits", "fuel=10", "--fees", "fuel=1",
			     "--lifetime", "4", "--escrow", "7", "--principal", "p",
			     "--host-program", "h", "--env-inherit", "prog", "--lease", "x"),
			0, &o, NULL) == 0);
	CHECK(o.ephemeral && o.lifetime == 4 && o.escrow == 7 && o.env_clear == -1);
	CHECK(o.argv && !strcmp(o.argv[0], "prog") && !strcmp(o.argv[1], "--lease") && !o.lease);
	CHECK(run_parse(ARGV("--help"), 0, &o, NULL) == 1);
	CHECK(failed_with(run_parse(ARGV("--bogus", "--", "x"), 0, &o, NULL),
			  "--bogus: unknown option"));
	CHECK(failed_with(run_parse(ARGV("--ephemeral", "--store"), 0, &o, NULL),
			  "--store: needs a value"));
	CHECK(failed_with(run_parse(ARGV("--ephemeral=yes", "--", "x"), 0, &o, NULL),
			  "--ephemeral: takes no value"));
	CHECK(failed_with(run_parse(ARGV("--lifetime", "4x", "--", "x"), 0, &o, NULL),
			  "--lifetime: 4x: not a non-negative integer"));
	CHECK(failed_with(run_parse(ARGV("--max-procs", "1", "--", "x"), 0, &o, NULL),
			  "--max-procs: 1: between 2 and 1048576"));
	CHECK(failed_with(run_parse(ARGV("--inspect-timeout", "0", "--", "x"), 0, &o, NULL),
			  "--inspect-timeout: expected milliseconds, 1 to 3600000"));
	CHECK(failed_with(run_parse(ARGV("--ephemeral"), 0, &o, NULL),
			  "PROGRAM: missing (-- PROGRAM [ARG...])"));
	CHECK(failed_with(run_parse(ARGV("--chdir", "rel", "--", "x"), 0, &o, NULL),
			  "--chdir: \"rel\" is not an absolute path"));
	CHECK(failed_with(run_parse(ARGV("--trace-level", "most", "--", "x"), 0, &o, NULL),
			  "--trace-level: unknown level \"most\" (exec, file or all)"));
	CHECK(failed_with(run_parse(ARGV("--snapshot-every-batches", "0", "--", "x"), 0, &o, NULL),
			  "--snapshot-every-batches: 0: at least 1"));
	CHECK(failed_with(run_parse(ARGV("--ephemeral", "--"), 0, &o, NULL),
			  "PROGRAM: missing (-- PROGRAM [ARG...])"));
	/* --chain N: at most N leases, 1 to 4096; sbx-run's only */
	CHECK(run_parse(ARGV("--ephemeral", "--chain", "3", "--", "prog"), 0, &o, NULL) == 0 &&
	      o.chain == 3);
	CHECK(failed_with(run_parse(ARGV("--chain", "0", "--", "x"), 0, &o, NULL),
			  "--chain: 0: between 1 and 4096"));
	CHECK(failed_with(run_parse(ARGV("--chain", "4097", "--", "x"), 0, &o, NULL),
			  "--chain: 4097: between 1 and 4096"));
	CHECK(failed_with(run_parse(ARGV("abc", "--lease", "L", "--chain", "2"), TRACE_RUN_RESTORE,
				    &o, &digest), "--chain: unknown option"));
	CHECK(run_parse(ARGV("--ephemeral", "--", "prog"), 0, &o, NULL) == 0 &&
	      o.trace_level == TRACE_LEVEL_FILE && !strcmp(o.argv[0], "prog"));

	/* sbx-restore: one operand anywhere before "--", its own subset of options */
	CHECK(run_parse(ARGV("--store", "/s", "abc", "--lease", "L2", "--ro", "/etc", "--env", "B"),
			TRACE_RUN_RESTORE, &o, &digest) == 0);
	CHECK_STR(digest, "abc");
	CHECK_STR(o.lease, "L2");
	CHECK(o.argv == NULL && o.nmounts == 1 && o.nenv_set == 1);
	CHECK(run_parse(ARGV("abc", "--lease", "L2", "--", "prog", "arg"), TRACE_RUN_RESTORE, &o,
			&digest) == 0);
	CHECK(o.argv && !strcmp(o.argv[0], "prog") && !strcmp(o.argv[1], "arg"));
	CHECK(run_parse(ARGV("--lease", "L2", "abc", "--trace-level", "exec", "--"), TRACE_RUN_RESTORE,
			&o, &digest) == 0 && o.argv == NULL && o.trace_level == TRACE_LEVEL_EXEC);
	CHECK(run_parse(ARGV("--help"), TRACE_RUN_RESTORE, &o, &digest) == 1);
	CHECK(failed_with(run_parse(ARGV("abc", "--lease", "L", "--ephemeral"), TRACE_RUN_RESTORE,
				    &o, &digest), "--ephemeral: unknown option"));
	CHECK(failed_with(run_parse(ARGV("abc", "--deterministic", "--lease", "L"),
				    TRACE_RUN_RESTORE, &o, &digest), "--deterministic: unknown option"));
	CHECK(failed_with(run_parse(ARGV("abc", "--lease"), TRACE_RUN_RESTORE, &o, &digest),
			  "--lease: needs a value"));
	CHECK(failed_with(run_parse(ARGV("abc", "def", "--lease", "L"), TRACE_RUN_RESTORE, &o,
				    &digest), "def: unexpected operand (one DIGEST)"));
	CHECK(failed_with(run_parse(ARGV("--lease", "L"), TRACE_RUN_RESTORE, &o, &digest),
			  "DIGEST: missing (the snapshot to restore)"));
	CHECK(failed_with(run_parse(ARGV("abc"), TRACE_RUN_RESTORE, &o, &digest),
			  "--lease: required (the Funded lease to restore into)"));
	CHECK(failed_with(run_parse(ARGV("abc", "--lease", "L", "--max-procs", "x"),
				  TRACE_RUN_RESTORE, &o, &digest),
			  "--max-procs: x: not a non-negative integer"));
	trace_run_opts_free(&o);
}

static int trace_parse(char **v, struct trace_cli *c)
{
	memset(&e, 0, sizeof e);
	return trace_cli_parse(argc_of(v), v, c, &e);
}

static void test_trace(void)
{
	static struct trace_cli c;

	CHECK(trace_parse(ARGV("files", "t", "--format", "make", "--hash-inputs"), &c) == 0);
	CHECK(!strcmp(c.verb->name, "files") && c.fmt == TRACE_FMT_MAKE && c.hash_inputs);
	CHECK(c.nargs == 1 && !strcmp(c.args[0], "t"));
	CHECK(trace_parse(ARGV("verify", "--complete", "--head", "ab", "--format=text", "t"), &c) == 0);
	CHECK(c.complete && c.fmt == TRACE_FMT_TEXT);
	CHECK_STR(c.head, "ab");
	CHECK(trace_parse(ARGV("filter", "--pid", "12", "--class", "file,process", "--path", "/a*",
			       "--name", "openat", "t"), &c) == 0);
	CHECK(c.flt.pid_tree == 12 && c.flt.classes == (TRACE_CLASS_FILE | TRACE_CLASS_PROCESS));
	CHECK_STR(c.flt.glob, "/a*");
	CHECK_STR(c.flt.name, "openat");
	CHECK(trace_parse(ARGV("timeline", "--format", "chrome", "-o", "out", "t"), &c) == 0);
	CHECK(c.fmt == TRACE_FMT_CHROME);
	CHECK_STR(c.out, "out");
	CHECK(trace_parse(ARGV("provenance", "--store", "s", "--result", "r", "--output", "o", "t"),
			  &c) == 0);
	CHECK_STR(c.result, "r");
	CHECK_STR(c.adj.store, "s");
	CHECK(trace_parse(ARGV("adjudicate", "a", "b", "--env", "K=V", "--env-inherit", "--ns", "d",
			       "--timeout", "5", "--allow-rw"), &c) == 0);
	CHECK(c.adj.nenv_set == 1 && c.adj.env_clear == -1 && c.adj.timeout_ms == 5 && c.adj.allow_rw);
	CHECK_STR(c.envs[0], "K=V");
	CHECK(trace_parse(ARGV("adjudicate", "--env-clear", "a", "b"), &c) == 0 && c.adj.env_clear == 1);
	/* options before the verb, and "--" ending them */
	CHECK(trace_parse(ARGV("--format", "json", "stats", "F"), &c) == 0);
	CHECK(!strcmp(c.verb->name, "stats") && c.fmt == TRACE_FMT_JSON && c.nargs == 1);
	CHECK_STR(c.args[0], "F");
	CHECK(trace_parse(ARGV("--format=text", "diff", "--", "-a", "--format"), &c) == 0);
	CHECK(c.fmt == TRACE_FMT_TEXT && c.nargs == 2 && !strcmp(c.args[0], "-a"));
	CHECK(trace_parse(ARGV("-o", "t.html", "timeline", "--format", "html", "t"), &c) == 0);
	CHECK(c.fmt == TRACE_FMT_HTML);
	CHECK_STR(c.out, "t.html");
	CHECK(trace_parse(ARGV("--help"), &c) == 1);
	CHECK(trace_parse(ARGV("stats", "--help"), &c) == 1);
	CHECK(failed_with(trace_parse(ARGV("frob"), &c), "unknown command \"frob\""));
	CHECK(failed_with(trace_parse((char *[]){ "prog", NULL }, &c), "missing command"));
	CHECK(failed_with(trace_parse(ARGV("stats", "--bogus", "t"), &c), "--bogus: unknown option"));
	CHECK(failed_with(trace_parse(ARGV("stats", "t", "--format"), &c), "--format: needs a value"));
	CHECK(failed_with(trace_parse(ARGV("stats", "--format", "make", "t"), &c),
			  "--format: unknown format \"make\" for stats"));
	CHECK(failed_with(trace_parse(ARGV("--format", "html", "stats", "t"), &c),
			  "--format: unknown format \"html\" for stats"));
	CHECK(failed_with(trace_parse(ARGV("stats", "--format", "xml", "t"), &c),
			  "--format: unknown format \"xml\" (json, text, make, html or chrome)"));
	CHECK(failed_with(trace_parse(ARGV("--hash-inputs", "stats", "t"), &c),
			  "--hash-inputs: not an option of this command"));
	CHECK(failed_with(trace_parse(ARGV("stats", "-x", "t"), &c), "-x: unknown option"));
	CHECK(failed_with(trace_parse(ARGV("stats", "t", "--complete=yes"), &c),
			  "--complete: takes no value"));
	CHECK(failed_with(trace_parse(ARGV("filter", "--pid", "0", "t"), &c),
			  "--pid: expected a process id, got \"0\""));
	CHECK(failed_with(trace_parse(ARGV("adjudicate", "--timeout", "x", "a", "b"), &c),
			  "--timeout: expected milliseconds, got \"x\""));
	CHECK(failed_with(trace_parse(ARGV("adjudicate", "--env", "=x", "a", "b"), &c),
			  "--env: \"=x\" is not NAME=VALUE (at most 256)"));
	CHECK(trace_parse(ARGV("filter", "--class", "nope", "t"), &c) == -1);
	CHECK(failed_with(trace_parse(ARGV("diff", "a"), &c), "diff: takes 2 operands, not 1"));
	CHECK(failed_with(trace_parse(ARGV("timeline", "t"), &c), "timeline: needs -o FILE"));
}

static int snap_parse(char **v, struct snap_cli *c)
{
	memset(&e, 0, sizeof e);
	return snap_cli_parse(argc_of(v), v, c, &e);
}

static void test_snap(void)
{
	struct snap_cli c;

	CHECK(snap_parse(ARGV("--store", "s", "take", "L1", "--stop", "--principal", "p",
			      "--format", "text"), &c) == 0);
	CHECK(!strcmp(c.verb->name, "take") && c.stop && c.fmt == COMMON_FMT_TEXT && c.npos == 1);
	CHECK_STR(c.store, "s");
	CHECK_STR(c.principal, "p");
	CHECK_STR(c.pos[0], "L1");
	CHECK(snap_parse(ARGV("list"), &c) == 0 && c.npos == 0);
	CHECK(snap_parse(ARGV("export", "abc", "-o", "f.tar"), &c) == 0);
	CHECK_STR(c.out, "f.tar");
	CHECK(snap_parse(ARGV("export", "--output=g.tar", "abc"), &c) == 0);
	CHECK_STR(c.out, "g.tar");
	CHECK(snap_parse(ARGV("show", "--help"), &c) == 1);
	CHECK(failed_with(snap_parse(ARGV("frob"), &c), "unknown command \"frob\""));
	CHECK(failed_with(snap_parse((char *[]){ "prog", NULL }, &c), "missing command"));
	CHECK(failed_with(snap_parse(ARGV("--bogus", "list"), &c), "--bogus: unknown option"));
	CHECK(failed_with(snap_parse(ARGV("list", "--store"), &c), "--store: needs a value"));
	CHECK(failed_with(snap_parse(ARGV("list", "--format", "xml"), &c),
			  "--format: unknown format \"xml\" (json or text)"));
	CHECK(failed_with(snap_parse(ARGV("show"), &c), "show: takes 1 operand, not 0"));
	CHECK(failed_with(snap_parse(ARGV("list", "a", "b"), &c), "list: takes 0 to 1 operands, not 2"));
	CHECK(failed_with(snap_parse(ARGV("export", "abc"), &c), "export: needs -o FILE.tar"));
	CHECK(failed_with(snap_parse(ARGV("list", "--stop"), &c),
			  "--stop: not an option of this command"));
	/* options on both sides of the verb and its operand */
	CHECK(snap_parse(ARGV("--stop", "take", "--store", "s", "L1", "--format=text"), &c) == 0);
	CHECK(c.stop && c.fmt == COMMON_FMT_TEXT && c.npos == 1);
	CHECK_STR(c.store, "s");
	CHECK(snap_parse(ARGV("-o", "f.tar", "export", "--", "-abc"), &c) == 0);
	CHECK_STR(c.pos[0], "-abc");
	CHECK(snap_parse(ARGV("export", "-og.tar", "abc"), &c) == 0);
	CHECK_STR(c.out, "g.tar");
}

static int lease_parse(char **v, struct lease_cli *c)
{
	memset(&e, 0, sizeof e);
	return lease_cli_parse(argc_of(v), v, c, &e);
}

static void test_lease(void)
{
	struct lease_cli c;

	CHECK(lease_parse(ARGV("--store", "s", "--format", "text", "request", "--image", "/bin/true",
			       "--principal", "p", "--host-program", "h", "--limits", "fuel=5",
			       "--lifetime", "3", "--escrow", "2", "--fees", "fuel=1"), &c) == 0);
	CHECK(!strcmp(c.verb->name, "request") && c.fmt == COMMON_FMT_TEXT && c.npos == 0);
	CHECK_STR(c.req.image, "/bin/true");
	CHECK_STR(c.req.principal, "p");
	CHECK_STR(c.req.host_program, "h");
	CHECK(c.req.has_limit[LEASE_DIM_FUEL] && c.req.limits[LEASE_DIM_FUEL] == 5);
	CHECK(c.req.fees[LEASE_DIM_FUEL] == 1 && c.req.lifetime == 3 && c.req.escrow == 2);
	CHECK(lease_parse(ARGV("fund", "L1", "--amount", "5", "--evidence", "-"), &c) == 0);
	CHECK_STR(c.pos[0], "L1");
	CHECK(c.amount == 5);
	CHECK_STR(c.evidence, "-");
	CHECK(lease_parse(ARGV("observe", "--usage", "fuel=1", "--evidence", "f"), &c) == 0);
	CHECK(c.usage_given[LEASE_DIM_FUEL] && c.usage[LEASE_DIM_FUEL] == 1);
	CHECK(lease_parse(ARGV("list"), &c) == 0 && c.state == -1);
	CHECK(lease_parse(ARGV("list", "--principal", "p", "--state", "Active"), &c) == 0);
	CHECK(c.state == LEASE_ACTIVE);
	CHECK(lease_parse(ARGV("--help"), &c) == 1);
	CHECK(lease_parse(ARGV("show", "--help"), &c) == 1);
	CHECK(failed_with(lease_parse(ARGV("frob"), &c), "unknown command \"frob\""));
	CHECK(failed_with(lease_parse((char *[]){ "prog", NULL }, &c), "missing command"));
	CHECK(failed_with(lease_parse(ARGV("--bogus", "list"), &c), "--bogus: unknown option"));
	CHECK(failed_with(lease_parse(ARGV("list", "--bogus"), &c), "--bogus: unknown option"));
	CHECK(failed_with(lease_parse(ARGV("--store"), &c), "--store: needs a value"));
	CHECK(failed_with(lease_parse(ARGV("fund", "--amount"), &c), "--amount: needs a value"));
	CHECK(failed_with(lease_parse(ARGV("--format", "xml", "list"), &c),
			  "--format: unknown format \"xml\" (json or text)"));
	CHECK(lease_parse(ARGV("--image", "x", "request"), &c) == 0);
	CHECK_STR(c.req.image, "x");
	CHECK(lease_parse(ARGV("list", "--format=json"), &c) == 0 && c.fmt == COMMON_FMT_JSON);
	CHECK(lease_parse(ARGV("--format=text", "list"), &c) == 0 && c.fmt == COMMON_FMT_TEXT);
	CHECK(lease_parse(ARGV("show", "--store", "s", "L1", "--format", "text"), &c) == 0);
	CHECK(c.npos == 1 && c.fmt == COMMON_FMT_TEXT);
	CHECK(failed_with(lease_parse(ARGV("--amount", "3", "show", "L1"), &c),
			  "--amount: not an option of this command"));
	CHECK(failed_with(lease_parse(ARGV("show", "--amount", "3", "L1"), &c),
			  "--amount: not an option of this command"));
	CHECK(failed_with(lease_parse(ARGV("request"), &c), "request: needs --image"));
	CHECK(failed_with(lease_parse(ARGV("request", "--image", "x", "--lifetime", "0"), &c),
			  "--lifetime: 0 is outside 1..1000000"));
	CHECK(failed_with(lease_parse(ARGV("list", "--state", "Nope"), &c),
			  "--state: unknown state \"Nope\" (Requested, Funded, Active, Settling, "
			  "Expired, Destroyed)"));
	CHECK(failed_with(lease_parse(ARGV("fund", "--evidence", "x"), &c), "fund: needs --amount"));
	CHECK(failed_with(lease_parse(ARGV("observe", "--evidence", "x"), &c), "observe: needs --usage"));
	CHECK(failed_with(lease_parse(ARGV("show"), &c), "show: takes 1 operand, not 0"));
	CHECK(failed_with(lease_parse(ARGV("tick", "1", "2"), &c), "tick: takes 0 to 1 operands, not 2"));
	CHECK(failed_with(lease_parse(ARGV("request", "--image", "x", "L1"), &c),
			  "request: takes 0 operands, not 1"));
}

int main(void)
{
	test_common_verbs();
	test_common_parsed();
	test_run();
	test_trace();
	test_snap();
	test_lease();
	return unit_finish("test_cli");
}
