#include "hello.h"

uint64_t fnv_run(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; } return h;
}
