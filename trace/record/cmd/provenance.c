/* Build provenance from a trace: an in-toto Statement v1 whose predicate is SLSA
 * Provenance v1 (subjects: the outputs with their SHA-256 as they are now on the
 * host; resolvedDependencies: the inputs read and the tools executed, with the
 * SHA-256 the trace recorded), in a DSSE envelope signed with the store's
 * Ed25519 authority key. DSSE signs PAE(type, payload), never the JSON itself. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/record/cmd/cmd-internal.h"
#include "trace/tracee/tracee.h"

#define PAYLOAD_TYPE "application/vnd.in-toto+json"
#define ENVELOPE_MAX (64u << 20)

static char *b64(const void *p, size_t n)
{
	char *out = common_xmalloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

/* Standard base64 with padding; NULL when s is not that. */
static uint8_t *unb64(const char *s, size_t *n)
{
	size_t len = strlen(s);
	if (len % 4 || len > 2 * (size_t)ENVELOPE_MAX)
		return NULL;
	uint8_t *out = common_xmalloc(len / 4 * 3 + 1);
	int r = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
	if (r < 0 || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != len) {
		free(out);
		return NULL;
	}
	*n = (size_t)r - (len && s[len - 1] == '=') - (len > 1 && s[len - 2] == '=');
	return out;
}

/* DSSE's pre-authentication encoding: "DSSEv1 LEN(type) type LEN(body) body". */
static char *pae(const char *body, size_t blen, size_t *len)
{
	char head[128];
	int h = snprintf(head, sizeof head, "DSSEv1 %zu %s %zu ", strlen(PAYLOAD_TYPE), PAYLOAD_TYPE, blen);
	char *m = common_xmalloc((size_t)h + blen);
	memcpy(m, head, (size_t)h);
	memcpy(m + h, body, blen);
	*len = (size_t)h + blen;
	return m;
}

/* The host file behind a guest path, through the run's binds (the deepest wins). */
static char *host_path(const json_t *mounts, const char *guest)
{
	const json_t *best = NULL, *m;
	size_t i, best_len = 0;
	json_array_foreach(mounts, i, m) {
		const char *dst = json_string_value(json_object_get(m, "dst"));
		const char *type = json_string_value(json_object_get(m, "type"));
		size_t n = dst ? strlen(dst) : 0;
		if (!dst || !type || strcmp(type, "bind") || !json_string_value(json_object_get(m, "src")))
			continue;
		if (strcmp(dst, "/") == 0)
			n = 0;
		if (strncmp(guest, dst, n) == 0 && (guest[n] == '/' || guest[n] == 0) && n >= best_len) {
			best = m;
			best_len = n;
		}
	}
	if (!best)
		return NULL;
	return common_xasprintf("%s%s", json_string_value(json_object_get(best, "src")),
				guest + best_len);
}

/* The build's outputs that are still on the host, hashed now. */
static json_t *subjects(const json_t *rec, const json_t *mounts)
{
	json_t *out = json_array(), *v;
	size_t i;
	json_array_foreach(json_object_get(rec, "outputs"), i, v) {
		const char *g = json_string_value(json_object_get(v, "path"));
		char folded[PATH_MAX];
		if (g)
			trace_path_fold(g, folded);
		/* a hostile trace's "/src/../../etc/x" names nothing outside its binds */
		char *h = g && !strcmp(g, folded) ? host_path(mounts, g) : NULL;
		int fd = h ? open(h, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
		struct stat st;
		uint8_t d[COMMON_SHA256_LEN];
		char hex[COMMON_SHA256_HEX];
		struct common_err e;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    common_sha256_fd(fd, h, d, &e) == 0) {
			common_hex(d, sizeof d, hex);
			json_array_append_new(out, json_pack("{s:s, s:{s:s}}", "name", g, "digest",
							     "sha256", hex));
		}
		if (fd >= 0)
			close(fd);
		free(h);
	}
	return out;
}

