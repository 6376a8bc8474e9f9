/* sbx-trace adjudicate from a snapshot (SPEC §7, §8, §9): when the disputed
 * run's lease holds a snapshot taken at a deterministic point within the
 * events both traces agree on (sbx-run --snapshot-at-step), the re-execution
 * restores it into a fresh lease with sbx-restore (beside this program) and
 * goes on from there; its trace begins with the agreed events of trace A, up
 * to the snapshot's, and is compared as a whole run's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/record/cmd/cmd-internal.h"

#define ARGS_MAX 600

struct argv_b {
	char *v[ARGS_MAX + 1];
	size_t n;
};

static void arg(struct argv_b *b, char *s)
{
	if (b->n < ARGS_MAX)
		b->v[b->n++] = s;
	else
		free(s);
}

/* The run's mounts as sbx-run options: --mount when they replaced the defaults. */
static void mount_args(struct argv_b *b, const struct trace_mount *m, size_t n, int replace)
{
	static const char *const types[] = { "bind", "tmpfs", "proc" };
	for (size_t i = 0; i < n; i++) {
		if (!replace && m[i].type == TRACE_MOUNT_BIND) {
			arg(b, common_xstrdup(m[i].rw ? "--rw" : "--ro"));
			arg(b, common_xasprintf("%s:%s", m[i].src, m[i].dst));
			continue;
		}
		arg(b, common_xstrdup("--mount"));
		if (m[i].type == TRACE_MOUNT_BIND)
			arg(b, common_xasprintf("bind:%s:%s:%s", m[i].src, m[i].dst, m[i].rw ? "rw" : "ro"));
		else
			arg(b, common_xasprintf("%s:%s:%s%s%s", types[m[i].type], types[m[i].type],
						m[i].dst, m[i].opts ? ":" : "", m[i].opts ? m[i].opts : ""));
	}
}

/* sbx-restore's path: beside the running sbx-trace. */
static char *restore_path(struct common_err *e)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		return common_errno(e, errno, "/proc/self/exe"), NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	*slash = 0;
	return common_xasprintf("%s/sbx-restore", self);
}

/* Run b's program (its output to scratch/restore.err) within timeout_ms; 1
 * when it had to be killed. */
static int run_bounded(struct argv_b *b, const char *scratch, uint64_t timeout_ms, int *status,
		       struct common_err *e)
{
	char *errp = common_xasprintf("%s/restore.err", scratch);
	pid_t pid = fork();
	if (pid < 0) {
		free(errp);
		return common_errno(e, errno, "fork");
	}
	if (pid == 0) {
		setpgid(0, 0);
		int nul = open("/dev/null", O_RDWR), err = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (nul < 0 || err < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(err, 2) < 0)
			_exit(127);
		execv(b->v[0], b->v);
		_exit(127);
	}
	free(errp);
	setpgid(pid, pid);
	uint64_t deadline = common_mono_us() + timeout_ms * 1000;
	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);
		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return common_errno(e, errno, "waitpid");
		if (common_mono_us() >= deadline) {
			kill(-pid, SIGKILL);
			waitpid(pid, status, 0);
			return 1;
		}
		usleep(20000);
	}
}

/* Why the restore failed: its result's error, else the last line it wrote. */
static void restore_error(const char *scratch, const char *digest, struct common_err *e)
{
	char *rp = common_xasprintf("%s/restore.json", scratch), *ep = common_xasprintf("%s/restore.err", scratch);
	json_t *res = common_json_load_file(rp, 1 << 20, NULL);
	char *buf = NULL;
	size_t len = 0;
	const char *why = common_jstr(res, "error", NULL);
	if (!why && common_read_file(ep, 1 << 16, &buf, &len, NULL) == 0 && len) {
		while (len && buf[len - 1] == '\n')
			buf[--len] = 0;
		char *nl = strrchr(buf, '\n');
		why = nl ? nl + 1 : buf;
	}
	common_errf(e, "adjudicate", "restoring snapshot %s failed: %s", digest, why ? why : "no reason given");
	free(buf);
	json_decref(res);
	free(rp);
	free(ep);
}

int trace_adj_from_snapshot(const struct trace_adj_opts *o, const char *lease,
			    const uint8_t (*heads)[32], size_t n, uint64_t stop_after,
			    const struct trace_mount *m, size_t nm, int replace, const char *scratch,
			    const char *replay, json_t **from, struct common_err *e)
{
	char digest[65] = "", *target = NULL;
	uint64_t step = 0;
	struct argv_b b = { .n = 0 };
	int status = 0, rc;

	*from = NULL;
	if (!o->snap || (rc = o->snap->latest(o->store, lease, heads, n, digest, &step, e)) == 1)
		return 1;
	if (rc < 0 || o->snap->target(o->store, lease, &target, e) < 0)
		return -1;
	char *prog = restore_path(e);
	if (!prog) {
		free(target);
		return -1;
	}
	arg(&b, prog);
	if (o->store) {
		arg(&b, common_xstrdup("--store"));
		arg(&b, common_xstrdup(o->store));
	}
	const char *fixed[] = { digest, "--lease", target, "--trace", replay, "--trace-from", o->a };
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		arg(&b, common_xstrdup(fixed[i]));
	arg(&b, common_xstrdup("--result"));
	arg(&b, common_xasprintf("%s/restore.json", scratch));
	if (o->env_clear)
		arg(&b, common_xstrdup(o->env_clear > 0 ? "--env-clear" : "--env-inherit"));
	for (size_t i = 0; i < o->nenv_set; i++) {
		arg(&b, common_xstrdup("--env"));
		arg(&b, common_xstrdup(o->env_set[i]));
	}
	if (stop_after) { /* up to the disputed step, not to the end */
		arg(&b, common_xstrdup("--stop-after-events"));
		arg(&b, common_xasprintf("%llu", (unsigned long long)stop_after));
	}
	mount_args(&b, m, nm, replace);
	rc = run_bounded(&b, scratch, o->timeout_ms ? o->timeout_ms : 60000, &status, e);
	json_t *res = NULL;
	if (rc == 0) {
		char *rp = common_xasprintf("%s/restore.json", scratch);
		res = common_json_load_file(rp, 1 << 20, NULL);
		free(rp);
		if (!res || json_object_get(res, "error")) {
			restore_error(scratch, digest, e);
			rc = -1;
		}
	}
	if (rc >= 0)
		*from = json_pack("{s:s,s:s,s:I,s:s}", "from", "snapshot", "snapshot", digest, "step",
				  (json_int_t)step, "lease", target);
	if (rc == 1)
		json_object_set_new(*from, "stopped", json_string("adjudicate timeout"));
	else if (rc == 0 && json_is_string(json_object_get(res, "stopped")))
		json_object_set(*from, "stopped", json_object_get(res, "stopped"));
	json_decref(res);
	for (size_t i = 0; i < b.n; i++)
		free(b.v[i]);
	free(target);
	return rc < 0 ? -1 : 0;
}
