/* sbx-run's run as its steps (trace_run_main): plan, set up, compose the
 * features' layers, supervise, close; the lease's checks and transitions, the
 * control socket, the run's own hooks and the result record (SPEC §6.5, §6.6). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/record/reader/reader.h"
#include "trace/record/record.h"
#include "trace/run/run-internal.h"
#include "trace/sys/sys.h"

#define DET_TRIES 64 /* --snapshot-at-step: takes refused before the run gives up */

/* One run's state from its plan to its close; each layer's hooks get it as ctx. */
struct run {
	struct trace_run_opts *opts;
	struct common_err e;          /* why the run failed */
	int code;                     /* its exit status (SPEC §6.6) */
	struct common_outfile result_out; /* --result, opened before anything moves */
	char *image;                  /* plan: the program as checked and hashed */
	char sha[COMMON_SHA256_HEX];
	int image_fd;                 /* the image as opened, checked and hashed */
	struct stat image_st;         /* its identity then */
	int image_seen;               /* the guest's first exec came */
	struct trace_script sc;
	struct trace_bound *bound;    /* metering, closure, policy, state */
	struct lease_store *store;    /* set up: the lease, claimed; snapshots persist here */
	char *store_real, *id, *ns, *filters, *wd;
	char **env;
	json_t *lease_rec, *head, *receipts;
	json_int_t start_seq;         /* --lease: the head the run started with */
	int have_lease;               /* --ephemeral: a lease this run must close */
	int run_fd;                   /* lease_run_claim's */
	/* One owner-only Unix socket per run, STORE/run/LEASE.sock (directory 0700):
	 * a client writes one JSON request line, reads one JSON reply line.
	 * {"op":"status"} -> {"lease","pid","guest_pid","stops","refused","running"}.
	 * Snapshots and observations add their ops here. */
	int ctl_fd;
	char *ctl_path;
	struct trace_determ *det;     /* --deterministic */
	struct trace_rec *rec;        /* --trace */
	struct trace_inspector *ins;  /* the bound's: policy, co-process */
	struct trace_metering *meter; /* the bound's: metering, closure */
	struct trace_layer layers[TRACE_LAYERS]; /* compose */
	struct trace_config cfg;
	struct trace_supervisor *sv;  /* supervise */
	int restored;                 /* the restore hook ran */
	uint8_t *det_rec;             /* --snapshot-at-step: the determinism record at its point */
	size_t det_len;
	int det_taken, det_refused;   /* done; takes refused (a task starting meanwhile) */
	uint64_t snap_batch;          /* batch of the last automatic snapshot */
	struct trace_handover ho;     /* --chain: this link's hand-over */
	int failed;                   /* the run ends with fail, an sbx error (125) */
	struct common_err fail;
	struct trace_result res;      /* close */
	const char *closed;           /* the dimension that closed the lease */
	char closed_at_close[32];     /* the one the close's last observation closed it by */
	json_t *trace_j, *result;
};

static int ctl_open(struct run *r, const char *store_dir, const char *lease, struct common_err *e)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/run", store_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return common_errno(e, errno, "control socket directory %s", dir);
	r->ctl_path = common_xasprintf("%s/%s.sock", dir, lease);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(r->ctl_path) >= sizeof a.sun_path) {
		common_errf(e, "control socket", "path %s is too long", r->ctl_path);
		free(r->ctl_path);
		r->ctl_path = NULL;
		return -1;
	}
	strcpy(a.sun_path, r->ctl_path);
	unlink(r->ctl_path);
	r->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(077);
	int rc = r->ctl_fd < 0 ? -1 : bind(r->ctl_fd, (struct sockaddr *)&a, sizeof a);
	umask(old);
	if (rc < 0 || listen(r->ctl_fd, 8) < 0) {
		common_errno(e, errno, "control socket %s", r->ctl_path);
		if (r->ctl_fd >= 0)
			close(r->ctl_fd);
		r->ctl_fd = -1;
		free(r->ctl_path);
		r->ctl_path = NULL;
		return -1;
	}
	return 0;
}

static void ctl_close(struct run *r)
{
	if (r->ctl_fd >= 0)
		close(r->ctl_fd);
	if (r->ctl_path)
		unlink(r->ctl_path);
	free(r->ctl_path);
	r->ctl_fd = -1;
	r->ctl_path = NULL;
}

/* A snapshot of guest, asked of the program's snapshot operation (opts->snap,
 * snap/ plugged in from above); the request carries the supervisor's own state:
 * the trace head, flushed. */