static json_t *dependencies(const json_t *rec)
{
	static const char *const lists[] = { "inputs", "tools" };
	json_t *out = json_array(), *v;
	size_t i;
	for (size_t k = 0; k < 2; k++)
		json_array_foreach(json_object_get(rec, lists[k]), i, v) {
			const char *p = json_string_value(json_object_get(v, "path"));
			const char *sha = json_string_value(json_object_get(v, "sha256"));
			json_t *d = json_pack("{s:s+}", "uri", "file://", p ? p : "");
			if (!d)
				continue; /* a path JSON cannot hold */
			if (sha)
				json_object_set_new(d, "digest", json_pack("{s:s}", "sha256", sha));
			json_array_append_new(out, d);
		}
	return out;
}

static int read_result(const char *path, json_t **out, struct common_err *e)
{
	char *buf;
	size_t len;
	if (common_read_file(path, ENVELOPE_MAX, &buf, &len, e) < 0)
		return -1;
	*out = common_json_load(buf, len, path, e);
	free(buf);
	if (!*out)
		return -1;
	if (!json_is_array(json_object_get(*out, "receipts"))) {
		json_decref(*out);
		*out = NULL;
		return common_errf(e, path, "not a result record with receipts");
	}
	return 0;
}

/* The statement; lease and last receipt from the result record when given. */
static json_t *statement(const char *trace, const char *result, struct common_err *e)
{
	json_t *rec = trace_buildrec(trace, 1, e), *res = NULL, *hdr = NULL;
	struct trace_reader *t;
	if (!rec || !(t = trace_reader_open(trace, e))) {
		json_decref(rec);
		return NULL;
	}
	struct trace_event ev;
	if (trace_reader_next(t, &ev, e) < 0) { /* the header is read with the first event */
		trace_reader_close(t);
		json_decref(rec);
		return NULL;
	}
	hdr = json_deep_copy(trace_reader_header(t));
	trace_reader_close(t);
	if (result && read_result(result, &res, e) < 0) {
		json_decref(rec);
		json_decref(hdr);
		return NULL;
	}
	json_t *receipts = json_object_get(res, "receipts");
	json_t *last = json_array_get(receipts, json_array_size(receipts) - 1);
	json_t *mounts = json_object_get(hdr, "mounts");
	json_t *ext = json_pack("{s:O?, s:O?, s:O?, s:O?}", "argv", json_object_get(hdr, "argv"),
				"env_sha256", json_object_get(hdr, "env_sha256"), "mounts", mounts,
				"image", json_object_get(hdr, "image"));
	json_t *internal = json_pack("{s:O?, s:O?, s:O?}", "lease", json_object_get(hdr, "lease"),
				     "last_receipt_digest", json_object_get(last, "digest"),
				     "trace_level", json_object_get(hdr, "level"));
	json_t *st = json_pack(
		"{s:s, s:o, s:s, s:{s:{s:s, s:o, s:o, s:o}, s:{s:{s:s}, s:{s:O?}}}}",
		"_type", "https://in-toto.io/Statement/v1", "subject", subjects(rec, mounts),
		"predicateType", "https://slsa.dev/provenance/v1", "predicate", "buildDefinition",
		"buildType", "https://sbx.invalid/sbx-run/v1", "externalParameters", ext,
		"internalParameters", internal, "resolvedDependencies", dependencies(rec),
		"runDetails", "builder", "id", "https://sbx.invalid/sbx-run", "metadata",
		"invocationId", json_object_get(hdr, "lease"));
	json_decref(rec);
	json_decref(hdr);
	json_decref(res);
	if (!st)
		common_errf(e, trace, "the trace's header cannot make a statement");
	return st;
}

