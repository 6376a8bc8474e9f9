/* Transitions: request and every edge of SPEC §3.1, one locked, ordered write path. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

#define DEFAULT_LIFETIME 3600u

/* Commit sealed receipts of one lease (rec folds them all) to the store's back end. */
static int commit(struct lease_store *s, const json_t *rs, json_t *rec, json_t **out,
		  struct common_err *e)
{
	if (s->be->commit(s, rs, rec, e) < 0)
		return -1;
	*out = json_pack("{s:O, s:O}", "lease", rec, "receipt",
			 json_array_get(rs, json_array_size(rs) - 1));
	return 0;
}

static json_t *receipt_new(const char *id, int64_t seq, enum lease_edge edge, const char *from,
			   enum lease_state to, uint64_t batch, const char *prev)
{
	return json_pack("{s:i, s:s, s:I, s:s, s:s?, s:s, s:I, s:s?}", "v", 1, "lease", id,
			 "seq", (json_int_t)seq, "edge", lease_edge_name(edge), "from", from,
			 "to", lease_state_name(to), "batch", (json_int_t)batch, "prev", prev);
}

/* Seal r and fold it into *rec (replaced), keeping r in rs. Consumes r. */
static int seal_fold(struct lease_store *s, json_t **rec, json_t *r, json_t *rs,
		     struct common_err *e)
{
	json_t *next = NULL;

	if (lease_receipt_seal(s, r, e) < 0 || lease_fold_sealed(*rec, r, &next, e) < 0) {
		json_decref(r);
		return -1;
	}
	json_array_append_new(rs, r);
	json_decref(*rec);
	*rec = next;
	return 0;
}

static char *current_user(void)
{
	struct passwd *pw = getpwuid(geteuid());

	if (pw && lease_name_valid(pw->pw_name))
		return common_xstrdup(pw->pw_name);
	return common_xasprintf("uid%u", (unsigned)geteuid());
}

static int new_id(struct lease_store *s, char id[LEASE_ID_LEN + 1], struct common_err *e)
{
	uint8_t rnd[8];
	json_t *pair;

	for (int tries = 0; tries < 64; tries++) {
		if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
			return common_errno(e, errno, "getrandom");
		id[0] = 'L';
		common_hex(rnd, sizeof rnd, id + 1);
		/* Records are never deleted (Destroyed stays), so an id seen once stays taken;
		 * etcd's commit checks that the record is still absent (a taken id loses
		 * the comparison and the request runs again with another). */
		if (s->be->creates_checked)
			return 0;
		if (lease_pair_read(s, id, &pair, e) < 0)
			return -1;
		if (!pair)
			return 0;
		json_decref(pair);
	}
	return common_errf(e, "lease id", "no unused id after 64 tries");
}

/* A request's bounds, checked and hashed before the store is locked. */
struct prepared {
	char *principal, *path, *script;
	const char *host;
	char hash[COMMON_SHA256_HEX], script_hash[COMMON_SHA256_HEX];
	uint64_t lifetime;
	json_t *limits, *fees;
};

static void prepared_free(struct prepared *p)
{
	free(p->principal);
	free(p->path);
	free(p->script);
	json_decref(p->limits);
	json_decref(p->fees);
}

static int prepare(struct lease_store *s, const struct lease_request *req, struct prepared *p,
		   struct common_err *e)
{
	p->host = req->host_program ? req->host_program : "sbx";
	p->lifetime = req->lifetime ? req->lifetime : DEFAULT_LIFETIME;
	p->limits = json_object();
	p->fees = json_object();
	p->path = NULL;
	p->principal = req->principal ? common_xstrdup(req->principal) : current_user();
	if (!lease_name_valid(p->principal))
		return common_errf(e, "--principal", "\"%s\" is not a plain name (1-64 of A-Z a-z 0-9 . _ - @)",
				   p->principal);
	if (!lease_name_valid(p->host))
		return common_errf(e, "--host-program", "\"%s\" is not a plain name (1-64 of A-Z a-z 0-9 . _ - @)",
				   p->host);
	if (p->lifetime > LEASE_LIFETIME_CEILING)
		return common_errf(e, "--lifetime", "%llu exceeds the ceiling %u",
				   (unsigned long long)p->lifetime, LEASE_LIFETIME_CEILING);
	if (req->escrow > LEASE_AMOUNT_MAX)
		return common_errf(e, "--escrow", "%llu is too large", (unsigned long long)req->escrow);
	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		uint64_t ceil = lease_dim_ceiling((enum lease_dim)d);
		uint64_t v = req->has_limit[d] ? req->limits[d] : ceil;
		if (v > ceil || req->fees[d] > LEASE_FEE_MAX)
			return common_errf(e, "--limits", "%s: %llu exceeds the ceiling %llu",
					   lease_dim_name((enum lease_dim)d), (unsigned long long)v,
					   (unsigned long long)ceil);
		json_object_set_new(p->limits, lease_dim_name((enum lease_dim)d), json_integer((json_int_t)v));
		json_object_set_new(p->fees, lease_dim_name((enum lease_dim)d),
				    json_integer((json_int_t)req->fees[d]));
	}
	if (!req->image)
		return common_errf(e, "request", "--image is required");
	const char *image = req->image, *script = req->script;
	char interp[LEASE_INTERP_MAX], arg[LEASE_INTERP_MAX];
	if (!script && !req->image_sha256) {
		/* --image of a #! script: its interpreter is the image, the script beside it */
		int fd = open(image, O_RDONLY | O_CLOEXEC), r;
		if (fd < 0)
			return common_errno(e, errno, "image %s", image);
		r = lease_image_interp(fd, image, interp, arg, e);
		close(fd);
		if (r < 0)
			return -1;
		if (r == 1) {
			script = image;
			image = interp;
		}
	}
	if (script && (p->script = realpath(script, NULL)) == NULL)
		return common_errno(e, errno, "%s", script);
	if (script && req->script_sha256) {
		snprintf(p->script_hash, sizeof p->script_hash, "%s", req->script_sha256);
	} else if (script) {
		uint8_t d[COMMON_SHA256_LEN];
		if (common_sha256_file(p->script, d, e) < 0)
			return -1;
		common_hex(d, sizeof d, p->script_hash);
	}
	if (req->image_sha256) {
		snprintf(p->hash, sizeof p->hash, "%s", req->image_sha256);
	} else if (lease_image_check_cached(s, image, p->hash, e) < 0) {
		if (script)
			common_err_context(e, "interpreter of %s", script);
		return -1;
	}
	p->path = realpath(image, NULL);
	if (!p->path)
		return common_errno(e, errno, "%s", image);
	return 0;
}

