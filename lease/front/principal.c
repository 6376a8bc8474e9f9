/* Principals prove who they are (SPEC §3): each has an Ed25519 key pair kept with
 * the principal (its configuration directory or --principal-key), never in the
 * store. The store records a principal's public key at its first use (trust on
 * first use) and checks, before it acts, that every edge a renter asks for is
 * signed by that key over the lease, the edge and a nonce that the edge consumes
 * (the lease's head; for a snapshot, how many it has), so no signature is replayed. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "lease/front/front-internal.h"

#define PKEY_HEX 128          /* private then public key, hex */
#define RENTER_DOMAIN "sbx/renter/v1"

void lease_keys_forget(struct lease_store *s)
{
	OPENSSL_cleanse(&s->key, sizeof s->key);
	OPENSSL_cleanse(&s->pkey, sizeof s->pkey);
	free(s->pkey_file);
	s->pkey_file = NULL;
	s->pkey_ok = 0;
}

void lease_store_principal_key(struct lease_store *s, const char *file)
{
	free(s->pkey_file);
	s->pkey_file = file ? common_xstrdup(file) : NULL;
}

/* $XDG_CONFIG_HOME/sbx/principals, else ~/.config/sbx/principals */
static char *principal_dir(void)
{
	const char *v = getenv("XDG_CONFIG_HOME");

	if (v && *v == '/')
		return common_xasprintf("%s/sbx/principals", v);
	v = getenv("HOME");
	if (!v || *v != '/') {
		struct passwd *pw = getpwuid(geteuid());
		v = pw ? pw->pw_dir : "/";
	}
	return common_xasprintf("%s/.config/sbx/principals", v);
}

/* 1 with k from path, 0 when there is no such file, -1 damaged (hostile bytes). */
static int key_read(const char *name, const char *path, struct common_key *k, struct common_err *e)
{
	struct common_key want;
	char *buf, what[LEASE_NAME_MAX + 16];
	size_t len;

	snprintf(what, sizeof what, "principal %s", name);
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	if (common_read_file(path, LEASE_PKEY_FILE_MAX, &buf, &len, e) < 0) {
		common_err_context(e, "%s: key", what);
		return -1;
	}
	if (len == PKEY_HEX + 1 && buf[PKEY_HEX] == '\n')
		buf[--len] = 0;
	int ok = len == PKEY_HEX && common_unhex(buf + 64, want.pub, 32) == 0 &&
		 (buf[64] = 0, common_unhex(buf, k->priv, 32)) == 0 && common_key_derive(k) == 0 &&
		 memcmp(k->pub, want.pub, 32) == 0;
	free(buf);
	if (!ok)
		return common_errf(e, what, "key file %s is damaged (expected 128 hex digits: an "
				   "Ed25519 private key and its public key)", path);
	return 1;
}

/* The invoker's own key for a name it uses first: 0600 in a 0700 directory, written
 * whole aside and linked in, so of callers making it at once one key stands: the
 * one read back. */
static int key_make(const char *name, const char *dir, const char *path, struct common_key *k,
		    struct common_err *e)
{
	char hex[PKEY_HEX + 2], *tmp;
	int r;

	if (common_mkdir_p(dir, 0700, e) < 0 || common_key_generate(k, e) < 0)
		return -1;
	common_hex(k->priv, 32, hex);
	common_hex(k->pub, 32, hex + 64);
	strcat(hex, "\n");
	tmp = common_xasprintf("%s.new.%d", path, (int)getpid());
	r = common_write_atomic(tmp, hex, strlen(hex), 0600, e);
	if (r == 0 && link(tmp, path) < 0 && errno != EEXIST)
		r = common_errno(e, errno, "principal %s: key %s", name, path);
	unlink(tmp);
	free(tmp);
	OPENSSL_cleanse(hex, sizeof hex);
	return r < 0 ? -1 : key_read(name, path, k, e);
}

/* The caller's key for principal name: --principal-key, else the principal's own
 * file, made when create (a request: first use) and absent. */
