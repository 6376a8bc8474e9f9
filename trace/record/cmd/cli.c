/* sbx-trace's command line: a verb table and an option table, no output. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "trace/record/cmd/cmd-internal.h"

/* A command's 0 / -1 (e) as the exit status; its error printed once. */
static int status(struct trace_cli *c, int rc)
{
	if (rc != 0 && c->e.what[0])
		common_report(&c->e);
	return rc == 0 ? SBX_EXIT_OK : SBX_EXIT_FAIL;
}

static int v_files(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_files(c->args[0], c->fmt, c->hash_inputs, &c->e));
}

static int v_verify(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_verify(c->args[0], c->complete, c->head, c->fmt, &c->e));
}

static int v_filter(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_filter(c->args[0], &c->flt, &c->e));
}

static int v_diff(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_diff(c->args[0], c->args[1], c->fmt, &c->e));
}

static int v_stats(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_stats(c->args[0], c->fmt, &c->e));
}

static int v_timeline(void *p)
{
	struct trace_cli *c = p;
	enum trace_fmt f = c->fmt == TRACE_FMT_CHROME ? c->fmt : TRACE_FMT_TEXT;
	return status(c, trace_cmd_timeline(c->args[0], c->out, f, &c->e));
}

static int v_provenance(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_provenance(c->args[0], c->result, c->adj.store, c->out, &c->e));
}

static int v_verify_provenance(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_verify_provenance(c->args[0], c->adj.store, &c->e));
}

static int v_bisect(void *p)
{
	struct trace_cli *c = p;
	return status(c, trace_cmd_bisect(c->args[0], c->args[1], c->fmt, &c->e));
}

static int v_adjudicate(void *p)
{
	struct trace_cli *c = p;
	c->adj.a = c->args[0];
	c->adj.b = c->args[1];
	c->adj.env_set = c->envs;
	c->adj.fmt = c->fmt;
	int rc = trace_adjudicate(&c->adj, &c->e);
	/* the verdict: 0 both, 10 A, 11 B, 12 neither (sbx-trace(1)) */
	return rc >= 0 ? rc : status(c, rc);
}

static const struct common_verb trace_verbs[] = {
	{ "files", v_files, "files [--format json|text|make] [--hash-inputs] TRACE", 1, 1 },
	{ "verify", v_verify, "verify [--format json|text] [--complete] [--head HEX] TRACE", 1, 1 },
	{ "filter", v_filter, "filter [--pid PID] [--class CLASS[,CLASS...]] [--path GLOB] "
			      "[--name NAME] TRACE", 1, 1 },
	{ "diff", v_diff, "diff [--format json|text] TRACE_A TRACE_B", 2, 2 },
	{ "stats", v_stats, "stats [--format json|text] TRACE", 1, 1 },
	{ "timeline", v_timeline, "timeline [--format html|chrome] -o FILE TRACE", 1, 1 },
	{ "provenance", v_provenance, "provenance [--store DIR] [--result FILE] [-o FILE] TRACE", 1, 1 },
	{ "verify-provenance", v_verify_provenance, "verify-provenance [--store DIR] FILE", 1, 1 },
	{ "bisect", v_bisect, "bisect [--format json|text] TRACE_A TRACE_B", 2, 2 },
	{ "adjudicate", v_adjudicate,
	  "adjudicate [--store DIR] [--env-clear | --env-inherit] [--env K=V]...\n"
	  "                            [--ns DIR] [--timeout MS] [--allow-rw] [--format json|text]\n"
	  "                            TRACE_A TRACE_B", 2, 2 },
};
#define NVERBS (sizeof trace_verbs / sizeof trace_verbs[0])

static void trace_cli_usage(FILE *f)
{
	common_verb_usage(f, trace_verbs, NVERBS);
}

static const char *const fmt_names[] = {
	[TRACE_FMT_JSON] = "json", [TRACE_FMT_TEXT] = "text", [TRACE_FMT_MAKE] = "make",
	[TRACE_FMT_CHROME] = "chrome", [TRACE_FMT_HTML] = "html",
};

/* --format NAME: json and text for every command, make for files, html and chrome
 * for timeline (checked once the verb is known). */
static int parse_fmt(const struct common_opt *o, void *cli, const char *v,
		     struct common_err *e)
{
	for (size_t i = 0; i < sizeof fmt_names / sizeof fmt_names[0]; i++)
		if (!strcmp(v, fmt_names[i])) {
			*COMMON_OPT_FIELD(o, cli, enum trace_fmt) = (enum trace_fmt)i;
			return 0;
		}
	return common_errf(e, "--format", "unknown format \"%s\" (json, text, make, html or chrome)", v);
}

static int parse_pid(const struct common_opt *o, void *cli, const char *v,
		     struct common_err *e)
{
	uint64_t n;

	if (common_parse_u64(v, 0x7fffffff, &n, e) < 0 || n == 0)
		return common_errf(e, "--pid", "expected a process id, got \"%s\"", v);
	*COMMON_OPT_FIELD(o, cli, pid_t) = (pid_t)n;
	return 0;
}