/* A chain's next link names a lease of the same principal that exists. */
static int prev_check(struct lease_store *s, const char *prev, const char *principal,
		      struct common_err *e)
{
	json_t *pair = NULL;
	if (!lease_id_valid(prev))
		return common_errf(e, "request", "prev \"%.40s\" is not a lease id", prev);
	if (lease_pair_read(s, prev, &pair, e) < 0)
		return -1;
	const char *who = lease_jstr(json_object_get(pair, "lease"), "principal");
	int ok = who && strcmp(who, principal) == 0;
	if (!pair)
		common_errf(e, "request", "prev %s: no such lease in store %s", prev, s->name);
	else if (!ok)
		common_errf(e, "request", "prev %s is %s's lease, not %s's", prev, who ? who : "?",
			    principal);
	json_decref(pair);
	return pair && ok ? 0 : -1;
}

/* The request receipt (under the lock): a slot, a fresh id. */
static int request_receipt(struct lease_store *s, const struct lease_request *req,
			   const struct prepared *p, uint64_t batch, json_t **r, struct common_err *e)
{
	char id[LEASE_ID_LEN + 1], *ns;
	json_t *slots, *q;
	int full;

	if (lease_slots_read(s, p->principal, &slots, e) < 0)
		return -1;
	full = json_array_size(json_object_get(slots, p->principal)) >= LEASE_PRINCIPAL_SLOTS;
	json_decref(slots);
	if (full)
		return common_errf(e, "request refused",
				   "principal %s already holds %d live leases (Requested, Funded, Active or Settling), the maximum",
				   p->principal, LEASE_PRINCIPAL_SLOTS);
	if (new_id(s, id, e) < 0)
		return -1;
	ns = common_xasprintf("%s/%s", p->host, id);
	q = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:O, s:I, s:I, s:I, s:O}",
		      "principal", p->principal, "host_program", p->host, "image", "path", p->path,
		      "sha256", p->hash, "namespace", ns, "limits", p->limits,
		      "lifetime", (json_int_t)p->lifetime, "deadline", (json_int_t)(batch + p->lifetime),
		      "escrow", (json_int_t)req->escrow, "fees", p->fees);
	free(ns);
	if (q && p->script)
		json_object_set_new(json_object_get(q, "image"), "script",
				    json_pack("{s:s, s:s}", "path", p->script, "sha256", p->script_hash));
	if (!q || (p->script && !json_object_get(json_object_get(q, "image"), "script")))
		return common_errf(e, "request", "image path is not valid UTF-8");
	if (req->ephemeral) { /* the host that runs it, the one that may recover it */
		uint8_t pub[32];
		char hex[65];
		lease_store_pubkey(s, pub);
		common_hex(pub, sizeof pub, hex);
		json_object_set_new(q, "ephemeral", json_string(hex));
	}
	if (req->prev && prev_check(s, req->prev, p->principal, e) < 0) {
		json_decref(q);
		return -1;
	}
	if (req->prev)
		json_object_set_new(q, "prev", json_string(req->prev));
	*r = receipt_new(id, 0, LEASE_EDGE_REQUEST, NULL, LEASE_REQUESTED, batch, NULL);
	json_object_set_new(*r, "request", q);
	return 0;
}

/* Load a lease's {"lease","receipt"} pair or explain that there is none. */
static int load_pair(struct lease_store *s, const char *id, json_t **pair, struct common_err *e)
{
	if (!lease_id_valid(id))
		return common_errf(e, id, "not a lease id (expected L followed by 16 hex digits)");
	if (lease_pair_read(s, id, pair, e) < 0)
		return -1;
	if (!*pair)
		return common_errf(e, id, "no such lease in store %s", s->name);
	return 0;
}

