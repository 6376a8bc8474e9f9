/* snap: snapshots of a running sbx-run guest, persisted into the store and
 * recorded as the lease's snapshot receipt (SPEC §8.1, §8.3). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lease/lease.h"
#include "snap/snap-internal.h"
#include "trace/tracee/tracee.h"

/* The directory a new snapshot hex goes into (malloc'd); hex is checked. */
static char *snap_dir(struct lease_store *s, const char *hex, struct common_err *e)
{
	size_t n = strlen(hex);
	if (n != 64 || strspn(hex, "0123456789abcdef") != 64) {
		common_errf(e, hex, "not a snapshot digest (64 lowercase hex digits)");
		return NULL;
	}
	return common_xasprintf("%s/%s", lease_snapshot_top(s), hex);
}

char *snap_tmp_name(const char *top, const char *what)
{
	uint64_t r = 0;
	char host[64] = "";

	if (getrandom(&r, sizeof r, 0) < 0)
		r = (uint64_t)common_mono_us();
	gethostname(host, sizeof host - 1);
	host[strcspn(host, "/")] = 0;
	return common_xasprintf("%s/.%s.%s.%d.%016llx", top, what, host, (int)getpid(),
				(unsigned long long)r);
}

int snap_register(struct lease_store *s, const json_t *meta, const struct snap_manifest *m,
		  struct common_err *e)
{
	static const char *const keep[] = { "lease", "principal", "host_program", "image",
					    "persisted_bytes", "batch" };
	uint8_t mb[SNAP_MANIFEST_LEN];
	char mhex[2 * SNAP_MANIFEST_LEN + 1], hex[COMMON_SHA256_HEX];
	json_t *rec;
	int rc;

	snap_manifest_encode(m, mb);
	common_hex(mb, sizeof mb, mhex);
	common_hex(m->digest, 32, hex);
	rec = json_pack("{s:s, s:s, s:I, s:I}", "digest", hex, "manifest", mhex, "bytes",
			(json_int_t)m->len, "chunks", (json_int_t)m->chunks);
	for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
		if (json_object_get(meta, keep[i]))
			json_object_set(rec, keep[i], json_object_get(meta, keep[i]));
	rc = lease_snapshot_register(s, rec, e);
	json_decref(rec);
	return rc;
}

/* A count from a lease record: 0 when absent or below 0. */
static uint64_t jnum(const json_t *o, const char *k)
{
	json_int_t v = common_jint(o, k, 0);
	return v > 0 ? (uint64_t)v : 0;
}

/* 1 when sig, about to be delivered to pid, ends it: a terminating default
 * action, neither caught nor ignored. */
static int snap_signal_fatal(pid_t pid, int sig)
{
	static const int harmless[] = { SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU,
					SIGURG, SIGWINCH, SIGTRAP, SIGKILL };
	if (sig < 1 || sig > SNAP_NSIG)
		return 0;
	for (size_t i = 0; i < sizeof harmless / sizeof harmless[0]; i++)
		if (sig == harmless[i])
			return 0;
	struct trace_status s;
	if (trace_status_read(pid, &s) < 0)
		return 0;
	unsigned long long cgt = 0, ign = 0;
	trace_status_num(&s, "SigCgt", 16, &cgt);
	trace_status_num(&s, "SigIgn", 16, &ign);
	trace_status_free(&s);
	return !((cgt | ign) >> (sig - 1) & 1);
}

/* A task already in a ptrace stop the supervisor has seen and holds (a new
 * child waiting for its parent's fork event): it stands at a boundary, needs
 * no interrupt (which it would never report) and stays held after. */
static int held_by_loop(pid_t tid)
{
	char p[64], *buf;
	size_t len;
	int held = 0;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)tid);
	if (common_read_file(p, 4096, &buf, &len, NULL) < 0)
		return 0;
	char *rp = strrchr(buf, ')');
	if (rp && rp[1] == ' ' && rp[2] == 't') {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		held = waitid(P_PID, (id_t)tid, &si, WSTOPPED | WNOHANG | WNOWAIT | __WALL |
			      __WNOTHREAD) == 0 && si.si_pid == 0;
	}
	free(buf);
	return held;
}

/* 1 when tid is a zombie or gone within a few milliseconds (it was exiting). */
static int ended(pid_t tid)
{
	for (int i = 0; i < 50; i++) {
		char p[64], *buf;
		size_t len;
		snprintf(p, sizeof p, "/proc/%d/stat", (int)tid);
		if (common_read_file(p, 4096, &buf, &len, NULL) < 0)
			return 1;
		char *rp = strrchr(buf, ')');
		int z = rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
		free(buf);
		if (z)
			return 1;
		usleep(2000);
	}
	return 0;
}

