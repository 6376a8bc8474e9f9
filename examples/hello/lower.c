#include "hello.h"

uint64_t lower_run(const char *s, size_t n)
{
	uint64_t u = 0; for (size_t i = 0; i < n; i++) u += s[i] >= 'a' && s[i] <= 'z'; return u;
}
