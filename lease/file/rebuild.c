/* After a machine crash: records and the slot index, written without fsync during
 * the boot that crashed, are derived again from the journal (the truth), durably. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

struct rebuild {
	struct lease_store *s;
	json_t *chains; /* id -> {"rec", "receipts", "broken"} */
};

/* Fold every chain by digest (signatures are checked only where a record must change). */
static int rebuild_line(void *arg, size_t no, const char *line, size_t len)
{
	struct rebuild *b = arg;
	const char *id;
	json_t *r, *ch, *next;

	(void)no;
	if (len > LEASE_LINE_MAX)
		return 0;
	r = common_json_load(line, len, "journal.jsonl", NULL);
	id = lease_jstr(r, "lease");
	if (!lease_id_valid(id)) {
		json_decref(r);
		return 0;
	}
	ch = json_object_get(b->chains, id);
	if (!ch) {
		ch = json_pack("{s:[]}", "receipts");
		json_object_set_new(b->chains, id, ch);
	}
	if (!json_object_get(ch, "broken")) {
		if (lease_receipt_check(r, "journal.jsonl", NULL) < 0 ||
		    lease_fold(json_object_get(ch, "rec"), r, &next, NULL) < 0) {
			json_object_set_new(ch, "broken", json_true());
		} else {
			json_object_set_new(ch, "rec", next);
			json_array_append(json_object_get(ch, "receipts"), r);
		}
	}
	json_decref(r);
	return 0;
}

/* Make leases/ID.json the fold of its chain when the chain verifies. */
static int rebuild_record(struct rebuild *b, const char *id, json_t *ch, struct common_err *e)
{
	json_t *rs = json_object_get(ch, "receipts"), *rec = json_object_get(ch, "rec"), *pair = NULL;
	json_t *last = json_array_get(rs, json_array_size(rs) - 1), *r, *np;
	char *p;
	size_t i;
	int rc = 0;

	if (lease_file_pair_read(b->s, id, &pair, NULL) == 0 && pair &&
	    lease_json_same(json_object_get(pair, "lease"), rec) &&
	    lease_json_same(json_object_get(pair, "receipt"), last)) {
		json_decref(pair);
		return 0;
	}
	json_decref(pair);
	json_array_foreach(rs, i, r)
		if (lease_receipt_verify(b->s, r, "journal.jsonl", NULL) < 0)
			return 0; /* not ours: verify reports it */
	np = json_pack("{s:O, s:O}", "lease", rec, "receipt", last);
	p = lease_path(b->s, "leases/%s.json", id);
	{
		char *c = common_json_canonical(np), *line = common_xasprintf("%s\n", c);
		rc = common_write_atomic(p, line, strlen(line), 0600, e);
		free(line);
		free(c);
	}
	free(p);
	json_decref(np);
	return rc;
}

static int ns_effect(struct lease_store *s, const char *id, enum lease_state st,
		     struct common_err *e)
{
	char *ns = lease_ns_dir(s, id);
	int rc = 0;

	if (st == LEASE_DESTROYED) {
		if (access(ns, F_OK) == 0)
			rc = common_rm_rf(ns, e);
	} else if (mkdir(ns, 0700) < 0 && errno != EEXIST) {
		rc = common_errno(e, errno, "namespace %s", ns);
	}
	free(ns);
	return rc;
}

/* Namespaces as the states say; the slot index as the live leases say, durably. */
static int rebuild_effects(struct rebuild *b, struct common_err *e)
{
	json_t *live = json_object(), *slots = NULL, *ch, *l;
	const char *id, *pr;
	char *p;
	int rc = -1;

	json_object_foreach(b->chains, id, ch) {
		json_t *rec = json_object_get(ch, "rec");
		enum lease_state st;
		if (!rec || lease_state_parse(lease_jstr(rec, "state"), &st) < 0)
			continue;
		/* a broken chain is verify's to report: only its slot counts */
		if (!json_object_get(ch, "broken") && ns_effect(b->s, id, st, e) < 0)
			goto out;
		if (!lease_state_live(st))
			continue;
		pr = lease_jstr(rec, "principal");
		if (!(l = json_object_get(live, pr)))
			json_object_set_new(live, pr, l = json_array());
		json_array_append_new(l, json_string(id));
	}
	if (lease_file_slots_read(b->s, NULL, &slots, NULL) == 0 && lease_json_same(slots, live)) {
		rc = 0;
		goto out;
	}
	p = lease_path(b->s, "slots.json");
	{
		char *c = common_json_canonical(live), *line = common_xasprintf("%s\n", c);
		rc = common_write_atomic(p, line, strlen(line), 0600, e);
		free(line);
		free(c);
	}
	free(p);
out:
	json_decref(slots);
	json_decref(live);
	return rc;
}

int lease_file_rebuild(struct lease_store *s, struct common_err *e)
{
	struct rebuild b = { s, json_object() };
	const char *id;
	json_t *ch;
	char *p;
	int rc = -1;

	if (lease_file_journal_each(s, rebuild_line, &b, e) < 0)
		goto out;
	json_object_foreach(b.chains, id, ch)
		if (json_object_get(ch, "rec") && !json_object_get(ch, "broken") &&
		    rebuild_record(&b, id, ch, e) < 0)
			goto out;
	if (rebuild_effects(&b, e) < 0)
		goto out;
	/* the namespaces' creations and removals, made durable with their directory */
	p = lease_ns_dir(s, "");
	rc = common_fsync_dir(p, e);
	free(p);
	lease_file_journal_forget(s);
out:
	if (rc < 0)
		common_err_context(e, "rebuilding the store from its journal");
	json_decref(b.chains);
	return rc;
}
