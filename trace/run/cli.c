/* sbx-run's command line, and sbx-restore's: one table of options, one parser. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>
#include "trace/record/record.h"
#include "trace/run/run-internal.h"

static int add_mount(struct trace_run_opts *o, int type, const char *src, const char *dst,
		     const char *opts, int rw, struct common_err *e)
{
	char real[PATH_MAX];
	if (type == TRACE_MOUNT_BIND) {
		if (!src || !*src)
			return common_errf(e, "mount", "empty bind source");
		if (!realpath(src, real))
			return common_errno(e, errno, "mount source %s", src);
		src = real;
		if (!dst || !*dst)
			dst = src;
	}
	if (!dst || dst[0] != '/')
		return common_errf(e, "mount", "target \"%s\" is not an absolute path", dst ? dst : "");
	o->mounts = common_xrealloc(o->mounts, (o->nmounts + 1) * sizeof *o->mounts);
	struct trace_mount *m = &o->mounts[o->nmounts++];
	m->type = type;
	m->src = src ? common_xstrdup(src) : NULL;
	m->dst = common_xstrdup(dst);
	m->opts = opts && *opts ? common_xstrdup(opts) : NULL;
	m->rw = rw;
	return 0;
}

/* --ro and --rw SRC[:DST] */
static int parse_bind(const struct common_opt *opt, void *cli, const char *v,
		      struct common_err *e)
{
	struct trace_run_opts *o = cli;
	int rw = opt->flag;
	char *s = common_xstrdup(v);
	char *colon = strchr(s, ':');
	if (colon)
		*colon++ = 0;
	int rc = add_mount(o, TRACE_MOUNT_BIND, s, colon, NULL, rw, e);
	free(s);
	return rc;
}

/* TYPE:SRC:DST[:OPTS]; bind OPTS is ro (default) or rw */
static int parse_mount(const struct common_opt *opt, void *cli, const char *v,
		       struct common_err *e)
{
	struct trace_run_opts *o = cli;
	char *s = common_xstrdup(v), *f[4] = { NULL, NULL, NULL, NULL };
	int n = 0, rc = -1;

	(void)opt;	for (char *c = s; n < 4; n++) {
		f[n] = c;
		c = n < 3 ? strchr(c, ':') : NULL;
		if (!c) {
			n++;
			break;
		}
		*c++ = 0;
	}
	if (n < 3) {
		common_errf(e, "--mount", "\"%s\": expected TYPE:SRC:DST[:OPTS]", v);
	} else if (strcmp(f[0], "bind") == 0) {
		int rw = 0;
		if (f[3] && strcmp(f[3], "rw") == 0)
			rw = 1;
		else if (f[3] && strcmp(f[3], "ro") != 0)
			common_errf(e, "--mount", "\"%s\": bind options are ro or rw", v);
		if (!f[3] || rw || strcmp(f[3], "ro") == 0)
			rc = add_mount(o, TRACE_MOUNT_BIND, f[1], f[2], NULL, rw, e);
	} else if (strcmp(f[0], "tmpfs") == 0) {
		rc = add_mount(o, TRACE_MOUNT_TMPFS, NULL, f[2], f[3], 1, e);
	} else if (strcmp(f[0], "proc") == 0) {
		rc = add_mount(o, TRACE_MOUNT_PROC, NULL, f[2], NULL, 0, e);
	} else {
		common_errf(e, "--mount", "\"%s\": unknown type %s (bind, tmpfs, proc)", v, f[0]);
	}
	if (rc == 0)
		o->replace_defaults = 1;
	free(s);
	return rc;
}

/* --owner UID:GID: who owns, on the host, what a root invoker's guest writes
 * through rw binds; only root can give files away. */
static int parse_owner(const struct common_opt *opt, void *cli, const char *v,
		       struct common_err *e)
{
	struct trace_run_opts *o = cli;
	uint64_t u, g;
	char *copy = common_xstrdup(v), *colon = strchr(copy, ':');
	int rc = -1;