static int caller_key(struct lease_store *s, const char *name, int create, struct common_err *e)
{
	char *dir, *path, what[LEASE_NAME_MAX + 16];
	int r;

	snprintf(what, sizeof what, "principal %s", name);
	if (s->pkey_ok && strcmp(s->pkey_name, name) == 0)
		return 0;
	s->pkey_ok = 0;
	dir = principal_dir();
	path = s->pkey_file ? common_xstrdup(s->pkey_file) : common_xasprintf("%s/%s", dir, name);
	r = key_read(name, path, &s->pkey, e);
	if (r == 0 && create && !s->pkey_file)
		r = key_make(name, dir, path, &s->pkey, e);
	if (r == 0)
		r = common_errf(e, what, "not signed by its key (no key %s; give "
				"--principal-key FILE)", path);
	free(dir);
	free(path);
	if (r < 0)
		return -1;
	snprintf(s->pkey_name, sizeof s->pkey_name, "%s", name);
	s->pkey_ok = 1;
	return 0;
}

/* The key the store knows name by: 1 with hex, 0 none yet. */
static int registered(struct lease_store *s, const char *name, char hex[65], struct common_err *e)
{
	char *key = NULL, *where = NULL;
	int r = s->be->principal_get(s, name, &key, &where, e);

	if (r > 0 && key && lease_hex_valid(key, 64))
		memcpy(hex, key, 65);
	else if (r > 0)
		r = common_errf(e, where, "damaged principal record (expected its 64 hex digit key)");
	free(key);
	free(where);
	return r;
}

/* What a renter signs: the domain, then {"edge", "lease", "nonce"} canonical. */
static char *renter_message(const char *id, const char *edge, const char *nonce, size_t *len)
{
	json_t *m = json_pack("{s:s, s:s, s:s}", "edge", edge, "lease", id, "nonce", nonce);
	char *c = common_json_canonical(m), *msg;

	json_decref(m);
	*len = sizeof RENTER_DOMAIN + strlen(c);
	msg = common_xmalloc(*len);
	memcpy(msg, RENTER_DOMAIN, sizeof RENTER_DOMAIN); /* with its NUL: the separator */
	memcpy(msg + sizeof RENTER_DOMAIN, c, strlen(c));
	free(c);
	return msg;
}

/* The nonce an edge consumes: the head it moves on; a snapshot (taken while
 * observations move the head) consumes the count of snapshots; a request, whose
 * lease id is fresh and never reused, none. */
static void renter_nonce(const json_t *rec, enum lease_edge edge, char *out, size_t n)
{
	if (!rec)
		snprintf(out, n, "request");
	else if (edge == LEASE_EDGE_SNAPSHOT)
		snprintf(out, n, "snapshots:%zu", json_array_size(json_object_get(rec, "snapshots")));
	else
		snprintf(out, n, "%s", lease_jstr(rec, "head"));
}

int lease_renter_holds(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	const char *who = lease_jstr(rec, "principal");
	char pub[65], known[65], what[LEASE_NAME_MAX + 16];
	int reg;

	if (!who || caller_key(s, who, 0, e) < 0)
		return -1;
	if ((reg = registered(s, who, known, e)) < 0)
		return -1;
	common_hex(s->pkey.pub, 32, pub);
	snprintf(what, sizeof what, "principal %s", who);
	/* a lease from before principals had keys: its first signed use records one */
	if (reg && strcmp(pub, known) != 0)
		return common_errf(e, what, "not signed by its key (the store knows %s by key "
				   "%.16s…)", who, known);
	return 0;
}

int lease_renter_presign(struct lease_store *s, const json_t *rec, enum lease_edge edge,
			 char pub[65], char sig[129], struct common_err *e)
{
	char nonce[80];
	uint8_t raw[64];
	size_t len;
	char *msg;
	int r;

	if (caller_key(s, lease_jstr(rec, "principal"), 0, e) < 0)
		return -1;
	renter_nonce(rec, edge, nonce, sizeof nonce);
	msg = renter_message(lease_jstr(rec, "id"), lease_edge_name(edge), nonce, &len);
	r = common_key_sign(&s->pkey, msg, len, raw, e);
	free(msg);
	common_hex(s->pkey.pub, 32, pub);
	common_hex(raw, 64, sig);
	return r;
}