/* Check the caller's evidence: our signature, this lease, and the head (no replays). */
static int check_evidence(struct lease_store *s, const json_t *pair, const json_t *ev,
			  struct common_err *e)
{
	const json_t *rec = json_object_get(pair, "lease"), *head = json_object_get(pair, "receipt");
	const char *id = lease_jstr(rec, "id"), *evl, *sig = lease_jstr(ev, "sig");

	if (!ev)
		return common_errf(e, "evidence", "missing (pass the lease's head receipt with --evidence)");
	/* Fastest: the very head receipt this store keeps, field for field (the caller
	 * gave back what the last transition returned): nothing to digest again. */
	if (head && json_equal((json_t *)ev, (json_t *)head) && id && lease_jstr(ev, "lease") &&
	    strcmp(lease_jstr(ev, "lease"), id) == 0 && lease_jstr(ev, "digest") &&
	    lease_jstr(rec, "head") && strcmp(lease_jstr(ev, "digest"), lease_jstr(rec, "head")) == 0)
		return 0;
	/* Fast path: contents hash to the head digest and the signature is the very one
	 * this store made for the head; otherwise the full Ed25519 check says what is wrong. */
	if (lease_receipt_check(ev, "evidence", e) < 0)
		return -1;
	if (!(sig && lease_jstr(head, "sig") && strcmp(sig, lease_jstr(head, "sig")) == 0 &&
	      strcmp(lease_jstr(ev, "digest"), lease_jstr(rec, "head")) == 0) &&
	    lease_receipt_verify(s, ev, "evidence", e) < 0)
		return -1;
	evl = lease_jstr(ev, "lease");
	if (strcmp(evl, id) != 0)
		return common_errf(e, "evidence", "receipt is for lease %s, not %s", evl, id);
	if (strcmp(lease_jstr(ev, "digest"), lease_jstr(rec, "head")) != 0)
		return common_errf(e, "evidence",
				   "replayed: receipt seq %lld (%s) of lease %s is not its head (seq %lld)",
				   (long long)lease_jint(ev, "seq"), lease_jstr(ev, "edge"), id,
				   (long long)lease_jint(rec, "seq"));
	return 0;
}

static int refuse_edge(struct common_err *e, enum lease_edge ed, const json_t *rec)
{
	char what[128];

	snprintf(what, sizeof what, "cannot %s lease %s", lease_edge_name(ed), lease_jstr(rec, "id"));
	return common_errf(e, what, "state is %s, %s needs %s%s", lease_jstr(rec, "state"),
			   lease_edge_name(ed), lease_edge_needs(ed),
			   strcmp(lease_jstr(rec, "state"), "Destroyed") == 0 ?
			   " (Destroyed is terminal)" : "");
}

/* Why the lease must close now, or NULL: the first bound exceeded (SPEC §4.3). */
static const char *closure(const json_t *rec, const uint64_t u[LEASE_DIM_COUNT], uint64_t cost,
			   uint64_t batch)
{
	json_t *lim = json_object_get(rec, "limits");
	uint64_t snap = (uint64_t)lease_jint(rec, "snapshot_bytes");

	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		uint64_t l = (uint64_t)lease_jint(lim, lease_dim_name((enum lease_dim)d));
		uint64_t v = u[d] + (d == LEASE_DIM_NAMESPACE_BYTES ? snap : 0);
		if (v > l)
			return lease_dim_name((enum lease_dim)d);
	}
	if (batch >= (uint64_t)lease_jint(rec, "deadline"))
		return "lifetime";
	if (cost > (uint64_t)lease_jint(rec, "escrow"))
		return "escrow";
	return NULL;
}

/* An observation: merge, check monotonic, and close automatically when a bound is
 * first exceeded. *r NULL when the observation changes nothing (no receipt). */
static int observe_receipt(const json_t *rec, const json_t *uobj, uint64_t batch,
			   int force, json_t **r, const char **closed, struct common_err *e)
{
	uint64_t old[LEASE_DIM_COUNT], now[LEASE_DIM_COUNT];
	const char *id = lease_jstr(rec, "id"), *why;
	json_t *uj;
	uint64_t cost;
	int changed = 0;
	void *it;

	*r = NULL;
	*closed = NULL;
	lease_usage_get(json_object_get(rec, "usage"), old);
	memcpy(now, old, sizeof now);
	if (!json_is_object(uobj))
		return common_errf(e, "observe", "usage must be an object of dimension totals");
	for (it = json_object_iter((json_t *)uobj); it; it = json_object_iter_next((json_t *)uobj, it)) {
		const char *k = json_object_iter_key(it);
		json_t *v = json_object_iter_value(it);
		enum lease_dim d;
		if (lease_dim_parse(k, &d) < 0)
			return common_errf(e, "observe", "unknown dimension \"%s\"", k);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    (uint64_t)json_integer_value(v) > LEASE_USAGE_MAX)
			return common_errf(e, "observe", "%s: expected an integer in 0..2^62", k);
		now[d] = (uint64_t)json_integer_value(v);
		if (now[d] < old[d])
			return common_errf(e, "cannot observe lease",
					   "%s: %s %llu is below the recorded %llu (usage is monotonic)",
					   id, k, (unsigned long long)now[d], (unsigned long long)old[d]);
		changed |= now[d] != old[d];
	}
	uj = lease_usage_json(now);
	cost = lease_cost(uj, json_object_get(rec, "fees"));
	why = closure(rec, now, cost, batch);
	if (!changed && !why && !force) {
		json_decref(uj);
		return 0;
	}
	*r = receipt_new(id, lease_jint(rec, "seq") + 1, why ? LEASE_EDGE_SETTLE : LEASE_EDGE_OBSERVE,
			 lease_jstr(rec, "state"), why ? LEASE_SETTLING : LEASE_ACTIVE, batch,
			 lease_jstr(rec, "head"));
	json_object_set_new(*r, "usage", uj);
	json_object_set_new(*r, "cost", json_integer((json_int_t)cost));
	if (why)
		json_object_set_new(*r, "reason", json_string(why));
	*closed = why;
	return 0;
}

