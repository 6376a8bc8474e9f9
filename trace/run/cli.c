/* sbx-run's command line, and sbx-restore's: one table of options, one parser. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "trace/trace.h"

/* One row per option: its value is trace_run_opt()'s to parse; add rows, not code. */
static const struct {
	const char *name;
	int arg;
	int restore; /* sbx-restore takes it too */
} run_options[] = {
	{ "store", 1, 1 }, { "lease", 1, 1 }, { "ephemeral", 0, 0 },
	{ "limits", 1, 0 }, { "fees", 1, 0 }, { "lifetime", 1, 0 }, { "escrow", 1, 0 },
	{ "principal", 1, 0 }, { "host-program", 1, 0 },
	{ "ro", 1, 1 }, { "rw", 1, 1 }, { "mount", 1, 1 }, { "owner", 1, 1 }, { "socket", 1, 1 },
	{ "chdir", 1, 1 }, { "env-clear", 0, 1 }, { "env-inherit", 0, 1 }, { "env", 1, 1 },
	{ "result", 1, 1 }, { "result-fd", 1, 1 },
	{ "max-procs", 1, 1 }, { "snapshot-every-batches", 1, 0 }, { "snapshot-on-exit-signal", 0, 0 },
	{ "trace", 1, 1 }, { "trace-level", 1, 1 },
	{ "policy", 1, 1 }, { "inspect-exec", 1, 1 }, { "inspect-timeout", 1, 1 },
	{ "state-in", 1, 0 }, { "state-out", 1, 0 },
	{ "deterministic", 0, 0 }, { "memory-sampled", 0, 1 }, { "memory-exact", 0, 1 },
	{ "help", 0, 1 },
};
#define NOPTIONS (sizeof run_options / sizeof run_options[0])

const char trace_run_usage[] =
	"usage: sbx-run [--store DIR] (--lease ID | --ephemeral [request options])\n"
	"               [--ro SRC[:DST]] [--rw SRC[:DST]] [--mount TYPE:SRC:DST[:OPTS]]...\n"
	"               [--owner UID:GID] [--socket PATH]... [--chdir DIR]\n"
	"               [--env-clear | --env-inherit] [--env K=V]...\n"
	"               [--trace FILE|-] [--trace-level exec|file|all]\n"
	"               [--policy FILE] [--inspect-exec PROG] [--inspect-timeout MS]\n"
	"               [--state-in FILE] [--state-out FILE]\n"
	"               [--max-procs N] [--snapshot-every-batches N] [--snapshot-on-exit-signal]\n"
	"               [--deterministic] [--memory-sampled | --memory-exact]\n"
	"               [--result FILE | --result-fd N] -- PROGRAM [ARG...]\n"
	"request options: [--limits DIM=N[,...]] [--fees DIM=PRICE[,...]] [--lifetime BATCHES]\n"
	"                 [--escrow N] [--principal NAME] [--host-program NAME]\n";

/* The words after the options: sbx-run's PROGRAM; sbx-restore's one operand,
 * then after "--" its PROGRAM (none: o->argv stays NULL). */
static int operands(int argc, char **argv, unsigned flags, int dashdash,
		    struct trace_run_opts *o, const char **operand, struct common_err *e)
{
	if (!(flags & TRACE_RUN_RESTORE)) {
		if (optind >= argc)
			return common_errf(e, "PROGRAM", "missing (-- PROGRAM [ARG...])");
		o->argv = argv + optind;
		return 1;
	}
	if (dashdash || optind >= argc) {
		o->argv = optind < argc ? argv + optind : NULL;
		return 1;
	}
	if (*operand)
		return common_errf(e, argv[optind], "unexpected operand (one DIGEST)");
	*operand = argv[optind++];
	return 0;
}

int trace_run_parse(int argc, char **argv, unsigned flags, struct trace_run_opts *o,
		    const char **operand, struct common_err *e)
{
	struct option lo[NOPTIONS + 1];
	size_t n = 0;

	for (size_t k = 0; k < NOPTIONS; k++)
		if (run_options[k].restore || !(flags & TRACE_RUN_RESTORE))
			lo[n++] = (struct option){ run_options[k].name,
						   run_options[k].arg ? required_argument : no_argument,
						   NULL, (int)k };
	lo[n] = (struct option){ 0 };
	if (operand)
		*operand = NULL;
	optind = 0; /* a fresh scan of a new argv (GNU getopt) */
	opterr = 0;
	for (;;) {
		int at = optind ? optind : 1;
		int c = getopt_long(argc, argv, "+:", lo, NULL);
		if (c == '?' || c == ':')
			return common_getopt_err(c, argv, e);
		if (c == -1) {
			int rc = operands(argc, argv, flags, optind > at, o, operand, e);
			if (rc < 0)
				return -1;
			if (rc == 0)
				continue;
			break;
		}
		if (!strcmp(run_options[c].name, "help"))
			return 1;
		if (trace_run_opt(o, run_options[c].name, optarg, e) <= 0)
			return -1;
	}
	if ((flags & TRACE_RUN_RESTORE) && !*operand)
		return common_errf(e, "DIGEST", "missing (the snapshot to restore)");
	if ((flags & TRACE_RUN_RESTORE) && !o->lease)
		return common_errf(e, "--lease", "required (the Funded lease to restore into)");
	return 0;
}

int trace_run_cli(int argc, char **argv, const struct trace_snap_ops *snap)
{
	struct trace_run_opts o = { .result_fd = -1 };
	struct common_err e;
	int rc = trace_run_parse(argc, argv, 0, &o, NULL, &e);

	if (rc == 1) {
		trace_run_opts_free(&o);
		fputs(trace_run_usage, stdout);
		return SBX_EXIT_OK;
	}
	if (rc < 0) {
		trace_run_opts_free(&o);
		return common_usage_error(&e, trace_run_usage, SBX_EXIT_SBX);
	}
	o.snap = snap;
	return trace_run_main(&o);
}
