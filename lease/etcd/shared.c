/* The etcd back end (SPEC §14): records, receipt chains, slot indexes, the batch
 * clock and registered host keys in one cluster; every transition is one etcd
 * transaction over the revisions it read, run again when another client won.
 * Keys under PREFIX: lease/ID, receipt/ID/SEQ (20 digits), slots/PRINCIPAL,
 * clock, keys/PUBHEX, snapshot/HEX (lease/front/snapshot.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "lease/etcd/etcd.h"

#define KEY_MAX 160
#define KEPT_MAX 1024 /* values kept in memory before they are all dropped */

/* What a transition read: the revision its commit compares. */
static void note(struct lease_store *s, const char *key, int64_t rev, const json_t *val)
{
	json_object_set_new(s->reads, key, json_pack("[I, O?]", (json_int_t)rev, (json_t *)val));
}

static int64_t noted_rev(struct lease_store *s, const char *key)
{
	return json_integer_value(json_array_get(json_object_get(s->reads, key), 0));
}

/* A record or slot list this process last read or wrote is kept (s->fcache:
 * [revision, value]) for the write path, whose commit compares the revision: a
 * process alone at the store reads nothing. */
static int keepable(const char *key)
{
	return strncmp(key, "lease/", 6) == 0 || strncmp(key, "slots/", 6) == 0;
}

static void keep(struct lease_store *s, const char *key, int64_t rev, const json_t *val)
{
	if (!s->fcache)
		s->fcache = json_object();
	if (json_object_size(s->fcache) >= KEPT_MAX)
		json_object_clear(s->fcache);
	json_object_set_new(s->fcache, key, json_pack("[I, O?]", (json_int_t)rev, (json_t *)val));
}

/* Another process writes here too: slot lists, which every request and end of a
 * principal's lease changes, are then read fresh rather than compared stale. */
static int contended(const struct lease_store *s)
{
	return json_is_true(json_object_get(s->fcache, "contended"));
}

static void contend(struct lease_store *s)
{
	if (!s->fcache)
		s->fcache = json_object();
	json_object_set_new(s->fcache, "contended", json_true());
}

/* The write path's value of key without a read: noted by this transition, else kept
 * (1 with *out, which may be NULL for an absent key), 0 a read is needed. Slots
 * others write too are read afresh, unless mine: the kept value will do. */
static int unread(struct lease_store *s, const char *key, int mine, json_t **out)
{
	const json_t *seen = json_object_get(s->reads, key), *kept = json_object_get(s->fcache, key);

	if (!s->kept_ok)
		return 0;
	if (!seen && (!kept || !keepable(key) ||
		      (strncmp(key, "slots/", 6) == 0 && contended(s) && !mine)))
		return 0;
	if (!seen) {
		note(s, key, json_integer_value(json_array_get(kept, 0)), json_array_get(kept, 1));
		s->kept_used = 1;
	}
	seen = json_array_get(json_object_get(s->reads, key), 1);
	*out = json_is_null(seen) ? NULL : json_deep_copy(seen); /* null: absent */
	return 1;
}

/* key's value parsed as JSON (NULL when absent), its revision noted. */
static int get_json(struct lease_store *s, const char *key, json_t **out, struct common_err *e)
{
	char *val, name[KEY_MAX + 8];
	const json_t *kept;
	int64_t rev;

	*out = NULL;
	if (unread(s, key, 0, out))
		return 0;
	if (lease_etcd_get(s->etcd, key, &val, &rev, e) < 0)
		return -1;
	snprintf(name, sizeof name, "etcd %s", key);
	if (val && !(*out = common_json_load(val, strlen(val), name, e))) {
		free(val);
		return -1;
	}
	free(val);
	note(s, key, rev, *out);
	kept = json_object_get(s->fcache, key);
	if (kept && json_integer_value(json_array_get(kept, 0)) != rev)
		contend(s);
	if (keepable(key))
		keep(s, key, rev, *out);
	return 0;
}