static int request_snapshot(struct run *r, pid_t guest, pid_t held, int stop, int at_stop,
			    const json_t *peer, struct trace_snap_taken *out, struct common_err *e)
{
	struct trace_snap_request rq = { .guest = guest, .held = held, .stop = stop, .at_stop = at_stop,
					 .renter = json_string_value(json_object_get(peer, "renter")),
					 .renter_sig = json_string_value(json_object_get(peer, "renter_sig")),
					 .held_prot = trace_metering_held_prot, .held_ctx = r->meter };
	if (!r->opts || !r->opts->snap)
		return common_errf(e, "snapshot", "this program takes no snapshots");
	/* the channel's result goes to this run's --state-out only: a restored run
	 * would hold a copy of the memory file and nowhere to deliver it */
	if (r->opts->state_in || r->opts->state_out)
		return common_errf(e, "snapshot", "this run carries a --state-in/--state-out "
				   "channel, whose result a restored run could not deliver");
	if (r->rec) {
		trace_rec_flush(r->rec);
		trace_rec_head(r->rec, rq.trace_head);
		rq.trace_seq = trace_rec_events(r->rec);
	}
	trace_bound_std_fds(r->bound, rq.std_fds);
	rq.determ = r->det_rec; /* only at --snapshot-at-step's point: a trace goes on from it */
	rq.determ_len = r->det_len;
	if (r->sv)
		trace_sv_unhurried(r->sv, 1);
	int rc = r->opts->snap->take(r->store, r->id, &rq, out, e);
	if (r->sv)
		trace_sv_unhurried(r->sv, 0);
	/* the snapshot resumed the guest with PTRACE_CONT */
	if ((!stop || rc < 0) && r->sv) {
		pid_t tids[1024];
		size_t n = trace_sv_pids(r->sv, tids, 1024);
		for (size_t i = 0; i < n; i++)
			if (tids[i] != (held ? held : guest) || !at_stop)
				trace_sv_every_call_rearm(r->sv, tids[i]);
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

static void ctl_serve(struct run *r, struct trace_supervisor *sv)
{
	int fd = accept4(r->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
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
		json_object_set_new(rep, "lease", r->id ? json_string(r->id) : json_null());
		json_object_set_new(rep, "pid", json_integer(getpid()));
		json_object_set_new(rep, "guest_pid", json_integer(trace_sv_guest_pid(sv)));
		json_object_set_new(rep, "stops", json_integer((json_int_t)r->res.stops));
		json_object_set_new(rep, "refused", json_integer((json_int_t)r->res.refused));
		json_object_set_new(rep, "running", json_true());
	} else if (strcmp(op, "snapshot") == 0) {
		/* capture at a step boundary, persist, record the receipt */
		struct trace_snap_taken t;
		int stop = json_is_true(json_object_get(req, "stop"));
		/* a peer's snapshot is its renter's to authorize, never this run's key */
		int peer_signed = json_is_string(json_object_get(req, "renter_sig"));
		/* the control socket is up while the sandbox is still being set up */
		int rc = !peer_signed ? common_errf(&e, "snapshot", "not signed by the lease's renter "
						    "(sbx-snap take signs it)")
			: trace_sv_guest_pid(sv) <= 0 ? common_errf(&e, "snapshot", "the guest has not "
								 "started yet: try again")
			: request_snapshot(r, trace_sv_guest_pid(sv), 0, stop, 0, req, &t, &e);
		json_decref(rep);
		rep = snap_reply(r->id, rc, &t, &e);
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
	struct run *r = ctx;
	r->sv = sv;
	r->ho.sv = sv;
	r->ho.meter = r->meter;
	if (r->ctl_fd >= 0)
		trace_sv_watch(sv, r->ctl_fd);
	if (r->opts && r->opts->snapshot_every && r->store)
		lease_store_batch(r->store, &r->snap_batch, NULL);
	return 0;
}

static int hook_fd(void *ctx, struct trace_supervisor *sv, int fd)
{
	struct run *r = ctx;
	if (fd == r->ctl_fd)
		ctl_serve(r, sv);
	return 0;
}

/* The image once the guest has exec'd it, when the kernel refuses writes to it:
 * the same identity as when it was hashed, or else the same bytes, or the run
 * stops (a writer changing the file in place between hash and exec). */
static int image_unchanged(struct run *r)
{
	struct stat now;
	uint8_t d[COMMON_SHA256_LEN];
	char hex[COMMON_SHA256_HEX];
	if (fstat(r->image_fd, &now) == 0 && common_same_file(&r->image_st, &now))
		return 1;
	if (common_sha256_fd(r->image_fd, r->image, d, &r->fail) < 0)
		return 0;
	common_hex(d, sizeof d, hex);
	if (strcmp(hex, r->sha) == 0)
		return 1;
	common_errf(&r->fail, "image", "%s changed between its hash (sha256 %s) and its exec "
		    "(now sha256 %s): the run is stopped", r->image, r->sha, hex);
	return 0;
}

/* The image at the guest's first exec is the one hashed. */
static int hook_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
		     const char *path)
{
	struct run *r = ctx;
	(void)pid;
	(void)ppid;
	(void)path;
	if (r->image_seen)
		return 0;
	r->image_seen = 1;
	if (image_unchanged(r))
		return 0;
	r->failed = 1;
	trace_sv_stop(sv, "image changed before its exec");
	return -1;
}

/* sbx-restore: the guest's first exec is rebuilt into the snapshot's state. */
static int hook_restore(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			const char *path)
{
	struct run *r = ctx;
	struct common_err e;
	(void)ppid;
	(void)path;
	if (!r->opts || !r->opts->restore_exec || r->restored)
		return 0;
	r->restored = 1;
	if (r->opts->restore_exec(r->opts->restore_ctx, pid, &e) < 0) {
		r->fail = e;
		r->failed = 1;
		trace_sv_kill_now(sv, "restore failed");
		return -1;
	}
	/* the shared file mappings restored writable are held as the guest's own */
	if (trace_metering_hold_restored(r->meter, pid, &e) < 0) {
		r->fail = e;
		r->failed = 1;
		trace_sv_kill_now(sv, "restore failed");
		return -1;
	}
	/* the snapshot's other threads and processes, made by the restore, run
	 * from now on */
	trace_sv_adopt_tree(sv, pid);
	if (r->det && r->opts->determ_resume && trace_run_determ_resume(r->det, sv, r->rec, &e) < 0) {
		r->fail = e;
		r->failed = 1;
		trace_sv_kill_now(sv, "restore failed");
		return -1;
	}
	if (r->meter) /* the lease is Active now: its usage may be observed */
		trace_metering_hold(r->meter, 0);
	return 0;
}

/* After the recorder: the trace it wrote is the guest's storage, held like a write. */
static int hook_recorded(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct run *r = ctx;
	(void)g, (void)st;
	if (r->opts->stop_after_events && trace_rec_events(r->rec) >= r->opts->stop_after_events)
		trace_sv_stop(r->sv, "disputed step reached"); /* adjudicate's replay */
	return trace_metering_trace_grew(r->meter, trace_rec_bytes(r->rec));
}

static int hook_recorded_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			      const char *path)
{
	(void)sv, (void)pid, (void)ppid, (void)path;
	return hook_recorded(ctx, NULL, NULL);
}

/* The trace grows with the guest: flushed, it is held like a write to its storage. */
static void hold_trace(struct run *r)
{
	if (r->rec && r->meter) {
		trace_rec_flush(r->rec);
		trace_metering_host_write(r->meter, trace_rec_bytes(r->rec));
	}
}

/* --chain: the snapshot that ends the link, taken as the guest stands (held: a
 * thread at its stop) and left stopped. */
static int chain_snapshot(void *ctx, pid_t held, struct trace_snap_taken *t, struct common_err *e)
{
	struct run *r = ctx;
	return request_snapshot(r, trace_sv_guest_pid(r->sv), held, 1, held != 0, NULL, t, e);
}

/* --snapshot-at-step's snapshot, as the thread stands at its entry stop (the
 * call runs on afterwards, and runs again first in a restore), at the first
 * stop where the record holds the run. A take refused while other tasks run
 * (one with a fork, exec, signal or exit to report meanwhile: "try again") is
 * tried again at a later stop, DET_TRIES times at most; any other refusal
 * ends the run: the step asked for has no snapshot. 1: put off. */
static int det_snapshot(struct run *r, struct trace_guest *g)
{
	struct trace_snap_taken t;
	struct common_err e;
	pid_t tids[2];
	if (trace_determ_save(r->det, r->sv, r->rec ? trace_rec_state_save : NULL, r->rec,
			      &r->det_rec, &r->det_len, &e) < 0)
		return 1; /* not yet a point the record holds: a later stop */
	/* the whole tree, from its root, the thread at its stop held as it stands */
	int rc = request_snapshot(r, trace_sv_guest_pid(r->sv), trace_guest_tid(g), 0, 1, NULL, &t, &e);
	free(r->det_rec);
	r->det_rec = NULL;
	if (rc == 0) {
		r->det_taken = 1;
		json_decref(t.receipt);
		return 0;
	}
	if (trace_sv_pids(r->sv, tids, 2) > 1 && strstr(e.why, "try again") &&
	    ++r->det_refused < DET_TRIES)
		return 1;
	r->det_taken = 1;
	r->fail = e;
	common_err_context(&r->fail, "--snapshot-at-step %llu",
			   (unsigned long long)r->opts->snapshot_at_step);
	r->failed = 1;
	trace_sv_kill_now(r->sv, "snapshot at step refused");
	return -1;
}

static int hook_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct run *r = ctx;

	int rc = 1;
	if (!r->det_taken && trace_run_det_point(r->opts, r->rec))
		rc = det_snapshot(r, g);
	return rc < 1 ? rc : trace_handover_entry(&r->ho, g, st);
}

