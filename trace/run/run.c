/* sbx-run's orchestration: options, the lease checks and transitions, the control
 * socket, the features' hooks and the result record (SPEC §6.5, §6.6). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"
#include "trace/run/run-internal.h"

/* PROGRAM as the host resolves it: a path, or a name searched in $PATH. */
static char *resolve_program(const char *prog, int *exit_code, struct common_err *e)
{
	char buf[PATH_MAX];
	*exit_code = SBX_EXIT_NOTFOUND;
	if (strchr(prog, '/')) {
		if (!realpath(prog, buf)) {
			common_errno(e, errno, "program %s", prog);
			return NULL;
		}
		if (access(buf, X_OK) < 0) {
			*exit_code = SBX_EXIT_NOEXEC;
			common_errno(e, errno, "program %s", prog);
			return NULL;
		}
		return common_xstrdup(buf);
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char *dup = common_xstrdup(path), *save = NULL;
	for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof buf, "%s/%s", *d ? d : ".", prog);
		struct stat st;
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) {
			char real[PATH_MAX];
			free(dup);
			return common_xstrdup(realpath(buf, real) ? real : buf);
		}
	}
	free(dup);
	common_errf(e, prog, "command not found in PATH");
	return NULL;
}

/* One owner-only Unix socket per run, STORE/run/LEASE.sock (directory 0700):
 * a client writes one JSON request line, reads one JSON reply line.
 * {"op":"status"} -> {"lease","pid","guest_pid","stops","refused","running"}.
 * Snapshots and observations add their ops here. */
struct run_ctx {
	const char *lease;
	int ctl_fd;
	char *ctl_path;
	struct trace_result *res;
	struct trace_supervisor *sv;
	struct trace_rec *rec;        /* --trace */
	struct trace_inspector *ins;  /* policy, co-process */
	struct trace_metering *meter; /* metering, closure */
	struct lease_store *store;    /* snapshots persist into the store */
	const struct trace_run_opts *opts;
	int restored;                 /* the restore hook ran */
	uint64_t snap_batch;          /* batch of the last automatic snapshot */
	struct trace_determ *det;     /* --deterministic */
	int image_fd;                 /* the image as opened, checked and hashed */
	struct stat image_st;         /* its identity then */
	const char *image, *image_sha;
	int image_seen;               /* the guest's first exec came */
	int failed;                   /* the run ends with fail, an sbx error (125) */
	struct common_err fail;
};

static int ctl_open(struct run_ctx *c, const char *store_dir, const char *lease, struct common_err *e)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/run", store_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return common_errno(e, errno, "control socket directory %s", dir);
	c->ctl_path = common_xasprintf("%s/%s.sock", dir, lease);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(c->ctl_path) >= sizeof a.sun_path) {
		common_errf(e, "control socket", "path %s is too long", c->ctl_path);
		free(c->ctl_path);
		c->ctl_path = NULL;
		return -1;
	}
	strcpy(a.sun_path, c->ctl_path);
	unlink(c->ctl_path);
	c->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(077);
	int rc = c->ctl_fd < 0 ? -1 : bind(c->ctl_fd, (struct sockaddr *)&a, sizeof a);
	umask(old);
	if (rc < 0 || listen(c->ctl_fd, 8) < 0) {
		common_errno(e, errno, "control socket %s", c->ctl_path);
		if (c->ctl_fd >= 0)
			close(c->ctl_fd);
		c->ctl_fd = -1;
		free(c->ctl_path);
		c->ctl_path = NULL;
		return -1;
	}
	return 0;
}

static void ctl_close(struct run_ctx *c)
{
	if (c->ctl_fd >= 0)
		close(c->ctl_fd);
	if (c->ctl_path)
		unlink(c->ctl_path);
	free(c->ctl_path);
	c->ctl_fd = -1;
	c->ctl_path = NULL;
}

/* A snapshot of guest through the program's snapshot operations; the
 * request carries the supervisor's own state: the trace head, flushed. */
static int snap_take(struct run_ctx *c, pid_t guest, int stop, int at_stop, const json_t *peer,
		     struct trace_snap_taken *out, struct common_err *e)
{
	struct trace_snap_request rq = { .guest = guest, .stop = stop, .at_stop = at_stop,
					 .renter = json_string_value(json_object_get(peer, "renter")),
					 .renter_sig = json_string_value(json_object_get(peer, "renter_sig")) };
	if (!c->opts || !c->opts->snap)
		return common_errf(e, "snapshot", "this program takes no snapshots");
	if (c->rec) {
		trace_rec_flush(c->rec);
		trace_rec_head(c->rec, rq.trace_head);
		rq.trace_seq = trace_rec_events(c->rec);
	}
	if (c->sv)
		trace_sv_unhurried(c->sv, 1);
	int rc = c->opts->snap->take(c->store, c->lease, &rq, out, e);
	if (c->sv)
		trace_sv_unhurried(c->sv, 0);
	/* the snapshot resumed the guest with PTRACE_CONT */
	if ((!stop || rc < 0) && c->sv) {
		pid_t tids[1024];
		size_t n = trace_sv_pids(c->sv, tids, 1024);
		for (size_t i = 0; i < n; i++)
			if (tids[i] != guest || !at_stop)
				trace_sv_every_call_rearm(c->sv, tids[i]);
	}
	return rc;
}