static int shared_pair_read(struct lease_store *s, const char *id, json_t **pair,
			    struct common_err *e)
{
	char key[KEY_MAX], name[KEY_MAX];
	json_t *j;

	snprintf(key, sizeof key, "lease/%s", id);
	snprintf(name, sizeof name, "etcd %s", key);
	if (get_json(s, key, &j, e) < 0)
		return -1;
	*pair = NULL;
	if (!j)
		return 0;
	if (!json_is_object(j) || !json_is_object(json_object_get(j, "receipt")) ||
	    lease_record_check(json_object_get(j, "lease"), name, e) < 0) {
		json_decref(j);
		return common_errf(e, name, "expected {\"lease\": RECORD, \"receipt\": RECEIPT}");
	}
	*pair = j;
	return 0;
}

/* The records of ids not noted or kept yet, read in one round trip and kept: a
 * request's sweep of its principal's live leases then reads none by one. */
static int shared_prefetch(struct lease_store *s, const json_t *ids, struct common_err *e)
{
	json_t *keys = json_array(), *kvs, *kv, *v;
	char key[KEY_MAX];
	size_t i;
	int rc;

	json_array_foreach(ids, i, v) {
		if (!json_is_string(v))
			continue;
		snprintf(key, sizeof key, "lease/%s", json_string_value(v));
		if (!json_object_get(s->reads, key) &&
		    !json_object_get(s->fcache, key))
			json_array_append_new(keys, json_string(key));
	}
	if (!s->kept_ok || json_array_size(keys) == 0) {
		json_decref(keys);
		return 0;
	}
	rc = lease_etcd_get_many(s->etcd, keys, &kvs, e);
	json_array_foreach(rc == 0 ? kvs : NULL, i, kv) {
		const char *k = json_string_value(json_array_get(kv, 0));
		const char *val = json_string_value(json_array_get(kv, 1));
		/* damaged: left for the read one by one to report */
		if ((v = common_json_load(val, strlen(val), k, NULL)))
			keep(s, k, json_integer_value(json_array_get(kv, 2)), v);
		json_decref(v);
	}
	if (rc == 0)
		json_decref(kvs);
	json_decref(keys);
	return rc;
}

/* A principal's live leases, one key a slot: slots/PRINCIPAL/NN (NN below
 * LEASE_PRINCIPAL_SLOTS) holds a lease id. A request takes a free slot and a lease
 * leaving the live states frees its own, each comparing that one key: one
 * principal's clients contend only when two pick the same slot, and no principal
 * ever holds more slots than there are. A list of ids at slots/PRINCIPAL (a store
 * written before) counts too and moves into slots at the principal's next change.
 * A view: {"NN": [id, mod_revision], …, "list": [mod_revision, [id, …]]}. */
#define SLOT_DIGITS 2

/* NN of a slot key's tail, -1 when it is none */
static int slot_number(const char *tail)
{
	if (strlen(tail) != SLOT_DIGITS || tail[0] < '0' || tail[0] > '9' || tail[1] < '0' ||
	    tail[1] > '9' || (tail[0] - '0') * 10 + (tail[1] - '0') >= LEASE_PRINCIPAL_SLOTS)
		return -1;
	return (tail[0] - '0') * 10 + (tail[1] - '0');
}

/* One key below slots/ (k without it) into views ({principal: view}); keys of other
 * principals than only (when given) are skipped. */
static int slot_entry(json_t *views, const char *only, const char *k, const char *v, int64_t rev,
		      struct common_err *e)
{
	const char *slash = strchr(k, '/');
	size_t plen = slash ? (size_t)(slash - k) : strlen(k);
	char pr[LEASE_NAME_MAX + 1], nn[SLOT_DIGITS + 1];
	json_t *view, *list;

