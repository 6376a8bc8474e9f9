/* The fold: a lease record is a pure function of its receipt chain. Transitions,
 * crash recovery and verify all derive records here, so they cannot disagree. */
#include <stdio.h>
#include <string.h>
#include "lease/backend/backend.h"

uint64_t lease_cost(const json_t *usage, const json_t *fees)
{
	unsigned __int128 sum = 0;

	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		int64_t u = lease_jint(usage, lease_dim_name((enum lease_dim)d));
		int64_t f = lease_jint(fees, lease_dim_name((enum lease_dim)d));
		if (u > 0 && f > 0)
			sum += (unsigned __int128)(uint64_t)u * (uint64_t)f;
	}
	return sum > INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)sum;
}

int lease_usage_get(const json_t *usage, uint64_t out[LEASE_DIM_COUNT])
{
	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		int64_t v = lease_jint(usage, lease_dim_name((enum lease_dim)d));
		if (v < 0 || (uint64_t)v > LEASE_USAGE_MAX)
			return -1;
		out[d] = (uint64_t)v;
	}
	return 0;
}

json_t *lease_usage_json(const uint64_t v[LEASE_DIM_COUNT])
{
	json_t *o = json_object();

	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		json_object_set_new(o, lease_dim_name((enum lease_dim)d), json_integer((json_int_t)v[d]));
	return o;
}

static int bad(struct common_err *e, const char *id, const char *edge, const char *why)
{
	return common_errf(e, "receipt", "lease %s, edge %s: %s", id, edge, why);
}

/* A dimension map from a request: every dimension present, each within max[d]. */
static int dims_ok(const json_t *o, const uint64_t *max, uint64_t flat)
{
	if (!json_is_object(o) || json_object_size(o) != LEASE_DIM_COUNT)
		return 0;
	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		int64_t v = lease_jint(o, lease_dim_name((enum lease_dim)d));
		if (v < 0 || (uint64_t)v > (max ? max[d] : flat))
			return 0;
	}
	return 1;
}

static json_t *fold_request(const json_t *r, struct common_err *e)
{
	const char *id = lease_jstr(r, "lease");
	json_t *q = json_object_get(r, "request"), *img, *rec;
	uint64_t ceil[LEASE_DIM_COUNT], zero[LEASE_DIM_COUNT] = { 0 };
	int64_t life = lease_jint(q, "lifetime"), dl = lease_jint(q, "deadline");
	int64_t esc = lease_jint(q, "escrow"), batch = lease_jint(r, "batch");
	char *ns;
	int ok;

	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		ceil[d] = lease_dim_ceiling((enum lease_dim)d);
	if (!json_is_object(q)) {
		bad(e, id, "request", "missing \"request\" object");
		return NULL;
	}
	img = json_object_get(q, "image");
	if (!lease_name_valid(lease_jstr(q, "principal")) ||
	    !lease_name_valid(lease_jstr(q, "host_program")) || !json_is_object(img) ||
	    !lease_jstr(img, "path") || !lease_hex_valid(lease_jstr(img, "sha256"), 64)) {
		bad(e, id, "request", "bad principal, host_program or image");
		return NULL;
	}
	if (!dims_ok(json_object_get(q, "limits"), ceil, 0) ||
	    !dims_ok(json_object_get(q, "fees"), NULL, LEASE_FEE_MAX)) {
		bad(e, id, "request", "limits or fees out of range");
		return NULL;
	}
	if (life < 1 || life > LEASE_LIFETIME_CEILING || dl != batch + life || esc < 0 ||
	    (uint64_t)esc > LEASE_AMOUNT_MAX) {
		bad(e, id, "request", "lifetime, deadline or escrow out of range");
		return NULL;
	}
	if (json_object_get(q, "ephemeral") && !lease_hex_valid(lease_jstr(q, "ephemeral"), 64)) {
		bad(e, id, "request", "ephemeral is not a host key (64 hex digits)");
		return NULL;
	}
	if (json_object_get(q, "prev") && !lease_id_valid(lease_jstr(q, "prev"))) {
		bad(e, id, "request", "prev is not a lease id");
		return NULL;
	}
	ns = common_xasprintf("%s/%s", lease_jstr(q, "host_program"), id);
	ok = lease_jstr(q, "namespace") && strcmp(ns, lease_jstr(q, "namespace")) == 0;
	free(ns);
	if (!ok) {
		bad(e, id, "request", "namespace is not HOST_PROGRAM/ID");
		return NULL;
	}
	rec = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:I, s:I, s:I, s:I,"
			" s:o, s:I, s:I, s:[]}",
			"id", id, "principal", json_object_get(q, "principal"),
			"host_program", json_object_get(q, "host_program"), "image", img,
			"namespace", json_object_get(q, "namespace"),
			"limits", json_object_get(q, "limits"), "fees", json_object_get(q, "fees"),
			"lifetime", (json_int_t)life, "requested", (json_int_t)batch,
			"deadline", (json_int_t)dl, "escrow_required", (json_int_t)esc,
			"escrow", (json_int_t)0, "usage", lease_usage_json(zero),
			"cost", (json_int_t)0, "snapshot_bytes", (json_int_t)0, "snapshots");
	if (rec && lease_jstr(r, "renter"))
		json_object_set(rec, "renter", json_object_get(r, "renter"));
	if (rec && json_object_get(q, "ephemeral"))
		json_object_set(rec, "ephemeral", json_object_get(q, "ephemeral"));
	if (rec && json_object_get(q, "prev")) /* a chain's link: the lease it continues */
		json_object_set(rec, "prev", json_object_get(q, "prev"));
	return rec;
}