/* Every task of the guest's tree: the leader's threads, every other live
 * process and its threads (malloc'd). */
static int tree_tids(pid_t guest, pid_t **out, size_t *n, struct common_err *e)
{
	struct snap_task *procs;
	size_t np;
	pid_t *ids;
	size_t k;
	if (snap_thread_ids(guest, out, n, e) < 0)
		return -1;
	if (snap_tree_list(guest, &procs, &np, e) < 0) {
		free(*out);
		return -1;
	}
	for (size_t i = 0; i < np; i++) {
		if (procs[i].zombie || snap_thread_ids(procs[i].host, &ids, &k, NULL) < 0)
			continue;
		*out = common_xrealloc(*out, (*n + k + 1) * sizeof **out);
		(*out)[(*n)++] = procs[i].host;
		memcpy(*out + *n, ids, k * sizeof *ids);
		*n += k;
		free(ids);
	}
	free(procs);
	return 0;
}

/* The stop registers of the tasks the loop holds (a deterministic run's
 * parked calls): the capture leaves a task at its image's rewound boundary,
 * and one the loop then resumed would skip its call and issue it again. */
struct kept {
	pid_t tid;
	struct user_regs_struct regs;
	int seccomp;   /* at a seccomp stop: its call has not run yet */
};

static void keep_regs(struct kept **k, size_t *nk, pid_t tid)
{
	*k = common_xrealloc(*k, (*nk + 1) * sizeof **k);
	(*k)[*nk].tid = tid;
	(*k)[*nk].seccomp = trace_syscall_op(tid) == PTRACE_SYSCALL_INFO_SECCOMP;
	*nk += trace_regs_get(tid, &(*k)[*nk].regs) == 0;
}

/* Each kept task back at its stop: one at a seccomp stop stops there again
 * (after the calls injected into it, its own would not run). */
static void kept_back(const struct kept *k, size_t nk)
{
	for (size_t i = 0; i < nk; i++)
		if (!k[i].seccomp || trace_seccomp_again(k[i].tid, &k[i].regs) < 0)
			trace_regs_set(k[i].tid, &k[i].regs);
}

/* Every task of the guest but the leader (and held, a thread already in the
 * loop's stop) stopped at a step boundary, before anything is read; tasks
 * started meanwhile are caught by the next pass. *ids lists the ones stopped
 * here, for resume_threads; *kept the ones the loop holds, with their registers. */
static int stop_threads(pid_t guest, pid_t held, int signals_left, pid_t **ids, size_t *n,
			struct kept **kept, size_t *nkept, struct common_err *e)
{
	pid_t *seen = NULL;
	size_t nseen = 0;
	*ids = NULL;
	*n = 0;
	for (int pass = 0; pass < 16; pass++) {
		pid_t *now;
		size_t k, fresh = 0;
		if (tree_tids(guest, &now, &k, e) < 0) {
			free(seen);
			return -1;
		}
		for (size_t i = 0; i < k; i++) {
			size_t j = 0;
			while (j < nseen && seen[j] != now[i])
				j++;
			if (j < nseen || now[i] == held)
				continue;
			seen = common_xrealloc(seen, (nseen + 1) * sizeof *seen);
			seen[nseen++] = now[i];
			fresh++;
			if (held_by_loop(now[i])) {
				keep_regs(kept, nkept, now[i]);
				continue;
			}
			if (trace_tracee_interrupt(now[i], signals_left, e) < 0) {
				/* a task other than the leader ending meanwhile (a compiler
				 * done) is a zombie or gone by the capture, not a refusal */
				if (now[i] != guest && ended(now[i]))
					continue;
				free(now);
				free(seen);
				return -1;
			}
			*ids = common_xrealloc(*ids, (*n + 1) * sizeof **ids);
			(*ids)[(*n)++] = now[i];
		}
		free(now);
		if (!fresh) {
			free(seen);
			return 0;
		}
	}
	free(seen);
	return common_errf(e, "snapshot", "the guest keeps starting tasks");
}

static void resume_threads(const pid_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		trace_tracee_resume(ids[i]); /* ESRCH: it exited meanwhile */
}

/* The thread-group leader of tid (tid itself when unknown). */
static pid_t leader_of(pid_t tid)
{
	struct trace_status s;
	unsigned long long v = 0;
	if (trace_status_read(tid, &s) < 0)
		return tid;
	int rc = trace_status_num(&s, "Tgid", 10, &v);
	trace_status_free(&s);
	return rc == 0 && v > 0 ? (pid_t)v : tid;
}

