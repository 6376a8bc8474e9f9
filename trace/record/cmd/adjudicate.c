/* sbx-trace adjudicate (SPEC §7 "Replay and disputes", §9): two traces of
 * one deterministic run disagree; re-execute the run their common header
 * describes — the lease's image, argv, mounts, environment (checked against
 * the header's digest) and the namespace as it was when the run began (a
 * scratch copy, so the lease's storage never changes) — under
 * --deterministic, record it, and compare the re-execution with both traces
 * through the first step where they diverge. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/record/cmd/cmd-internal.h"
#include "trace/record/record.h"

#define ADJ_TIMEOUT_MS 60000
#define COPY_DEPTH 256
#define COPY_FILE_MAX (1ull << 30)

struct tr {
	char **canon;   /* [0] is the header */
	uint8_t (*h)[32];
	size_t n, cap;
	json_t *header;
	int has_readlink;
};

static void tr_free(struct tr *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->canon[i]);
	free(t->canon);
	free(t->h);
	json_decref(t->header);
	memset(t, 0, sizeof *t);
}

static int tr_load(const char *path, struct tr *t, struct common_err *e)
{
	struct trace_reader *r = trace_reader_open(path, e);
	struct trace_event ev;
	int rc;
	memset(t, 0, sizeof *t);
	if (!r)
		return -1;
	while ((rc = trace_reader_next(r, &ev, e)) > 0) {
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 256;
			t->canon = common_xrealloc(t->canon, t->cap * sizeof *t->canon);
			t->h = common_xrealloc(t->h, t->cap * sizeof *t->h);
		}
		t->canon[t->n] = common_xmalloc(ev.canon_len + 1);
		memcpy(t->canon[t->n], ev.canon, ev.canon_len);
		t->canon[t->n][ev.canon_len] = 0;
		memcpy(t->h[t->n], ev.h, 32);
		if (t->n == 0)
			t->header = json_incref(ev.ev);
		const char *name = json_string_value(json_object_get(ev.ev, "name"));
		if (name && (!strcmp(name, "readlink") || !strcmp(name, "readlinkat")))
			t->has_readlink = 1;
		t->n++;
	}
	trace_reader_close(r);
	if (rc < 0) {
		tr_free(t);
		return -1;
	}
	if (t->n == 0) {
		tr_free(t);
		return common_errf(e, path, "empty trace");
	}
	return 0;
}

/* First index where the two differ (n when one is a prefix of the other and
 * both have n entries). */
static size_t first_diff(const struct tr *a, const struct tr *b)
{
	size_t n = a->n < b->n ? a->n : b->n, i;
	for (i = 1; i < n; i++)
		if (strcmp(a->canon[i], b->canon[i]))
			return i;
	return i;
}

static int copy_tree(const char *src, const char *dst, int depth, struct common_err *e)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;
	if (depth > COPY_DEPTH)
		return common_errf(e, src, "namespace deeper than %d directories", COPY_DEPTH);
	if (!(d = opendir(src)))
		return errno == ENOENT && depth == 0 ? 0 : common_errno(e, errno, "namespace %s", src);
	while (rc == 0 && (de = readdir(d))) {
		char s[PATH_MAX], t[PATH_MAX];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(s, sizeof s, "%s/%s", src, de->d_name) >= sizeof s ||
		    (size_t)snprintf(t, sizeof t, "%s/%s", dst, de->d_name) >= sizeof t) {
			rc = common_errf(e, src, "path too long");
			break;
		}
		if (lstat(s, &st) < 0) {
			rc = common_errno(e, errno, "namespace %s", s);
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(t, st.st_mode & 07777) < 0)
				rc = common_errno(e, errno, "scratch %s", t);
			else
				rc = copy_tree(s, t, depth + 1, e);
		} else if (S_ISLNK(st.st_mode)) {
			char l[PATH_MAX];
			ssize_t n = readlink(s, l, sizeof l - 1);
			if (n < 0)
				rc = common_errno(e, errno, "namespace %s", s);
			else {
				l[n] = 0;
				if (symlink(l, t) < 0)
					rc = common_errno(e, errno, "scratch %s", t);
			}
		} else if (S_ISREG(st.st_mode)) {
			char *buf = NULL;
			size_t len = 0;
			if (common_read_file(s, COPY_FILE_MAX, &buf, &len, e) < 0) {
				rc = -1;
			} else {
				int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777);
				int w = fd < 0 ? -errno : common_write_all(fd, buf, len);
				if (w < 0)
					rc = common_errno(e, -w, "scratch %s", t);
				if (fd >= 0)
					close(fd);
			}
			free(buf);
		}
		/* other types (fifos, sockets) are not namespace cells */
	}
	closedir(d);
	return rc;
}

