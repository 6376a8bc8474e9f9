/* libFuzzer target for the etcd gateway reply decoder: a status byte then
 * arbitrary bytes as the reply body are decoded (JSON, gRPC code, base64
 * keys and values below the prefix) or refused with a message, never crash. */
#include <stdint.h>
#include <stdlib.h>
#include "lease/lease-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
			      &e) == 0)
		json_decref(kvs);
	return 0;
}