static int hook_tick(void *ctx, struct trace_supervisor *sv)
{
	struct run *r = ctx;
	hold_trace(r);
	uint64_t b = 0;
	/* --snapshot-every-batches, taken like sbx-snap take */
	if (r->opts && r->opts->snapshot_every && r->store && r->id &&
	    lease_store_batch(r->store, &b, NULL) == 0 && b >= r->snap_batch + r->opts->snapshot_every) {
		r->snap_batch = b;
		struct trace_snap_taken t;
		struct common_err e;
		if (request_snapshot(r, trace_sv_guest_pid(sv), 0, 0, 0, NULL, &t, &e) < 0)
			common_warnf("automatic snapshot: %s: %s", e.what, e.why);
		else
			json_decref(t.receipt);
	}
	return trace_handover_tick(&r->ho);
}

static void hook_signal(void *ctx, struct trace_supervisor *sv, pid_t tid, int sig)
{
	struct run *r = ctx;
	(void)sv;
	if (!r->opts || !r->opts->snapshot_on_exit_signal || !r->opts->snap || !r->store ||
	    !r->id || !r->opts->snap->signal_fatal(tid, sig))
		return;
	struct trace_snap_taken t;
	struct common_err e;
	if (request_snapshot(r, tid, 0, 0, 1, NULL, &t, &e) < 0)
		common_warnf("snapshot on signal %d: %s: %s", sig, e.what, e.why);
	else
		json_decref(t.receipt);
}

