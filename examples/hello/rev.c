#include "hello.h"

uint64_t rev_run(const char *s, size_t n)
{
	uint64_t t = 0; for (size_t i = n; i > 0; i--) t = t * 33 + (unsigned char)s[i - 1]; return t;
}
