/* Receipts: canonical digest, Ed25519 seal, and the hostile-input checks (SPEC §3.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/backend/backend.h"

/* The digest domain: receipts can never be confused with any other signed bytes. */
static const char receipt_domain[] = "sbx/receipt/v1";

/* Digest (hex) over the canonical receipt without "digest" and "sig". */
static void lease_receipt_digest_hex(const json_t *r, char hex[COMMON_SHA256_HEX])
{
	json_t *body = json_copy((json_t *)r);
	struct common_sha256 h;
	uint8_t d[COMMON_SHA256_LEN];
	char *c;

	json_object_del(body, "digest");
	json_object_del(body, "sig");
	c = common_json_canonical(body);
	common_sha256_init(&h);
	common_sha256_update(&h, receipt_domain, sizeof receipt_domain); /* incl. the NUL */
	common_sha256_update(&h, c, strlen(c));
	common_sha256_final(&h, d);
	common_hex(d, sizeof d, hex);
	free(c);
	json_decref(body);
}

int lease_receipt_seal(struct lease_store *s, json_t *r, struct common_err *e)
{
	char hex[COMMON_SHA256_HEX], sighex[129], pub[65];
	uint8_t d[COMMON_SHA256_LEN], sig[64];

	if (s->etcd) {
		/* many hosts sign into one store: the receipt names whose key it was */
		common_hex(s->key.pub, 32, pub);
		json_object_set_new(r, "signer", json_string(pub));
	}
	lease_receipt_digest_hex(r, hex);
	common_unhex(hex, d, sizeof d);
	if (common_key_sign(&s->key, d, sizeof d, sig, e) < 0)
		return -1;
	common_hex(sig, sizeof sig, sighex);
	json_object_set_new(r, "digest", json_string(hex));
	json_object_set_new(r, "sig", json_string(sighex));
	return 0;
}

static int field_err(struct common_err *e, const char *name, const char *field, const char *want)
{
	return common_errf(e, name, "field \"%s\": expected %s", field, want);
}

int lease_receipt_shape(const json_t *r, const char *name, struct common_err *e)
{
	const char *edge, *from, *to, *prev, *digest;
	enum lease_edge ed;
	enum lease_state st;
	json_t *v;

	if (!json_is_object(r))
		return common_errf(e, name, "a receipt must be a JSON object");
	if (json_object_size(r) > 32)
		return common_errf(e, name, "too many fields for a receipt");
	v = json_object_get(r, "v");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return field_err(e, name, "v", "1");
	if (!lease_id_valid(lease_jstr(r, "lease")))
		return field_err(e, name, "lease", "a lease id (L + 16 hex digits)");
	if (lease_jint(r, "seq") < 0)
		return field_err(e, name, "seq", "a non-negative integer");
	edge = lease_jstr(r, "edge");
	if (!edge || lease_edge_parse(edge, &ed) < 0)
		return field_err(e, name, "edge", "a lifecycle edge");
	from = lease_jstr(r, "from");
	if (ed == LEASE_EDGE_REQUEST ? !json_is_null(json_object_get(r, "from"))
				     : (!from || lease_state_parse(from, &st) < 0))
		return field_err(e, name, "from", ed == LEASE_EDGE_REQUEST ? "null" : "a state");
	to = lease_jstr(r, "to");
	if (!to || lease_state_parse(to, &st) < 0)
		return field_err(e, name, "to", "a state");
	if (lease_jint(r, "batch") < 0)
		return field_err(e, name, "batch", "a non-negative integer");
	prev = lease_jstr(r, "prev");
	if (lease_jint(r, "seq") == 0 ? !json_is_null(json_object_get(r, "prev"))
				      : !lease_hex_valid(prev, 64))
		return field_err(e, name, "prev", lease_jint(r, "seq") == 0 ? "null" : "64 hex digits");
	if ((ed == LEASE_EDGE_REQUEST) != (lease_jint(r, "seq") == 0))
		return field_err(e, name, "seq", "0 exactly for a request");
	digest = lease_jstr(r, "digest");
	if (!lease_hex_valid(digest, 64))
		return field_err(e, name, "digest", "64 hex digits");
	if (!lease_hex_valid(lease_jstr(r, "sig"), 128))
		return field_err(e, name, "sig", "128 hex digits");
	if (json_object_get(r, "signer") && !lease_hex_valid(lease_jstr(r, "signer"), 64))
		return field_err(e, name, "signer", "64 hex digits (an Ed25519 public key)");
	if (json_object_get(r, "renter") && !lease_hex_valid(lease_jstr(r, "renter"), 64))
		return field_err(e, name, "renter", "64 hex digits (the renter's Ed25519 public key)");
	if (json_object_get(r, "renter_sig") && !lease_hex_valid(lease_jstr(r, "renter_sig"), 128))
		return field_err(e, name, "renter_sig", "128 hex digits (an Ed25519 signature)");
	return 0;
}

int lease_receipt_check(const json_t *r, const char *name, struct common_err *e)
{
	char hex[COMMON_SHA256_HEX];

	if (lease_receipt_shape(r, name, e) < 0)
		return -1;
	lease_receipt_digest_hex(r, hex);
	if (strcmp(hex, lease_jstr(r, "digest")) != 0)
		return common_errf(e, name, "receipt digest does not match its contents (tampered)");
	return 0;
}