/* --trace: the header binds lease, image, argv, mounts, environment, start batch. */
static struct trace_rec *recorder_open(const struct run *r, struct common_err *e)
{
	const struct trace_run_opts *o = r->opts;
	struct lease_store *s = r->store;
	enum trace_level lvl = o->trace_level;
	uint64_t batch = 0;
	json_t *mounts = json_array();
	static const char *const types[] = {"bind", "tmpfs", "proc"};
	if (lease_store_batch(s, &batch, e) < 0)
		return NULL;
	json_t *det = NULL;
	if (o->deterministic) {
		batch = 0; /* the run's batch is in the lease's receipts, not in the chain */
		if (!(det = trace_determ_header(r->det, r->ns, e)))
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
		.lease = r->id, .image_path = r->image, .image_sha256 = r->sha, .argv = o->argv,
		.envp = r->env, .mounts = mounts, .start_batch = batch, .level = lvl,
		.deterministic = o->deterministic, .determinism = det, .hash_cache = hcache,
		.resume_seq = o->resume_seq, .resume_head = o->resume_head,
	};
	char *prefix = NULL; /* sbx-restore --trace-from: the run's trace up to the snapshot */
	struct trace_rec *rec = NULL;
	if (!o->trace_from || trace_trace_prefix(o->trace_from, o->resume_seq, o->resume_head,
						 &prefix, &in.resume_len, e) == 0) {
		in.resume_text = prefix;
		rec = trace_rec_open(o->trace_path, -1, &in, e);
	}
	free(prefix);
	free(hcache);
	json_decref(mounts);
	json_decref(det);
	return rec;
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

/* Plan: the program resolved, opened once (what is checked, hashed and named in
 * receipts is what runs), and every input refused before the store is opened. */
static int run_plan(struct run *r)
{
	struct trace_run_opts *o = r->opts;

	if (o->result_path && common_outfile_open(&r->result_out, o->result_path, &r->e) < 0) {
		common_err_context(&r->e, "--result %s", o->result_path);
		return -1;
	}
	if (!o->argv || !o->argv[0])
		return common_errf(&r->e, "usage", "no program given (sbx-run … -- PROGRAM [ARG…])");
	if (!!o->lease == !!o->ephemeral)
		return common_errf(&r->e, "usage", "give exactly one of --lease ID and --ephemeral");
	/* one trace, state or virtual clock across leases is not carried (yet) */
	if (o->chain && (o->trace_path || o->state_in || o->state_out || o->deterministic))
		return common_errf(&r->e, "--chain", "not with --trace, --state-in, --state-out or "
				   "--deterministic");
	if (trace_run_determ_check(o, &r->e) < 0)
		return -1;
	if (!(r->image = trace_program_resolve(o->argv[0], &r->code, &r->e)))
		return -1;
	r->code = SBX_EXIT_NOEXEC; /* checked before the store is opened (or created) */
	r->image_fd = trace_image_open(r->image);
	if (r->image_fd < 0 || fstat(r->image_fd, &r->image_st) < 0)
		return common_errno(&r->e, errno, "image %s", r->image);
	if (trace_script_open(&r->sc, &r->image, &r->image_fd, &r->image_st, o->argv, &r->e) < 0)
		return -1;
	if (r->sc.argv)
		o->argv = r->sc.argv;
	else if (lease_image_validate_fd(r->image_fd, r->image, &r->e) < 0)
		return -1;
	r->code = SBX_EXIT_SBX;
	return trace_bound_open(o, &r->bound, &r->e); /* a bad policy or state input */
}

/* --ephemeral: request and claim under one host lock: sbx-lease recover never
 * finds the lease unclaimed while this run lives */
static int lease_ephemeral(struct run *r)
{
	if (lease_store_lock_host(r->store, &r->e) < 0)
		return -1;
	if (trace_run_ephemeral_open(r->store, r->opts, r->image, r->sha, &r->sc, &r->id, &r->head,
			   r->receipts, &r->e) == 0) {
		r->have_lease = 1;
		r->run_fd = lease_run_claim(r->store, r->id, &r->e);
	}
	lease_store_unlock(r->store);
	return r->run_fd < 0 ? -1 : 0;
}

/* --lease ID: claimed, the renter's, in the state the run needs, naming this
 * image and this script (or none) exactly */
static int lease_given(struct run *r)
{
	struct common_err *e = &r->e;
	const struct trace_script *sc = &r->sc;

	r->id = common_xstrdup(r->opts->lease);
	/* before anything of the lease is touched: its control socket, its usage */
	if (!lease_id_valid(r->id))
		return common_errf(e, r->id, "not a lease id (expected L followed by 16 hex digits)");
	if ((r->run_fd = lease_run_claim(r->store, r->id, e)) < 0)
		return -1;
	r->have_lease = r->opts->link && r->opts->link->owned; /* a one-shot chain's link */
	if (lease_load(r->store, r->id, &r->lease_rec, e) < 0)
		return -1;
	json_t *l = json_object_get(r->lease_rec, "lease") ? json_object_get(r->lease_rec, "lease")
							    : r->lease_rec;
	/* a run spends the renter's escrow: only the holder of its key runs it */
	if (lease_renter_holds(r->store, l, e) < 0)
		return -1;
	const char *state = common_jstr(l, "state", NULL);
	const char *want = common_jstr(json_object_get(l, "image"), "sha256", NULL);
	/* a restore becomes Active once its guest is rebuilt (restore_exec) */
	const char *need = r->opts->restore_exec ? "Funded" : "Active";
	if (!state || strcmp(state, need) != 0)
		return common_errf(e, "lease", "cannot run lease %s: state is %s, run needs %s",
				   r->id, state ? state : "unknown", need);
	r->start_seq = json_integer_value(json_object_get(l, "seq"));
	if (!want || strcmp(want, r->sha) != 0)
		return common_errf(e, "image", "%s (sha256 %s) is not lease %s's image (sha256 %s)",
				   r->image, r->sha, r->id, want ? want : "unknown");
	const json_t *script = json_object_get(json_object_get(l, "image"), "script");
	const char *wsc = common_jstr(script, "sha256", NULL);
	if (!wsc != !sc->path || (wsc && strcmp(wsc, sc->sha) != 0))
		return common_errf(e, "image", "%s%s%s is not the script lease %s names (%s)",
				   sc->path ? sc->path : "no script", sc->path ? " sha256 " : "",
				   sc->path ? sc->sha : "", r->id, wsc ? wsc : "none");
	return 0;
}

/* The sandbox as the options and the image ask for it; the lease's namespace,
 * the environment and the start directory come once the lease is held. */
static void config_init(struct run *r)
{
	const struct trace_run_opts *o = r->opts;

	r->cfg = (struct trace_config){
		.argv = (const char *const *)o->argv,
		.image = r->image,
		.image_fd = r->image_fd,
		.mounts = o->mounts,
		.nmounts = o->nmounts,
		.replace_defaults = o->replace_defaults,
		.sockets = o->sockets,
		.nsockets = o->nsockets,
		.owner_set = o->owner_set,
		.owner_uid = o->owner_uid,
		.owner_gid = o->owner_gid,
		.rlimit_nproc = o->max_procs,
		.state_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.no_aslr = !o->ephemeral || o->deterministic || o->chain, /* snapshots; SPEC §9 */
		.store_dir = r->store_real,
		.host_signals = 1, /* sbx-run's own process: SIGTERM & co. end the run */
		.layers = r->layers,
	};
}

/* The features the options ask for, each opened by its room: determinism, the
 * recorder, then the bound (limits, relay, inspector, state fd) into the config. */
static int features_open(struct run *r)
{
	const struct trace_run_opts *o = r->opts;

	if (o->deterministic &&
	    !(r->det = trace_run_determ_open(r->store, r->id, r->lease_rec, r->receipts, o, &r->e)))
		return -1;
	for (size_t i = 0; r->det && i < o->nsockets; i++) /* peers outside the run */
		trace_determ_uncontrolled(r->det, "socket named with --socket");
	if (o->trace_path && !(r->rec = recorder_open(r, &r->e)))
		return -1;
	if (trace_bound_attach(r->bound, r->store, r->id, r->ns, &r->run_fd, &r->cfg, &r->e) < 0)
		return -1;
	r->ins = trace_bound_inspector(r->bound);
	r->meter = trace_bound_metering(r->bound);
	if (r->meter && o->restore_exec) /* no observation of a lease still Funded */
		trace_metering_hold(r->meter, 1);
	return 0;
}

/* Set up: the store, the mount list checked before any lease moves (a bind that
 * would show the store, say), the lease held, the guest's namespace, environment
 * and start directory, the control socket, the features. */
static int run_setup(struct run *r)
{
	const struct trace_run_opts *o = r->opts;

	if (lease_store_open(o->store, &r->store, &r->e) < 0)
		return -1;
	lease_store_principal_key(r->store, o->principal_key);
	r->store_real = realpath(lease_store_dir(r->store), NULL);
	config_init(r);
	if (trace_config_check(&r->cfg, &r->e) < 0)
		return -1;
	if (lease_image_check_cached_fd(r->store, r->image_fd, r->image, r->sha, &r->e) < 0)
		return -1;
	if ((o->ephemeral ? lease_ephemeral(r) : lease_given(r)) < 0)
		return -1;
	r->ns = lease_ns_dir(r->store, r->id);
	if (common_mkdir_p(r->ns, 0700, &r->e) < 0)
		return -1;
	r->env = trace_env_build(o->env_clear, o->env_set, o->nenv_set);
	r->filters = common_xasprintf("%s/filters", lease_store_dir(r->store));
	r->wd = trace_run_start_dir(o);
	r->cfg.envp = (const char *const *)r->env;
	r->cfg.ns_dir = r->ns;
	r->cfg.cwd = r->wd;
	r->cfg.filter_cache = r->filters;
	if (ctl_open(r, lease_store_dir(r->store), r->id, &r->e) < 0)
		return -1;
	r->ho = (struct trace_handover){ .link = o->link, .snapshot = chain_snapshot, .ctx = r };
	if (o->link && trace_handover_open(&r->ho, r->store, r->id, &r->e) < 0)
		return -1;
	return features_open(r);
}

/* The calls the filter stops: those each feature says it needs. */
static unsigned compose_classes(const struct run *r)
{
	unsigned c = trace_metering_classes(r->meter);
	unsigned inspected = r->ins ? trace_inspector_classes(r->ins) : 0;

	if (r->rec)
		c |= trace_classes(r->opts->trace_level);
	c |= inspected;
	if (r->det) /* SPEC §9 */
		c |= trace_determ_classes();
	/* level file (or determinism alone): readlink need not stop unless an
	 * inspector looks at file calls */
	if ((r->rec ? r->opts->trace_level == TRACE_LEVEL_FILE : r->det != NULL) &&
	    !(inspected & TRACE_CLASS_FILE))
		c |= TRACE_FILTER_NO_READLINK;
	/* an exec call stops only for a class that asks (level file, an inspector):
	 * the exec event records and checks what ran; a schedule, a chain's
	 * handover (--chain) and a step count count its stop */
	if (!r->det && !r->opts->link && !r->opts->snapshot_at_step)
		c |= TRACE_FILTER_EXEC_EVENT;
	return c;
}

/* Level file's lookups through user notification (trace/sv/notify.c) when
 * SBX_FILE_TRACE=notify asks and nothing but the boundary judges a call: no
 * inspector with anything to judge (its rewrites and pages need a stopped
 * thread) and no determinism. Not the default: bench/run.sh measured it slower
 * than a ptrace stop each where a wake-up crosses vCPUs. */
static int notify_files(const struct run *r)
{
	const char *v = getenv("SBX_FILE_TRACE");
	return r->rec && r->opts->trace_level == TRACE_LEVEL_FILE && !r->det &&
	       (!r->ins || trace_inspector_classes(r->ins) == 0) && v && !strcmp(v, "notify");
}

/* Compose: each feature brings its own layer; the run adds its own hooks (the
 * control socket, the restore, the trace held as the guest's storage). */
static void run_compose(struct run *r)
{
	struct trace_layer *l = r->layers;

	l[TRACE_LAYER_CONTROL] = (struct trace_layer){ .ctx = r, .on_start = hook_start,
		.on_entry = r->opts->link || r->opts->snapshot_at_step ? hook_entry : NULL,
		.on_fd = hook_fd, .on_exec = hook_exec, .on_tick = hook_tick,
		.on_signal = hook_signal };
	l[TRACE_LAYER_INSPECT] = trace_inspector_layer(r->ins);
	l[TRACE_LAYER_METER] = trace_meter_layer(r->meter);
	l[TRACE_LAYER_DETERM] = trace_determ_layer(r->det);
	l[TRACE_LAYER_RESTORE] = (struct trace_layer){ .ctx = r, .on_exec = hook_restore };
	l[TRACE_LAYER_RECORD] = trace_rec_layer(r->rec);
	if (r->rec && r->meter)
		l[TRACE_LAYER_AFTER] = (struct trace_layer){ .ctx = r, .on_entry = hook_recorded,
			.on_exit = hook_recorded, .on_exec = hook_recorded_exec };
	r->cfg.trace_classes = compose_classes(r);
	r->cfg.notify_files = notify_files(r);
	if (r->det)
		r->cfg.tsc_sigsegv = trace_tsc_probe();
}

/* The trace closed into its head, named in the result record. */
static int recorder_close(struct run *r, struct common_err *e)
{
	uint8_t h[32];
	char hex[COMMON_SHA256_HEX];
	int rc = trace_rec_close(r->rec, r->res.wstatus, h, e);

	r->rec = NULL;
	common_hex(h, 32, hex);
	r->trace_j = json_pack("{s:s,s:s}", "path", r->opts->trace_path, "head", hex);
	return rc;
}

/* Supervise: the guest runs under the composed layers; then the bound's last
 * observation, sbx's own reason to stop it, the trace closed. */
static int run_supervise(struct run *r)
{
	struct common_err te;
	int rc = trace_run(&r->cfg, &r->res, &r->e);

	hold_trace(r);
	if (rc == 0 && trace_bound_finish(r->bound, &r->res, &r->closed, &r->e) < 0)
		rc = -1;
	if (rc == 0 && r->failed) { /* sbx stopped the guest for its own reason */
		r->e = r->fail;
		rc = -1;
	}
	ctl_close(r);
	if (r->rec && recorder_close(r, &te) < 0 && rc == 0) {
		r->e = te;
		rc = -1;
	}
	return rc;
}

/* The result record of a run that finished: what ran, how it ended, its usage,
 * its receipts, what determinism answered, the trace. */
/* Where the order's waits went (the result's stops.parked_by): µs by the
 * call that waited, its name from the syscall table, "exit", "answer" (a
 * first sight answered at its turn) and "other"; only what waited at all. */
static json_t *parked_by(const struct trace_sched_stats *ss)
{
	json_t *o = json_object();
	for (int nr = 0; nr < TRACE_SCHED_NR; nr++) {
		const struct trace_sysinfo *sys = trace_sys_by_nr(nr);
		if (ss->parked_call_us[nr])
			json_object_set_new(o, sys ? sys->name : "other",
					    json_integer((json_int_t)ss->parked_call_us[nr]));
	}
	const char *k[] = { "exit", "answer", "other" };
	const uint64_t v[] = { ss->parked_exit_us, ss->parked_answer_us, ss->parked_other_us };
	for (size_t i = 0; i < 3; i++) {
		json_t *had = json_object_get(o, k[i]);
		uint64_t t = v[i] + (had ? (uint64_t)json_integer_value(had) : 0);
		if (t)
			json_object_set_new(o, k[i], json_integer((json_int_t)t));
	}
	return o;
}

static void result_build(struct run *r)
{
	r->result = trace_run_result_json(r->id, r->image, r->sha, r->opts->argv, &r->res, r->code,
				r->closed, r->receipts);
	if (r->sc.path)
		json_object_set_new(r->result, "script", json_pack("{s:s,s:s}", "path", r->sc.path,
								    "sha256", r->sc.sha));
	trace_bound_result(r->bound, r->result);
	if (r->det) { /* what was answered, and what no run controls (SPEC §9) */
		json_t *d = trace_determ_header(r->det, NULL, &r->e);
		if (d) {
			json_object_set_new(d, "emulated",
					    json_integer((json_int_t)trace_determ_emulated(r->det)));
			/* waits the schedule did not model: each a run of a task
			 * beside the schedule, where timing could show */
			json_object_set_new(d, "unscheduled", json_integer((json_int_t)r->res.unscheduled));
			json_object_set_new(d, "fell_back", trace_determ_fell_back(r->det));
			const struct trace_sched_stats *ss = &r->res.sched;
			json_t *stops = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
				"ordered", (json_int_t)ss->ordered, "free", (json_int_t)ss->free,
				"turns", (json_int_t)ss->turns, "answered", (json_int_t)ss->answered,
				"blocked", (json_int_t)ss->blocked,
				"parked_us", (json_int_t)ss->parked_us,
				"blocked_us", (json_int_t)ss->blocked_us);
			json_object_set_new(stops, "parked_by", parked_by(ss));
			json_object_set_new(d, "stops", stops);
			json_object_set_new(r->result, "determinism", d);
		}
	}
	if (r->trace_j)
		json_object_set_new(r->result, "trace", r->trace_j);
	r->trace_j = NULL;
}

