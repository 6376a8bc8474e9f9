/* sbx-lease recover: what a crash left behind, closed through the ordinary edges.
 * A run that died (its claim unheld) is settled from the bound it kept durable; a
 * one-shot lease of this host's runs is also expired and destroyed, as its run
 * would have done; a deadline already passed expires its lease. Each step is an
 * ordinary transition with its receipt, so recovering twice changes nothing. */
#include <stdlib.h>
#include <string.h>
#include "lease/front/front-internal.h"

int lease_store_lock_host(struct lease_store *s, struct common_err *e)
{
	return lease_lock_host(s, e);
}

void lease_store_unlock(struct lease_store *s)
{
	lease_unlock(s);
}

static void ids_free(char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

static json_t *record_of(struct lease_store *s, const char *id, struct common_err *e, int *rc)
{
	json_t *pair, *rec;

	*rc = lease_pair_read(s, id, &pair, e);
	if (*rc < 0 || !pair)
		return NULL;
	rec = json_incref(json_object_get(pair, "lease"));
	json_decref(pair);
	return rec;
}

/* One lease (was: its state before dead runs were settled): a one-shot lease of this
 * host no live run holds is closed to the end; any other live lease past its
 * deadline expires. */
static int repair_one(struct lease_store *s, const char *id, const char *was, uint64_t batch,
		      json_t *done, struct common_err *e)
{
	enum lease_state st;
	json_t *rec, *out = NULL;
	char *from;
	int rc;

	if (!(rec = record_of(s, id, e, &rc)))
		return rc;
	lease_state_parse(lease_jstr(rec, "state"), &st);
	from = common_xstrdup(was ? was : lease_jstr(rec, "state"));
	if (st != LEASE_DESTROYED && lease_ephemeral_here(s, rec) && !lease_run_held(s, id))
		rc = lease_close_left(s, &rec, batch, &out, e);
	else if (lease_state_live(st) && batch >= (uint64_t)lease_jint(rec, "deadline"))
		rc = lease_expire_overdue(s, &rec, batch, e) < 0 ? -1 : 0;
	if (rc == 0 && strcmp(from, lease_jstr(rec, "state")) != 0)
		json_array_append_new(done, json_pack("{s:s, s:s, s:s}", "lease", id, "from", from,
						      "to", lease_jstr(rec, "state")));
	if (rc == 0 && !lease_run_held(s, id) && st != LEASE_ACTIVE)
		lease_run_forget(s, id); /* a claim left by a run that ended unrecorded */
	json_decref(out);
	json_decref(rec);
	free(from);
	return rc;
}

static int repair_once(struct lease_store *s, json_t **report, struct common_err *e)
{
	json_t *done = json_array(), *before = json_object(), *rec;
	char **ids = NULL;
	size_t n = 0;
	uint64_t batch;
	int rc = -1;

	/* alone on this host: no sbx-run is between its request and its run claim */
	if (lease_lock_host(s, e) < 0)
		goto out;
	if (lease_recover(s, e) < 0 || lease_store_batch(s, &batch, e) < 0 ||
	    s->be->ids(s, &ids, &n, e) < 0)
		goto unlock;
	for (size_t i = 0; i < n; i++) { /* states before dead runs are settled */
		int got;
		if (!(rec = record_of(s, ids[i], e, &got)))
			continue; /* a damaged record is verify's to report */
		json_object_set(before, ids[i], json_object_get(rec, "state"));
		json_decref(rec);
	}
	if (lease_dead_runs_close(s, batch, e) < 0)
		goto unlock;
	for (size_t i = 0; i < n; i++)
		if (repair_one(s, ids[i], json_string_value(json_object_get(before, ids[i])), batch,
			       done, e) < 0)
			goto unlock;
	*report = json_pack("{s:s, s:I, s:O}", "store", s->name, "batch", (json_int_t)batch,
			    "recovered", done);
	rc = 0;
unlock:
	lease_unlock(s);
out:
	ids_free(ids, n);
	json_decref(before);
	json_decref(done);
	return rc;
}

int lease_repair(struct lease_store *s, json_t **report, struct common_err *e)
{
	unsigned attempt = 0;
	int rc;

	while ((rc = repair_once(s, report, e)) < 0 && lease_retry(s, &attempt))
		;
	return rc;
}
