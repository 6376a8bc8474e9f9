#include "hello.h"

uint64_t palin_run(const char *s, size_t n)
{
	size_t i = 0, j = n ? n - 1 : 0; while (i < j && s[i] == s[j]) { i++; j--; } return i >= j;
}