struct adj_run {
	struct trace_rec *rec;
	struct trace_determ *det;
	struct trace_supervisor *sv;
	uint64_t deadline;
	uint64_t stop_after;    /* events; 0: run to the end */
};

/* Up to the disputed step: once the replay has recorded it, stop the guest. */
static void reached(struct adj_run *c)
{
	if (c->stop_after && trace_rec_events(c->rec) >= c->stop_after) {
		trace_sv_stop(c->sv, "disputed step reached");
		c->stop_after = 0;
	}
}

static int a_start(void *ctx, struct trace_supervisor *sv)
{
	((struct adj_run *)ctx)->sv = sv;
	return 0;
}

static int a_stop(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	(void)g;
	(void)st;
	reached(ctx);
	return 0;
}

static int a_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid, const char *path)
{
	(void)sv;
	(void)pid;
	(void)ppid;
	(void)path;
	reached(ctx);
	return 0;
}

static void a_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
		    unsigned long flags)
{
	(void)sv;
	(void)parent;
	(void)child;
	(void)flags;
	reached(ctx);
}

static void a_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	(void)sv;
	(void)tid;
	(void)wstatus;
	reached(ctx);
}

static int a_tick(void *ctx, struct trace_supervisor *sv)
{
	struct adj_run *c = ctx;
	if (common_mono_us() >= c->deadline) {
		trace_sv_stop(sv, "adjudicate timeout");
		return 1;
	}
	return 0;
}

/* Mounts from the header (bounded, checked like sbx-run's options). */
static int header_mounts(const json_t *arr, int allow_rw, struct trace_mount **out, size_t *n,
			 int *replace, struct common_err *e)
{
	size_t i;
	const json_t *m;
	*out = NULL;
	*n = 0;
	*replace = 0;
	if (json_array_size(arr) > 256)
		return common_errf(e, "trace header", "more than 256 mounts");
	*out = common_xcalloc(json_array_size(arr) + 1, sizeof **out);
	json_array_foreach(arr, i, m) {
		const char *type = common_jstr(m, "type", NULL), *dst = common_jstr(m, "dst", NULL);
		struct trace_mount *t = &(*out)[*n];
		if (!type || !dst)
			return common_errf(e, "trace header", "mount %zu: type and dst are required", i);
		if (!strcmp(type, "bind"))
			t->type = TRACE_MOUNT_BIND;
		else if (!strcmp(type, "tmpfs"))
			t->type = TRACE_MOUNT_TMPFS;
		else if (!strcmp(type, "proc"))
			t->type = TRACE_MOUNT_PROC;
		else
			return common_errf(e, "trace header", "mount %zu: unknown type \"%.32s\"", i, type);
		t->src = common_jstr(m, "src", NULL);
		t->dst = dst;
		t->opts = common_jstr(m, "opts", NULL);
		t->rw = json_is_true(json_object_get(m, "rw"));
		if (t->type == TRACE_MOUNT_BIND && !t->src)
			return common_errf(e, "trace header", "mount %zu: bind without src", i);
		/* the trace, not the operator, names these: a writable host path needs consent */
		if (t->type == TRACE_MOUNT_BIND && t->rw && !allow_rw)
			return common_errf(e, "trace header", "mount %zu binds %s read-write at %s; the "
					   "re-execution could change it: check it and pass --allow-rw",
					   i, t->src, t->dst);
		(*n)++;
	}
	/* --mount lists replace the defaults and must supply / first; --ro/--rw never target / */
	*replace = *n > 0 && !strcmp((*out)[0].dst, "/");
	return 0;
}