/* The control socket's JSON reply for a snapshot taken or refused. */
static json_t *snap_reply(const char *lease, int rc, struct trace_snap_taken *t,
			  const struct common_err *e)
{
	if (rc < 0)
		return json_pack("{s:s++}", "error", e->what, ": ", e->why);
	return json_pack("{s:s,s:s,s:I,s:I,s:I,s:o}", "lease", lease, "digest", t->digest,
			 "bytes", (json_int_t)t->bytes, "chunks", (json_int_t)t->chunks,
			 "persisted_bytes", (json_int_t)t->persisted_bytes, "receipt", t->receipt);
}

/* The control socket serves the invoking user from outside every sandbox: the
 * peer's uid is ours and it lives in our PID namespace (a guest never does). */
static int ctl_peer_ok(int fd)
{
	struct ucred cr;
	socklen_t n = sizeof cr;
	struct stat a, b;
	char path[64];
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0 || cr.uid != geteuid() || cr.pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)cr.pid);
	return stat(path, &a) == 0 && stat("/proc/self/ns/pid", &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

static void ctl_serve(struct run_ctx *c, struct trace_supervisor *sv)
{
	int fd = accept4(c->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!ctl_peer_ok(fd)) {
		static const char no[] = "{\"error\":\"the control socket serves only the invoking "
					 "user, from outside every sandbox\"}\n";
		(void)!send(fd, no, sizeof no - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		close(fd);
		return;
	}
	/* one bounded request; a slow or silent client gets no second chance */
	struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	char buf[4096];
	size_t len = 0;
	while (len < sizeof buf - 1) {
		ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(buf, '\n', len))
			break;
	}
	struct common_err e;
	json_t *req = common_json_load(buf, len, "control request", &e), *rep = json_object();
	const char *op = NULL;
	if (!req || common_json_str(req, "op", &op, "control request", &e) < 0) {
		json_object_set_new(rep, "error", json_string(e.why));
	} else if (strcmp(op, "status") == 0) {
		json_object_set_new(rep, "lease", c->lease ? json_string(c->lease) : json_null());
		json_object_set_new(rep, "pid", json_integer(getpid()));
		json_object_set_new(rep, "guest_pid", json_integer(trace_sv_guest_pid(sv)));
		json_object_set_new(rep, "stops", json_integer((json_int_t)c->res->stops));
		json_object_set_new(rep, "refused", json_integer((json_int_t)c->res->refused));
		json_object_set_new(rep, "running", json_true());
	} else if (strcmp(op, "snapshot") == 0) {
		/* capture at a step boundary, persist, record the receipt */
		struct trace_snap_taken t;
		int stop = json_is_true(json_object_get(req, "stop"));
		/* a peer's snapshot is its renter's to authorize, never this run's key */
		int peer_signed = json_is_string(json_object_get(req, "renter_sig"));
		int rc = peer_signed ? snap_take(c, trace_sv_guest_pid(sv), stop, 0, req, &t, &e)
			: common_errf(&e, "snapshot", "not signed by the lease's renter (sbx-snap "
				      "take signs it)");
		json_decref(rep);
		rep = snap_reply(c->lease, rc, &t, &e);
		if (stop && rc == 0)
			trace_sv_stop(sv, "snapshot --stop");
	} else {
		json_object_set_new(rep, "error", json_sprintf("unknown op \"%.64s\"", op));
	}
	char *out = common_json_canonical(rep);
	size_t ol = strlen(out);
	out = common_xrealloc(out, ol + 2);
	out[ol++] = '\n';
	(void)common_write_all(fd, out, ol);
	free(out);
	json_decref(req);
	json_decref(rep);
	close(fd);
}

static int hook_start(void *ctx, struct trace_supervisor *sv)
{
	struct run_ctx *c = ctx;
	c->sv = sv;
	if (c->ctl_fd >= 0)
		trace_sv_watch(sv, c->ctl_fd);
	if (c->opts && c->opts->snapshot_every && c->store)
		lease_store_batch(c->store, &c->snap_batch, NULL);
	return 0;
}

static int hook_fd(void *ctx, struct trace_supervisor *sv, int fd)
{
	struct run_ctx *c = ctx;
	if (fd == c->ctl_fd)
		ctl_serve(c, sv);
	return 0;
}

/* The image once the guest has exec'd it, when the kernel refuses writes to it:
 * the same identity as when it was hashed, or else the same bytes, or the run
 * stops (a writer changing the file in place between hash and exec). */
static int image_unchanged(struct run_ctx *c)
{
	struct stat now;
	uint8_t d[COMMON_SHA256_LEN];
	char hex[COMMON_SHA256_HEX];
	if (fstat(c->image_fd, &now) == 0 && common_same_file(&c->image_st, &now))
		return 1;
	if (common_sha256_fd(c->image_fd, c->image, d, &c->fail) < 0)
		return 0;
	common_hex(d, sizeof d, hex);
	if (strcmp(hex, c->image_sha) == 0)
		return 1;
	common_errf(&c->fail, "image", "%s changed between its hash (sha256 %s) and its exec "
		    "(now sha256 %s): the run is stopped", c->image, c->image_sha, hex);
	return 0;
}

/* The image at the guest's first exec is the one hashed. */
static int hook_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
		     const char *path)
{
	struct run_ctx *c = ctx;
	(void)pid;
	(void)ppid;
	(void)path;
	if (c->image_seen)
		return 0;
	c->image_seen = 1;
	if (image_unchanged(c))
		return 0;
	c->failed = 1;
	trace_sv_stop(sv, "image changed before its exec");
	return -1;
}