	if (plen > LEASE_NAME_MAX || (only && (plen != strlen(only) || strncmp(k, only, plen) != 0)))
		return 0;
	memcpy(pr, k, plen);
	pr[plen] = '\0';
	if (!(view = json_object_get(views, pr)))
		json_object_set_new(views, pr, view = json_object());
	if (!slash) {
		list = common_json_load(v, strlen(v), k, NULL);
		if (!json_is_array(list)) {
			json_decref(list);
			return common_errf(e, k, "expected an array of lease ids");
		}
		json_object_set_new(view, "list", json_pack("[I, o]", (json_int_t)rev, list));
		return 0;
	}
	if (slot_number(slash + 1) < 0 || !lease_id_valid(v))
		return common_errf(e, k, "expected slot 00-%d holding a lease id",
				   LEASE_PRINCIPAL_SLOTS - 1);
	snprintf(nn, sizeof nn, "%s", slash + 1);
	json_object_set_new(view, nn, json_pack("[s, I]", v, (json_int_t)rev));
	return 0;
}

/* The lease ids of a view: slots in order, then the list's. */
static json_t *view_ids(const json_t *view)
{
	json_t *ids = json_array(), *v;
	char nn[SLOT_DIGITS + 1];
	size_t i;

	for (int n = 0; n < LEASE_PRINCIPAL_SLOTS; n++) {
		snprintf(nn, sizeof nn, "%02d", n);
		if ((v = json_object_get(view, nn)))
			json_array_append(ids, json_array_get(v, 0));
	}
	json_array_foreach(json_array_get(json_object_get(view, "list"), 1), i, v)
		if (json_is_string(v))
			json_array_append(ids, v);
	return ids;
}

/* pr's view: noted or kept (mine: even when others write here, for a lease's own
 * slot, which nobody else frees), else read (the list's key and the slots'). */
static int slot_view(struct lease_store *s, const char *pr, int mine, json_t **view,
		     struct common_err *e)
{
	char vk[KEY_MAX], from[KEY_MAX];
	json_t *kvs, *kv, *views, *kept;
	size_t i;
	int rc = 0;

	snprintf(vk, sizeof vk, "slots/%s/", pr);
	if (unread(s, vk, mine, view))
		return 0;
	snprintf(from, sizeof from, "slots/%s", pr);
	if (lease_etcd_range(s->etcd, vk, from, &kvs, e) < 0)
		return -1;
	views = json_object();
	json_array_foreach(kvs, i, kv)
		if (rc == 0)
			rc = slot_entry(views, pr, json_string_value(json_array_get(kv, 0)) + 6,
					json_string_value(json_array_get(kv, 1)),
					json_integer_value(json_array_get(kv, 2)), e);
	json_decref(kvs);
	*view = rc == 0 ? json_deep_copy(json_object_get(views, pr)) : NULL;
	json_decref(views);
	if (rc < 0)
		return -1;
	if (!*view)
		*view = json_object();
	kept = json_array_get(json_object_get(s->fcache, vk), 1);
	if (kept && !json_equal(kept, *view))
		contend(s);
	note(s, vk, 0, *view);
	keep(s, vk, 0, *view);
	return 0;
}

static int shared_slots_read(struct lease_store *s, const char *principal, json_t **slots,
			     struct common_err *e)
{
	json_t *kvs, *kv, *view, *ids;
	const char *pr;
	size_t i;
	int rc = 0;

	*slots = json_object();
	if (principal) {
		if (slot_view(s, principal, 0, &view, e) < 0)
			goto fail;
		ids = view_ids(view);
		json_decref(view);
		json_object_set_new(*slots, principal, ids);
		return 0;
	}
	if (lease_etcd_range(s->etcd, "slots/", NULL, &kvs, e) < 0)
		goto fail;
	json_array_foreach(kvs, i, kv)
		if (rc == 0)
			rc = slot_entry(*slots, NULL, json_string_value(json_array_get(kv, 0)) + 6,
					json_string_value(json_array_get(kv, 1)),
					json_integer_value(json_array_get(kv, 2)), e);
	json_decref(kvs);
	if (rc < 0)
		goto fail;
	json_object_foreach(*slots, pr, view) {
		ids = view_ids(view);
		json_object_set_new(*slots, pr, ids);
	}
	return 0;
fail:
	json_decref(*slots);
	*slots = NULL;
	return -1;
}