static json_t *event_json(const struct tr *t, size_t i)
{
	if (i >= t->n)
		return json_null();
	json_t *j = json_loads(t->canon[i], 0, NULL);
	return j ? j : json_null();
}

/* The header's argv as a NULL-terminated vector (*out), or -1. */
static int header_argv(const json_t *av, char ***out, struct common_err *e)
{
	const json_t *v;
	size_t i;
	char **argv;

	if (!json_array_size(av) || json_array_size(av) > 65536)
		return common_errf(e, "trace header", "argv must hold 1 to 65536 strings");
	argv = common_xcalloc(json_array_size(av) + 1, sizeof *argv);
	json_array_foreach(av, i, v) {
		if (!json_is_string(v)) {
			trace_env_free(argv);
			return common_errf(e, "trace header", "argv[%zu] is not a string", i);
		}
		argv[i] = common_xstrdup(json_string_value(v));
	}
	*out = argv;
	return 0;
}

/* The re-execution's environment must be the one the header's digest binds. */
static int check_env(char **env, const char *env_want, struct common_err *e)
{
	struct common_sha256 c;
	uint8_t d[32];
	char hex[COMMON_SHA256_HEX];

	common_sha256_init(&c);
	for (char **p = env; *p; p++)
		common_sha256_update(&c, *p, strlen(*p) + 1);
	common_sha256_final(&c, d);
	common_hex(d, 32, hex);
	if (strcmp(hex, env_want))
		return common_errf(e, "environment",
				   "digest %s is not the trace header's env_sha256 %s; give the run's "
				   "environment with --env-clear/--env K=V", hex, env_want);
	return 0;
}

/* Run the header's guest into replay_path. */
static int reexecute(const struct trace_adj_opts *o, const json_t *hdr, int keep_readlink,
		     uint64_t stop_after, const char *scratch_ns, const char *replay_path,
		     struct trace_result *res, struct common_err *e)
{
	const json_t *img = json_object_get(hdr, "image");
	const char *lease = common_jstr(hdr, "lease", NULL), *path = common_jstr(img, "path", NULL);
	const char *sha = common_jstr(img, "sha256", NULL), *lvl_s = common_jstr(hdr, "level", NULL);
	const char *env_want = common_jstr(hdr, "env_sha256", NULL);
	enum trace_level lvl;
	char **argv = NULL, **env = NULL;
	struct trace_mount *mounts = NULL;
	size_t nm = 0;
	int replace = 0, rc = -1, devnull = -1, saved_in = -1;
	json_t *det_hdr = NULL;
	struct adj_run run = { 0 };

