#include "hello.h"

uint64_t hexd_run(const char *s, size_t n)
{
	static const char *x = "0123456789abcdef"; uint64_t t = 0; for (size_t i = 0; i < n; i++) t += (unsigned char)x[(unsigned char)s[i] >> 4] + (unsigned char)x[s[i] & 15]; return t;
}