/* sbx-restore: the guest's first exec is rebuilt into the snapshot's state. */
static int hook_restore(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			const char *path)
{
	struct run_ctx *c = ctx;
	struct common_err e;
	(void)ppid;
	(void)path;
	if (!c->opts || !c->opts->restore_exec || c->restored)
		return 0;
	c->restored = 1;
	if (c->opts->restore_exec(c->opts->restore_ctx, pid, &e) < 0) {
		c->fail = e;
		c->failed = 1;
		trace_sv_kill_now(sv, "restore failed");
		return -1;
	}
	/* the snapshot's other threads, made by the restore, run from now on */
	trace_sv_adopt_threads(sv, pid);
	if (c->meter) /* the lease is Active now: its usage may be observed */
		trace_metering_hold(c->meter, 0);
	return 0;
}

/* After the recorder: the trace it wrote is the guest's storage, held like a write. */
static int hook_recorded(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct run_ctx *c = ctx;
	(void)g, (void)st;
	return trace_metering_trace_grew(c->meter, trace_rec_bytes(c->rec));
}

static int hook_recorded_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			      const char *path)
{
	(void)sv, (void)pid, (void)ppid, (void)path;
	return hook_recorded(ctx, NULL, NULL);
}

static int hook_tick(void *ctx, struct trace_supervisor *sv)
{
	struct run_ctx *c = ctx;
	if (c->rec && c->meter) { /* the trace grows with the guest: it is the guest's storage */
		trace_rec_flush(c->rec);
		trace_metering_host_write(c->meter, trace_rec_bytes(c->rec));
	}
	uint64_t b = 0;
	/* --snapshot-every-batches, taken like sbx-snap take */
	if (c->opts && c->opts->snapshot_every && c->store && c->lease &&
	    lease_store_batch(c->store, &b, NULL) == 0 && b >= c->snap_batch + c->opts->snapshot_every) {
		c->snap_batch = b;
		struct trace_snap_taken t;
		struct common_err e;
		if (snap_take(c, trace_sv_guest_pid(sv), 0, 0, NULL, &t, &e) < 0)
			common_warnf("automatic snapshot: %s: %s", e.what, e.why);
		else
			json_decref(t.receipt);
	}
	return 0;
}

static void hook_signal(void *ctx, struct trace_supervisor *sv, pid_t tid, int sig)
{
	struct run_ctx *c = ctx;
	(void)sv;
	if (!c->opts || !c->opts->snapshot_on_exit_signal || !c->opts->snap || !c->store ||
	    !c->lease || !c->opts->snap->signal_fatal(tid, sig))
		return;
	struct trace_snap_taken t;
	struct common_err e;
	if (snap_take(c, tid, 0, 1, NULL, &t, &e) < 0)
		common_warnf("snapshot on signal %d: %s: %s", sig, e.what, e.why);
	else
		json_decref(t.receipt);
}

/* --trace: the header binds lease, image, argv, mounts, environment, start batch. */
static struct trace_rec *trace_open(const struct trace_run_opts *o, struct lease_store *s,
				    const char *id, const char *image, const char *sha,
				    char *const *env, const char *ns, const struct trace_determ *d,
				    struct common_err *e)
{
	enum trace_level lvl = o->trace_level;
	uint64_t batch = 0;
	json_t *mounts = json_array();
	static const char *const types[] = {"bind", "tmpfs", "proc"};
	if (lease_store_batch(s, &batch, e) < 0)
		return NULL;
	json_t *det = NULL;
	if (o->deterministic) {
		batch = 0; /* the run's batch is in the lease's receipts, not in the chain */
		if (!(det = trace_determ_header(d, ns, e)))
			return NULL;
	}
	for (size_t i = 0; i < o->nmounts; i++) {
		const struct trace_mount *m = &o->mounts[i];
		json_array_append_new(mounts, json_pack("{s:s,s:s?,s:s,s:s?,s:b}", "type",
			types[m->type], "src", m->src, "dst", m->dst, "opts", m->opts, "rw", m->rw));
	}
	/* exec hashes persist in the store: each run need not hash cc1 again */
	char *hcache = common_xasprintf("%s/exec-hashes", lease_store_dir(s));
	struct trace_rec_info in = {
		.lease = id, .image_path = image, .image_sha256 = sha, .argv = o->argv,
		.envp = env, .mounts = mounts, .start_batch = batch, .level = lvl,
		.deterministic = o->deterministic, .determinism = det, .hash_cache = hcache,
	};
	struct trace_rec *r = trace_rec_open(o->trace_path, -1, &in, e);
	free(hcache);
	json_decref(mounts);
	json_decref(det);
	return r;
}

