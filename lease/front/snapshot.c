/* Snapshot records and chunk locations (SPEC §2, §8.3): with etcd, PREFIX/snapshot/HEX
 * tells every host a snapshot's manifest, its origin and where its chunks are; the
 * chunks are in $SBX_SNAPSHOT_DIR when hosts share one, else on the taking host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

#define HOST_MAX 255
#define MANIFEST_HEX 88 /* the 44-byte manifest */

const char *lease_snapshot_top(const struct lease_store *s)
{
	return s->snapdir;
}

static int field_err(struct common_err *e, const char *name, const char *field, const char *want)
{
	return common_errf(e, name, "snapshot record: \"%s\" must be %s", field, want);
}

static int count_ok(const json_t *rec, const char *k)
{
	int64_t v = lease_jint(rec, k);

	return v >= 0 && (uint64_t)v <= LEASE_USAGE_MAX;
}

static int host_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	if (n == 0 || n > HOST_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)h[i] < 0x21 || (unsigned char)h[i] > 0x7e)
			return 0;
	return 1;
}

int lease_snapshot_record_check(const json_t *rec, const char *hex, const char *name,
				struct common_err *e)
{
	const char *d = lease_jstr(rec, "digest"), *m = lease_jstr(rec, "manifest");
	const char *loc = lease_jstr(rec, "location");

	if (!json_is_object(rec))
		return common_errf(e, name, "snapshot record: expected an object");
	if (!lease_hex_valid(d, 64) || (hex && strcmp(d, hex) != 0))
		return field_err(e, name, "digest", hex ? "the digest its key names" : "64 hex digits");
	if (!lease_hex_valid(m, MANIFEST_HEX) || strncmp(m, d, 64) != 0)
		return field_err(e, name, "manifest", "88 hex digits starting with the digest");
	if (!count_ok(rec, "bytes") || !count_ok(rec, "chunks") || !count_ok(rec, "batch") ||
	    !count_ok(rec, "persisted_bytes"))
		return field_err(e, name, "bytes, chunks, persisted_bytes and batch",
				 "non-negative integers");
	if (!lease_id_valid(lease_jstr(rec, "lease")))
		return field_err(e, name, "lease", "a lease id");
	if (!lease_name_valid(lease_jstr(rec, "principal")) ||
	    !lease_name_valid(lease_jstr(rec, "host_program")))
		return field_err(e, name, "principal and host_program", "names");
	if (!lease_hex_valid(lease_jstr(rec, "image"), 64) ||
	    !lease_hex_valid(lease_jstr(rec, "signer"), 64))
		return field_err(e, name, "image and signer", "64 hex digits");
	if (!host_ok(lease_jstr(rec, "host")))
		return field_err(e, name, "host", "a host name");
	if (!loc || (strcmp(loc, "host") != 0 && strcmp(loc, "shared") != 0))
		return field_err(e, name, "location", "\"host\" or \"shared\"");
	return 0;
}

static int hex_ok(const char *hex, struct common_err *e)
{
	if (!lease_hex_valid(hex, 64))
		return common_errf(e, hex, "not a snapshot digest (64 lowercase hex digits)");
	return 0;
}

int lease_snapshot_lookup(struct lease_store *s, const char *hex, json_t **rec,
			  struct common_err *e)
{
	char name[96];

	*rec = NULL;
	if (hex_ok(hex, e) < 0 || s->be->snap_get(s, hex, rec, e) < 0)
		return -1;
	snprintf(name, sizeof name, "snapshot %s", hex);
	if (*rec && lease_snapshot_record_check(*rec, hex, name, e) < 0) {
		json_decref(*rec);
		*rec = NULL;
		return -1;
	}
	return 0;
}

int lease_snapshot_records(struct lease_store *s, json_t **recs, struct common_err *e)
{
	json_t *r;
	size_t i;

	if (s->be->snap_all(s, recs, e) < 0)
		return -1;
	json_array_foreach(*recs, i, r)
		if (lease_snapshot_record_check(r, NULL, "snapshot record", e) < 0) {
			json_decref(*recs);
			*recs = NULL;
			return -1;
		}
	return 0;
}