	(void)opt;
	if (!colon)
		common_errf(e, "--owner", "\"%s\" is not UID:GID", v);
	else if (*colon = 0, common_parse_u64(copy, UINT32_MAX - 1, &u, e) < 0 ||
		 common_parse_u64(colon + 1, UINT32_MAX - 1, &g, e) < 0)
		common_err_context(e, "--owner");
	else if (geteuid() != 0)
		common_errf(e, "--owner", "only a root invoker chooses who owns files written "
			    "through binds (they are the invoker's own)");
	else {
		o->owner_set = 1;
		o->owner_uid = (uid_t)u;
		o->owner_gid = (gid_t)g;
		rc = 0;
	}
	free(copy);
	return rc;
}

static int parse_chdir(const struct common_opt *opt, void *cli, const char *v,
		       struct common_err *e)
{
	if (v[0] != '/')
		return common_errf(e, "--chdir", "\"%s\" is not an absolute path", v);
	*COMMON_OPT_FIELD(opt, cli, const char *) = v;
	return 0;
}

static int parse_socket(const struct common_opt *opt, void *cli, const char *v,
			struct common_err *e)
{
	struct trace_run_opts *o = cli;

	(void)opt;
	if (v[0] != '/' || strlen(v) >= sizeof ((struct sockaddr_un *)0)->sun_path)
		return common_errf(e, "--socket", "\"%s\" is not an absolute socket path "
				   "(at most 107 bytes)", v);
	o->sockets = common_xrealloc(o->sockets, (o->nsockets + 1) * sizeof *o->sockets);
	o->sockets[o->nsockets++] = v;
	return 0;
}

/* --env NAME (passed on from the invoker) or NAME=VALUE */
static int parse_env(const struct common_opt *opt, void *cli, const char *v,
		     struct common_err *e)
{
	struct trace_run_opts *o = cli;
	size_t k = strcspn(v, "=");

	(void)opt;
	for (size_t i = 0; i < k; i++)
		if (!(v[i] == '_' || (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
		      (i && v[i] >= '0' && v[i] <= '9')))
			k = 0;
	if (k == 0)
		return common_errf(e, "--env", "\"%s\" is not NAME or NAME=VALUE", v);
	o->env_set = common_xrealloc(o->env_set, (o->nenv_set + 1) * sizeof *o->env_set);
	o->env_set[o->nenv_set++] = v;
	return 0;
}

static int parse_result_fd(const struct common_opt *opt, void *cli, const char *v,
			   struct common_err *e)
{
	uint64_t fd;

	if (common_parse_u64(v, UINT64_MAX, &fd, e) < 0) {
		common_err_context(e, "--result-fd");
		return -1;
	}
	if (fd > INT_MAX || fd < 3 || fcntl((int)fd, F_GETFD) < 0)
		return common_errf(e, "--result-fd", "%s is not an open descriptor above 2", v);
	*COMMON_OPT_FIELD(opt, cli, int) = (int)fd;
	return 0;
}

static int parse_level(const struct common_opt *opt, void *cli, const char *v,
		       struct common_err *e)
{
	return trace_level_parse(v, COMMON_OPT_FIELD(opt, cli, enum trace_level), e);
}

static int parse_inspect_timeout(const struct common_opt *opt, void *cli, const char *v,
				 struct common_err *e)
{
	uint64_t ms;

	if (common_parse_u64(v, 3600000, &ms, e) < 0 || ms == 0)
		return common_errf(e, "--inspect-timeout", "expected milliseconds, 1 to 3600000");
	*COMMON_OPT_FIELD(opt, cli, int) = (int)ms;
	return 0;
}

/* --inspect-classes file,read,...: the classes a co-process is sent (not refused,
 * store or load: the boundary's and the meter's, never a co-process's). */
static int parse_inspect_classes(const struct common_opt *opt, void *cli, const char *v,
				 struct common_err *e)
{
	char *list = common_xstrdup(v), *save = NULL;
	unsigned *out = COMMON_OPT_FIELD(opt, cli, unsigned);
	int rc = 0;