/* --deterministic (SPEC §9): seeded by the lease; its clock starts when the
 * lease was requested (rec: its record, else receipts holds the request) */
static struct trace_determ *determ_open(struct lease_store *s, const char *id, const json_t *rec,
					const json_t *receipts, struct common_err *e)
{
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	json_int_t batch = -1;
	size_t i;
	const json_t *r;
	if (l)
		batch = json_integer_value(json_object_get(l, "requested"));
	json_array_foreach(receipts, i, r) {
		const char *edge = json_string_value(json_object_get(r, "edge"));
		if (!l && edge && !strcmp(edge, "request"))
			batch = json_integer_value(json_object_get(r, "batch"));
	}
	json_t *clk = NULL;
	if (lease_clock_get(s, &clk, e) < 0)
		return NULL;
	int64_t epoch = trace_determ_epoch(clk, batch);
	json_decref(clk);
	if (epoch < 0) {
		common_errf(e, "determinism", "lease %s: no request time in its receipts", id);
		return NULL;
	}
	return trace_determ_new(id, epoch, trace_tsc_probe());
}

static const char *priority_name(enum trace_priority p)
{
	return p == TRACE_PRIO_REALTIME ? "realtime" : p == TRACE_PRIO_INVOKER ? "invoker" : "normal";
}

static json_t *result_json(const char *lease, const char *image, const char *sha,
			   char *const *argv, const struct trace_result *r, int code,
			   const char *closed, json_t *receipts)
{
	json_t *j = json_object(), *av = json_array();
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(av, json_string(argv[i]));
	json_object_set_new(j, "lease", lease ? json_string(lease) : json_null());
	json_object_set_new(j, "image", json_pack("{s:s,s:s}", "path", image, "sha256", sha));
	json_object_set_new(j, "argv", av);
	if (r->exec_failed)
		json_object_set_new(j, "exec_error", json_string(strerror(r->exec_failed)));
	if (r->signal)
		json_object_set_new(j, "signal", json_integer(r->signal));
	else if (r->exited)
		json_object_set_new(j, "status", json_integer(r->status));
	json_object_set_new(j, "exit_code", json_integer(code));
	json_object_set_new(j, "closed", closed ? json_string(closed) : json_null());
	json_object_set_new(j, "stopped", r->stop_reason[0] ? json_string(r->stop_reason) : json_null());
	json_object_set_new(j, "usage", json_pack("{s:I,s:I}", "cpu_us", (json_int_t)r->cpu_us,
						  "maxrss", (json_int_t)r->maxrss));
	json_object_set_new(j, "supervisor", json_pack("{s:I,s:I,s:s}", "stops", (json_int_t)r->stops,
						       "refused", (json_int_t)r->refused, "priority",
						       priority_name(r->priority)));
	json_object_set_new(j, "trace", json_null()); /* the trace head digest */
	json_object_set_new(j, "receipts", receipts ? json_incref(receipts) : json_array());
	return j;
}

/* --result goes beneath the directory opened before the guest started */
static int write_result(const struct trace_run_opts *o, struct common_outfile *out,
			const json_t *j, struct common_err *e)
{
	char *s = common_json_canonical(j);
	size_t n = strlen(s);
	s = common_xrealloc(s, n + 2);
	s[n++] = '\n';
	int rc = 0;
	if (out->path && common_outfile_write(out, s, n, 0644, e) < 0)
		rc = -1;
	if (o->result_fd >= 0 && common_write_all(o->result_fd, s, n) < 0)
		rc = common_errno(e, errno, "--result-fd %d", o->result_fd);
	free(s);
	return rc;
}

/* request, fund, activate: one locked commit, one receipt each */
/* The image, opened once, above 0-2 (a closed stdin keeps them for what they are). */
static int open_image(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fd <= 2) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3), err = errno;
		close(fd);
		fd = hi;
		errno = err;
	}
	return fd;
}

/* A #! script named as the program (what the kernel would do on its exec). */
struct script {
	char *path;                  /* its host path, NULL when the program is an ELF */
	char sha[COMMON_SHA256_HEX];
	char **argv;                 /* interpreter, its argument, the script, the arguments */
};

/* When *image_fd is a script: hash it, and make its interpreter the image
 * (*image, *image_fd, *st) and argv the interpreter's, as execve(2) builds it.
 * The script is named as given when it has a slash (the guest resolves it in
 * its working directory), else by its host path. 0, or -1 with e set. */
