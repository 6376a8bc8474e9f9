/* libFuzzer target for the receipt/evidence reader: any bytes give a checked
 * receipt or a clean error, never a crash or a leak. */
#include <stdint.h>
#include "lease/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct common_err e;
	json_t *r;

	if (lease_evidence_parse((const char *)data, size, "fuzz", &r, &e) == 0) {
		/* a parsed receipt must pass its own check again */
		if (lease_receipt_check(r, "fuzz", &e) != 0)
			__builtin_trap();
		json_decref(r);
	}
	return 0;
}