static json_t *put_json(const char *key, const json_t *val)
{
	char *c = common_json_canonical(val);
	json_t *p = json_pack("[s, s]", key, c);

	free(c);
	return p;
}

/* A lease entering (live) or leaving the live states: the slot keys that change,
 * each compared (cmp) and put (puts; freed: deleted); *view the view after, its
 * new slots at revision 0 until the commit names it. */
static int slot_change(struct lease_store *s, const char *pr, const char *id, int live,
		       json_t *cmp, json_t *puts, json_t **view, struct common_err *e)
{
	json_t *moving = json_array(), *list, *v, *ids;
	char key[KEY_MAX], nn[SLOT_DIGITS + 1];
	const char *n;
	unsigned start = 0;
	size_t i;
	int rc = 0;

	if (slot_view(s, pr, !live, view, e) < 0) {
		json_decref(moving);
		return -1;
	}
	ids = view_ids(*view);
	if ((list = json_object_get(*view, "list"))) { /* written before slots: moved */
		snprintf(key, sizeof key, "slots/%s", pr);
		json_array_append_new(cmp, json_pack("[s, O]", key, json_array_get(list, 0)));
		json_array_append_new(puts, json_pack("[s, n]", key));
		json_array_foreach(json_array_get(list, 1), i, v)
			if (json_is_string(v) && strcmp(json_string_value(v), id) != 0)
				json_array_append(moving, v);
		json_object_del(*view, "list");
	}
	json_object_foreach(*view, n, v)
		if (!live && strcmp(json_string_value(json_array_get(v, 0)), id) == 0) {
			snprintf(key, sizeof key, "slots/%s/%s", pr, n);
			json_array_append_new(cmp, json_pack("[s, O]", key, json_array_get(v, 1)));
			json_array_append_new(puts, json_pack("[s, n]", key));
		}
	if (!live)
		for (int k = 0; k < LEASE_PRINCIPAL_SLOTS; k++) {
			snprintf(nn, sizeof nn, "%02d", k);
			v = json_object_get(*view, nn);
			if (v && strcmp(json_string_value(json_array_get(v, 0)), id) == 0)
				json_object_del(*view, nn);
		}
	json_array_foreach(ids, i, v)
		live &= strcmp(json_string_value(v), id) != 0; /* already in a slot */
	if (live)
		json_array_append_new(moving, json_string(id));
	/* from a random slot: clients of one principal seldom pick the same */
	if (json_array_size(moving) && getrandom(&start, sizeof start, 0) < 0)
		start = (unsigned)getpid();
	json_array_foreach(moving, i, v) {
		int k = 0;
		for (; k < LEASE_PRINCIPAL_SLOTS; k++) {
			snprintf(nn, sizeof nn, "%02u", (start + (unsigned)k) % LEASE_PRINCIPAL_SLOTS);
			if (!json_object_get(*view, nn))
				break;
		}
		if (k == LEASE_PRINCIPAL_SLOTS) {
			rc = common_errf(e, "request refused", "principal %s already holds %d live "
					 "leases, the maximum", pr, LEASE_PRINCIPAL_SLOTS);
			break;
		}
		snprintf(key, sizeof key, "slots/%s/%s", pr, nn);
		json_array_append_new(cmp, json_pack("[s, i]", key, 0));
		json_array_append_new(puts, json_pack("[s, O]", key, v));
		json_object_set_new(*view, nn, json_pack("[O, i]", v, 0));
	}
	json_decref(ids);
	json_decref(moving);
	return rc;
}

/* What a lost comparison answered (now: [[key, value, mod_revision], …]) is kept for
 * the run again, for each key compared (cmp: [[key, revision], …]). 1 when the
 * record's head is our last receipt: a commit whose reply was lost and whose retry
 * then lost the comparison was applied. */
