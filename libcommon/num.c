/* Numbers from the command line and records: decimal, optional binary suffix, bounded. */
#include <ctype.h>
#include <string.h>
#include "libcommon/common.h"

int common_parse_u64(const char *s, uint64_t max, uint64_t *out, struct common_err *e)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*s))
		return common_errf(e, s ? s : "(null)", "not a non-negative integer");
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return common_errf(e, s, "number too large");
		v = v * 10 + d;
	}
	switch (*p) {
	case '\0': break;
	case 'K': case 'k': mul = 1ull << 10; p++; break;
	case 'M': case 'm': mul = 1ull << 20; p++; break;
	case 'G': case 'g': mul = 1ull << 30; p++; break;
	case 'T': case 't': mul = 1ull << 40; p++; break;
	default:
		return common_errf(e, s, "not a non-negative integer");
	}
	if (*p)
		return common_errf(e, s, "not a non-negative integer");
	if (v > UINT64_MAX / mul)
		return common_errf(e, s, "number too large");
	v *= mul;
	if (v > max)
		return common_errf(e, s, "exceeds the maximum %llu", (unsigned long long)max);
	*out = v;
	return 0;
}
