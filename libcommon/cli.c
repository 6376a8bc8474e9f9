/* The command-line shape every tool shares: verb tables, option tables, one grammar, usage. */
#include <stdlib.h>
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
	fputs("options may come before or after COMMAND; -- ends them\n", f);
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

static int parse_str(const struct common_opt *o, void *cli, const char *v,
		     struct common_err *e)
{
	(void)e;
	*COMMON_OPT_FIELD(o, cli, const char *) = v;
	return 0;
}

static int parse_flag(const struct common_opt *o, void *cli, const char *v,
		      struct common_err *e)
{
	(void)v;
	(void)e;
	*COMMON_OPT_FIELD(o, cli, int) = o->flag ? o->flag : 1;
	return 0;
}

static int parse_u64(const struct common_opt *o, void *cli, const char *v,
		     struct common_err *e)
{
	uint64_t n, max = o->max ? o->max : UINT64_MAX;

	if (common_parse_u64(v, UINT64_MAX, &n, e) < 0) {
		common_err_context(e, "--%s", o->name);
		return -1;
	}
	if (n < o->min || n > max) {
		char what[64];
		snprintf(what, sizeof what, "--%s", o->name);
		if (max == UINT64_MAX)
			return common_errf(e, what, "%s: at least %llu", v, (unsigned long long)o->min);
		return common_errf(e, what, "%s: between %llu and %llu", v,
				   (unsigned long long)o->min, (unsigned long long)max);
	}
	*COMMON_OPT_FIELD(o, cli, uint64_t) = n;
	return 0;
}

static int parse_format(const struct common_opt *o, void *cli, const char *v,
			struct common_err *e)
{
	if (!strcmp(v, "json"))
		*COMMON_OPT_FIELD(o, cli, enum common_format) = COMMON_FMT_JSON;
	else if (!strcmp(v, "text"))
		*COMMON_OPT_FIELD(o, cli, enum common_format) = COMMON_FMT_TEXT;
	else
		return common_errf(e, "--format", "unknown format \"%s\" (json or text)", v);
	return 0;
}

const struct common_opt_type common_opt_str = { 1, parse_str };
const struct common_opt_type common_opt_flag = { 0, parse_flag };
const struct common_opt_type common_opt_u64 = { 1, parse_u64 };
const struct common_opt_type common_opt_format = { 1, parse_format };

/* An option as the command line gave it, applied once the verb is known. */
struct given {
	const struct common_opt *o;
	const char *value;
};

/* The row for "--NAME[=V]" (len: NAME's) or "-L"; NULL when the tool has none. */
static const struct common_opt *find_opt(const struct common_cli *t, const char *name,
					 size_t len, char letter)
{
	for (size_t i = 0; i < t->nopts; i++) {
		const struct common_opt *o = &t->opts[i];
		if (!t->verbs && t->tool && o->in && !(o->in & t->tool))
			continue;
		if (letter ? o->letter == letter : strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	}
	return NULL;
}

/* The option at argv[*i] (its value attached, or argv[*i + 1]) into g; 1 for help. */
static int scan_option(const struct common_cli *t, int argc, char **argv, int *i,
		       struct given *g, struct common_err *e)
{
	const char *w = argv[*i], *attached = NULL;
	char name[64];

	if (!strcmp(w, "--help") || !strcmp(w, "-h"))
		return 1;
	if (w[1] == '-') { /* --NAME or --NAME=VALUE */
		const char *eq = strchr(w, '=');
		size_t len = eq ? (size_t)(eq - w) : strlen(w);
		g->o = find_opt(t, w + 2, len - 2, 0);
		snprintf(name, sizeof name, "%.*s", (int)len, w);
		attached = eq ? eq + 1 : NULL;
	} else { /* -L or -LVALUE */
		g->o = find_opt(t, NULL, 0, w[1]);
		snprintf(name, sizeof name, "%.2s", w);
		attached = w[2] ? w + 2 : NULL;
	}
	if (!g->o)
		return common_errf(e, name, "unknown option");
	if (!g->o->type->value && attached)
		return common_errf(e, name, "takes no value");
	g->value = attached;
	if (g->o->type->value && !attached) {
		if (*i + 1 >= argc)
			return common_errf(e, name, "needs a value");
		g->value = argv[++*i];
	}
	return 0;
}

/* Options into g (*ng of them), operands to the front of argv + 1, the program in w. */
static int scan(const struct common_cli *t, int argc, char **argv, struct given *g, int *ng,
		struct common_words *w, struct common_err *e)
{
	int nop = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int dashdash = !strcmp(a, "--");
		if (a[0] == '-' && a[1] && !dashdash) {
			int rc = scan_option(t, argc, argv, &i, &g[*ng], e);
			if (rc != 0)
				return rc;
			++*ng;
			continue;
		}
		if (t->program == COMMON_PROGRAM_AT_OPERAND ||
		    (dashdash && t->program == COMMON_PROGRAM_AFTER_DASHDASH)) {
			w->program = argv + i + dashdash;
			break;
		}
		if (dashdash) {
			while (++i < argc)
				argv[1 + nop++] = argv[i];
			break;
		}
		argv[1 + nop++] = argv[i];
	}
	w->operands = argv + 1;
	w->noperands = nop;
	return 0;
}

static int was_given(const struct given *g, int ng, const struct common_opt *o)
{
	for (int i = 0; i < ng; i++)
		if (g[i].o == o)
			return 1;
	return 0;
}

/* The verb (the first operand) and its operands' count; each option given it takes,
 * each it needs given. */
static int verb_check(const struct common_cli *t, const struct given *g, int ng,
		      struct common_words *w, struct common_err *e)
{
	size_t k;

	w->verb = common_verb_find(t->verbs, t->nverbs, w->noperands ? w->operands[0] : NULL, e);
	if (!w->verb)
		return -1;
	k = (size_t)(w->verb - t->verbs);
	w->operands++;
	w->noperands--;
	for (int i = 0; i < ng; i++)
		if (g[i].o->in && !(g[i].o->in & (1u << k))) {
			char name[64];
			snprintf(name, sizeof name, "--%s", g[i].o->name);
			return common_errf(e, name, "not an option of this command");
		}
	for (size_t i = 0; i < t->nopts; i++)
		if ((t->opts[i].need & (1u << k)) && !was_given(g, ng, &t->opts[i]))
			return common_errf(e, w->verb->name, "needs --%s", t->opts[i].name);
	return common_verb_args(w->verb, w->noperands, e);
}

int common_cli_parse(const struct common_cli *t, int argc, char **argv, void *cli,
		     struct common_words *w, struct common_err *e)
{
	struct given *g = common_xcalloc((size_t)argc + 1, sizeof *g);
	int ng = 0, rc;

	memset(w, 0, sizeof *w);
	rc = scan(t, argc, argv, g, &ng, w, e);
	if (rc == 0 && t->verbs)
		rc = verb_check(t, g, ng, w, e);
	for (int i = 0; rc == 0 && i < ng; i++)
		rc = g[i].o->type->parse(g[i].o, cli, g[i].value, e);
	free(g);
	return rc;
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
