#include "hello.h"

uint64_t sqrt_run(const char *s, size_t n)
{
	uint64_t x = n * 1000003ull, r = x; (void)s; while (r * r > x) r = (r + x / r) / 2; return r;
}