static int u64_arg(const json_t *args, const char *key, int need, uint64_t max, uint64_t *out,
		   struct common_err *e)
{
	json_t *v = json_object_get(args, key);

	*out = 0;
	if (!v && !need)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
		return common_errf(e, key, "expected an integer in 0..%llu", (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* snapshot and restore: the digest, bytes within the namespace_bytes left, and for a
 * restore a source lease of the same principal, host program and image. */
static int snapshot_args(struct lease_store *s, const json_t *rec, enum lease_edge ed,
			 const json_t *args, const char *what, json_t *r, struct common_err *e)
{
	const char *snap = lease_jstr(args, "snapshot"), *src;
	const char *f[] = { "principal", "host_program" };
	uint64_t v, bytes, lim;
	json_t *src_pair = NULL, *sr;
	int rc = -1;

	if (!lease_hex_valid(snap, 64))
		return common_errf(e, what, "snapshot digest must be 64 lowercase hex digits");
	if (u64_arg(args, "bytes", ed == LEASE_EDGE_SNAPSHOT, LEASE_USAGE_MAX, &bytes, e) < 0)
		return -1;
	v = (uint64_t)lease_jint(json_object_get(rec, "usage"), "namespace_bytes") +
	    (uint64_t)lease_jint(rec, "snapshot_bytes");
	lim = (uint64_t)lease_jint(json_object_get(rec, "limits"), "namespace_bytes");
	if (v > lim || bytes > lim - v)
		return common_errf(e, what, "%llu snapshot bytes exceed the namespace_bytes left (%llu used of %llu)",
				   (unsigned long long)bytes, (unsigned long long)v,
				   (unsigned long long)lim);
	json_object_set_new(r, "snapshot", json_string(snap));
	json_object_set_new(r, "bytes", json_integer((json_int_t)bytes));
	if (ed == LEASE_EDGE_SNAPSHOT)
		return 0;
	src = lease_jstr(args, "source");
	if (load_pair(s, src ? src : "(none)", &src_pair, e) < 0)
		goto out;
	sr = json_object_get(src_pair, "lease");
	for (size_t i = 0; i < 2; i++)
		if (strcmp(lease_jstr(sr, f[i]), lease_jstr(rec, f[i])) != 0) {
			common_errf(e, what, "source lease %s has another %s (%s, not %s)",
				    src, f[i], lease_jstr(sr, f[i]), lease_jstr(rec, f[i]));
			goto out;
		}
	if (strcmp(lease_jstr(json_object_get(sr, "image"), "sha256"),
		   lease_jstr(json_object_get(rec, "image"), "sha256")) != 0) {
		common_errf(e, what, "source lease %s ran another image", src);
		goto out;
	}
	json_object_set_new(r, "source", json_string(src));
	rc = 0;
out:
	json_decref(src_pair);
	return rc;
}

/* Edge-specific evidence for an edge already allowed from the record's state. */
static int edge_receipt(struct lease_store *s, const json_t *rec, enum lease_edge ed,
			const json_t *args, uint64_t batch, json_t **r, struct common_err *e)
{
	const char *id = lease_jstr(rec, "id"), *closed;
	uint64_t v, esc, cost, charge, cells, bytes;
	enum lease_state from, to;
	char what[128], hex[COMMON_SHA256_HEX];
	char *ns;
	int rc;

	snprintf(what, sizeof what, "cannot %s lease %s", lease_edge_name(ed), id);
	lease_state_parse(lease_jstr(rec, "state"), &from);
	lease_edge_next(ed, from, &to);
	if (ed == LEASE_EDGE_OBSERVE) /* changed_only: no receipt when nothing moved */
		return observe_receipt(rec, json_object_get(args, "usage"), batch,
				       !json_is_true(json_object_get(args, "changed_only")), r, &closed, e);
	*r = receipt_new(id, lease_jint(rec, "seq") + 1, ed, lease_jstr(rec, "state"), to, batch,
			 lease_jstr(rec, "head"));
	switch (ed) {
	case LEASE_EDGE_FUND:
		if (u64_arg(args, "amount", 1, LEASE_AMOUNT_MAX, &v, e) < 0)
			goto fail;
		if (v < (uint64_t)lease_jint(rec, "escrow_required")) {
			common_errf(e, what, "amount %llu is below the declared escrow %lld",
				    (unsigned long long)v, (long long)lease_jint(rec, "escrow_required"));
			goto fail;
		}
		json_object_set_new(*r, "amount", json_integer((json_int_t)v));
		break;
	case LEASE_EDGE_SNAPSHOT:
	case LEASE_EDGE_RESTORE:
		if (snapshot_args(s, rec, ed, args, what, *r, e) < 0)
			goto fail;
		break;
	case LEASE_EDGE_SETTLE:
		json_object_set(*r, "usage", json_object_get(rec, "usage"));
		json_object_set(*r, "cost", json_object_get(rec, "cost"));
		json_object_set_new(*r, "reason", json_string(json_is_true(json_object_get(args,
						"run_died")) ? "run-died" : "caller"));
		break;
	case LEASE_EDGE_EXPIRE:
		if (strcmp(lease_jstr(rec, "state"), "Settling") != 0 &&
		    batch < (uint64_t)lease_jint(rec, "deadline")) {
			common_errf(e, what, "batch %llu is before the deadline %lld",
				    (unsigned long long)batch, (long long)lease_jint(rec, "deadline"));
			goto fail;
		}
		esc = (uint64_t)lease_jint(rec, "escrow");
		cost = (uint64_t)lease_jint(rec, "cost");
		charge = cost < esc ? cost : esc;
		json_object_set_new(*r, "charge", json_integer((json_int_t)charge));
		json_object_set_new(*r, "refund", json_integer((json_int_t)(esc - charge)));
		break;
	case LEASE_EDGE_DESTROY:
		ns = lease_ns_dir(s, id);
		rc = lease_ns_destroy_digest(ns, hex, &cells, &bytes, e);
		free(ns);
		if (rc < 0)
			goto fail;
		json_object_set_new(*r, "destroyed", json_string(hex));
		json_object_set_new(*r, "cells", json_integer((json_int_t)cells));
		json_object_set_new(*r, "bytes", json_integer((json_int_t)bytes));
		break;
	default:
		break;
	}
	return 0;
fail:
	json_decref(*r);
	*r = NULL;
	return -1;
}

/* Deadlines act by themselves: a lease still Requested or Funded at its
 * deadline expires, with its receipt, before any decision that counts it. A
 * sweep (a request counting its principal's slots) also expires Settling ones
 * and Active ones no run holds; a single lease's own steps do not, since its
 * run settles and expires it itself. 1 when *rec was expired (and replaced),
 * 0 when it is not overdue. */
static int expire_if_overdue(struct lease_store *s, json_t **rec, uint64_t batch, int sweep,
			     struct common_err *e)
{
	enum lease_state st;
	json_t *rs, *r, *out = NULL;
	int rc = -1;

	lease_state_parse(lease_jstr(*rec, "state"), &st);
	if (batch < (uint64_t)lease_jint(*rec, "deadline") ||
	    !(st == LEASE_REQUESTED || st == LEASE_FUNDED || (sweep && st == LEASE_SETTLING) ||
	      (sweep && st == LEASE_ACTIVE && !lease_run_held(s, lease_jstr(*rec, "id")))))
		return 0;
	rs = json_array();
	if (edge_receipt(s, *rec, LEASE_EDGE_EXPIRE, NULL, batch, &r, e) == 0 &&
	    seal_fold(s, rec, r, rs, e) == 0 && commit(s, rs, *rec, &out, e) == 0)
		rc = 1;
	json_decref(out);
	json_decref(rs);
	return rc;
}

/* A dead run's bound (what its guest may have used at most, lease_run_bound_write),
 * capped at the limits, as an observation: the guest cannot have passed it. */
static int dead_run_observe(struct lease_store *s, const char *id, json_t **rec, uint64_t batch,
			    json_t *rs, const char **closed, struct common_err *e)
{
	uint64_t bound[LEASE_DIM_COUNT], lim[LEASE_DIM_COUNT], old[LEASE_DIM_COUNT];
	json_t *r = NULL, *uj;
	int rc;

	*closed = NULL;
	if (lease_run_bound_read(s, id, bound) <= 0)
		return 0;
	lease_usage_get(json_object_get(*rec, "limits"), lim);
	lease_usage_get(json_object_get(*rec, "usage"), old);
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		bound[d] = bound[d] > lim[d] ? lim[d] : bound[d] < old[d] ? old[d] : bound[d];
	uj = lease_usage_json(bound);
	rc = observe_receipt(*rec, uj, batch, 0, &r, closed, e);
	json_decref(uj);
	if (rc == 0 && r)
		rc = seal_fold(s, rec, r, rs, e);
	return rc;
}

/* 1 when rec is a one-shot lease of this host's runs (sbx-run --ephemeral). */
int lease_ephemeral_here(const struct lease_store *s, const json_t *rec)
{
	uint8_t pub[32];
	char hex[65];

	lease_store_pubkey(s, pub);
	common_hex(pub, sizeof pub, hex);
	return lease_jstr(rec, "ephemeral") && strcmp(lease_jstr(rec, "ephemeral"), hex) == 0;
}

int lease_close_left(struct lease_store *s, json_t **rec, uint64_t batch, json_t **out,
		     struct common_err *e)
{
	static const enum lease_edge tail[] = { LEASE_EDGE_EXPIRE, LEASE_EDGE_DESTROY };
	const char *id = lease_jstr(*rec, "id"), *closed = NULL;
	json_t *rs = json_array(), *r, *args = json_pack("{s:b}", "run_died", 1);
	int eph = lease_ephemeral_here(s, *rec), rc = -1;
	enum lease_state st;

	*out = NULL;
	lease_state_parse(lease_jstr(*rec, "state"), &st);
	if (st == LEASE_ACTIVE &&
	    (dead_run_observe(s, id, rec, batch, rs, &closed, e) < 0 ||
	     (!closed && (edge_receipt(s, *rec, LEASE_EDGE_SETTLE, args, batch, &r, e) < 0 ||
			  seal_fold(s, rec, r, rs, e) < 0))))
		goto out;
	/* one-shot mode never leaves a lease behind: its run would have ended it so */
	for (size_t k = 0; eph && k < 2; k++) {
		lease_state_parse(lease_jstr(*rec, "state"), &st);
		if (!lease_edge_next(tail[k], st, NULL))
			continue;
		if (edge_receipt(s, *rec, tail[k], NULL, batch, &r, e) < 0 ||
		    seal_fold(s, rec, r, rs, e) < 0)
			goto out;
	}
	rc = json_array_size(rs) ? commit(s, rs, *rec, out, e) : 0;
out:
	json_decref(args);
	json_decref(rs);
	return rc;
}

/* A run that died (SIGKILL, OOM) left its lease Active: it closes from the bound it
 * left (else its last durable observation), before anything else is decided. */
static int close_dead_runs(struct lease_store *s, uint64_t batch, struct common_err *e)
{
	char **ids;
	size_t n;
	int rc = 0;

	if (lease_run_orphans(s, &ids, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		json_t *pair = NULL, *rec, *out = NULL;
		struct common_err skip;
		if (load_pair(s, ids[i], &pair, &skip) < 0) {
			lease_run_forget(s, ids[i]);
			continue;
		}
		rec = json_incref(json_object_get(pair, "lease"));
		json_decref(pair);
		if ((rc = lease_close_left(s, &rec, batch, &out, e)) == 0)
			lease_run_forget(s, ids[i]);
		json_decref(out);
		json_decref(rec);
	}
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	return rc;
}

int lease_dead_runs_close(struct lease_store *s, uint64_t batch, struct common_err *e)
{
	return close_dead_runs(s, batch, e);
}

int lease_expire_overdue(struct lease_store *s, json_t **rec, uint64_t batch,
			 struct common_err *e)
{
	return expire_if_overdue(s, rec, batch, 1, e);
}

/* Before a request counts the principal's slots: its overdue leases go. */
static int expire_principal_overdue(struct lease_store *s, const char *principal, uint64_t batch,
				    struct common_err *e)
{
	json_t *slots, *ids, *v;
	size_t i;
	int rc = 0;

	if (lease_slots_read(s, principal, &slots, e) < 0)
		return -1;
	ids = json_deep_copy(json_object_get(slots, principal));
	json_decref(slots);
	if (s->be->pairs_prefetch && ids && s->be->pairs_prefetch(s, ids, e) < 0) {
		json_decref(ids);
		return -1;
	}
	json_array_foreach(ids, i, v) {
		json_t *pair = NULL, *rec;
		struct common_err skip;
		/* a damaged record is verify's to report; it must not block requests */
		if (!json_is_string(v) || load_pair(s, json_string_value(v), &pair, &skip) < 0)
			continue;
		rec = json_incref(json_object_get(pair, "lease"));
		json_decref(pair);
		rc = expire_if_overdue(s, &rec, batch, 1, e) < 0 ? -1 : 0;
		json_decref(rec);
		if (rc < 0)
			break;
	}
	json_decref(ids);
	return rc;
}

/* The edges a renter asks for (SPEC §3): signed by the renter's key. The others are
 * the runtime's (activate, observe) or the clock's and settlement's (expire). */
static int renter_asks(enum lease_edge ed)
{
	return ed == LEASE_EDGE_FUND || ed == LEASE_EDGE_SNAPSHOT || ed == LEASE_EDGE_SETTLE ||
	       ed == LEASE_EDGE_DESTROY;
}

/* One attempt of the write path: request (req) or an existing lease (id, evidence checked when
 * need_ev or given), then the steps, then one commit. *pair_out NULL when every step
 * was optional and skipped. */
static int apply_once(struct lease_store *s, const struct lease_request *req,
		      const struct prepared *p, const char *id, const json_t *ev, int need_ev,
		      const struct lease_step *steps, size_t n, json_t **pair_out, json_t **receipts,
		      struct common_err *e)
{
	json_t *pair = NULL, *rec = NULL, *rs = json_array(), *r;
	enum lease_state from;
	uint64_t batch;
	int rc = -1;

	*pair_out = NULL;
	if (lease_lock(s, e) < 0)
		goto out;
	s->kept_ok = 1;
	s->kept_used = 0;
	if (lease_recover(s, e) < 0 || lease_store_batch(s, &batch, e) < 0 ||
	    close_dead_runs(s, batch, e) < 0)
		goto unlock;
	if (req) {
		if (expire_principal_overdue(s, p->principal, batch, e) < 0 ||
		    request_receipt(s, req, p, batch, &r, e) < 0)
			goto unlock;
		if (lease_renter_sign(s, NULL, p->principal, r, NULL, e) < 0) {
			json_decref(r);
			goto unlock;
		}
		if (seal_fold(s, &rec, r, rs, e) < 0)
			goto unlock;
	} else {
		if (load_pair(s, id, &pair, e) < 0)
			goto unlock;
		rec = json_incref(json_object_get(pair, "lease"));
		if ((ev || need_ev) && check_evidence(s, pair, ev, e) < 0)
			goto unlock;
		if ((int64_t)batch < lease_jint(rec, "batch"))
			batch = (uint64_t)lease_jint(rec, "batch");
		if (n && steps[0].edge != LEASE_EDGE_EXPIRE &&
		    expire_if_overdue(s, &rec, batch, 0, e) < 0)
			goto unlock;
	}
	for (size_t k = 0; k < n; k++) {
		if (steps[k].edge == LEASE_EDGE_REQUEST || (unsigned)steps[k].edge >= LEASE_EDGE_COUNT) {
			common_errf(e, "transition", "use lease_request to create a lease");
			goto unlock;
		}
		lease_state_parse(lease_jstr(rec, "state"), &from);
		if (!lease_edge_next(steps[k].edge, from, NULL)) {
			if (steps[k].optional)
				continue;
			refuse_edge(e, steps[k].edge, rec);
			goto unlock;
		}
		if (edge_receipt(s, rec, steps[k].edge, steps[k].args, batch, &r, e) < 0)
			goto unlock;
		if (!r) /* an observation that changed nothing */
			continue;
		if (renter_asks(steps[k].edge) &&
		    lease_renter_sign(s, rec, lease_jstr(rec, "principal"), r, steps[k].args, e) < 0) {
			json_decref(r);
			goto unlock;
		}
		if (seal_fold(s, &rec, r, rs, e) < 0)
			goto unlock;
	}
	if (json_array_size(rs) && commit(s, rs, rec, pair_out, e) < 0)
		goto unlock;
	if (receipts)
		*receipts = json_incref(rs);
	rc = 0;
unlock:
	lease_unlock(s);
out:
	json_decref(rec);
	json_decref(pair);
	json_decref(rs);
	return rc;
}

/* A refusal decided on kept values (s->kept_used) may rest on a stale record: the
 * transition runs again once on fresh reads. */
static int kept_again(struct lease_store *s, int *fresh)
{
	if (!s->kept_used || s->conflict || *fresh)
		return 0;
	*fresh = 1;
	if (s->be->forget)
		s->be->forget(s);
	return 1;
}

/* The one write path; a transition that lost a race to another host runs again. */
static int apply(struct lease_store *s, const struct lease_request *req, const char *id,
		 const json_t *ev, int need_ev, const struct lease_step *steps, size_t n,
		 json_t **pair_out, json_t **receipts, struct common_err *e)
{
	struct prepared p = { 0 };
	unsigned attempt = 0;
	int rc = -1, fresh = 0;

	*pair_out = NULL;
	if (n > LEASE_STEPS_MAX)
		return common_errf(e, "steps", "more than %d edges at once", LEASE_STEPS_MAX);
	if (!req || prepare(s, req, &p, e) == 0)
		while ((rc = apply_once(s, req, &p, id, ev, need_ev, steps, n, pair_out, receipts,
					e)) < 0 && (kept_again(s, &fresh) || lease_retry(s, &attempt)))
			;
	prepared_free(&p);
	return rc;
}

int lease_request(struct lease_store *s, const struct lease_request *req, json_t **out,
		  struct common_err *e)
{
	return apply(s, req, NULL, NULL, 0, NULL, 0, out, NULL, e);
}

int lease_steps(struct lease_store *s, const struct lease_request *req, const char *id,
		const json_t *evidence, const struct lease_step *steps, size_t n,
		json_t **receipts, struct common_err *e)
{
	json_t *pair = NULL, *ev = NULL;
	int rc;

	if (evidence) {
		ev = json_object_get(evidence, "receipt");
		ev = json_is_object(ev) ? ev : (json_t *)evidence;
	}
	if (!req && !id)
		id = ev ? lease_jstr(ev, "lease") : NULL;
	if (!req && !id)
		return common_errf(e, "steps", "no lease id given and the evidence names none");
	rc = apply(s, req, id, req ? NULL : ev, 0, steps, n, &pair, receipts, e);
	json_decref(pair);
	return rc;
}

int lease_transition(struct lease_store *s, const char *id, enum lease_edge edge,
		     const json_t *evidence, const json_t *args, json_t **out,
		     struct common_err *e)
{
	struct lease_step st = { edge, args, 0 };
	const json_t *ev = NULL;

	if (edge == LEASE_EDGE_REQUEST || (unsigned)edge >= LEASE_EDGE_COUNT)
		return common_errf(e, "transition", "use lease_request to create a lease");
	if (evidence) {
		ev = json_object_get(evidence, "receipt");
		ev = json_is_object(ev) ? ev : evidence;
	}
	if (!id)
		id = ev ? lease_jstr(ev, "lease") : NULL;
	if (!id)
		return common_errf(e, lease_edge_name(edge), "no lease id given and the evidence names none");
	return apply(s, NULL, id, ev, 1, &st, 1, out, NULL, e);
}

static int observe_once(struct lease_store *s, const char *id,
			const uint64_t usage[LEASE_DIM_COUNT], const char **closed,
			json_t **receipts, struct common_err *e)
{
	json_t *pair = NULL, *r = NULL, *uj = lease_usage_json(usage), *out = NULL, *rec = NULL;
	json_t *rs = json_array();
	uint64_t batch;
	int rc = -1;

	*closed = NULL;
	*receipts = NULL;
	if (lease_lock(s, e) < 0)
		goto out;
	s->kept_ok = 1;
	s->kept_used = 0;
	if (lease_recover(s, e) < 0)
		goto unlock;
reload:
	if (load_pair(s, id, &pair, e) < 0)
		goto unlock;
	rec = json_incref(json_object_get(pair, "lease"));
	if (strcmp(lease_jstr(rec, "state"), "Active") != 0) {
		refuse_edge(e, LEASE_EDGE_OBSERVE, rec);
		goto unlock;
	}
	if (lease_store_batch(s, &batch, e) < 0)
		goto unlock;
	if ((int64_t)batch < lease_jint(rec, "batch"))
		batch = (uint64_t)lease_jint(rec, "batch");
	if (observe_receipt(rec, uj, batch, 0, &r, closed, e) < 0)
		goto unlock;
	if (!r && s->kept_used && s->kept_ok) { /* nothing to do by what was kept: read it */
		s->kept_ok = 0;
		json_decref(rec);
		json_decref(pair);
		rec = pair = NULL;
		goto reload;
	}
	if (!r) {
		rc = 0;
		goto unlock;
	}
	if (seal_fold(s, &rec, r, rs, e) == 0)
		rc = commit(s, rs, rec, &out, e);
	if (rc < 0)
		*closed = NULL;
unlock:
	lease_unlock(s);
out:
	if (rc == 0)
		*receipts = json_incref(rs);
	json_decref(rs);
	json_decref(out);
	json_decref(rec);
	json_decref(pair);
	json_decref(uj);
	return rc;
}

int lease_observe_usage(struct lease_store *s, const char *id,
			const uint64_t usage[LEASE_DIM_COUNT], const char **closed,
			json_t **receipts, struct common_err *e)
{
	unsigned attempt = 0;
	int rc, fresh = 0;

	while ((rc = observe_once(s, id, usage, closed, receipts, e)) < 0 &&
	       (kept_again(s, &fresh) || lease_retry(s, &attempt)))
		;
	return rc;
}

/* The pair of id; sweep: a deadline already passed has decided (SPEC §4.3), so the
 * lease is expired by it, with its receipt, before it is shown. */
static int show_once(struct lease_store *s, const char *id, int sweep, json_t **out,
		     struct common_err *e)
{
	json_t *rec;
	uint64_t batch;
	int rc;

	if (lease_lock(s, e) < 0)
		return -1;
	rc = lease_recover(s, e);
	if (rc == 0)
		rc = load_pair(s, id, out, e);
	if (rc == 0 && sweep) {
		rec = json_incref(json_object_get(*out, "lease"));
		rc = lease_store_batch(s, &batch, e) < 0 ? -1 : expire_if_overdue(s, &rec, batch, 1, e);
		json_decref(rec);
		if (rc != 0)
			json_decref(*out);
		if (rc == 1)
			rc = load_pair(s, id, out, e);
	}
	lease_unlock(s);
	return rc;
}

int lease_show(struct lease_store *s, const char *id, json_t **out, struct common_err *e)
{
	unsigned attempt = 0;
	int rc;

	while ((rc = show_once(s, id, 1, out, e)) < 0 && lease_retry(s, &attempt))
		;
	return rc;
}

int lease_load(struct lease_store *s, const char *id, json_t **record, struct common_err *e)
{
	json_t *pair;

	if (show_once(s, id, 0, &pair, e) < 0)
		return -1;
	*record = json_incref(json_object_get(pair, "lease"));
	json_decref(pair);
	return 0;
}

int lease_head(struct lease_store *s, const char *id, json_t **receipt, struct common_err *e)
{
	json_t *pair;

	if (show_once(s, id, 0, &pair, e) < 0)
		return -1;
	*receipt = json_incref(json_object_get(pair, "receipt"));
	json_decref(pair);
	return 0;
}