static int lost(struct lease_store *s, const json_t *cmp, const json_t *now, const char *lk,
		const char *digest)
{
	const json_t *c, *kv;
	json_t *val;
	size_t i, j;
	int ours = 0;

	contend(s);
	json_array_foreach(cmp, i, c) {
		const char *key = json_string_value(json_array_get(c, 0));
		int64_t rev = 0;
		val = NULL;
		json_array_foreach(now, j, kv) {
			const char *v = json_string_value(json_array_get(kv, 1));
			if (strcmp(json_string_value(json_array_get(kv, 0)), key) != 0)
				continue;
			rev = json_integer_value(json_array_get(kv, 2));
			val = common_json_load(v, strlen(v), key, NULL);
		}
		if (strcmp(key, lk) == 0 && json_is_object(val)) {
			const char *head = lease_jstr(json_object_get(val, "lease"), "head");
			ours = head && strcmp(head, digest) == 0;
		}
		/* a slot: the principal's view is read again */
		if (strncmp(key, "slots/", 6) == 0) {
			char vk[KEY_MAX];
			const char *slash = strchr(key + 6, '/');
			snprintf(vk, sizeof vk, "%.*s/", slash ? (int)(slash - key) : (int)strlen(key), key);
			json_object_del(s->fcache, vk);
			json_decref(val);
			continue;
		}
		/* not JSON (the run again reads it and says so), or no clock */
		if ((rev && !val) || (!val && strcmp(key, "clock") == 0))
			json_object_del(s->fcache, key);
		else if (keepable(key) || strcmp(key, "clock") == 0)
			keep(s, key, rev, val);
		json_decref(val);
	}
	return ours;
}

static int shared_commit(struct lease_store *s, const json_t *rs, const json_t *rec,
			 struct common_err *e)
{
	const json_t *last = json_array_get(rs, json_array_size(rs) - 1), *r;
	const char *id = lease_jstr(rec, "id"), *pr = lease_jstr(rec, "principal");
	json_t *cmp = json_array(), *puts = json_array(), *pair, *view = NULL, *now = NULL, *v;
	const json_t *before;
	char lk[KEY_MAX], vk[KEY_MAX], rk[KEY_MAX];
	const char *nn;
	enum lease_state st, prev;
	int was_live;
	int64_t rev = 0;
	size_t i;
	int rc = -1, done;

	snprintf(lk, sizeof lk, "lease/%s", id);
	snprintf(vk, sizeof vk, "slots/%s/", pr);
	lease_state_parse(lease_jstr(rec, "state"), &st);
	json_array_append_new(cmp, json_pack("[s, I]", lk, (json_int_t)noted_rev(s, lk)));
	/* the batch the receipts name is the clock's as read (maybe kept): still so */
	if (json_object_get(s->reads, "clock"))
		json_array_append_new(cmp, json_pack("[s, I]", "clock",
						     (json_int_t)noted_rev(s, "clock")));
	json_array_foreach(rs, i, r) {
		snprintf(rk, sizeof rk, "receipt/%s/%020lld", id, (long long)lease_jint(r, "seq"));
		json_array_append_new(puts, put_json(rk, r));
	}
	pair = json_pack("{s:O, s:O}", "lease", rec, "receipt", last);
	json_array_append_new(puts, put_json(lk, pair));
	/* the slot index changes only when the lease enters or leaves the live states */
	before = json_object_get(json_array_get(json_object_get(s->reads, lk), 1), "lease");
	was_live = before && lease_state_parse(lease_jstr(before, "state"), &prev) == 0 &&
		   lease_state_live(prev);
	if (was_live != lease_state_live(st) &&
	    slot_change(s, pr, id, lease_state_live(st), cmp, puts, &view, e) < 0)
		goto out;
	done = lease_etcd_txn(s->etcd, cmp, puts, &rev, &now, e);
	/* ours after all: every key it put carries its revision, the record's now */
	if (done == 0 && (done = lost(s, cmp, now, lk, lease_jstr(last, "digest"))))
		rev = json_integer_value(json_array_get(json_object_get(s->fcache, lk), 0));
	json_decref(now);
	if (done < 0)
		goto out;
	if (done == 0) {
		s->conflict = 1;
		common_errf(e, "store", "lease %s, the slots of %s or the clock changed meanwhile "
			    "in %s", id, pr, s->name);
		goto out;
	}
	note(s, lk, rev, pair);
	keep(s, lk, rev, pair);
	s->kept_used = 0; /* what follows this commit starts from what it wrote */
	json_object_foreach(view, nn, v) /* the slots taken now carry the commit's revision */
		if (json_integer_value(json_array_get(v, 1)) == 0)
			json_array_set_new(v, 1, json_integer((json_int_t)rev));
	if (view) {
		note(s, vk, 0, view);
		keep(s, vk, 0, view);
	}
	rc = lease_ns_effect(s, rec, e);
out:
	json_decref(view);
	json_decref(pair);
	json_decref(cmp);
	json_decref(puts);
	return rc;
}

