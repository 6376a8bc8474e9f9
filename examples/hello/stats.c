#include "hello.h"

uint64_t stats_run(const char *s, size_t n)
{
	uint64_t mn = 255, mx = 0, sum = 0; for (size_t i = 0; i < n; i++) { unsigned char c = (unsigned char)s[i]; if (c < mn) mn = c; if (c > mx) mx = c; sum += c; } return n ? (mn << 32) | (mx << 16) | (sum / n) : 0;
}
