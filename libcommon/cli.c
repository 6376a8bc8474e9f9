/* The command-line shape every tool shares: verb tables, getopt errors, usage. */
#include <getopt.h>
#include <string.h>
#include "libcommon/common.h"

const struct common_verb *common_verb_find(const struct common_verb *v, size_t n,
					   const char *name, struct common_err *e)
{
	for (size_t i = 0; name && i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	/* one WHAT, no WHY: the words every tool has printed for a bad verb */
	if (name)
		snprintf(e->what, sizeof e->what, "unknown command \"%s\"", name);
	else
		snprintf(e->what, sizeof e->what, "missing command");
	e->why[0] = 0;
	return NULL;
}

void common_verb_usage(FILE *f, const struct common_verb *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s %s %s\n", i ? "      " : "usage:", common_progname(), v[i].usage);
}

int common_verb_args(const struct common_verb *v, int nargs, struct common_err *e)
{
	if (nargs >= v->min_args && nargs <= v->max_args)
		return 0;
	if (v->min_args == v->max_args)
		return common_errf(e, v->name, "takes %d operand%s, not %d", v->min_args,
				   v->min_args == 1 ? "" : "s", nargs);
	return common_errf(e, v->name, "takes %d to %d operands, not %d", v->min_args,
			   v->max_args, nargs);
}

int common_getopt_err(int c, char *const argv[], struct common_err *e)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	char name[64];

	if (arg[0] == '-' && arg[1] == '-')
		snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
	else
		snprintf(name, sizeof name, "-%c", optopt ? optopt : '?');
	if (c == ':')
		return common_errf(e, name, "needs a value");
	if (optopt && strchr(arg, '=') && arg[1] == '-')
		return common_errf(e, name, "takes no value");
	return common_errf(e, name, "unknown option");
}

int common_usage_error(const struct common_err *e, const char *usage, int code)
{
	common_report(e);
	fputs(usage, stderr);
	return code;
}

int common_cli_parsed(int rc, const struct common_err *e, void (*usage)(FILE *), int code)
{
	if (rc == 1) {
		usage(stdout);
		return SBX_EXIT_OK;
	}
	if (rc < 0) {
		common_report(e);
		usage(stderr);
		return code;
	}
	return -1;
}
