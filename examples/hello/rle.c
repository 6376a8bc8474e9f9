#include "hello.h"

uint64_t rle_run(const char *s, size_t n)
{
	uint64_t runs = 0; for (size_t i = 0; i < n; i++) if (i == 0 || s[i] != s[i - 1]) runs++; return runs;
}