	if (!lease || !path || !sha || !lvl_s || !env_want)
		return common_errf(e, "trace header", "lease, image, level and env_sha256 are required");
	if (trace_level_parse(lvl_s, &lvl, e) < 0)
		return -1;
	if (header_argv(json_object_get(hdr, "argv"), &argv, e) < 0)
		return -1;
	env = trace_env_build(o->env_clear, o->env_set, o->nenv_set);
	if (check_env(env, env_want, e) < 0)
		goto out;
	if (header_mounts(json_object_get(hdr, "mounts"), o->allow_rw, &mounts, &nm, &replace, e) < 0)
		goto out;
	/* the run's clock started at its lease's request time, which the header names */
	const json_t *epoch = json_object_get(json_object_get(hdr, "determinism"), "epoch");
	if (!json_is_integer(epoch) || json_integer_value(epoch) < 0) {
		common_errf(e, "trace header", "determinism.epoch must be a non-negative integer");
		goto out;
	}
	run.det = trace_determ_new(lease, json_integer_value(epoch), trace_tsc_probe());
	if (!(det_hdr = trace_determ_header(run.det, scratch_ns, e)))
		goto out;
	struct trace_rec_info in = {
		.lease = lease, .image_path = path, .image_sha256 = sha, .argv = argv, .envp = env,
		.mounts = json_object_get(hdr, "mounts"), .start_batch = 0, .level = lvl,
		.deterministic = 1, .determinism = det_hdr,
	};
	if (!(run.rec = trace_rec_open(replay_path, -1, &in, e)))
		goto out;
	run.stop_after = stop_after;
	run.deadline = common_mono_us() + (o->timeout_ms ? o->timeout_ms : ADJ_TIMEOUT_MS) * 1000;
	struct trace_layer layers[TRACE_LAYERS] = {
		[TRACE_LAYER_DETERM] = trace_determ_layer(run.det),
		[TRACE_LAYER_RECORD] = trace_rec_layer(run.rec),
		[TRACE_LAYER_AFTER] = { .ctx = &run, .on_start = a_start, .on_entry = a_stop,
					.on_exit = a_stop, .on_exec = a_exec, .on_spawn = a_spawn,
					.on_proc_exit = a_proc_exit, .on_tick = a_tick },
	};
	/* the guest's output is not evidence; its stdin was not recorded: empty */
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	saved_in = fcntl(0, F_DUPFD_CLOEXEC, 10);
	if (devnull < 0 || saved_in < 0 || dup2(devnull, 0) < 0) {
		common_errno(e, errno, "/dev/null");
		trace_rec_abort(run.rec);
		goto out;
	}
	struct trace_config cfg = {
		.argv = (const char *const *)argv, .envp = (const char *const *)env, .image = path,
		.mounts = mounts, .nmounts = nm, .replace_defaults = replace, .ns_dir = scratch_ns,
		.state_fd = -1, .stdout_fd = devnull, .stderr_fd = devnull, .no_aslr = 1,
		.tsc_sigsegv = trace_tsc_probe(), .host_signals = 1, .layers = layers,
		.trace_classes = trace_classes(lvl) | trace_determ_classes() |
				 (lvl == TRACE_LEVEL_FILE && !keep_readlink ? TRACE_FILTER_NO_READLINK : 0),
	};
	rc = trace_run(&cfg, res, e);
	dup2(saved_in, 0);
	{
		struct common_err te;
		if (trace_rec_close(run.rec, res->wstatus, NULL, &te) < 0 && rc == 0) {
			*e = te;
			rc = -1;
		}
	}
out:
	if (saved_in >= 0)
		close(saved_in);
	if (devnull >= 0)
		close(devnull);
	trace_determ_free(run.det);
	json_decref(det_hdr);
	free(mounts);
	trace_env_free(argv);
	trace_env_free(env);
	return rc;
}

/* The lease: its image must be the header's; its namespace (or --ns) must be
 * the one the run began with. */
static int check_lease(const struct trace_adj_opts *o, const json_t *hdr, char **ns_src,
		       struct common_err *e)
{
	struct lease_store *s = NULL;
	json_t *rec = NULL;
	const char *id = common_jstr(hdr, "lease", NULL);
	const char *sha = common_jstr(json_object_get(hdr, "image"), "sha256", NULL);
	const char *path = common_jstr(json_object_get(hdr, "image"), "path", NULL);
	const char *ns_want = common_jstr(json_object_get(hdr, "determinism"), "ns_sha256", NULL);
	char hex[COMMON_SHA256_HEX];
	int rc = -1;
	*ns_src = NULL;
	if (!id || !sha || !path)
		return common_errf(e, "trace header", "no lease or image to re-execute");
	/* judging never creates a store (lease_store_open would, on first use) */
	const char *dir = o->store ? o->store : getenv("SBX_STORE");
	struct stat sd;
	if (dir && *dir && stat(dir, &sd) < 0)
		return common_errno(e, errno, "store %s", dir);
	if (lease_store_open(o->store, &s, e) < 0)
		return -1;
	if (lease_load(s, id, &rec, e) < 0)
		goto out;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	const char *lsha = common_jstr(json_object_get(l, "image"), "sha256", NULL);
	if (!lsha || strcmp(lsha, sha)) {
		common_errf(e, "trace header", "image sha256 %s is not lease %s's image (%s)", sha, id,
			    lsha ? lsha : "unknown");
		goto out;
	}
	if (lease_image_check(path, hex, e) < 0)
		goto out;
	if (strcmp(hex, sha)) {
		common_errf(e, path, "sha256 %s is not the image the trace ran (%s)", hex, sha);
		goto out;
	}
	*ns_src = o->ns_dir ? common_xstrdup(o->ns_dir) : lease_ns_dir(s, id);
	if (ns_want) {
		uint64_t cells, bytes;
		struct stat st;
		if (stat(*ns_src, &st) < 0 && errno == ENOENT) {
			/* a destroyed lease's namespace: empty, as its digest says or not */
			static const char empty_sha[] =
				"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
			snprintf(hex, sizeof hex, "%s", empty_sha);
		} else if (lease_ns_digest(*ns_src, hex, &cells, &bytes, e) < 0) {
			goto out;
		}
		if (strcmp(hex, ns_want)) {
			common_errf(e, "namespace", "%s (sha256 %s) is not the namespace the run began with "
				    "(%s); give a copy of it with --ns DIR", *ns_src, hex, ns_want);
			goto out;
		}
	}
	rc = 0;
out:
	if (rc < 0) {
		free(*ns_src);
		*ns_src = NULL;
	}
	json_decref(rec);
	lease_store_close(s);
	return rc;
}

