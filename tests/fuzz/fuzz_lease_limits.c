/* libFuzzer target for the --limits/--fees/--usage/--amount readers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct lease_request req;
	struct common_err e;
	uint64_t u[LEASE_DIM_COUNT] = { 0 }, v;
	int given[LEASE_DIM_COUNT] = { 0 };

	memcpy(s, data, size);
	s[size] = '\0';
	memset(&req, 0, sizeof req);
	if (lease_parse_limits(s, &req, &e) == 0) {
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			if (req.has_limit[d] && req.limits[d] > lease_dim_ceiling((enum lease_dim)d))
				__builtin_trap(); /* admitted above a ceiling */
		if (req.lifetime > LEASE_LIFETIME_CEILING)
			__builtin_trap();
	}
	lease_parse_fees(s, &req, &e);
	lease_parse_usage(s, u, given, &e);
	lease_parse_amount("fuzz", s, &v, &e);
	free(s);
	return 0;
}
