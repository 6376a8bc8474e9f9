/* libFuzzer target for the bound a dead run left in its claim (lease_run_bound_decode). */
#include <stdint.h>
#include <string.h>
#include "lease/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seq, b[LEASE_DIM_COUNT];

	if (lease_run_bound_decode(data, size, "L0123456789abcdef", &seq, b) == 0)
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			if (b[d] > (1ull << 62))
				__builtin_trap(); /* a decoded bound above any usage */
	return 0;
}