/* Every thread stopped at a step boundary, the tree of guest's process captured
 * into dir, and every thread resumed unless stop (held, when not 0: a thread of
 * any process of the tree met at a stop of the loop's, which stays there). */
static int capture_guest(pid_t guest, pid_t held, int stop, const struct snap_capture_opts *o,
			 const char *dir, struct snap_manifest *man, struct common_err *e)
{
	pid_t leader = leader_of(guest), *threads;
	size_t nthreads, nkept = 0;
	/* a leader the loop holds already (parked by a deterministic run's
	 * schedule) would never report an interrupt */
	int interrupt = leader != held && !held_by_loop(leader);
	struct kept *kept = NULL;
	/* a held thread the loop goes on with keeps its stop's registers, not the
	 * image's rewound ones: its call runs once here (and again after a restore) */
	if (held)
		keep_regs(&kept, &nkept, held);
	if (leader != held && !interrupt)
		keep_regs(&kept, &nkept, leader);
	/* a deterministic run's signals are its loop's to deliver, in order */
	int signals_left = o->determ != NULL;
	if (interrupt && trace_tracee_interrupt(leader, signals_left, e) < 0) {
		free(kept);
		return -1;
	}
	int rc = stop_threads(leader, held, signals_left, &threads, &nthreads, &kept, &nkept, e);
	/* streamed into chunks as it is read: no image-sized buffer */
	if (rc == 0)
		rc = snap_capture_store(leader, o, dir, man, e);
	if (!stop || rc < 0) /* the run goes on: taken or refused after its calls */
		kept_back(kept, nkept);
	free(kept);
	if (!stop || rc < 0)
		resume_threads(threads, nthreads);
	free(threads);
	if (interrupt && (!stop || rc < 0))
		trace_tracee_resume(leader);
	return rc;
}

struct admit_ctx {
	struct lease_store *s;
	const char *lease;
	const json_t *l;       /* the lease record */
	uint64_t persist;      /* metered bytes of the admitted snapshot */
};

/* namespace_bytes, checked with the guest stopped and before anything is written */
static int admit_snapshot(void *vctx, uint64_t len, struct common_err *e)
{
	struct admit_ctx *a = vctx;
	uint64_t used = 0;
	if (lease_ns_bytes(a->s, a->lease, &used, e) < 0)
		return -1;
	uint64_t observed = jnum(json_object_get(a->l, "usage"), "namespace_bytes");
	if (observed > used)
		used = observed;
	used += jnum(a->l, "snapshot_bytes");
	uint64_t limit = jnum(json_object_get(a->l, "limits"), "namespace_bytes");
	a->persist = snap_persist_bytes(len);
	if (used > limit || a->persist > limit - used)
		return common_errf(e, "snapshot", "%llu snapshot bytes exceed lease %s's "
				   "namespace_bytes left (%llu used of %llu); nothing written",
				   (unsigned long long)a->persist, a->lease,
				   (unsigned long long)used, (unsigned long long)limit);
	return 0;
}

/* A snapshot of a run's guest (host pid) for lease: stop it at a step boundary
 * (unless at_stop: taken as it stands in its ptrace stop, and left stopped),
 * capture, resume it (unless stop), check namespace_bytes, persist under
 * lease_snapshot_top/HEX, register it with the store and record the lease's
 * snapshot receipt; nothing is written on failure. */
static int snap_take(struct lease_store *s, const char *lease, const struct trace_snap_request *rq,
	      struct trace_snap_taken *taken, struct common_err *ep)
{
	struct common_err e = { "", "" };
	json_t *rec = NULL, *head = NULL, *out = NULL;
	struct snap_manifest man;
	char *ns = NULL, *dir = NULL, *tmp = NULL;
	char hex[COMMON_SHA256_HEX];
	pid_t guest = rq->guest;
	int stop = rq->stop, at_stop = rq->at_stop, created = 0, registered = 0, ok = -1;
	json_t *meta = NULL;