static int script_open(struct script *sc, char **image, int *image_fd, struct stat *st,
		       char *const *argv, struct common_err *e)
{
	char interp[LEASE_INTERP_MAX], arg[LEASE_INTERP_MAX];
	uint8_t d[COMMON_SHA256_LEN];
	size_t n = 0, k = 0;
	int r = lease_image_interp(*image_fd, *image, interp, arg, e);

	if (r <= 0)
		return r;
	if (common_sha256_fd(*image_fd, *image, d, e) < 0)
		return -1;
	common_hex(d, sizeof d, sc->sha);
	sc->path = *image;
	while (argv[n])
		n++;
	sc->argv = common_xcalloc(n + 3, sizeof *sc->argv);
	sc->argv[k++] = common_xstrdup(interp);
	if (arg[0])
		sc->argv[k++] = common_xstrdup(arg);
	sc->argv[k++] = common_xstrdup(strchr(argv[0], '/') ? argv[0] : sc->path);
	for (size_t i = 1; i < n; i++)
		sc->argv[k++] = common_xstrdup(argv[i]);
	char real[PATH_MAX];
	*image = common_xstrdup(realpath(interp, real) ? real : interp);
	close(*image_fd);
	*image_fd = open_image(*image);
	if (*image_fd < 0 || fstat(*image_fd, st) < 0)
		return common_errno(e, errno, "interpreter %s of %s", *image, sc->path);
	if (lease_image_validate_fd(*image_fd, *image, e) < 0) {
		common_err_context(e, "interpreter of %s", sc->path);
		return -1;
	}
	return 0;
}

static void script_free(struct script *sc)
{
	free(sc->path);
	for (size_t i = 0; sc->argv && sc->argv[i]; i++)
		free(sc->argv[i]);
	free(sc->argv);
}

static int ephemeral_open(struct lease_store *s, const struct trace_run_opts *o, const char *image,
			  const char *sha, const struct script *sc, char **id, json_t **head,
			  json_t *receipts, struct common_err *e)
{
	struct lease_request req;
	memset(&req, 0, sizeof req);
	req.principal = o->principal;
	req.host_program = o->host_program;
	req.image = image;
	req.image_sha256 = sha;
	req.script = sc->path;
	req.script_sha256 = sc->path ? sc->sha : NULL;
	req.lifetime = o->lifetime;
	req.escrow = o->escrow;
	req.ephemeral = 1;
	if (o->limits && lease_parse_limits(o->limits, &req, e) < 0)
		return -1;
	if (o->fees && lease_parse_fees(o->fees, &req, e) < 0)
		return -1;
	json_t *amount = json_pack("{s:I}", "amount", (json_int_t)o->escrow), *made = NULL;
	struct lease_step steps[] = { { LEASE_EDGE_FUND, amount, 0 }, { LEASE_EDGE_ACTIVATE, NULL, 0 } };
	int rc = lease_steps(s, &req, NULL, NULL, steps, 2, &made, e);
	json_decref(amount);
	if (rc < 0)
		return -1;
	json_t *r = json_array_get(made, 0);
	*id = common_xstrdup(common_jstr(r, "lease", NULL) ? common_jstr(r, "lease", NULL) : "");
	json_array_extend(receipts, made);
	*head = json_incref(json_array_get(made, json_array_size(made) - 1));
	json_decref(made);
	return 0;
}

/* settle (unless a bound already did), expire, destroy: one locked commit */
static int ephemeral_close(struct lease_store *s, const char *id, json_t *receipts,
			   struct common_err *e)
{
	struct lease_step steps[] = { { LEASE_EDGE_SETTLE, NULL, 1 }, { LEASE_EDGE_EXPIRE, NULL, 0 },
				      { LEASE_EDGE_DESTROY, NULL, 0 } };
	json_t *made = NULL, *all = NULL;
	if (lease_steps(s, NULL, id, NULL, steps, 3, &made, e) < 0)
		return -1;
	/* the journal also holds the observations metering made during the run */
	if (lease_log_since(s, id, -1, &all, e) == 0) {
		json_array_clear(receipts);
		json_array_extend(receipts, all);
	} else {
		json_array_extend(receipts, made);
	}
	json_decref(all);
	json_decref(made);
	return 0;
}

/* Where the guest starts: --chdir, else the invoker's directory where a bind
 * shows it (at its own or a mapped destination, the deepest bind winning), else
 * /ns (NULL). Malloc'd. */
static char *start_dir(const struct trace_run_opts *o)
{
	char cwd[PATH_MAX], src[PATH_MAX];
	const struct trace_mount *best = NULL;
	size_t best_len = 0;

	if (o->chdir)
		return common_xstrdup(o->chdir);
	if (!getcwd(cwd, sizeof cwd))
		return NULL;
	for (size_t i = 0; i < o->nmounts; i++) {
		const struct trace_mount *m = &o->mounts[i];
		if (m->type != TRACE_MOUNT_BIND || !realpath(m->src, src) || strcmp(src, "/") == 0)
			continue;
		size_t n = strlen(src);
		if (strncmp(cwd, src, n) == 0 && (cwd[n] == 0 || cwd[n] == '/') && n >= best_len) {
			best = m;
			best_len = n;
		}
	}
	if (!best)
		return NULL;
	return common_xasprintf("%s%s", strcmp(best->dst, "/") ? best->dst : "", cwd + best_len);
}

