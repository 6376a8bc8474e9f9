/* Snapshots of --deterministic runs (SPEC §7, §8, §9): the ids a restored run
 * hands out next, and sbx-trace adjudicate's snapshots — the latest one of the
 * disputed run's lease from which a restored run continues the trace both
 * accounts agree on, and a fresh lease to restore it into. */
#include <dirent.h>
#include <sys/user.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease.h"
#include "snap/snap-internal.h"
#include "trace/determ/determ.h"
#include "trace/tracee/tracee.h"

#define SNAP_META_BYTES (64u << 10)

/* The highest id of the snapshot's tree: the restore hands out the next one. */
static uint32_t tree_max_id(const struct snap_state *st)
{
	uint32_t m = 0;
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		m = (k ? p->pid : st->tid) > m ? (k ? p->pid : st->tid) : m;
		for (size_t j = 0; j < p->nthreads; j++)
			m = p->threads[j].tid > m ? p->threads[j].tid : m;
	}
	return m;
}

int snap_determ_ids(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	uint32_t want = trace_determ_record_last_pid(st->determ, st->determ_len);
	uint32_t last = tree_max_id(st);
	struct trace_tracee t;
	struct user_regs_struct regs;
	int rc = 0;
	if (!st->determ || want <= last)
		return 0;
	if ((rc = trace_regs_get(pid, &regs)) < 0)
		return common_errno(e, -rc, "registers of %d", (int)pid);
	if (trace_tracee_open(&t, pid, e) < 0)
		return -1;
	if (trace_tracee_find_syscall(&t, e) < 0)
		rc = -1;
	/* ids the run had given to tasks that ended before the snapshot */
	while (rc == 0 && last < want) {
		int64_t got;
		if ((rc = snap_thread_burn(&t, &got, e)) < 0)
			break;
		if (got != (int64_t)last + 1)
			rc = common_errf(e, "restore", "the namespace handed out id %lld after %u: a "
					 "deterministic run's ids cannot continue", (long long)got, last);
		last = (uint32_t)got;
	}
	trace_tracee_close(&t);
	/* the injected clones leave the leader's registers as they left them */
	int err = trace_regs_set(pid, &regs);
	return rc < 0 ? -1 : err < 0 ? common_errno(e, -err, "registers of %d", (int)pid) : 0;
}

/* Every digest of lease's snapshots the store registered or holds here, once. */
static json_t *lease_digests(struct lease_store *s, const char *lease, struct common_err *e)
{
	json_t *recs = NULL, *by = json_object(), *r;
	size_t i;
	if (lease_snapshot_records(s, &recs, e) < 0) {
		json_decref(by);
		return NULL;
	}
	json_array_foreach(recs, i, r)
		if (!strcmp(common_jstr(r, "lease", ""), lease))
			json_object_set_new(by, common_jstr(r, "digest", ""), json_true());
	json_decref(recs);
	char *own = common_xasprintf("%s/snapshots", lease_store_dir(s));
	const char *tops[2] = { lease_snapshot_top(s), own };
	for (int t = 0; t < 2; t++) {
		DIR *d = opendir(tops[t]);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64)
				continue;
			char *mp = common_xasprintf("%s/%s/meta.json", tops[t], de->d_name);
			json_t *m = common_json_load_file(mp, SNAP_META_BYTES, NULL);
			if (json_is_object(m) && !strcmp(common_jstr(m, "lease", ""), lease))
				json_object_set_new(by, de->d_name, json_true());
			json_decref(m);
			free(mp);
		}
		if (d)
			closedir(d);
	}
	free(own);
	return by;
}

/* Each candidate is loaded, verified and decoded whole (hostile input); one that
 * fails is passed over, never half-used. */
static int adj_latest(const char *store, const char *lease, const uint8_t (*heads)[32], size_t n,
		      char digest[65], uint64_t *step, struct common_err *e)
{
	struct lease_store *s;
	const char *hex;
	json_t *v;
	int found = 1;
	if (lease_store_open(store, &s, e) < 0)
		return -1;
	json_t *by = lease_digests(s, lease, e);
	if (!by) {
		lease_store_close(s);
		return -1;
	}
	json_object_foreach(by, hex, v) {
		struct snap_image im;
		struct snap_state st;
		struct common_err skip;
		if (snap_load(s, hex, &im, NULL, &skip) < 0)
			continue;
		if (snap_decode(im.bytes, im.len, hex, &st, &skip) == 0) {
			uint64_t k = st.meta.step;
			int better = found || k > *step || (k == *step && strcmp(hex, digest) < 0);
			if (st.determ && !strcmp(st.meta.lease, lease) && k < n &&
			    !memcmp(heads[k], st.meta.trace_head, 32) && better) {
				snprintf(digest, 65, "%s", hex);
				*step = k;
				found = 0;
			}
			snap_state_free(&st);
		}
		snap_image_free(&im);
	}
	json_decref(by);
	lease_store_close(s);
	return found;
}

static int adj_target(const char *store, const char *lease, char **id, struct common_err *e)
{
	struct lease_store *s;
	if (lease_store_open(store, &s, e) < 0)
		return -1;
	int rc = trace_lease_fund_like(s, lease, NULL, id, e);
	lease_store_close(s);
	return rc;
}

const struct trace_adj_snap snap_adj_ops = { adj_latest, adj_target };
