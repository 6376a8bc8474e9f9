#include "hello.h"

uint64_t sum_run(const char *s, size_t n)
{
	uint64_t t = 0; for (size_t i = 0; i < n; i++) t += (unsigned char)s[i]; return t;
}