/* The clock changes only by tick and set-mode, so the one last read is used again
 * (s->fcache: [revision, clock]); every commit compares its revision, and a
 * transition that used a clock changed since runs again with the new one. */
static int shared_clock_read(struct lease_store *s, json_t **clk, struct common_err *e)
{
	json_t *kept = json_object_get(s->fcache, "clock");

	if (kept) {
		note(s, "clock", json_integer_value(json_array_get(kept, 0)), json_array_get(kept, 1));
		*clk = json_deep_copy(json_array_get(kept, 1));
		return 0;
	}
	if (get_json(s, "clock", clk, e) < 0)
		return -1;
	if (!*clk)
		return common_errf(e, "clock", "store %s has no clock", s->name);
	if (!s->fcache)
		s->fcache = json_object();
	json_object_set_new(s->fcache, "clock", json_pack("[I, o]", (json_int_t)noted_rev(s, "clock"),
							  json_deep_copy(*clk)));
	return 0;
}

static int shared_clock_write(struct lease_store *s, const json_t *clk, struct common_err *e)
{
	json_t *cmp = json_pack("[[s, I]]", "clock", (json_int_t)noted_rev(s, "clock"));
	json_t *puts = json_pack("[o]", put_json("clock", clk));
	int64_t rev;
	int done = lease_etcd_txn(s->etcd, cmp, puts, &rev, NULL, e);

	json_object_del(s->fcache, "clock"); /* changed, or not as this process read it */
	json_decref(cmp);
	json_decref(puts);
	if (done == 0) {
		s->conflict = 1;
		return common_errf(e, "clock", "changed meanwhile in store %s", s->name);
	}
	return done < 0 ? -1 : 0;
}

static int shared_ids(struct lease_store *s, char ***ids, size_t *n, struct common_err *e)
{
	json_t *kvs, *kv;
	size_t i;

	*ids = NULL;
	*n = 0;
	if (lease_etcd_range(s->etcd, "lease/", NULL, &kvs, e) < 0)
		return -1;
	*ids = common_xcalloc(json_array_size(kvs) + 1, sizeof **ids);
	json_array_foreach(kvs, i, kv) {
		const char *id = json_string_value(json_array_get(kv, 0)) + strlen("lease/");
		if (lease_id_valid(id))
			(*ids)[(*n)++] = common_xstrdup(id);
	}
	json_decref(kvs);
	return 0;
}

static int shared_receipts(struct lease_store *s, const char *id, int64_t after, lease_line_fn fn,
			   void *arg, struct common_err *e)
{
	char pre[KEY_MAX], from[KEY_MAX], name[KEY_MAX + 8];
	json_t *kvs, *kv;
	size_t i;
	int rc = 0;

	snprintf(pre, sizeof pre, id ? "receipt/%s/" : "receipt/", id);
	snprintf(from, sizeof from, "%s%020lld", pre, (long long)(after + 1));
	if (lease_etcd_range(s->etcd, pre, id && after >= 0 ? from : NULL, &kvs, e) < 0)
		return -1;
	json_array_foreach(kvs, i, kv) {
		const char *v = json_string_value(json_array_get(kv, 1));
		snprintf(name, sizeof name, "etcd %s", json_string_value(json_array_get(kv, 0)));
		if ((rc = fn(arg, name, v, strlen(v))) < 0)
			break;
	}
	json_decref(kvs);
	return rc;
}