	memset(taken, 0, sizeof *taken);
	if (!lease || guest <= 0) {
		common_errf(&e, "snapshot", "this run has no lease guest to snapshot");
		goto fail;
	}
	if (lease_load(s, lease, &rec, &e) < 0)
		goto fail;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	if (strcmp(common_jstr(l, "state", ""), "Active") != 0) {
		common_errf(&e, "snapshot", "cannot snapshot lease %s: state is %s, snapshot needs "
			    "Active", lease, common_jstr(l, "state", ""));
		goto fail;
	}
	struct snap_capture_opts o = { .meta = {
		.lease = (char *)lease, .principal = (char *)common_jstr(l, "principal", ""),
		.host_program = (char *)common_jstr(l, "host_program", ""),
		.ns_prefix = (char *)common_jstr(l, "namespace", "") } };
	common_unhex(common_jstr(json_object_get(l, "image"), "sha256", ""), o.meta.image, 32);
	for (int d = 0; d < SNAP_NUSAGE && d < LEASE_DIM_COUNT; d++)
		o.meta.usage[d] = jnum(json_object_get(l, "usage"), lease_dim_name((enum lease_dim)d));
	o.meta.step = rq->trace_seq;
	memcpy(o.meta.trace_head, rq->trace_head, 32);
	o.determ = rq->determ;
	o.held_prot = rq->held_prot;
	o.held_ctx = rq->held_ctx;
	o.std_fds = rq->std_fds;
	o.determ_len = rq->determ_len;
	ns = lease_ns_dir(s, lease);
	o.ns_dir = ns;
	struct admit_ctx adm = { s, lease, l, 0 };
	o.admit = admit_snapshot;
	o.admit_ctx = &adm;
	char *top = common_xstrdup(lease_snapshot_top(s));
	int rc = common_mkdir_p(top, 0700, &e);
	tmp = snap_tmp_name(top, "take");
	free(top);
	if (rc < 0)
		goto fail;
	common_rm_rf(tmp, NULL);
	if (capture_guest(guest, !at_stop ? 0 : rq->held ? rq->held : guest, stop, &o, tmp, &man,
			  &e) < 0)
		goto fail;

	uint64_t persist = adm.persist;
	common_hex(man.digest, 32, hex);
	dir = snap_dir(s, hex, &e);
	struct stat sb;
	if (!dir)
		goto fail;
	uint64_t batch = 0;
	lease_store_batch(s, &batch, NULL);
	meta = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "digest", hex, "lease", lease,
			 "principal", common_jstr(l, "principal", ""),
			 "host_program", common_jstr(l, "host_program", ""),
			 "image", common_jstr(json_object_get(l, "image"), "sha256", ""), "bytes",
			 (json_int_t)man.len, "chunks", (json_int_t)man.chunks, "persisted_bytes",
			 (json_int_t)persist, "batch", (json_int_t)batch);
	if (stat(dir, &sb) < 0) {
		/* another host may have stored the same digest meanwhile in a shared dir */
		if (rename(tmp, dir) < 0 && errno != ENOTEMPTY && errno != EEXIST) {
			common_errno(&e, errno, "rename %s to %s", tmp, dir);
			goto fail;
		}
		created = access(tmp, F_OK) != 0;
	}
	if (created) {
		char *txt = common_json_canonical(meta), *mp = common_xasprintf("%s/meta.json", dir);
		rc = common_write_atomic(mp, txt, strlen(txt), 0600, &e);
		free(txt);
		free(mp);
		if (rc < 0)
			goto fail;
	}
	/* the chunks are durable: now every host of the store may learn of them */
	if ((registered = snap_register(s, meta, &man, &e)) < 0)
		goto fail;
	if (lease_head(s, lease, &head, &e) < 0)
		goto fail;
	json_t *args = json_pack("{s:s,s:I,s:s?,s:s?}", "snapshot", hex, "bytes", (json_int_t)persist,
				 "renter", rq->renter, "renter_sig", rq->renter_sig);
	rc = lease_transition(s, lease, LEASE_EDGE_SNAPSHOT, head, args, &out, &e);
	json_decref(args);
	if (rc < 0)
		goto fail;
	memcpy(taken->digest, hex, sizeof taken->digest);
	taken->bytes = man.len;
	taken->chunks = man.chunks;
	taken->persisted_bytes = persist;
	taken->receipt = json_incref(json_object_get(out, "receipt"));
	ok = 0;
	goto done;
fail:
	if (registered == 1)
		lease_snapshot_unregister(s, hex, NULL);
	if (created)
		common_rm_rf(dir, NULL);
	*ep = e;
done:
	if (tmp)
		common_rm_rf(tmp, NULL);
	free(tmp);
	json_decref(rec);
	json_decref(meta);
	json_decref(head);
	json_decref(out);
	free(ns);
	free(dir);
	return ok;
}

const struct trace_snap_ops snap_ops = { snap_take, snap_signal_fatal, snap_chain_run };
