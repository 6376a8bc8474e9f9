/* libFuzzer target for the --policy file decoder (trace/inspect/policy.c), fed
 * as is: parsed or refused, never a crash, a leak or a read past the input. */
#include <stdint.h>
#include <stdlib.h>
#include "trace/inspect/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_policy *p = NULL;
	struct common_err e;
	if (trace_policy_parse((const char *)data, size, "fuzz", &p, &e) == 0) {
		if (!p)
			abort();
		trace_policy_free(p);
	}
	return 0;
}