static int shared_snap_get(struct lease_store *s, const char *hex, json_t **rec,
			   struct common_err *e)
{
	char key[KEY_MAX];

	snprintf(key, sizeof key, "snapshot/%s", hex);
	return get_json(s, key, rec, e);
}

static int shared_snap_put(struct lease_store *s, const char *hex, const json_t *rec,
			   struct common_err *e)
{
	char key[KEY_MAX];
	json_t *cmp, *puts;
	int64_t rev;
	int done;

	snprintf(key, sizeof key, "snapshot/%s", hex);
	cmp = json_pack("[[s, i]]", key, 0);
	puts = json_pack("[o]", put_json(key, rec));
	done = lease_etcd_txn(s->etcd, cmp, puts, &rev, NULL, e);
	json_decref(cmp);
	json_decref(puts);
	return done;
}

static int shared_snap_del(struct lease_store *s, const char *hex, struct common_err *e)
{
	char key[KEY_MAX];
	json_t *cmp = json_array(), *puts;
	int64_t rev;
	int done;

	snprintf(key, sizeof key, "snapshot/%s", hex);
	puts = json_pack("[[s, n]]", key);
	done = lease_etcd_txn(s->etcd, cmp, puts, &rev, NULL, e);
	json_decref(cmp);
	json_decref(puts);
	return done < 0 ? -1 : 0;
}

static int shared_snap_all(struct lease_store *s, json_t **recs, struct common_err *e)
{
	json_t *kvs, *kv, *r;
	size_t i;

	*recs = NULL;
	if (lease_etcd_range(s->etcd, "snapshot/", NULL, &kvs, e) < 0)
		return -1;
	*recs = json_array();
	json_array_foreach(kvs, i, kv) {
		const char *k = json_string_value(json_array_get(kv, 0));
		const char *v = json_string_value(json_array_get(kv, 1));
		if (!(r = common_json_load(v, strlen(v), k, e))) {
			json_decref(kvs);
			json_decref(*recs);
			*recs = NULL;
			return -1;
		}
		json_array_append_new(*recs, r);
	}
	json_decref(kvs);
	return 0;
}

/* Put key = val unless key exists. A read first: opening a store is common and a
 * write would cost a round of consensus each time. */
static int ensure(struct lease_store *s, const char *key, const json_t *val, struct common_err *e)
{
	json_t *cmp = json_pack("[[s, i]]", key, 0), *puts = json_pack("[o]", put_json(key, val));
	char *have;
	int64_t rev;
	int r = lease_etcd_get(s->etcd, key, &have, &rev, e);

	free(have);
	if (r == 0 && rev == 0)
		r = lease_etcd_txn(s->etcd, cmp, puts, &rev, NULL, e);
	json_decref(cmp);
	json_decref(puts);
	return r < 0 ? -1 : 0;
}

/* The host key registered, the clock created. */
static int shared_open(struct lease_store *s, struct common_err *e)
{
	char pub[65], key[KEY_MAX], host[256] = "";
	json_t *v;
	int r;

	s->signers = json_object();
	common_hex(s->key.pub, 32, pub);
	snprintf(key, sizeof key, "keys/%s", pub);
	gethostname(host, sizeof host - 1);
	/* the host's public key, so that every host verifies what this one signs */
	v = json_pack("{s:s, s:s, s:I}", "key", pub, "host", host, "registered_ms",
		      (json_int_t)common_now_ms());
	r = ensure(s, key, v, e);
	json_decref(v);
	if (r < 0)
		return -1;
	json_object_set_new(s->signers, pub, json_true());
	v = json_pack("{s:s, s:I, s:I, s:I}", "mode", "wall", "epoch_ms", (json_int_t)common_now_ms(),
		      "batch_ms", (json_int_t)1000, "batch", (json_int_t)0);
	r = ensure(s, "clock", v, e);
	json_decref(v);
	return r;
}

