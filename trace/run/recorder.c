/* sbx-run's trace (--trace, SPEC §7): the recorder opened with the header that
 * binds the run, closed into the head the result names, and carried across a
 * chain's links (--chain, SPEC §8.4): one file and one hash chain, each link
 * after the first marked by a link event (trace/record/link.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/record/reader/reader.h"
#include "trace/record/record.h"
#include "trace/run/run-internal.h"
#include "trace/tracee/tracee.h"

#define LINK_TASKS_MAX 65536 /* tasks a link's map names (a run's tree is bounded below this) */

/* A chain's trace file, opened once for all its links: a guest that swaps the
 * path between links (a bind it writes) changes nothing of it. */
static int chain_fd(const struct trace_run_opts *o, struct common_err *e)
{
	struct trace_chain_link *ln = o->link;

	if (ln->trace_fd >= 0)
		return ln->trace_fd;
	if (strcmp(o->trace_path, "-") == 0)
		ln->trace_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	else /* a symlink there (a guest's, from an earlier run in a bind) is refused */
		ln->trace_fd = open(o->trace_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
				    0644);
	if (ln->trace_fd < 0)
		return common_errno(e, errno, "--trace %s", o->trace_path);
	return ln->trace_fd;
}

struct trace_rec *trace_run_recorder_open(const struct trace_run_opts *o, const struct trace_run_who *w,
					  struct trace_determ *det, struct common_err *e)
{
	uint64_t batch = 0;
	json_t *mounts = json_array(), *dh = NULL;
	static const char *const types[] = {"bind", "tmpfs", "proc"};
	if (lease_store_batch(w->store, &batch, e) < 0)
		return NULL;
	if (o->deterministic) {
		batch = 0; /* the run's batch is in the lease's receipts, not in the chain */
		if (!(dh = trace_determ_header(det, w->ns, e)))
			return NULL;
	}
	for (size_t i = 0; i < o->nmounts; i++) {
		const struct trace_mount *m = &o->mounts[i];
		json_array_append_new(mounts, json_pack("{s:s,s:s?,s:s,s:s?,s:b}", "type",
			types[m->type], "src", m->src, "dst", m->dst, "opts", m->opts, "rw", m->rw));
	}
	/* exec hashes persist in the store: each run need not hash cc1 again */
	char *hcache = common_xasprintf("%s/exec-hashes", lease_store_dir(w->store));
	struct trace_rec_info in = {
		.lease = w->id, .image_path = w->image, .image_sha256 = w->sha, .argv = o->argv,
		.envp = w->env, .mounts = mounts, .start_batch = batch, .level = o->trace_level,
		.deterministic = o->deterministic, .determinism = dh, .hash_cache = hcache,
		.resume_seq = o->resume_seq, .resume_head = o->resume_head,
	};
	const struct trace_chain_link *ln = o->link;
	if (ln && ln->n > 1) { /* the links before wrote the header and their events */
		in.chain_link = 1;
		in.resume_head = ln->trace_head;
		in.resume_seq = ln->trace_seq;
		in.t_start = ln->trace_t0;
	}
	char *prefix = NULL; /* sbx-restore --trace-from: the run's trace up to the snapshot */
	struct trace_rec *rec = NULL;
	int fd = ln ? chain_fd(o, e) : -1;
	if ((!ln || fd >= 0) && (!o->trace_from || trace_trace_prefix(o->trace_from, o->resume_seq,
						o->resume_head, &prefix, &in.resume_len, e) == 0)) {
		in.resume_text = prefix;
		rec = trace_rec_open(ln ? NULL : o->trace_path, fd, &in, e);
	}
	free(prefix);
	free(hcache);
	json_decref(mounts);
	json_decref(dh);
	return rec;
}

int trace_run_recorder_close(struct trace_rec *rec, const struct trace_run_opts *o, int wstatus,
			     json_t **trace_j, struct common_err *e)
{
	uint8_t h[32];
	char hex[COMMON_SHA256_HEX];
	struct trace_chain_link *ln = o->link;

	*trace_j = NULL;
	if (ln && ln->snapshot[0]) /* handed over: the next link goes on in the same file */
		return trace_rec_hand_close(rec, ln->trace_head, &ln->trace_seq, &ln->trace_t0, e);
	int rc = trace_rec_close(rec, wstatus, h, e);
	common_hex(h, 32, hex);
	*trace_j = json_pack("{s:s,s:s}", "path", o->trace_path, "head", hex);
	return rc;
}

