/* sbx-trace adjudicate's snapshots (SPEC §7, §8, §9): the latest snapshot of
 * the disputed run's lease from which a restored run continues the trace both
 * accounts agree on, and a fresh lease to restore it into. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease.h"
#include "snap/snap-internal.h"

#define SNAP_META_BYTES (64u << 10)

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
	struct lease_request req;
	json_t *rec = NULL, *made = NULL, *amount = NULL;
	int rc = -1;
	memset(&req, 0, sizeof req);
	if (lease_store_open(store, &s, e) < 0)
		return -1;
	if (lease_load(s, lease, &rec, e) < 0)
		goto out;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	if (trace_lease_request_of(l, &req, e) < 0)
		goto out;
	req.ephemeral = 0;
	amount = json_pack("{s:I}", "amount", (json_int_t)req.escrow);
	/* Funded: the restore makes it Active */
	struct lease_step fund[] = { { LEASE_EDGE_FUND, amount, 0 } };
	if (lease_steps(s, &req, NULL, NULL, fund, 1, &made, e) < 0)
		goto out;
	*id = common_xstrdup(common_jstr(json_array_get(made, 0), "lease", ""));
	rc = 0;
out:
	json_decref(amount);
	json_decref(made);
	json_decref(rec);
	lease_store_close(s);
	return rc;
}

const struct trace_adj_snap snap_adj_ops = { adj_latest, adj_target };