int lease_renter_sign(struct lease_store *s, const json_t *rec, const char *principal,
		      json_t *r, const json_t *args, struct common_err *e)
{
	const char *id = lease_jstr(r, "lease"), *edge = lease_jstr(r, "edge");
	const char *given = lease_jstr(args, "renter_sig"), *gpub = lease_jstr(args, "renter");
	char pub[65], sig[129], known[65], nonce[80], what[LEASE_NAME_MAX + 16];
	uint8_t kraw[32], sraw[64];
	enum lease_edge ed;
	size_t len;
	char *msg;
	int ok, reg, pre = given && gpub && lease_hex_valid(given, 128) && lease_hex_valid(gpub, 64);

	lease_edge_parse(edge, &ed);
	snprintf(what, sizeof what, "principal %s", principal);
	json_t *gs = json_object_get(args, "renter_sig"), *gp = json_object_get(args, "renter");
	if (!pre && ((gs && !json_is_null(gs)) || (gp && !json_is_null(gp))))
		return common_errf(e, what, "not signed by its key (a malformed signature)");
	if (pre) {
		snprintf(pub, sizeof pub, "%s", gpub); /* signed by the caller of another tool */
		snprintf(sig, sizeof sig, "%s", given);
	} else {
		if (caller_key(s, principal, !rec, e) < 0)
			return -1;
		common_hex(s->pkey.pub, 32, pub);
	}
	if ((reg = registered(s, principal, known, e)) < 0)
		return -1;
	if (!reg && (s->be->principal_put(s, principal, pub, e) < 0 ||
		     (reg = registered(s, principal, known, e)) < 0))
		return -1;
	if (!reg)
		return common_errf(e, what, "its key was not recorded in store %s", s->name);
	renter_nonce(rec, ed, nonce, sizeof nonce);
	msg = renter_message(id, edge, nonce, &len);
	if (!pre) {
		if (common_key_sign(&s->pkey, msg, len, sraw, e) < 0) {
			free(msg);
			return -1;
		}
		common_hex(sraw, 64, sig);
	}
	common_unhex(known, kraw, 32);
	/* what the caller's own key just signed holds iff that key is the one recorded */
	ok = pre ? common_unhex(sig, sraw, 64) == 0 && common_key_verify(kraw, msg, len, sraw)
		 : strcmp(pub, known) == 0;
	free(msg);
	if (!ok)
		return common_errf(e, what, "not signed by its key (the store knows %s by key %.16s…)",
				   principal, known);
	json_object_set_new(r, "renter", json_string(known));
	json_object_set_new(r, "renter_sig", json_string(sig));
	return 0;
}

int lease_renter_check(struct lease_store *s, const json_t *rec, const json_t *r,
		       struct common_err *e)
{
	const char *pub = lease_jstr(r, "renter"), *sig = lease_jstr(r, "renter_sig");
	const char *who = rec ? lease_jstr(rec, "principal")
			      : lease_jstr(json_object_get(r, "request"), "principal");
	char nonce[80], known[65];
	uint8_t kraw[32], sraw[64];
	enum lease_edge ed;
	size_t len;
	char *msg;
	int ok, reg;

	if (!who || lease_edge_parse(lease_jstr(r, "edge"), &ed) < 0)
		return common_errf(e, "receipt", "renter signature on a receipt without principal or edge");
	if ((reg = registered(s, who, known, e)) < 0)
		return -1;
	if (!reg || !pub || strcmp(pub, known) != 0)
		return common_errf(e, lease_jstr(r, "lease"), "receipt seq %lld names renter key %.16s…, "
				   "not the key recorded for principal %s", (long long)lease_jint(r, "seq"),
				   pub ? pub : "(none)", who);
	renter_nonce(rec, ed, nonce, sizeof nonce);
	msg = renter_message(lease_jstr(r, "lease"), lease_jstr(r, "edge"), nonce, &len);
	ok = common_unhex(pub, kraw, 32) == 0 && sig && common_unhex(sig, sraw, 64) == 0 &&
	     common_key_verify(kraw, msg, len, sraw);
	free(msg);
	if (!ok)
		return common_errf(e, lease_jstr(r, "lease"), "receipt seq %lld: renter signature "
				   "does not verify", (long long)lease_jint(r, "seq"));
	return 0;
}
