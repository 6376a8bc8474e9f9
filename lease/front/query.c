/* Reading the store: list, log, and verify (every chain, signature, state, slot). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

static void ids_free(char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

/* One lease of a listing as its deadline has decided (SPEC §4.3): an overdue lease
 * is expired, with its receipt, before it is listed. */
static int list_one(struct lease_store *s, const char *id, uint64_t batch, json_t **rec,
		    struct common_err *e)
{
	json_t *pair;
	enum lease_state st;

	*rec = NULL;
	if (lease_pair_read(s, id, &pair, e) < 0)
		return -1;
	if (!pair)
		return 0;
	*rec = json_incref(json_object_get(pair, "lease"));
	json_decref(pair);
	lease_state_parse(lease_jstr(*rec, "state"), &st);
	if (lease_state_live(st) && batch >= (uint64_t)lease_jint(*rec, "deadline") &&
	    lease_expire_overdue(s, rec, batch, e) < 0) {
		json_decref(*rec);
		*rec = NULL;
		return -1;
	}
	return 0;
}

static int list_once(struct lease_store *s, const char *principal, int state, json_t **out,
		     struct common_err *e)
{
	char **ids = NULL;
	size_t n = 0;
	uint64_t batch;
	json_t *arr = json_array(), *rec;
	int rc = -1;

	if (lease_lock(s, e) < 0)
		goto out;
	if (lease_recover(s, e) < 0 || lease_store_batch(s, &batch, e) < 0 ||
	    s->be->ids(s, &ids, &n, e) < 0)
		goto unlock;
	for (size_t i = 0; i < n; i++) {
		enum lease_state st;
		if (list_one(s, ids[i], batch, &rec, e) < 0)
			goto unlock;
		if (!rec)
			continue;
		lease_state_parse(lease_jstr(rec, "state"), &st);
		if ((!principal || strcmp(principal, lease_jstr(rec, "principal")) == 0) &&
		    (state < 0 || (int)st == state))
			json_array_append(arr, rec);
		json_decref(rec);
	}
	*out = json_incref(arr);
	rc = 0;
unlock:
	lease_unlock(s);
out:
	ids_free(ids, n);
	json_decref(arr);
	return rc;
}

int lease_list(struct lease_store *s, const char *principal, int state, json_t **out,
	       struct common_err *e)
{
	unsigned attempt = 0;
	int rc;

	while ((rc = list_once(s, principal, state, out, e)) < 0 && lease_retry(s, &attempt))
		;
	return rc;
}

struct log_ctx {
	const char *id;
	json_t *out;
	struct common_err *e;
	int64_t after;
};

static int log_line(void *arg, const char *name, const char *line, size_t len)
{
	struct log_ctx *c = arg;
	json_t *r;

	if (len > LEASE_LINE_MAX)
		return common_errf(c->e, name, "line longer than %u bytes", LEASE_LINE_MAX);
	r = common_json_load(line, len, name, c->e);
	if (!r)
		return -1;
	if (json_is_object(r) && lease_jstr(r, "lease") && strcmp(lease_jstr(r, "lease"), c->id) == 0 &&
	    lease_jint(r, "seq") > c->after)
		json_array_append(c->out, r);
	json_decref(r);
	return 0;
}

int lease_log(struct lease_store *s, const char *id, json_t **receipts, struct common_err *e)
{
	struct log_ctx c = { id, json_array(), e, -1 };
	json_t *pair = NULL;
	int rc = -1;

	if (!lease_id_valid(id)) {
		json_decref(c.out);
		return common_errf(e, id, "not a lease id (expected L followed by 16 hex digits)");
	}
	if (lease_lock(s, e) < 0) {
		json_decref(c.out);
		return -1;
	}
	if (lease_recover(s, e) < 0 || s->be->receipts(s, id, -1, log_line, &c, e) < 0)
		goto out;
	if (json_array_size(c.out) == 0) {
		if (lease_pair_read(s, id, &pair, e) == 0)
			common_errf(e, id, "no such lease in store %s", s->name);
		goto out;
	}
	*receipts = json_incref(c.out);
	rc = 0;
out:
	json_decref(pair);
	json_decref(c.out);
	lease_unlock(s);
	return rc;
}

#define SINCE_CHUNK (64u << 10)

/* One journal line met going backwards: kept when it is id's with seq > after;
 * 1 once the oldest wanted (or an older) receipt of id is reached. */