/* 1 when pubhex is a key registered in the store (receipts name their signer) */
static int signer_known(struct lease_store *s, const char *pubhex, struct common_err *e)
{
	char key[KEY_MAX], *val;
	int64_t rev;

	if (json_object_get(s->signers, pubhex))
		return 1;
	snprintf(key, sizeof key, "keys/%s", pubhex);
	if (lease_etcd_get(s->etcd, key, &val, &rev, e) < 0)
		return -1;
	free(val);
	if (rev == 0)
		return 0;
	json_object_set_new(s->signers, pubhex, json_true());
	return 1;
}

/* PREFIX/principals/NAME: {"key", "principal"}. Created once and never changed: a
 * key read stands for this process (s->fcache) until the back end forgets. */
static int principal_get(struct lease_store *s, const char *name, char **key, char **where,
			 struct common_err *e)
{
	char *p = common_xasprintf("principals/%s", name), *buf = NULL;
	const char *known = json_string_value(json_object_get(s->fcache, p));
	int64_t rev = 0;
	json_t *v;
	int r;

	*key = NULL;
	*where = p;
	if (known) {
		*key = common_xstrdup(known);
		return 1;
	}
	if ((r = lease_etcd_get(s->etcd, p, &buf, &rev, e)) < 0 || !buf) {
		free(buf);
		return r < 0 ? r : 0;
	}
	v = common_json_load(buf, strlen(buf), p, e);
	if (lease_jstr(v, "key"))
		*key = common_xstrdup(lease_jstr(v, "key"));
	if (*key && lease_hex_valid(*key, 64)) {
		if (!s->fcache)
			s->fcache = json_object();
		json_object_set_new(s->fcache, p, json_string(*key));
	}
	json_decref(v);
	free(buf);
	return 1;
}

static int principal_put(struct lease_store *s, const char *name, const char *hex,
			 struct common_err *e)
{
	json_t *v = json_pack("{s:s, s:s}", "key", hex, "principal", name);
	char *val = common_json_canonical(v), *p = common_xasprintf("principals/%s", name);
	json_t *cmp = json_pack("[[s, i]]", p, 0), *puts = json_pack("[[s, s]]", p, val);
	int64_t rev;
	/* not applied: another caller recorded one first, and that one stands */
	int r = lease_etcd_txn(s->etcd, cmp, puts, &rev, NULL, e);

	json_decref(cmp);
	json_decref(puts);
	json_decref(v);
	free(val);
	free(p);
	return r < 0 ? -1 : 0;
}

static void shared_forget(struct lease_store *s)
{
	json_object_clear(s->fcache);
}

static void shared_close(struct lease_store *s)
{
	json_decref(s->fcache);
	s->fcache = NULL;
	lease_etcd_close(s->etcd);
}

static int unreachable(const struct lease_store *s)
{
	return lease_etcd_unreachable(s->etcd);
}

const struct lease_backend lease_etcd_backend = {
	.pair_read = shared_pair_read,
	.pairs_prefetch = shared_prefetch,
	.creates_checked = 1,
	.slots_read = shared_slots_read,
	.commit = shared_commit,
	.clock_read = shared_clock_read,
	.clock_write = shared_clock_write,
	.ids = shared_ids,
	.receipts = shared_receipts,
	.snap_get = shared_snap_get,
	.snap_put = shared_snap_put,
	.snap_del = shared_snap_del,
	.snap_all = shared_snap_all,
	.open = shared_open,
	.close = shared_close,
	.forget = shared_forget,
	.signer_known = signer_known,
	.principal_get = principal_get,
	.principal_put = principal_put,
	.unreachable = unreachable,
};