/* A zombie's wait status (/proc/TID/stat's exit_code, field 52), or -1 while
 * it lives. */
static int zombie_status(pid_t tid)
{
	char p[64], *buf = NULL, *at;
	size_t len;
	int ws = -1;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)tid);
	if (common_read_file(p, 4096, &buf, &len, NULL) < 0)
		return -1;
	at = strrchr(buf, ')');
	if (at && at[1] == ' ' && at[2] == 'Z') {
		at += 2;
		for (int f = 3; f < 52 && at; f++) /* from the state, field 3 */
			if ((at = strchr(at, ' ')))
				at++;
		ws = at ? atoi(at) : -1;
	}
	free(buf);
	return ws;
}

/* The tasks of the run whose exit the hooks were not told: host id, namespace
 * id, process (tgid), and a zombie's wait status (else -1). */
static size_t link_tasks(struct trace_supervisor *sv, pid_t (*out)[4], size_t max)
{
	pid_t *tids = common_xmalloc(max * sizeof *tids);
	size_t n = trace_sv_pids(sv, tids, max), k = 0;

	for (size_t i = 0; i < n && i < max; i++) {
		struct trace_status s;
		unsigned long long tgid = 0;
		if (trace_status_read(tids[i], &s) < 0)
			continue; /* gone meanwhile: no events of it follow */
		out[k][0] = tids[i];
		out[k][1] = trace_status_nspid(&s);
		out[k][2] = trace_status_num(&s, "Tgid", 10, &tgid) == 0 && tgid > 0 &&
			    tgid <= (unsigned long long)INT32_MAX ? (pid_t)tgid : tids[i];
		trace_status_free(&s);
		out[k][3] = zombie_status(tids[i]);
		k += out[k][1] > 0;
	}
	free(tids);
	return k;
}

void trace_run_recorder_handed(struct trace_rec *rec, struct trace_supervisor *sv,
			       struct trace_chain_link *ln)
{
	if (!rec)
		return;
	pid_t (*t)[4] = common_xmalloc(LINK_TASKS_MAX * sizeof *t);
	pid_t (*ended)[3] = common_xmalloc(LINK_TASKS_MAX * sizeof *ended);
	size_t n = link_tasks(sv, t, LINK_TASKS_MAX), nended = 0;
	free(ln->tasks);
	ln->tasks = common_xmalloc((n ? n : 1) * sizeof *ln->tasks);
	ln->ntasks = 0;
	for (size_t i = 0; i < n; i++) {
		if (t[i][3] >= 0) { /* it ended while the snapshot stopped the tree */
			ended[nended][0] = t[i][0];
			ended[nended][1] = t[i][2];
			ended[nended++][2] = t[i][3];
			continue;
		}
		ln->tasks[ln->ntasks][0] = t[i][0];
		ln->tasks[ln->ntasks++][1] = t[i][1];
	}
	trace_rec_handed_over(rec, (const pid_t (*)[3])ended, nended);
	free(ended);
	free(t);
}

int trace_run_recorder_linked(struct trace_rec *rec, struct trace_supervisor *sv,
			      const struct trace_chain_link *ln, const char *lease, struct common_err *e)
{
	if (!rec || !ln || ln->n < 2)
		return 0;
	pid_t (*t)[4] = common_xmalloc(LINK_TASKS_MAX * sizeof *t);
	size_t n = link_tasks(sv, t, LINK_TASKS_MAX);
	json_t *pids = json_array(), *tgids = json_array();
	/* a restored task keeps its namespace id: that joins its ids of both links */
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(tgids, json_pack("[i,i]", (int)t[i][0], (int)t[i][2]));
		for (size_t j = 0; j < ln->ntasks; j++)
			if (ln->tasks[j][1] == t[i][1]) {
				json_array_append_new(pids, json_pack("[i,i]", (int)ln->tasks[j][0],
								      (int)t[i][0]));
				break;
			}
	}
	free(t);
	json_t *f = json_pack("{s:i,s:s,s:s?,s:s,s:o}", "link", (int)ln->n, "lease", lease,
			      "prev", ln->prev, "snapshot", ln->restored, "pids", pids);
	int rc = trace_rec_link(rec, f, tgids);
	json_decref(f);
	json_decref(tgids);
	if (rc < 0)
		return common_errf(e, "trace", "link %u: the link event could not be written", ln->n);
	return 0;
}