static int since_line(const char *line, size_t len, const char *pat, const char *id,
		      int64_t after, json_t *out)
{
	json_t *r;
	int64_t seq;

	/* journal lines are canonical: a receipt of id names it exactly so */
	if (!memmem(line, len, pat, strlen(pat)))
		return 0;
	r = common_json_load(line, len, "journal.jsonl", NULL);
	if (!json_is_object(r) || !lease_jstr(r, "lease") || strcmp(lease_jstr(r, "lease"), id) != 0) {
		json_decref(r);
		return 0;
	}
	seq = json_integer_value(json_object_get(r, "seq"));
	if (seq > after)
		json_array_insert(out, 0, r);
	json_decref(r);
	return seq <= after + 1;
}

/* With etcd a lease's receipts are keyed by seq: the range starts at after + 1. */
static int shared_log_since(struct lease_store *s, const char *id, int64_t after,
			    json_t **receipts, struct common_err *e)
{
	struct log_ctx c = { id, json_array(), e, after };
	json_t *pair = NULL;
	int rc = s->be->receipts(s, id, after, log_line, &c, e);

	if (rc == 0 && json_array_size(c.out) == 0 && after < 0) {
		rc = -1;
		if (lease_pair_read(s, id, &pair, e) == 0)
			common_errf(e, id, "no such lease in store %s", s->name);
	}
	if (rc == 0)
		*receipts = json_incref(c.out);
	json_decref(pair);
	json_decref(c.out);
	return rc;
}

int lease_log_since(struct lease_store *s, const char *id, int64_t after, json_t **receipts,
		    struct common_err *e)
{
	char *p = NULL, *buf = NULL, *nb, pat[64];
	json_t *out = json_array(), *pair = NULL;
	size_t len = 0, chunk;
	struct stat st;
	off_t off;
	int fd = -1, rc = -1, done = 0;

	if (!lease_id_valid(id)) {
		json_decref(out);
		return common_errf(e, id, "not a lease id (expected L followed by 16 hex digits)");
	}
	snprintf(pat, sizeof pat, "\"lease\":\"%s\"", id);
	if (s->etcd)
		return shared_log_since(s, id, after, receipts, e);
	if (lease_lock(s, e) < 0) {
		json_decref(out);
		return -1;
	}
	if (lease_recover(s, e) < 0)
		goto out;
	p = lease_path(s, "journal.jsonl");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		common_errno(e, errno, "%s", p);
		goto out;
	}
	if (fd >= 0 && fstat(fd, &st) < 0) {
		common_errno(e, errno, "%s", p);
		goto out;
	}
	off = fd >= 0 ? st.st_size : 0;
	while (!done) {
		while (len > 0 && !done) {
			size_t end = buf[len - 1] == '\n' ? len - 1 : len, start = end;
			while (start > 0 && buf[start - 1] != '\n')
				start--;
			if (start == 0 && off > 0)
				break;
			if (end - start > LEASE_LINE_MAX) {
				common_errf(e, p, "a line longer than %u bytes", LEASE_LINE_MAX);
				goto out;
			}
			done = since_line(buf + start, end - start, pat, id, after, out);
			len = start;
		}
		if (done || off == 0)
			break;
		if (len > LEASE_LINE_MAX + 1) {
			common_errf(e, p, "a line longer than %u bytes", LEASE_LINE_MAX);
			goto out;
		}
		chunk = off < (off_t)SINCE_CHUNK ? (size_t)off : SINCE_CHUNK;
		nb = common_xmalloc(chunk + len);
		if (pread(fd, nb, chunk, off - (off_t)chunk) != (ssize_t)chunk) {
			free(nb);
			common_errno(e, errno ? errno : EIO, "%s: reading", p);
			goto out;
		}
		if (len)
			memcpy(nb + chunk, buf, len);
		free(buf);
		buf = nb;
		len += chunk;
		off -= (off_t)chunk;
	}
	if (json_array_size(out) == 0 && after < 0) {
		if (lease_pair_read(s, id, &pair, e) == 0)
			common_errf(e, id, "no such lease in store %s", s->name);
		goto out;
	}
	*receipts = json_incref(out);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(p);
	json_decref(pair);
	json_decref(out);
	lease_unlock(s);
	return rc;
}

struct verify_ctx {
	struct lease_store *s;
	const char *only;
	json_t *chains;   /* id -> {"rec", "last", "broken"} */
	json_t *problems;
	size_t receipts;
};