/* --chain: this link in the links the result lists; its lease for the next
 * link's request to name. */
static void chain_link_close(struct run *r, int chained)
{
	struct trace_chain_link *ln = r->opts->link;
	json_t *u = json_pack("{s:{}}", "usage");
	trace_bound_result(r->bound, u);
	json_t *end = chained ? json_sprintf("chain: %s", ln->dim) : r->closed ?
		      json_sprintf("bound: %s", r->closed) : r->res.signal ?
		      json_sprintf("signal %d", r->res.signal) : json_sprintf("exit %d", r->res.status);
	json_array_append_new(ln->links, json_pack("{s:I,s:s,s:o,s:o,s:O,s:o,s:O}", "link",
		(json_int_t)ln->n, "lease", r->id, "prev", ln->prev ? json_string(ln->prev) : json_null(),
		"end", end, "usage", json_object_get(u, "usage"),
		"snapshot", chained ? json_string(ln->snapshot) : json_null(), "receipts", r->receipts));
	json_decref(u);
	free(ln->lease);
	ln->lease = common_xstrdup(r->id);
}

/* Close: the exit status, the lease's receipts (an ephemeral lease settled and
 * destroyed), the result record; -1 when the ephemeral lease would not close. A
 * chain's link that ended near a bound leaves the result to the last link. */