void trace_run_opts_free(struct trace_run_opts *o)
{
	for (size_t i = 0; i < o->nmounts; i++) {
		free((char *)o->mounts[i].src);
		free((char *)o->mounts[i].dst);
		free((char *)o->mounts[i].opts);
	}
	free(o->mounts);
	free(o->env_set);
	free(o->sockets);
	o->mounts = NULL;
	o->env_set = NULL;
	o->nmounts = o->nenv_set = 0;
}

/* --lease: the receipts this run added (observations, a closure), else the head */
static void run_receipts(struct lease_store *s, const char *id, json_int_t start_seq,
			 json_t *receipts)
{
	struct common_err e;
	json_t *all = NULL;
	/* from the head the run started with, which stands alone when nothing followed */
	if (lease_log_since(s, id, start_seq - 1, &all, &e) == 0) {
		if (json_array_size(all) > 1)
			json_array_remove(all, 0);
		json_array_extend(receipts, all);
	}
	json_decref(all);
}

int trace_run_main(struct trace_run_opts *o)
{
	struct common_err e;
	struct lease_store *s = NULL;
	json_t *rec = NULL, *head = NULL, *receipts = json_array(), *result = NULL;
	char *image = NULL, *id = NULL, *ns = NULL, *filters = NULL, *store_real = NULL, *wd = NULL;
	char **env = NULL;
	char sha[COMMON_SHA256_HEX] = "";
	int image_fd = -1, run_fd = -1;
	struct stat image_st;
	struct script sc = { 0 };
	struct common_outfile result_out = { .dirfd = -1 };
	int code = SBX_EXIT_SBX, have_lease = 0;
	const char *closed = NULL;
	struct trace_result res;
	json_int_t start_seq = -1;
	struct trace_bound *bound = NULL;
	struct trace_determ *det = NULL;
	memset(&res, 0, sizeof res);
	memset(&e, 0, sizeof e);

	if (o->result_path && common_outfile_open(&result_out, o->result_path, &e) < 0) {
		common_err_context(&e, "--result %s", o->result_path);
		goto fail;
	}
	if (!o->argv || !o->argv[0]) {
		common_errf(&e, "usage", "no program given (sbx-run … -- PROGRAM [ARG…])");
		goto fail;
	}
	if (!!o->lease == !!o->ephemeral) {
		common_errf(&e, "usage", "give exactly one of --lease ID and --ephemeral");
		goto fail;
	}
	image = resolve_program(o->argv[0], &code, &e);
	if (!image)
		goto fail;
	code = SBX_EXIT_NOEXEC; /* checked before the store is opened (or created) */
	/* opened once: what is checked, hashed and named in receipts is what runs */
	image_fd = open_image(image);
	if (image_fd < 0 || fstat(image_fd, &image_st) < 0) {
		common_errno(&e, errno, "image %s", image);
		goto fail;
	}
	if (script_open(&sc, &image, &image_fd, &image_st, o->argv, &e) < 0)
		goto fail;
	if (sc.argv)
		o->argv = sc.argv;
	else if (lease_image_validate_fd(image_fd, image, &e) < 0)
		goto fail;
	code = SBX_EXIT_SBX;
	if (trace_bound_open(o, &bound, &e) < 0) /* a bad policy or state input: nothing moved */
		goto fail;
	if (lease_store_open(o->store, &s, &e) < 0)
		goto fail;
	lease_store_principal_key(s, o->principal_key);
	store_real = realpath(lease_store_dir(s), NULL);
	/* the mount list (a bind that would show the store, say) before any lease moves */
	struct trace_config pre = { .argv = (const char *const *)o->argv, .image = image,
				    .mounts = o->mounts, .nmounts = o->nmounts,
				    .replace_defaults = o->replace_defaults, .store_dir = store_real };
	if (trace_config_check(&pre, &e) < 0)
		goto fail;
	if (lease_image_check_cached_fd(s, image_fd, image, sha, &e) < 0)
		goto fail;
	if (o->ephemeral) {
		/* request and claim under one host lock: sbx-lease recover never finds the
		 * lease unclaimed while this run lives */
		if (lease_store_lock_host(s, &e) < 0)
			goto fail;
		if (ephemeral_open(s, o, image, sha, &sc, &id, &head, receipts, &e) == 0) {
			have_lease = 1;
			run_fd = lease_run_claim(s, id, &e);
		}
		lease_store_unlock(s);
		if (run_fd < 0)
			goto fail;
	} else {
		id = common_xstrdup(o->lease);
		/* before anything of the lease is touched: its control socket, its usage */
		if (!lease_id_valid(id)) {
			common_errf(&e, id, "not a lease id (expected L followed by 16 hex digits)");
			goto fail;
		}
		if ((run_fd = lease_run_claim(s, id, &e)) < 0)
			goto fail;
		if (lease_load(s, id, &rec, &e) < 0)
			goto fail;
		json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
		/* a run spends the renter's escrow: only the holder of its key runs it */
		if (lease_renter_holds(s, l, &e) < 0)
			goto fail;
		const char *state = common_jstr(l, "state", NULL);
		const char *want = common_jstr(json_object_get(l, "image"), "sha256", NULL);
		/* a restore becomes Active once its guest is rebuilt (restore_exec) */
		const char *need = o->restore_exec ? "Funded" : "Active";
		if (!state || strcmp(state, need) != 0) {
			common_errf(&e, "lease", "cannot run lease %s: state is %s, run needs %s", id,
				    state ? state : "unknown", need);
			goto fail;
		}
		start_seq = json_integer_value(json_object_get(l, "seq"));
		if (!want || strcmp(want, sha) != 0) {
			common_errf(&e, "image", "%s (sha256 %s) is not lease %s's image (sha256 %s)",
				    image, sha, id, want ? want : "unknown");
			goto fail;
		}
		/* the script the lease names, or none, exactly */
		const json_t *script = json_object_get(json_object_get(l, "image"), "script");
		const char *wsc = common_jstr(script, "sha256", NULL);
		if (!wsc != !sc.path || (wsc && strcmp(wsc, sc.sha) != 0)) {
			common_errf(&e, "image", "%s%s%s is not the script lease %s names (%s)",
				    sc.path ? sc.path : "no script", sc.path ? " sha256 " : "",
				    sc.path ? sc.sha : "", id, wsc ? wsc : "none");
			goto fail;
		}
	}
	ns = lease_ns_dir(s, id);
	if (common_mkdir_p(ns, 0700, &e) < 0)
		goto fail;

	env = trace_env_build(o->env_clear, o->env_set, o->nenv_set);
	filters = common_xasprintf("%s/filters", lease_store_dir(s));
	wd = start_dir(o);
	struct run_ctx ctx = { .lease = id, .ctl_fd = -1, .res = &res, .store = s, .opts = o,
			       .image_fd = image_fd, .image_st = image_st, .image = image,
			       .image_sha = sha };
	if (ctl_open(&ctx, lease_store_dir(s), id, &e) < 0)
		goto fail;
	if (o->deterministic && !(ctx.det = det = determ_open(s, id, rec, receipts, &e))) {
		ctl_close(&ctx);
		goto fail;
	}
	if (o->trace_path) {
		ctx.rec = trace_open(o, s, id, image, sha, env, ns, ctx.det, &e);
		if (!ctx.rec) {
			ctl_close(&ctx);
			goto fail;
		}
	}
	struct trace_layer layers[TRACE_LAYERS] = {
		[TRACE_LAYER_CONTROL] = { .ctx = &ctx, .on_start = hook_start, .on_fd = hook_fd,
					  .on_exec = hook_exec, .on_tick = hook_tick,
					  .on_signal = hook_signal },
		[TRACE_LAYER_DETERM] = trace_determ_layer(ctx.det),
		[TRACE_LAYER_RESTORE] = { .ctx = &ctx, .on_exec = hook_restore },
		[TRACE_LAYER_RECORD] = trace_rec_layer(ctx.rec),
	};
	struct trace_config cfg = {
		.argv = (const char *const *)o->argv,
		.envp = (const char *const *)env,
		.image = image,
		.image_fd = image_fd,
		.mounts = o->mounts,
		.nmounts = o->nmounts,
		.replace_defaults = o->replace_defaults,
		.ns_dir = ns,
		.cwd = wd,
		.sockets = o->sockets,
		.nsockets = o->nsockets,
		.owner_set = o->owner_set,
		.owner_uid = o->owner_uid,
		.owner_gid = o->owner_gid,
		.rlimit_nproc = o->max_procs,
		.state_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.no_aslr = !o->ephemeral || o->deterministic, /* snapshots; SPEC §9 */
		.filter_cache = filters,
		.store_dir = store_real,
		.host_signals = 1, /* sbx-run's own process: SIGTERM & co. end the run */
		.layers = layers,
		.trace_classes = ctx.rec ? trace_classes(o->trace_level) : 0,
	};
	/* limits -> rlimits, meter/policy/inspect/state hooks */
	if (trace_bound_attach(bound, s, id, ns, &run_fd, &cfg, &e) < 0) {
		ctl_close(&ctx);
		if (ctx.rec)
			trace_rec_abort(ctx.rec);
		goto fail;
	}
	ctx.ins = trace_bound_inspector(bound);
	ctx.meter = trace_bound_metering(bound);
	layers[TRACE_LAYER_INSPECT] = trace_inspector_layer(ctx.ins);
	layers[TRACE_LAYER_METER] = trace_meter_layer(ctx.meter);
	if (ctx.rec && ctx.meter)
		layers[TRACE_LAYER_AFTER] = (struct trace_layer){ .ctx = &ctx, .on_entry = hook_recorded,
			.on_exit = hook_recorded, .on_exec = hook_recorded_exec };
	if (ctx.meter && o->restore_exec) /* no observation of a lease still Funded */
		trace_metering_hold(ctx.meter, 1);
	/* level file: readlink need not stop unless an inspector looks at file calls */
	if (ctx.rec && o->trace_level == TRACE_LEVEL_FILE &&
	    !(ctx.ins && (trace_inspector_classes(ctx.ins) & TRACE_CLASS_FILE)))
		cfg.trace_classes |= TRACE_FILTER_NO_READLINK;
	if (ctx.det) { /* SPEC §9 */
		cfg.trace_classes |= trace_determ_classes();
		cfg.tsc_sigsegv = trace_tsc_probe();
	}
	int rc = trace_run(&cfg, &res, &e);
	if (ctx.rec && ctx.meter) {
		trace_rec_flush(ctx.rec);
		trace_metering_host_write(ctx.meter, trace_rec_bytes(ctx.rec));
	}
	if (rc == 0 && trace_bound_finish(bound, &res, &closed, &e) < 0)
		rc = -1;
	if (rc == 0 && ctx.failed) { /* sbx stopped the guest for its own reason */
		e = ctx.fail;
		rc = -1;
	}
	ctl_close(&ctx);
	json_t *trace_j = NULL;
	if (ctx.rec) {
		uint8_t h[32];
		char hex[COMMON_SHA256_HEX];
		struct common_err te;
		int trc = trace_rec_close(ctx.rec, res.wstatus, h, &te);
		ctx.rec = NULL;
		common_hex(h, 32, hex);
		trace_j = json_pack("{s:s,s:s}", "path", o->trace_path, "head", hex);
		if (trc < 0 && rc == 0) {
			e = te;
			rc = -1;
		}
	}
	if (rc < 0) {
		json_decref(trace_j);
		goto fail;
	}
	code = trace_result_exit_code(&res);
	if (closed)
		code = SBX_EXIT_BOUND;
	if (o->ephemeral) {
		if (ephemeral_close(s, id, receipts, &e) < 0) {
			have_lease = 0;
			code = SBX_EXIT_SBX;
			goto fail;
		}
		have_lease = 0;
	} else {
		run_receipts(s, id, start_seq, receipts);
	}
	result = result_json(id, image, sha, o->argv, &res, code, closed, receipts);
	if (sc.path)
		json_object_set_new(result, "script", json_pack("{s:s,s:s}", "path", sc.path,
								 "sha256", sc.sha));
	trace_bound_result(bound, result);
	if (ctx.det) { /* what was answered, and what no run controls (SPEC §9) */
		json_t *d = trace_determ_header(ctx.det, NULL, &e);
		if (d) {
			json_object_set_new(d, "emulated",
					    json_integer((json_int_t)trace_determ_emulated(ctx.det)));
			/* waits the serial schedule did not model: each a run of a task
			 * beside the schedule, where timing could show */
			json_object_set_new(d, "unscheduled", json_integer((json_int_t)res.unscheduled));
			json_object_set_new(result, "determinism", d);
		}
	}
	if (trace_j)
		json_object_set_new(result, "trace", trace_j);
	if (write_result(o, &result_out, result, &e) < 0) {
		common_report(&e);
		code = SBX_EXIT_SBX;
	} else if (closed && !o->result_path && o->result_fd < 0) {
		fprintf(stderr, "sbx-run: lease %s closed: %s\n", id, closed);
	}
	goto out;
fail:
	common_report(&e);
	if (code == 0)
		code = SBX_EXIT_SBX;
	if (have_lease && s && id) {
		/* one-shot mode never leaves a lease behind, even when the run failed */
		struct common_err e2;
		if (ephemeral_close(s, id, receipts, &e2) < 0)
			common_report(&e2);
	}
	if (o->result_path || o->result_fd >= 0) {
		result = result_json(id, image ? image : o->argv && o->argv[0] ? o->argv[0] : "",
				     sha, o->argv ? o->argv : (char *const[]){ NULL }, &res, code, NULL,
				     receipts);
		json_object_set_new(result, "error", json_sprintf("%s: %s", e.what, e.why));
		struct common_err e3;
		if (write_result(o, &result_out, result, &e3) < 0)
			common_report(&e3);
	}
out:
	trace_bound_free(bound); /* its writer keeps the run's bound in the claim */
	if (run_fd >= 0)
		lease_run_release(s, id, run_fd);
	trace_determ_free(det);
	json_decref(result);
	json_decref(receipts);
	json_decref(head);
	json_decref(rec);
	trace_env_free(env);
	if (image_fd >= 0)
		close(image_fd);
	if (result_out.path)
		common_outfile_close(&result_out);
	free(image);
	free(id);
	free(ns);
	free(filters);
	free(store_real);
	free(wd);
	script_free(&sc);
	lease_store_close(s);
	trace_run_opts_free(o);
	return code;
}
