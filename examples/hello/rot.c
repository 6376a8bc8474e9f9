#include "hello.h"

uint64_t rot_run(const char *s, size_t n)
{
	uint64_t t = 0; for (size_t i = 0; i < n; i++) { char c = s[i]; if (c >= 'a' && c <= 'z') c = (char)('a' + (c - 'a' + 13) % 26); t = t * 31 + (unsigned char)c; } return t;
}