/* usage/cost carried by observe and settle: monotonic and priced by the fee schedule. */
static int fold_usage(json_t *rec, const json_t *r, const char *edge, struct common_err *e)
{
	const char *id = lease_jstr(rec, "id");
	json_t *u = json_object_get(r, "usage");
	uint64_t now[LEASE_DIM_COUNT], old[LEASE_DIM_COUNT];

	if (!u || lease_usage_get(u, now) < 0 || json_object_size(u) != LEASE_DIM_COUNT)
		return bad(e, id, edge, "missing or malformed usage");
	lease_usage_get(json_object_get(rec, "usage"), old);
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		if (now[d] < old[d])
			return bad(e, id, edge, "usage went backwards");
	if (lease_jint(r, "cost") < 0 ||
	    (uint64_t)lease_jint(r, "cost") != lease_cost(u, json_object_get(rec, "fees")))
		return bad(e, id, edge, "cost does not match usage × fees");
	json_object_set_new(rec, "usage", lease_usage_json(now));
	json_object_set(rec, "cost", json_object_get(r, "cost"));
	return 0;
}

static int valid_reason(const char *s)
{
	enum lease_dim d;

	return s && (lease_dim_parse(s, &d) == 0 || !strcmp(s, "lifetime") ||
		     !strcmp(s, "escrow") || !strcmp(s, "caller") || !strcmp(s, "run-died"));
}

/* Receipt r follows cur: same lease, next seq, prev is cur's head, the batch never
 * goes back, and its edge is declared from cur's state (*from) to r's. */
static int fold_link(const json_t *cur, const json_t *r, enum lease_edge ed, enum lease_state to,
		     enum lease_state *from, struct common_err *e)
{
	const char *id = lease_jstr(r, "lease"), *edge = lease_jstr(r, "edge");
	enum lease_state want;

	if (strcmp(id, lease_jstr(cur, "id")) != 0)
		return bad(e, id, edge, "receipt names another lease");
	if (lease_jint(r, "seq") != lease_jint(cur, "seq") + 1)
		return bad(e, id, edge, "sequence number is not the next one");
	if (strcmp(lease_jstr(r, "prev"), lease_jstr(cur, "head")) != 0)
		return bad(e, id, edge, "prev is not the previous receipt's digest");
	if (lease_jint(r, "batch") < lease_jint(cur, "batch"))
		return bad(e, id, edge, "batch went backwards");
	lease_state_parse(lease_jstr(cur, "state"), from);
	if (strcmp(lease_jstr(r, "from"), lease_state_name(*from)) != 0)
		return bad(e, id, edge, "from does not match the lease state");
	if (!lease_edge_next(ed, *from, &want) || want != to)
		return bad(e, id, edge, "undeclared edge for this state");
	return 0;
}

/* snapshot and restore: the bytes they add, and which snapshot (and for a restore,
 * from which lease). */
static int fold_snapshot(json_t *rec, const json_t *cur, const json_t *r, enum lease_edge ed,
			 struct common_err *e)
{
	const char *id = lease_jstr(r, "lease"), *edge = lease_jstr(r, "edge");
	int64_t bytes = json_object_get(r, "bytes") ? lease_jint(r, "bytes") : 0;

	if (!lease_hex_valid(lease_jstr(r, "snapshot"), 64) || bytes < 0 ||
	    (uint64_t)bytes > lease_dim_ceiling(LEASE_DIM_NAMESPACE_BYTES) ||
	    (ed == LEASE_EDGE_RESTORE && !lease_id_valid(lease_jstr(r, "source"))))
		return bad(e, id, edge, "missing snapshot digest, bytes or source");
	json_object_set_new(rec, "snapshot_bytes",
			    json_integer(lease_jint(cur, "snapshot_bytes") + bytes));
	if (ed == LEASE_EDGE_SNAPSHOT)
		json_array_append_new(json_object_get(rec, "snapshots"),
				      json_pack("{s:O, s:I, s:O}", "digest",
						json_object_get(r, "snapshot"), "bytes",
						(json_int_t)bytes, "batch",
						json_object_get(r, "batch")));
	else
		json_object_set_new(rec, "restored",
				    json_pack("{s:O, s:O, s:I}", "snapshot",
					      json_object_get(r, "snapshot"), "source",
					      json_object_get(r, "source"), "bytes",
					      (json_int_t)bytes));
	return 0;
}