static int run_close(struct run *r)
{
	const struct trace_run_opts *o = r->opts;
	int chained = o->link && o->link->snapshot[0];
	uint64_t u[TRACE_DIMS];
	int eph = r->have_lease;

	if (eph) {
		int final = trace_metering_final(r->meter, u);
		r->have_lease = 0;
		common_fault_point("run-before-close");
		if (trace_run_ephemeral_close(r->store, r->id, final ? u : NULL, r->receipts,
					      r->closed_at_close, &r->e) < 0) {
			r->code = SBX_EXIT_SBX;
			return -1;
		}
		if (r->closed_at_close[0])
			r->closed = r->closed_at_close;
	}
	r->code = r->closed ? SBX_EXIT_BOUND : trace_result_exit_code(&r->res);
	if (!eph) {
		/* a --lease link that ended near a bound is settled: the next one goes on */
		struct lease_step settle[] = { { LEASE_EDGE_SETTLE, NULL, 1 } };
		json_t *made = NULL;
		if (chained && lease_steps(r->store, NULL, r->id, NULL, settle, 1, &made, &r->e) < 0) {
			r->code = SBX_EXIT_SBX;
			return -1;
		}
		json_decref(made);
		trace_run_lease_receipts(r->store, r->id, r->start_seq, r->receipts);
	}
	if (o->link)
		chain_link_close(r, chained);
	if (chained)
		return 0;
	result_build(r);
	if (o->link)
		json_object_set(r->result, "links", o->link->links);
	if (trace_run_write_result(o, &r->result_out, r->result, &r->e) < 0) {
		common_report(&r->e);
		r->code = SBX_EXIT_SBX;
	} else if (r->closed && !o->result_path && o->result_fd < 0) {
		fprintf(stderr, "sbx-run: lease %s closed: %s\n", r->id, r->closed);
	}
	return 0;
}