static int parse_class(const struct common_opt *o, void *cli, const char *v,
		       struct common_err *e)
{
	return trace_class_parse(v, COMMON_OPT_FIELD(o, cli, unsigned), e);
}

/* --env NAME=VALUE, up to TRACE_CLI_ENV_MAX of them */
static int parse_env(const struct common_opt *o, void *cli, const char *v,
		     struct common_err *e)
{
	struct trace_cli *c = cli;

	(void)o;
	if (!strchr(v, '=') || v[0] == '=' || c->adj.nenv_set >= TRACE_CLI_ENV_MAX)
		return common_errf(e, "--env", "\"%s\" is not NAME=VALUE (at most 256)", v);
	c->envs[c->adj.nenv_set++] = v;
	return 0;
}

static int parse_timeout(const struct common_opt *o, void *cli, const char *v,
			 struct common_err *e)
{
	uint64_t *ms = COMMON_OPT_FIELD(o, cli, uint64_t);

	if (common_parse_u64(v, 86400000, ms, e) < 0 || !*ms)
		return common_errf(e, "--timeout", "expected milliseconds, got \"%s\"", v);
	return 0;
}

static const struct common_opt_type fmt_type = { 1, parse_fmt }, pid_type = { 1, parse_pid },
	class_type = { 1, parse_class }, env_type = { 1, parse_env },
	timeout_type = { 1, parse_timeout };

/* A bit per trace_verbs row. */
enum { FILES = 1u << 0, VERIFY = 1u << 1, FILTER = 1u << 2, DIFF = 1u << 3, STATS = 1u << 4,
       TIMELINE = 1u << 5, PROVENANCE = 1u << 6, VERIFY_PROV = 1u << 7, BISECT = 1u << 8,
       ADJUDICATE = 1u << 9 };
#define OPT(...) COMMON_OPT(struct trace_cli, __VA_ARGS__)

static const struct common_opt trace_opts[] = {
	OPT("format", &fmt_type, fmt, FILES | VERIFY | DIFF | STATS | TIMELINE | BISECT | ADJUDICATE),
	OPT("hash-inputs", &common_opt_flag, hash_inputs, FILES),
	OPT("complete", &common_opt_flag, complete, VERIFY),
	OPT("head", &common_opt_str, head, VERIFY),
	OPT("pid", &pid_type, flt.pid_tree, FILTER),
	OPT("class", &class_type, flt.classes, FILTER),
	OPT("path", &common_opt_str, flt.glob, FILTER),
	OPT("name", &common_opt_str, flt.name, FILTER),
	OPT("output", &common_opt_str, out, TIMELINE | PROVENANCE, .letter = 'o'),
	OPT("store", &common_opt_str, adj.store, PROVENANCE | VERIFY_PROV | ADJUDICATE),
	OPT("result", &common_opt_str, result, PROVENANCE),
	OPT("env", &env_type, envs, ADJUDICATE),
	OPT("env-clear", &common_opt_flag, adj.env_clear, ADJUDICATE),
	OPT("env-inherit", &common_opt_flag, adj.env_clear, ADJUDICATE, .flag = -1),
	OPT("ns", &common_opt_str, adj.ns_dir, ADJUDICATE),
	OPT("timeout", &timeout_type, adj.timeout_ms, ADJUDICATE),
	OPT("allow-rw", &common_opt_flag, adj.allow_rw, ADJUDICATE),
};

static const struct common_cli trace_cli = {
	.opts = trace_opts, .nopts = sizeof trace_opts / sizeof trace_opts[0],
	.verbs = trace_verbs, .nverbs = NVERBS,
};

int trace_cli_parse(int argc, char **argv, struct trace_cli *c, struct common_err *e)
{
	struct common_words w;
	int rc;

	memset(c, 0, sizeof *c);
	if ((rc = common_cli_parse(&trace_cli, argc, argv, c, &w, e)) != 0)
		return rc;
	c->verb = w.verb;
	c->args = w.operands;
	c->nargs = w.noperands;
	if ((c->fmt == TRACE_FMT_MAKE && c->verb->run != v_files) ||
	    ((c->fmt == TRACE_FMT_HTML || c->fmt == TRACE_FMT_CHROME) && c->verb->run != v_timeline))
		return common_errf(e, "--format", "unknown format \"%s\" for %s", fmt_names[c->fmt],
				   c->verb->name);
	if (c->verb->run == v_timeline && !c->out)
		return common_errf(e, "timeline", "needs -o FILE");
	return 0;
}

int trace_cli_main(int argc, char **argv, const struct trace_adj_snap *snap)
{
	struct trace_cli c;
	int rc = common_cli_parsed(trace_cli_parse(argc, argv, &c, &c.e), &c.e, trace_cli_usage, SBX_EXIT_USAGE);

	c.adj.snap = snap;
	if (rc >= 0)
		return rc;
	c.e.what[0] = 0;
	return c.verb->run(&c);
}