int lease_receipt_verify(struct lease_store *s, const json_t *r, const char *name,
			 struct common_err *e)
{
	uint8_t d[COMMON_SHA256_LEN], sig[64], pub[32];
	const char *signer = lease_jstr(r, "signer");
	char own[65];
	int known;

	if (lease_receipt_check(r, name, e) < 0)
		return -1;
	common_hex(s->key.pub, 32, own);
	if (s->etcd && !signer)
		return common_errf(e, name, "receipt names no signer: not made by a host of this store (forged)");
	if (signer && strcmp(signer, own) != 0) {
		known = s->be->signer_known ? s->be->signer_known(s, signer, e) : 0;
		if (known < 0)
			return -1;
		if (!known)
			return common_errf(e, name, "receipt signer %.16s… is not a key registered in store %s (forged)",
					   signer, s->name);
	}
	memcpy(pub, s->key.pub, 32);
	if (signer)
		common_unhex(signer, pub, 32);
	common_unhex(lease_jstr(r, "digest"), d, sizeof d);
	common_unhex(lease_jstr(r, "sig"), sig, sizeof sig);
	if (!common_key_verify(pub, d, sizeof d, sig))
		return common_errf(e, name, signer ?
				   "receipt signature does not verify with its signer's registered key (forged)" :
				   "receipt signature does not verify with this store's authority key (forged)");
	return 0;
}

int lease_evidence_parse(const char *buf, size_t len, const char *name, json_t **receipt,
			 struct common_err *e)
{
	json_t *j = common_json_load(buf, len, name, e), *r;

	if (!j)
		return -1;
	r = json_object_get(j, "receipt");
	if (json_is_object(j) && r && json_is_object(json_object_get(j, "lease")))
		json_incref(r);
	else
		r = json_incref(j);
	json_decref(j);
	if (lease_receipt_check(r, name, e) < 0) {
		json_decref(r);
		return -1;
	}
	*receipt = r;
	return 0;
}

static int dims_check(const json_t *o, uint64_t max, const char *field, const char *name,
		      struct common_err *e)
{
	if (!json_is_object(o) || json_object_size(o) != LEASE_DIM_COUNT)
		return field_err(e, name, field, "an object with every dimension");
	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		int64_t v = lease_jint(o, lease_dim_name((enum lease_dim)d));
		if (v < 0 || (uint64_t)v > max)
			return common_errf(e, name, "field \"%s.%s\": expected an integer in 0..%llu",
					   field, lease_dim_name((enum lease_dim)d),
					   (unsigned long long)max);
	}
	return 0;
}

int lease_record_check(const json_t *rec, const char *name, struct common_err *e)
{
	static const char *const ints[] = { "seq", "lifetime", "requested", "deadline", "batch",
					    "escrow", "escrow_required", "cost", "snapshot_bytes" };
	const char *st;
	enum lease_state state;
	json_t *img;

	if (!json_is_object(rec))
		return common_errf(e, name, "a lease record must be a JSON object");
	if (json_object_size(rec) > 40)
		return common_errf(e, name, "too many fields for a lease record");
	if (!lease_id_valid(lease_jstr(rec, "id")))
		return field_err(e, name, "id", "a lease id (L + 16 hex digits)");
	if (!lease_name_valid(lease_jstr(rec, "principal")))
		return field_err(e, name, "principal", "a name");
	if (!lease_name_valid(lease_jstr(rec, "host_program")))
		return field_err(e, name, "host_program", "a name");
	if (!lease_jstr(rec, "namespace"))
		return field_err(e, name, "namespace", "a string");
	st = lease_jstr(rec, "state");
	if (!st || lease_state_parse(st, &state) < 0)
		return field_err(e, name, "state", "a lease state");
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
		if (lease_jint(rec, ints[i]) < 0)
			return field_err(e, name, ints[i], "a non-negative integer");
	if (!lease_hex_valid(lease_jstr(rec, "head"), 64))
		return field_err(e, name, "head", "64 hex digits");
	img = json_object_get(rec, "image");
	if (!json_is_object(img) || !lease_jstr(img, "path") ||
	    !lease_hex_valid(lease_jstr(img, "sha256"), 64))
		return field_err(e, name, "image", "{\"path\", \"sha256\"}");
	if (dims_check(json_object_get(rec, "limits"), UINT64_MAX >> 1, "limits", name, e) < 0 ||
	    dims_check(json_object_get(rec, "fees"), LEASE_FEE_MAX, "fees", name, e) < 0 ||
	    dims_check(json_object_get(rec, "usage"), LEASE_USAGE_MAX, "usage", name, e) < 0)
		return -1;
	if (!json_is_array(json_object_get(rec, "snapshots")))
		return field_err(e, name, "snapshots", "an array");
	if (json_object_get(rec, "renter") && !lease_hex_valid(lease_jstr(rec, "renter"), 64))
		return field_err(e, name, "renter", "64 hex digits (the renter's key)");
	if (json_object_get(rec, "ephemeral") && !lease_hex_valid(lease_jstr(rec, "ephemeral"), 64))
		return field_err(e, name, "ephemeral", "64 hex digits (the key of its run's host)");
	if (json_object_get(rec, "prev") && !lease_id_valid(lease_jstr(rec, "prev")))
		return field_err(e, name, "prev", "a lease id (L + 16 hex digits)");
	return 0;
}