	*out = 0;
	for (char *w = strtok_r(list, ",", &save); w && rc == 0; w = strtok_r(NULL, ",", &save)) {
		unsigned c = trace_class_by_name(w);
		if (!c || (c & (TRACE_CLASS_REFUSED | TRACE_CLASS_STORE | TRACE_CLASS_LOAD)))
			rc = common_errf(e, "--inspect-classes", "unknown class \"%s\" (file, read, "
					 "write, process, net, signal, memory, time, desc)", w);
		*out |= c;
	}
	free(list);
	if (rc == 0 && !*out)
		rc = common_errf(e, "--inspect-classes", "expected a list of classes");
	return rc;
}

static const struct common_opt_type bind_type = { 1, parse_bind }, mount_type = { 1, parse_mount },
	owner_type = { 1, parse_owner }, chdir_type = { 1, parse_chdir },
	socket_type = { 1, parse_socket }, env_type = { 1, parse_env },
	result_fd_type = { 1, parse_result_fd }, level_type = { 1, parse_level },
	inspect_timeout_type = { 1, parse_inspect_timeout },
	inspect_classes_type = { 1, parse_inspect_classes };

/* Which tool takes a row: sbx-run only, or (0) both it and sbx-restore. */
enum { RUN = 1u << 0, RESTORE = 1u << 1 };
#define OPT(...) COMMON_OPT(struct trace_run_opts, __VA_ARGS__)

static const struct common_opt run_opts[] = {
	OPT("store", &common_opt_str, store, 0),
	OPT("lease", &common_opt_str, lease, 0),
	OPT("ephemeral", &common_opt_flag, ephemeral, RUN),
	OPT("limits", &common_opt_str, limits, RUN),
	OPT("fees", &common_opt_str, fees, RUN),
	OPT("lifetime", &common_opt_u64, lifetime, RUN),
	OPT("escrow", &common_opt_u64, escrow, RUN),
	OPT("principal", &common_opt_str, principal, RUN),
	OPT("principal-key", &common_opt_str, principal_key, 0), /* restore spends escrow too */
	OPT("host-program", &common_opt_str, host_program, RUN),
	OPT("ro", &bind_type, mounts, 0),
	OPT("rw", &bind_type, mounts, 0, .flag = 1),
	OPT("mount", &mount_type, mounts, 0),
	OPT("owner", &owner_type, owner_set, 0),
	OPT("socket", &socket_type, sockets, 0),
	OPT("chdir", &chdir_type, chdir, 0),
	OPT("env-clear", &common_opt_flag, env_clear, 0),
	OPT("env-inherit", &common_opt_flag, env_clear, 0, .flag = -1), /* --env adds to it */
	OPT("env", &env_type, env_set, 0),
	OPT("result", &common_opt_str, result_path, 0),
	OPT("result-fd", &result_fd_type, result_fd, 0),
	OPT("max-procs", &common_opt_u64, max_procs, 0, .min = 2, .max = 1u << 20),
	OPT("snapshot-every-batches", &common_opt_u64, snapshot_every, RUN, .min = 1),
	OPT("snapshot-at-step", &common_opt_u64, snapshot_at_step, RUN, .min = 1),
	OPT("snapshot-on-exit-signal", &common_opt_flag, snapshot_on_exit_signal, RUN),
	OPT("chain", &common_opt_u64, chain, RUN, .min = 1, .max = 4096), /* snap/chain.c */
	OPT("trace", &common_opt_str, trace_path, 0),
	OPT("trace-level", &level_type, trace_level, 0),
	OPT("trace-from", &common_opt_str, trace_from, RESTORE),
	OPT("stop-after-events", &common_opt_u64, stop_after_events, RESTORE, .min = 1),
	OPT("policy", &common_opt_str, policy, 0),
	OPT("inspect-exec", &common_opt_str, inspect_exec, 0),
	OPT("inspect-classes", &inspect_classes_type, inspect_classes, 0),
	OPT("inspect-timeout", &inspect_timeout_type, inspect_timeout_ms, 0),
	OPT("state-in", &common_opt_str, state_in, RUN),
	OPT("state-out", &common_opt_str, state_out, RUN),
	OPT("deterministic", &common_opt_flag, deterministic, RUN), /* SPEC §9: trace/determ/ */
	OPT("memory-sampled", &common_opt_flag, memory_sampled, 0),
	OPT("memory-exact", &common_opt_flag, memory_exact, 0),
};

static const struct common_cli run_cli = {
	.opts = run_opts, .nopts = sizeof run_opts / sizeof run_opts[0],
	.tool = RUN, .program = COMMON_PROGRAM_AT_OPERAND,
};
static const struct common_cli restore_cli = {
	.opts = run_opts, .nopts = sizeof run_opts / sizeof run_opts[0],
	.tool = RESTORE, .program = COMMON_PROGRAM_AFTER_DASHDASH,
};

static const char trace_run_usage[] =
	"usage: sbx-run [--store DIR] (--lease ID | --ephemeral [request options])\n"
	"               [--ro SRC[:DST]] [--rw SRC[:DST]] [--mount TYPE:SRC:DST[:OPTS]]...\n"
	"               [--owner UID:GID] [--socket PATH]... [--chdir DIR]\n"
	"               [--env-clear | --env-inherit] [--env K=V]...\n"
	"               [--trace FILE|-] [--trace-level exec|file|all]\n"
	"               [--policy FILE] [--inspect-exec PROG] [--inspect-classes LIST]\n"
	"               [--inspect-timeout MS]\n"
	"               [--state-in FILE] [--state-out FILE]\n"
	"               [--max-procs N] [--snapshot-every-batches N] [--snapshot-on-exit-signal]\n"
	"               [--snapshot-at-step K]\n"
	"               [--chain N]\n"
	"               [--deterministic] [--memory-sampled | --memory-exact]\n"
	"               [--result FILE | --result-fd N] -- PROGRAM [ARG...]\n"
	"request options: [--limits DIM=N[,...]] [--fees DIM=PRICE[,...]] [--lifetime BATCHES]\n"
	"                 [--escrow N] [--principal NAME] [--principal-key FILE]\n"
	"                 [--host-program NAME]\n"
	"options end at PROGRAM or --\n";

/* sbx-run's PROGRAM; sbx-restore's one operand, and after "--" its PROGRAM (none:
 * o->argv stays NULL). */
static int operands(const struct common_words *w, unsigned flags, struct trace_run_opts *o,
		    const char **operand, struct common_err *e)
{
	if (!(flags & TRACE_RUN_RESTORE)) {
		if (!w->program || !*w->program)
			return common_errf(e, "PROGRAM", "missing (-- PROGRAM [ARG...])");
		o->argv = w->program;
		return 0;
	}
	if (w->program && *w->program)
		o->argv = w->program;
	if (w->noperands > 1)
		return common_errf(e, w->operands[1], "unexpected operand (one DIGEST)");
	if (w->noperands == 0)
		return common_errf(e, "DIGEST", "missing (the snapshot to restore)");
	*operand = w->operands[0];
	if (!o->lease)
		return common_errf(e, "--lease", "required (the Funded lease to restore into)");
	return 0;
}

int trace_run_parse(int argc, char **argv, unsigned flags, struct trace_run_opts *o,
		    const char **operand, struct common_err *e)
{
	struct common_words w;
	int rc;

	if (operand)
		*operand = NULL;
	rc = common_cli_parse(flags & TRACE_RUN_RESTORE ? &restore_cli : &run_cli, argc, argv, o,
			      &w, e);
	return rc != 0 ? rc : operands(&w, flags, o, operand, e);
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
	if (o.chain && (!snap || !snap->chain)) {
		trace_run_opts_free(&o);
		return common_usage_error(&(struct common_err){ "--chain", "this program takes no "
					  "snapshots" }, trace_run_usage, SBX_EXIT_SBX);
	}
	return o.chain ? snap->chain(&o) : trace_run_main(&o);
}
