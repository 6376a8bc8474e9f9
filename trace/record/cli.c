/* sbx-trace's command line: a verb table, one getopt_long parser, no output. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "trace/trace.h"

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

void trace_cli_usage(FILE *f)
{
	common_verb_usage(f, trace_verbs, NVERBS);
}

/* --format NAME: json and text for every command, make for files, html and
 * chrome for timeline. */
static int parse_fmt(struct trace_cli *c, const char *v, struct common_err *e)
{
	int (*run)(void *) = c->verb->run;

	if (!strcmp(v, "json"))
		c->fmt = TRACE_FMT_JSON;
	else if (!strcmp(v, "text") || (!strcmp(v, "html") && run == v_timeline))
		c->fmt = TRACE_FMT_TEXT;
	else if (!strcmp(v, "make") && run == v_files)
		c->fmt = TRACE_FMT_MAKE;
	else if (!strcmp(v, "chrome") && run == v_timeline)
		c->fmt = TRACE_FMT_CHROME;
	else
		return common_errf(e, "--format", "unknown format \"%s\" for %s", v, c->verb->name);
	return 0;
}

static int parse_opt(struct trace_cli *c, int o, const char *v, struct common_err *e)
{
	uint64_t n;

	switch (o) {
	case 'f': return parse_fmt(c, v, e);
	case 'H': c->hash_inputs = 1; break;
	case 'c': c->complete = 1; break;
	case 'h': c->head = v; break;
	case 'p':
		if (common_parse_u64(v, 0x7fffffff, &n, e) < 0 || n == 0)
			return common_errf(e, "--pid", "expected a process id, got \"%s\"", v);
		c->flt.pid_tree = (pid_t)n;
		break;
	case 'C': return trace_class_parse(v, &c->flt.classes, e);
	case 'g': c->flt.glob = v; break;
	case 'n': c->flt.name = v; break;
	case 'o': c->out = v; break;
	case 's': c->adj.store = v; break;
	case 'E': c->adj.env_clear = 1; break;
	case 'I': c->adj.env_clear = -1; break;
	case 'N': c->adj.ns_dir = v; break;
	case 'W': c->adj.allow_rw = 1; break;
	case 'r': c->result = v; break;
	case 'e':
		if (!strchr(v, '=') || v[0] == '=' || c->adj.nenv_set >= TRACE_CLI_ENV_MAX)
			return common_errf(e, "--env", "\"%s\" is not NAME=VALUE (at most 256)", v);
		c->envs[c->adj.nenv_set++] = v;
		break;
	case 'T':
		if (common_parse_u64(v, 86400000, &c->adj.timeout_ms, e) < 0 || !c->adj.timeout_ms)
			return common_errf(e, "--timeout", "expected milliseconds, got \"%s\"", v);
		break;
	}
	return 0;
}

int trace_cli_parse(int argc, char **argv, struct trace_cli *c, struct common_err *e)
{
	static const struct option lo[] = {
		{"format", required_argument, 0, 'f'}, {"hash-inputs", no_argument, 0, 'H'},
		{"complete", no_argument, 0, 'c'},      {"head", required_argument, 0, 'h'},
		{"pid", required_argument, 0, 'p'},     {"class", required_argument, 0, 'C'},
		{"path", required_argument, 0, 'g'},    {"name", required_argument, 0, 'n'},
		{"output", required_argument, 0, 'o'},  {"help", no_argument, 0, '?' + 256},
		{"store", required_argument, 0, 's'},   {"env", required_argument, 0, 'e'},
		{"env-clear", no_argument, 0, 'E'},     {"env-inherit", no_argument, 0, 'I'},
		{"ns", required_argument, 0, 'N'},      {"timeout", required_argument, 0, 'T'},
		{"allow-rw", no_argument, 0, 'W'},     {"result", required_argument, 0, 'r'},
		{0, 0, 0, 0},
	};
	int o;

	memset(c, 0, sizeof *c);
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return 1;
	if (!(c->verb = common_verb_find(trace_verbs, NVERBS, argc > 1 ? argv[1] : NULL, e)))
		return -1;
	optind = 0; /* a fresh scan of the words after the verb; options may follow operands */
	opterr = 0;
	while ((o = getopt_long(argc - 1, argv + 1, ":o:", lo, NULL)) != -1) {
		if (o == '?' + 256)
			return 1;
		if (o == '?' || o == ':')
			return common_getopt_err(o, argv + 1, e);
		if (parse_opt(c, o, optarg, e) < 0)
			return -1;
	}
	c->nargs = argc - 1 - optind;
	c->args = argv + 1 + optind;
	if (common_verb_args(c->verb, c->nargs, e) < 0)
		return -1;
	if (c->verb->run == v_timeline && !c->out)
		return common_errf(e, "timeline", "needs -o FILE");
	return 0;
}

int trace_cli_main(int argc, char **argv)
{
	struct trace_cli c;
	int rc = common_cli_parsed(trace_cli_parse(argc, argv, &c, &c.e), &c.e, trace_cli_usage, SBX_EXIT_USAGE);

	if (rc >= 0)
		return rc;
	c.e.what[0] = 0;
	return c.verb->run(&c);
}
