#include "hello.h"

uint64_t base_run(const char *s, size_t n)
{
	uint64_t t = 0; for (size_t i = 0; i + 2 < n; i += 3) t += ((unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8 | (unsigned char)s[i + 2]) % 64; return t;
}