static void problem(struct verify_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct verify_ctx *c, const char *fmt, ...)
{
	char buf[1600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (json_array_size(c->problems) < 1000)
		json_array_append_new(c->problems, json_string(buf));
}

static int verify_line(void *arg, const char *name, const char *line, size_t len)
{
	struct verify_ctx *c = arg;
	struct common_err e = { "", "" };
	json_t *r, *ch, *next;
	const char *id;

	if (len > LEASE_LINE_MAX) {
		problem(c, "%s: line longer than %u bytes", name, LEASE_LINE_MAX);
		return 0;
	}
	r = common_json_load(line, len, name, &e);
	if (!r) {
		problem(c, "%s: %s", e.what, e.why);
		return 0;
	}
	id = lease_jstr(r, "lease");
	if (c->only && (!id || strcmp(id, c->only) != 0)) {
		json_decref(r);
		return 0;
	}
	c->receipts++;
	if (lease_receipt_verify(c->s, r, name, &e) < 0) {
		problem(c, "%s: %s", e.what, e.why);
		if (id && lease_id_valid(id)) {
			ch = json_object_get(c->chains, id);
			if (!ch)
				json_object_set_new(c->chains, id, ch = json_object());
			json_object_set_new(ch, "broken", json_true());
		}
		json_decref(r);
		return 0;
	}
	ch = json_object_get(c->chains, id);
	if (!ch)
		json_object_set_new(c->chains, id, ch = json_object());
	if (json_object_get(ch, "broken")) {
		json_decref(r);
		return 0;
	}
	if (json_object_get(r, "renter_sig") &&
	    lease_renter_check(c->s, json_object_get(ch, "rec"), r, &e) < 0)
		problem(c, "%s: %s: %s", name, e.what, e.why);
	if (lease_fold(json_object_get(ch, "rec"), r, &next, &e) < 0) {
		problem(c, "%s: %s: %s", name, e.what, e.why);
		json_object_set_new(ch, "broken", json_true());
	} else {
		json_object_set_new(ch, "rec", next);
		json_object_set(ch, "last", r);
	}
	json_decref(r);
	return 0;
}

/* How verify names a lease's record in the store. */
static const char *rec_name(const struct verify_ctx *c, const char *id, char buf[64])
{
	snprintf(buf, 64, c->s->etcd ? "etcd lease/%s" : "leases/%s.json", id);
	return buf;
}

static void verify_records(struct verify_ctx *c, char **ids, size_t n)
{
	char nb[64];

	struct common_err e = { "", "" };

	for (size_t i = 0; i < n; i++) {
		json_t *pair, *ch, *rec;
		char *ns;
		if (c->only && strcmp(ids[i], c->only) != 0)
			continue;
		if (lease_pair_read(c->s, ids[i], &pair, &e) < 0) {
			problem(c, "%s: %s", e.what, e.why);
			continue;
		}
		ch = json_object_get(c->chains, ids[i]);
		rec = json_object_get(ch, "rec");
		if (!ch) {
			problem(c, "%s: no receipts for this lease in the store", rec_name(c, ids[i], nb));
		} else if (json_object_get(ch, "broken")) {
			problem(c, "%s: its receipt chain is broken (see above)", rec_name(c, ids[i], nb));
		} else if (!lease_json_same(json_object_get(pair, "lease"), rec)) {
			problem(c, "%s: record disagrees with its receipt chain (chain says state %s, seq %lld)",
				rec_name(c, ids[i], nb), lease_jstr(rec, "state"), (long long)lease_jint(rec, "seq"));
		} else if (!lease_json_same(json_object_get(pair, "receipt"), json_object_get(ch, "last"))) {
			problem(c, "%s: head receipt is not the last receipt of its chain", rec_name(c, ids[i], nb));
		}
		if (ch)
			json_object_set_new(ch, "seen", json_true());
		if (rec && strcmp(lease_jstr(rec, "state"), "Destroyed") == 0) {
			ns = lease_ns_dir(c->s, ids[i]);
			if (access(ns, F_OK) == 0)
				problem(c, "ns/%s: namespace of a Destroyed lease still exists", ids[i]);
			free(ns);
		}
		json_decref(pair);
	}
}

static void verify_slots(struct verify_ctx *c)
{
	struct common_err e = { "", "" };
	json_t *live = json_object(), *slots, *ch, *v;
	const char *id, *pr;

	json_object_foreach(c->chains, id, ch) {
		json_t *rec = json_object_get(ch, "rec"), *l;
		enum lease_state st;
		if (!rec || lease_state_parse(lease_jstr(rec, "state"), &st) < 0 || !lease_state_live(st))
			continue;
		pr = lease_jstr(rec, "principal");
		if (!(l = json_object_get(live, pr)))
			json_object_set_new(live, pr, l = json_array());
		json_array_append_new(l, json_string(id));
	}
	json_object_foreach(live, pr, v)
		if (json_array_size(v) > LEASE_PRINCIPAL_SLOTS)
			problem(c, "principal %s holds %zu live leases (more than %d)", pr,
				json_array_size(v), LEASE_PRINCIPAL_SLOTS);
	if (lease_slots_read(c->s, NULL, &slots, &e) < 0) {
		problem(c, "%s: %s", e.what, e.why);
		json_decref(live);
		return;
	}
	json_object_foreach(live, pr, v) {
		json_t *have = json_object_get(slots, pr);
		if (json_array_size(have) != json_array_size(v))
			problem(c, "slots.json: principal %s has %zu slots recorded, %zu live leases",
				pr, json_array_size(have), json_array_size(v));
	}
	json_object_foreach(slots, pr, v)
		if (!json_object_get(live, pr) && json_array_size(v) > 0)
			problem(c, "slots.json: principal %s has %zu slots recorded, 0 live leases", pr,
				json_array_size(v));
	json_decref(slots);
	json_decref(live);
}

/* A one-shot lease of this host that no run holds and is not destroyed: its run
 * died (before or after it claimed the lease). */
static void verify_one_shots(struct verify_ctx *c)
{
	const char *id;
	json_t *ch;

	json_object_foreach(c->chains, id, ch) {
		json_t *rec = json_object_get(ch, "rec");
		if (rec && lease_ephemeral_here(c->s, rec) &&
		    strcmp(lease_jstr(rec, "state"), "Destroyed") != 0 && !lease_run_held(c->s, id))
			problem(c, "lease %s: its run died without closing it (a one-shot lease left "
				"%s); sbx-lease recover closes and destroys it", id,
				lease_jstr(rec, "state"));
	}
}

/* A run that died holding its lease: reported until a store write closes it. */
static void verify_dead_runs(struct verify_ctx *c)
{
	struct common_err e;
	char **ids;
	size_t n;

	if (lease_run_orphans(c->s, &ids, &n, &e) < 0) {
		problem(c, "run/: %s", e.why);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		static const char *from[] = { "its last observation (the bound in its claim is "
					      "torn or damaged: ignored)", "its last observation",
					      "the bound its run kept" };
		uint64_t b[LEASE_DIM_COUNT];
		json_t *pair = NULL;
		if (lease_pair_read(c->s, ids[i], &pair, &e) == 0 && pair &&
		    !strcmp(lease_jstr(json_object_get(pair, "lease"), "state"), "Active") &&
		    !lease_ephemeral_here(c->s, json_object_get(pair, "lease")))
			problem(c, "lease %s: its run died without closing it; sbx-lease recover "
				"(or the next store write) settles it from %s", ids[i],
				from[lease_run_bound_read(c->s, ids[i], b) + 1]);
		json_decref(pair);
		free(ids[i]);
	}
	free(ids);
	verify_one_shots(c);
}

int lease_verify(struct lease_store *s, const char *id, json_t **report, struct common_err *e)
{
	struct verify_ctx c = { s, id, json_object(), json_array(), 0 };
	const char *k;
	json_t *ch;
	char **ids = NULL;
	size_t n = 0;
	int rc = -1;

	if (id && !lease_id_valid(id)) {
		json_decref(c.chains);
		json_decref(c.problems);
		return common_errf(e, id, "not a lease id (expected L followed by 16 hex digits)");
	}
	if (lease_lock(s, e) < 0)
		goto out;
	if (s->be->forget) /* verify reads what is stored, not what this process remembers */
		s->be->forget(s);
	if (lease_recover(s, e) < 0 || s->be->receipts(s, id, -1, verify_line, &c, e) < 0 ||
	    s->be->ids(s, &ids, &n, e) < 0)
		goto unlock;
	verify_records(&c, ids, n);
	json_object_foreach(c.chains, k, ch)
		if (!json_object_get(ch, "seen"))
			problem(&c, "journal.jsonl: lease %s has receipts but no record file", k);
	if (!id) {
		verify_slots(&c);
		verify_dead_runs(&c);
	}
	else if (n == 0 || !json_object_get(c.chains, id))
		if (!json_object_get(c.chains, id)) {
			common_errf(e, id, "no such lease in store %s", s->name);
			goto unlock;
		}
	*report = json_pack("{s:b, s:s, s:I, s:I, s:O}", "ok", json_array_size(c.problems) == 0,
			    "store", s->name, "leases", (json_int_t)json_object_size(c.chains),
			    "receipts", (json_int_t)c.receipts, "problems", c.problems);
	rc = 0;
unlock:
	lease_unlock(s);
out:
	ids_free(ids, n);
	json_decref(c.chains);
	json_decref(c.problems);
	return rc;
}
