/* sbx-trace: read traces written by sbx-run --trace (see sbx-trace(1)). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"

static const char usage_text[] =
	"usage: sbx-trace files [--format json|text|make] [--hash-inputs] TRACE\n"
	"       sbx-trace verify [--format json|text] [--complete] [--head HEX] TRACE\n"
	"       sbx-trace filter [--pid PID] [--class CLASS[,CLASS...]] [--path GLOB] [--name NAME] TRACE\n"
	"       sbx-trace diff [--format json|text] TRACE_A TRACE_B\n"
	"       sbx-trace stats [--format json|text] TRACE\n"
	"       sbx-trace timeline [--format html|chrome] -o FILE TRACE\n"
	"       sbx-trace provenance [--store DIR] [--result FILE] [-o FILE] TRACE\n"
	"       sbx-trace verify-provenance [--store DIR] FILE\n"
	"       sbx-trace bisect [--format json|text] TRACE_A TRACE_B\n"
	"       sbx-trace adjudicate [--store DIR] [--env-clear | --env-inherit] [--env K=V]...\n"
	"                            [--ns DIR] [--timeout MS] [--allow-rw] [--format json|text]\n"
	"                            TRACE_A TRACE_B\n";

static const char *const commands[] = {
	"files", "verify", "filter", "diff", "stats", "timeline", "provenance",
	"verify-provenance", "bisect", "adjudicate",
};

static int known_command(const char *cmd)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(cmd, commands[i]))
			return 1;
	return 0;
}

static void usage(void)
{
	fputs(usage_text, stderr);
	exit(SBX_EXIT_USAGE);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"format", required_argument, 0, 'f'}, {"hash-inputs", no_argument, 0, 'H'},
		{"complete", no_argument, 0, 'c'},      {"head", required_argument, 0, 'h'},
		{"pid", required_argument, 0, 'p'},     {"class", required_argument, 0, 'C'},
		{"path", required_argument, 0, 'g'},    {"name", required_argument, 0, 'n'},
		{"output", required_argument, 0, 'o'},  {"help", no_argument, 0, '?'},
		{"store", required_argument, 0, 's'},   {"env", required_argument, 0, 'e'},
		{"env-clear", no_argument, 0, 'E'},     {"env-inherit", no_argument, 0, 'I'},
		{"ns", required_argument, 0, 'N'},      {"timeout", required_argument, 0, 'T'},
		{"allow-rw", no_argument, 0, 'W'},     {"result", required_argument, 0, 'r'},
		{0, 0, 0, 0},
	};
	struct common_err e = {"", ""};
	struct trace_filter flt = {0};
	struct trace_adj_opts adj = {0};
	const char *envs[256];
	enum trace_fmt fmt = TRACE_FMT_JSON;
	int hash_inputs = 0, complete = 0, c, rc = -1, nargs;
	const char *head = NULL, *out = NULL, *result = NULL, *cmd;
	uint64_t pid;

	common_set_progname("sbx-trace");
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? SBX_EXIT_USAGE : 0;
	}
	cmd = argv[1];
	if (!known_command(cmd)) {
		fprintf(stderr, "%s: error: unknown command \"%s\"\n", common_progname(), cmd);
		usage();
	}
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "json"))
				fmt = TRACE_FMT_JSON;
			else if (!strcmp(optarg, "text"))
				fmt = TRACE_FMT_TEXT;
			else if (!strcmp(optarg, "make") && !strcmp(cmd, "files"))
				fmt = TRACE_FMT_MAKE;
			else if (!strcmp(optarg, "chrome") && !strcmp(cmd, "timeline"))
				fmt = TRACE_FMT_CHROME;
			else if (!strcmp(optarg, "html") && !strcmp(cmd, "timeline"))
				fmt = TRACE_FMT_TEXT;
			else
				common_dief(SBX_EXIT_USAGE, "--format", "unknown format \"%s\"", optarg);
			break;
		case 'H': hash_inputs = 1; break;
		case 'c': complete = 1; break;
		case 'h': head = optarg; break;
		case 'p':
			if (common_parse_u64(optarg, 0x7fffffff, &pid, &e) < 0 || pid == 0)
				common_dief(SBX_EXIT_USAGE, "--pid", "expected a process id, got \"%s\"", optarg);
			flt.pid_tree = (pid_t)pid;
			break;
		case 'C':
			if (trace_class_parse(optarg, &flt.classes, &e) < 0)
				common_die(SBX_EXIT_USAGE, &e);
			break;
		case 'g': flt.glob = optarg; break;
		case 'n': flt.name = optarg; break;
		case 'o': out = optarg; break;
		case 's': adj.store = optarg; break;
		case 'E': adj.env_clear = 1; break;
		case 'I': adj.env_clear = -1; break;
		case 'N': adj.ns_dir = optarg; break;
		case 'W': adj.allow_rw = 1; break;
		case 'r': result = optarg; break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=' || adj.nenv_set >= 256)
				common_dief(SBX_EXIT_USAGE, "--env", "\"%s\" is not NAME=VALUE (at most 256)", optarg);
			envs[adj.nenv_set++] = optarg;
			break;
		case 'T':
			if (common_parse_u64(optarg, 86400000, &adj.timeout_ms, &e) < 0 || !adj.timeout_ms)
				common_dief(SBX_EXIT_USAGE, "--timeout", "expected milliseconds, got \"%s\"", optarg);
			break;
		default: usage();
		}
	}
	nargs = argc - optind;
	argv += optind;
	if (!strcmp(cmd, "files") && nargs == 1)
		rc = trace_cmd_files(argv[0], fmt, hash_inputs, &e);
	else if (!strcmp(cmd, "verify") && nargs == 1)
		rc = trace_cmd_verify(argv[0], complete, head, fmt, &e);
	else if (!strcmp(cmd, "filter") && nargs == 1)
		rc = trace_cmd_filter(argv[0], &flt, &e);
	else if (!strcmp(cmd, "diff") && nargs == 2)
		rc = trace_cmd_diff(argv[0], argv[1], fmt, &e);
	else if (!strcmp(cmd, "stats") && nargs == 1)
		rc = trace_cmd_stats(argv[0], fmt, &e);
	else if (!strcmp(cmd, "timeline") && nargs == 1 && out)
		rc = trace_cmd_timeline(argv[0], out, fmt == TRACE_FMT_CHROME ? fmt : TRACE_FMT_TEXT, &e);
	else if (!strcmp(cmd, "provenance") && nargs == 1)
		rc = trace_cmd_provenance(argv[0], result, adj.store, out, &e);
	else if (!strcmp(cmd, "verify-provenance") && nargs == 1)
		rc = trace_cmd_verify_provenance(argv[0], adj.store, &e);
	else if (!strcmp(cmd, "bisect") && nargs == 2)
		rc = trace_cmd_bisect(argv[0], argv[1], fmt, &e);
	else if (!strcmp(cmd, "adjudicate") && nargs == 2) {
		adj.a = argv[0];
		adj.b = argv[1];
		adj.env_set = envs;
		adj.fmt = fmt;
		rc = trace_adjudicate(&adj, &e);
		if (rc >= 0) /* the verdict: 0 both, 10 A, 11 B, 12 neither (sbx-trace(1)) */
			return rc;
	} else
		usage();
	if (rc != 0 && e.what[0])
		common_report(&e);
	return rc == 0 ? SBX_EXIT_OK : SBX_EXIT_FAIL;
}