/* A run that failed at any step: the error reported, an ephemeral lease closed
 * all the same (one-shot mode never leaves one behind), the result says why. */
static void run_fail(struct run *r)
{
	const struct trace_run_opts *o = r->opts;
	struct common_err e2;
	uint64_t u[TRACE_DIMS];
	int final = trace_metering_final(r->meter, u);

	ctl_close(r);
	if (r->rec)
		trace_rec_abort(r->rec);
	r->rec = NULL;
	common_report(&r->e);
	if (r->code == 0)
		r->code = SBX_EXIT_SBX;
	if (r->have_lease && r->store && r->id && trace_run_ephemeral_close(r->store, r->id, final ? u : NULL, r->receipts,
				      r->closed_at_close, &e2) < 0)
		common_report(&e2);
	if (!o->result_path && o->result_fd < 0)
		return;
	r->result = trace_run_result_json(r->id, r->image ? r->image : o->argv && o->argv[0] ? o->argv[0] : "",
				r->sha, o->argv ? o->argv : (char *const[]){ NULL }, &r->res, r->code,
				NULL, r->receipts);
	json_object_set_new(r->result, "error", json_sprintf("%s: %s", r->e.what, r->e.why));
	if (o->link)
		json_object_set(r->result, "links", o->link->links);
	if (trace_run_write_result(o, &r->result_out, r->result, &e2) < 0)
		common_report(&e2);
}

