/* libFuzzer target for the etcd gateway reply decoder: a status byte then
 * arbitrary bytes as the reply body are decoded (JSON, gRPC code, base64
 * keys and values below the prefix) or refused with a message, never crash.
 * Each value, and the body itself, is then read as a snapshot record. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lease/etcd/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A PREFIX/snapshot/HEX value: checked against its key's digest, and any digest. */
static void snapshot_record(const char *v, size_t len, const char *hex)
{
	struct common_err e;
	json_t *rec = common_json_load(v, len, "fuzz", &e);

	if (!rec)
		return;
	lease_snapshot_record_check(rec, hex, "fuzz", &e);
	lease_snapshot_record_check(rec, NULL, "fuzz", &e);
	json_decref(rec);
}

static const long statuses[] = { 200, 400, 401, 404, 500, 503 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct lease_etcd *c;
	struct common_err e;
	json_t *kvs = NULL;

	if (!c && lease_etcd_open("etcd://127.0.0.1:1/fuzz/p", &c, &e) < 0)
		abort();
	if (size == 0)
		return 0;
	if (lease_etcd_decode(c, statuses[data[0] % 6], (const char *)data + 1, size - 1, &kvs,
			      &e) == 0) {
		json_t *kv;
		size_t i;
		json_array_foreach(kvs, i, kv) {
			const char *k = json_string_value(json_array_get(kv, 0));
			const char *v = json_string_value(json_array_get(kv, 1));
			snapshot_record(v, strlen(v), strncmp(k, "snapshot/", 9) == 0 ? k + 9 : NULL);
		}
		json_decref(kvs);
	}
	snapshot_record((const char *)data + 1, size - 1, NULL);
	return 0;
}