int trace_cmd_provenance(const char *trace, const char *result, const char *store,
			 const char *out, struct common_err *e)
{
	struct lease_store *s = NULL;
	json_t *st = statement(trace, result, e);
	uint8_t sig[64], pub[32];
	char keyid[65];
	int rc = -1;
	if (!st || lease_store_open(store, &s, e) < 0)
		goto done;
	char *body = common_json_canonical(st), *p, *p64 = NULL, *s64 = NULL, *env = NULL;
	size_t plen;
	p = pae(body, strlen(body), &plen);
	if (lease_store_sign(s, p, plen, sig, e) == 0) {
		lease_store_pubkey(s, pub);
		common_hex(pub, sizeof pub, keyid);
		p64 = b64(body, strlen(body));
		s64 = b64(sig, sizeof sig);
		json_t *envj = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "payloadType", PAYLOAD_TYPE,
					 "payload", p64, "signatures", "keyid", keyid, "sig", s64);
		env = common_json_canonical(envj);
		json_decref(envj);
		if (!out || !strcmp(out, "-"))
			rc = printf("%s\n", env) < 0 ? common_errno(e, errno, "stdout") : 0;
		else
			rc = common_write_atomic(out, env, strlen(env), 0644, e);
	}
	free(body);
	free(p);
	free(p64);
	free(s64);
	free(env);
done:
	json_decref(st);
	lease_store_close(s);
	return rc;
}

/* The envelope's signature by this store's key over PAE(type, payload), and a
 * statement in it with well-formed subjects. */
int trace_cmd_verify_provenance(const char *file, const char *store, struct common_err *e)
{
	struct lease_store *s = NULL;
	char *buf = NULL, *p = NULL, keyid[65];
	size_t len, n = 0, slen = 0, plen;
	uint8_t *body = NULL, *sig = NULL, pub[32];
	json_t *env = NULL, *st = NULL, *v;
	int rc = -1;

	if (common_read_file(file, ENVELOPE_MAX, &buf, &len, e) < 0 ||
	    !(env = common_json_load(buf, len, file, e)) || lease_store_open(store, &s, e) < 0)
		goto done;
	const json_t *sg = json_array_get(json_object_get(env, "signatures"), 0);
	const char *type = json_string_value(json_object_get(env, "payloadType"));
	const char *pl = json_string_value(json_object_get(env, "payload"));
	const char *sv = json_string_value(json_object_get(sg, "sig"));
	lease_store_pubkey(s, pub);
	common_hex(pub, sizeof pub, keyid);
	if (!type || strcmp(type, PAYLOAD_TYPE) || !pl || !sv ||
	    json_array_size(json_object_get(env, "signatures")) != 1) {
		common_errf(e, file, "not a DSSE envelope of an in-toto statement");
		goto done;
	}
	if (!(body = unb64(pl, &n)) || !(sig = unb64(sv, &slen)) || slen != 64) {
		common_errf(e, file, "payload or signature is not base64 (or not 64 bytes)");
		goto done;
	}
	if (!json_string_value(json_object_get(sg, "keyid")) ||
	    strcmp(json_string_value(json_object_get(sg, "keyid")), keyid)) {
		common_errf(e, file, "signed by another key than this store's (%s)", keyid);
		goto done;
	}
	p = pae((const char *)body, n, &plen);
	if (common_key_verify(pub, p, plen, sig) != 1) {
		common_errf(e, file, "the signature does not verify (the envelope was changed)");
		goto done;
	}
	st = common_json_load((const char *)body, n, "payload", e);
	const char *t = json_string_value(json_object_get(st, "_type"));
	if (!t || strcmp(t, "https://in-toto.io/Statement/v1") ||
	    !json_is_array(json_object_get(st, "subject"))) {
		common_errf(e, file, "the payload is not an in-toto Statement v1");
		goto done;
	}
	json_array_foreach(json_object_get(st, "subject"), len, v)
		if (!json_string_value(json_object_get(v, "name")) ||
		    !json_string_value(json_object_get(json_object_get(v, "digest"), "sha256"))) {
			common_errf(e, file, "subject %zu has no name or sha256", len);
			goto done;
		}
	printf("{\"ok\":true,\"subjects\":%zu}\n", json_array_size(json_object_get(st, "subject")));
	rc = 0;
done:
	free(buf);
	free(body);
	free(sig);
	free(p);
	json_decref(env);
	json_decref(st);
	lease_store_close(s);
	return rc;
}