/* Everything the run held, released; returns its exit status. */
static int run_free(struct run *r)
{
	trace_bound_free(r->bound); /* its writer keeps the run's bound in the claim */
	if (r->run_fd >= 0)
		lease_run_release(r->store, r->id, r->run_fd);
	trace_determ_free(r->det);
	json_decref(r->result);
	json_decref(r->trace_j);
	json_decref(r->receipts);
	json_decref(r->head);
	json_decref(r->lease_rec);
	trace_env_free(r->env);
	if (r->image_fd >= 0)
		close(r->image_fd);
	if (r->result_out.path)
		common_outfile_close(&r->result_out);
	free(r->image);
	free(r->id);
	free(r->ns);
	free(r->filters);
	free(r->store_real);
	free(r->wd);
	trace_script_free(&r->sc);
	lease_store_close(r->store);
	return r->code;
}

int trace_run_main(struct trace_run_opts *o)
{
	int code = trace_run_link(o);

	trace_run_opts_free(o);
	return code;
}

int trace_run_link(struct trace_run_opts *o)
{
	struct run r = { .opts = o, .code = SBX_EXIT_SBX, .result_out = { .dirfd = -1 },
			 .image_fd = -1, .run_fd = -1, .ctl_fd = -1, .start_seq = -1,
			 .receipts = json_array() };

	if (run_plan(&r) == 0 && run_setup(&r) == 0) {
		run_compose(&r);
		if (run_supervise(&r) == 0 && run_close(&r) == 0)
			return run_free(&r);
	}
	run_fail(&r);
	return run_free(&r);
}