/* From the latest snapshot within a's first lo chain values, when the lease
 * holds one (adjfrom.c): the run's mounts checked as a re-execution's are. */
static int from_snapshot(const struct trace_adj_opts *o, const struct tr *a, size_t lo,
			 int identical, const char *scratch, const char *replay, json_t **from,
			 struct common_err *e)
{
	struct trace_mount *m = NULL;
	size_t nm = 0;
	int replace = 0, rc;
	char **env = trace_env_build(o->env_clear, o->env_set, o->nenv_set);
	const char *env_want = common_jstr(a->header, "env_sha256", "");
	rc = check_env(env, env_want, e) < 0 ||
	     header_mounts(json_object_get(a->header, "mounts"), o->allow_rw, &m, &nm, &replace, e) < 0
		     ? -1 : trace_adj_from_snapshot(o, common_jstr(a->header, "lease", ""),
						    (const uint8_t (*)[32])a->h, lo, identical ? 0 : lo,
						    m, nm, replace, scratch, replay, from, e);
	free(m);
	trace_env_free(env);
	return rc;
}

/* Which trace the re-execution r bears out, as TRACE_ADJ_* and *verdict;
 * ra and rb: how far r agrees with a and with b, lo: the disputed index. */
static int judge(const struct tr *a, const struct tr *b, const struct tr *r, size_t ra,
		 size_t rb, size_t lo, int identical, const char **verdict)
{
	int a_ok, b_ok;

	if (identical) {
		a_ok = b_ok = ra == a->n && r->n == a->n;
	} else {
		/* right through the disputed step: the re-execution agrees with the trace
		 * at every index up to lo, or both end right there */
		a_ok = ra > lo || (ra == lo && lo == a->n && lo == r->n);
		b_ok = rb > lo || (rb == lo && lo == b->n && lo == r->n);
	}
	if (a_ok && b_ok) {
		*verdict = "both";
		return TRACE_ADJ_BOTH;
	} else if (a_ok) {
		*verdict = "a";
		return TRACE_ADJ_A;
	} else if (b_ok) {
		*verdict = "b";
		return TRACE_ADJ_B;
	}
	*verdict = "neither";
	return TRACE_ADJ_NEITHER;
}