/* The same snapshot registered twice must be the same manifest. */
static int same_manifest(struct lease_store *s, const char *hex, const json_t *rec,
			 struct common_err *e)
{
	json_t *have;
	int same;

	if (lease_snapshot_lookup(s, hex, &have, e) < 0)
		return -1;
	if (!have)
		return common_errf(e, "snapshot", "%s: its record vanished while being registered", hex);
	same = strcmp(lease_jstr(have, "manifest"), lease_jstr(rec, "manifest")) == 0;
	if (!same)
		common_errf(e, "snapshot", "%s: store %s registered another manifest for it (%s, "
			    "from host %s); refused, nothing changed", hex, s->name,
			    lease_jstr(have, "manifest"), lease_jstr(have, "host"));
	json_decref(have);
	return same ? 0 : -1;
}

int lease_snapshot_register(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	const char *hex = lease_jstr(rec, "digest");
	char pub[65], host[HOST_MAX + 1] = "", name[96];
	json_t *full;
	int put;

	if (hex_ok(hex, e) < 0)
		return -1;
	common_hex(s->key.pub, 32, pub);
	if (gethostname(host, sizeof host - 1) < 0 || !host_ok(host))
		snprintf(host, sizeof host, "unnamed");
	full = json_copy((json_t *)rec);
	json_object_set_new(full, "signer", json_string(pub));
	json_object_set_new(full, "host", json_string(host));
	json_object_set_new(full, "location", json_string(s->snapshared ? "shared" : "host"));
	snprintf(name, sizeof name, "snapshot %s", hex);
	put = lease_snapshot_record_check(full, hex, name, e);
	if (put == 0)
		put = s->be->snap_put(s, hex, full, e);
	if (put == 0)
		put = same_manifest(s, hex, full, e);
	json_decref(full);
	return put;
}

int lease_snapshot_unregister(struct lease_store *s, const char *hex, struct common_err *e)
{
	if (hex_ok(hex, e) < 0)
		return -1;
	return s->be->snap_del(s, hex, e);
}

static int is_dir(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Why hex's chunks are not here, from its record. */
static void not_here(struct lease_store *s, const char *hex, const json_t *rec,
		     struct common_err *e)
{
	char pub[65], what[80];

	common_hex(s->key.pub, 32, pub);
	snprintf(what, sizeof what, "snapshot %s", hex);
	if (!rec)
		common_errf(e, hex, "no such snapshot in the store");
	else if (strcmp(lease_jstr(rec, "location"), "shared") == 0)
		common_errf(e, what, "its chunks are in the shared snapshot dir of host %s (key "
			    "%.16s): set SBX_SNAPSHOT_DIR to that directory here too",
			    lease_jstr(rec, "host"), lease_jstr(rec, "signer"));
	else if (strcmp(lease_jstr(rec, "signer"), pub) != 0)
		common_errf(e, what, "its chunks are on host %s (key %.16s): carry them with "
			    "sbx-snap export | sbx-snap import, or use a shared snapshot dir",
			    lease_jstr(rec, "host"), lease_jstr(rec, "signer"));
	else
		common_errf(e, what, "its chunks are missing from this host (%s/snapshots)", s->dir);
}

char *lease_snapshot_chunks(struct lease_store *s, const char *hex, const json_t *rec,
			    struct common_err *e)
{
	char *p;

	if (hex_ok(hex, e) < 0)
		return NULL;
	p = common_xasprintf("%s/%s", s->snapdir, hex);
	if (is_dir(p))
		return p;
	free(p);
	p = lease_path(s, "snapshots/%s", hex);
	if (is_dir(p))
		return p;
	free(p);
	not_here(s, hex, rec, e);
	return NULL;
}
