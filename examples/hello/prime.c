#include "hello.h"

uint64_t prime_run(const char *s, size_t n)
{
	uint64_t c = 0; for (uint64_t k = 2; k < 2000 + n; k++) { int p = 1; for (uint64_t d = 2; d * d <= k; d++) if (k % d == 0) { p = 0; break; } c += p; } (void)s; return c;
}
