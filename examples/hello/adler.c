#include "hello.h"

uint64_t adler_run(const char *s, size_t n)
{
	uint32_t a = 1, b = 0; for (size_t i = 0; i < n; i++) { a = (a + (unsigned char)s[i]) % 65521; b = (b + a) % 65521; } return ((uint64_t)b << 16) | a;
}