int lease_fold(const json_t *cur, const json_t *r, json_t **out, struct common_err *e)
{
	if (lease_receipt_check(r, "receipt", e) < 0)
		return -1;
	return lease_fold_sealed(cur, r, out, e);
}

int lease_fold_sealed(const json_t *cur, const json_t *r, json_t **out, struct common_err *e)
{
	const char *id = lease_jstr(r, "lease"), *edge = lease_jstr(r, "edge");
	enum lease_edge ed;
	enum lease_state from, to;
	json_t *rec;
	int64_t v, esc, cost;

	if (lease_receipt_shape(r, "receipt", e) < 0)
		return -1;
	lease_edge_parse(edge, &ed);
	lease_state_parse(lease_jstr(r, "to"), &to);
	if (!cur) {
		if (ed != LEASE_EDGE_REQUEST)
			return bad(e, id, edge, "a chain must start with a request");
		if (to != LEASE_REQUESTED)
			return bad(e, id, edge, "a request must lead to Requested");
		if (!(rec = fold_request(r, e)))
			return -1;
		goto done;
	}
	if (fold_link(cur, r, ed, to, &from, e) < 0)
		return -1;
	rec = json_deep_copy(cur);
	switch (ed) {
	case LEASE_EDGE_REQUEST:
		json_decref(rec);
		return bad(e, id, edge, "request on an existing lease");
	case LEASE_EDGE_FUND:
		v = lease_jint(r, "amount");
		if (v < 0 || (uint64_t)v > LEASE_AMOUNT_MAX || v < lease_jint(cur, "escrow_required")) {
			json_decref(rec);
			return bad(e, id, edge, "amount missing or below the declared escrow");
		}
		json_object_set_new(rec, "escrow", json_integer(v));
		break;
	case LEASE_EDGE_ACTIVATE:
		break;
	case LEASE_EDGE_OBSERVE:
		if (fold_usage(rec, r, edge, e) < 0) {
			json_decref(rec);
			return -1;
		}
		break;
	case LEASE_EDGE_SNAPSHOT:
	case LEASE_EDGE_RESTORE:
		if (fold_snapshot(rec, cur, r, ed, e) < 0) {
			json_decref(rec);
			return -1;
		}
		break;
	case LEASE_EDGE_SETTLE:
		if (!valid_reason(lease_jstr(r, "reason")) || fold_usage(rec, r, edge, e) < 0) {
			json_decref(rec);
			return bad(e, id, edge, "missing reason, usage or cost");
		}
		json_object_set(rec, "closed", json_object_get(r, "reason"));
		break;
	case LEASE_EDGE_EXPIRE:
		esc = lease_jint(cur, "escrow");
		cost = lease_jint(cur, "cost");
		if (from != LEASE_SETTLING && lease_jint(r, "batch") < lease_jint(cur, "deadline")) {
			json_decref(rec);
			return bad(e, id, edge, "expired before the deadline");
		}
		if (lease_jint(r, "charge") != (cost < esc ? cost : esc) ||
		    lease_jint(r, "refund") != esc - (cost < esc ? cost : esc)) {
			json_decref(rec);
			return bad(e, id, edge, "charge/refund is not min(cost, escrow) and the rest");
		}
		json_object_set(rec, "charge", json_object_get(r, "charge"));
		json_object_set(rec, "refund", json_object_get(r, "refund"));
		break;
	case LEASE_EDGE_DESTROY:
		if (!lease_hex_valid(lease_jstr(r, "destroyed"), 64) || lease_jint(r, "cells") < 0 ||
		    lease_jint(r, "bytes") < 0) {
			json_decref(rec);
			return bad(e, id, edge, "missing destruction digest, cells or bytes");
		}
		json_object_set_new(rec, "destroyed",
				    json_pack("{s:O, s:O, s:O}", "digest",
					      json_object_get(r, "destroyed"), "cells",
					      json_object_get(r, "cells"), "bytes",
					      json_object_get(r, "bytes")));
		break;
	default:
		json_decref(rec);
		return bad(e, id, edge, "unknown edge");
	}
done:
	json_object_set_new(rec, "state", json_string(lease_state_name(to)));
	json_object_set(rec, "seq", json_object_get(r, "seq"));
	json_object_set(rec, "head", json_object_get(r, "digest"));
	json_object_set(rec, "batch", json_object_get(r, "batch"));
	*out = rec;
	return 0;
}