int trace_adjudicate(const struct trace_adj_opts *o, struct common_err *e)
{
	struct tr a, b, r;
	char *ns_src = NULL, *scratch = NULL, tmpl[PATH_MAX];
	json_t *from = NULL;
	int rc = -1, loaded_r = 0;
	struct trace_result res;
	memset(&res, 0, sizeof res);

	if (tr_load(o->a, &a, e) < 0)
		return -1;
	if (tr_load(o->b, &b, e) < 0) {
		tr_free(&a);
		return -1;
	}
	const char *p[2] = { o->a, o->b };
	const struct tr *t2[2] = { &a, &b };
	for (int i = 0; i < 2; i++)
		if (!json_is_true(json_object_get(t2[i]->header, "deterministic"))) {
			common_errf(e, p[i], "adjudicate requires traces of --deterministic runs (SPEC §9); "
				    "this trace was not recorded with --deterministic");
			goto out;
		}
	if (strcmp(a.canon[0], b.canon[0])) {
		common_errf(e, "adjudicate", "the trace headers differ: %s and %s are not two accounts "
			    "of one run (compare them with sbx-trace diff)", o->a, o->b);
		goto out;
	}
	size_t lo = first_diff(&a, &b); /* the disputed step (index; 0 is the header) */
	int identical = lo == a.n && a.n == b.n;

	if (check_lease(o, a.header, &ns_src, e) < 0)
		goto out;
	const char *tmp = getenv("TMPDIR");
	snprintf(tmpl, sizeof tmpl, "%s/sbx-adjudicate.XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
	if (!mkdtemp(tmpl)) {
		common_errno(e, errno, "scratch directory %s", tmpl);
		goto out;
	}
	scratch = common_xstrdup(tmpl);
	char *ns = common_xasprintf("%s/ns", scratch), *replay = common_xasprintf("%s/replay.trace", scratch);
	int fr = from_snapshot(o, &a, lo, identical, scratch, replay, &from, e);
	if (fr < 0)
		rc = -1;
	else if (fr == 0 && tr_load(replay, &r, e) == 0)
		loaded_r = 1;
	else if (fr == 1 && mkdir(ns, 0700) < 0)
		rc = common_errno(e, errno, "scratch %s", ns);
	else if (fr == 1 && copy_tree(ns_src, ns, 0, e) == 0 &&
		 reexecute(o, a.header, a.has_readlink || b.has_readlink, identical ? 0 : lo, ns, replay,
			   &res, e) == 0 &&
		 tr_load(replay, &r, e) == 0)
		loaded_r = 1;
	free(ns);
	free(replay);
	if (!loaded_r)
		goto out;
	if (!from)
		from = json_pack("{s:s}", "from", "start");

	size_t ra = first_diff(&r, &a), rb = first_diff(&r, &b);
	const char *verdict;
	rc = judge(&a, &b, &r, ra, rb, lo, identical, &verdict);
	json_t *out = json_pack("{s:s, s:b, s:I, s:I, s:o, s:o, s:o}", "verdict", verdict,
				"identical", identical, "disputed_line", (json_int_t)(lo + 1),
				"agreed_events", (json_int_t)(lo ? lo - 1 : 0),
				"a", event_json(&a, lo), "b", event_json(&b, lo),
				"replay", json_pack("{s:I, s:o, s:o, s:o}", "events", (json_int_t)(r.n - 1),
						    "event", event_json(&r, lo),
						    "matches_a_through_line", json_integer((json_int_t)ra),
						    "matches_b_through_line", json_integer((json_int_t)rb)));
	if (res.stop_reason[0])
		json_object_set_new(json_object_get(out, "replay"), "stopped", json_string(res.stop_reason));
	json_object_update(json_object_get(out, "replay"), from);
	if (o->fmt == TRACE_FMT_TEXT) {
		printf("verdict: %s (disputed line %zu, %zu events agreed; the re-execution follows A "
		       "through line %zu and B through line %zu)\n", verdict, lo + 1, lo ? lo - 1 : 0,
		       ra, rb);
		if (json_object_get(from, "snapshot"))
			printf("re-executed from snapshot %s, after event %lld\n",
			       common_jstr(from, "snapshot", ""),
			       (long long)json_integer_value(json_object_get(from, "step")));
		else
			printf("re-executed from the start (no snapshot of the lease within the agreed "
			       "events)\n");
	} else {
		char *s = common_json_canonical(out);
		printf("%s\n", s);
		free(s);
	}
	json_decref(out);
out:
	if (scratch) {
		struct common_err e2;
		common_rm_rf(scratch, &e2);
		free(scratch);
	}
	free(ns_src);
	json_decref(from);
	if (loaded_r)
		tr_free(&r);
	tr_free(&a);
	tr_free(&b);
	return rc;
}
