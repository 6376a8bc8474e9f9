/* sbx-run: run a guest under a lease inside the sandbox boundary. */
#include <stdio.h>
#include <string.h>
#include "snap/snap.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sbx-run [--store DIR] (--lease ID | --ephemeral [request options])\n"
		"               [--ro SRC[:DST]] [--rw SRC[:DST]] [--mount TYPE:SRC:DST[:OPTS]]...\n"
		"               [--owner UID:GID] [--socket PATH]... [--chdir DIR]\n"
		"               [--env-clear | --env-inherit] [--env K=V]...\n"
		"               [--trace FILE|-] [--trace-level exec|file|all]\n"
		"               [--policy FILE] [--inspect-exec PROG] [--inspect-timeout MS]\n"
		"               [--state-in FILE] [--state-out FILE]\n"
		"               [--max-procs N] [--snapshot-every-batches N] [--snapshot-on-exit-signal]\n"
		"               [--deterministic]\n"
		"               [--result FILE | --result-fd N] -- PROGRAM [ARG...]\n"
		"request options: [--limits DIM=N[,...]] [--fees DIM=PRICE[,...]] [--lifetime BATCHES]\n"
		"                 [--escrow N] [--principal NAME] [--host-program NAME]\n");
}

/* One row per option: parsing is trace_run_opt()'s; add rows, not code. */
static const struct {
	const char *name;
	int arg;
} options[] = {
	{ "store", 1 }, { "lease", 1 }, { "ephemeral", 0 },
	{ "limits", 1 }, { "fees", 1 }, { "lifetime", 1 }, { "escrow", 1 },
	{ "principal", 1 }, { "host-program", 1 },
	{ "ro", 1 }, { "rw", 1 }, { "mount", 1 }, { "owner", 1 }, { "socket", 1 }, { "chdir", 1 },
	{ "env-clear", 0 }, { "env-inherit", 0 }, { "env", 1 },
	{ "result", 1 }, { "result-fd", 1 },
	{ "max-procs", 1 }, { "snapshot-every-batches", 1 }, { "snapshot-on-exit-signal", 0 },
	{ "trace", 1 }, { "trace-level", 1 },
	{ "policy", 1 }, { "inspect-exec", 1 }, { "inspect-timeout", 1 },
	{ "state-in", 1 }, { "state-out", 1 },
	{ "deterministic", 0 },
};

int main(int argc, char **argv)
{
	struct trace_run_opts o = { .result_fd = -1 };
	struct common_err e;
	int i;
	common_set_progname("sbx-run");
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *name = argv[i] + 2, *val = NULL;
		if (!*name) {
			i++;
			break;
		}
		if (strcmp(name, "help") == 0) {
			usage(stdout);
			return 0;
		}
		char buf[64];
		const char *eq = strchr(name, '=');
		if (eq && (size_t)(eq - name) < sizeof buf) {
			snprintf(buf, sizeof buf, "%.*s", (int)(eq - name), name);
			val = eq + 1;
			name = buf;
		}
		size_t k;
		for (k = 0; k < sizeof options / sizeof options[0]; k++)
			if (strcmp(options[k].name, name) == 0)
				break;
		if (k == sizeof options / sizeof options[0] || (!options[k].arg && val)) {
			fprintf(stderr, "sbx-run: error: unknown option --%s\n", name);
			usage(stderr);
			return SBX_EXIT_SBX;
		}
		if (options[k].arg && !val) {
			if (i + 1 >= argc) {
				fprintf(stderr, "sbx-run: error: --%s needs a value\n", name);
				return SBX_EXIT_SBX;
			}
			val = argv[++i];
		}
		if (trace_run_opt(&o, name, val, &e) <= 0) {
			common_report(&e);
			return SBX_EXIT_SBX;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return SBX_EXIT_SBX;
	}
	o.argv = argv + i;
	o.snap = &snap_ops;
	return trace_run_main(&o);
}
