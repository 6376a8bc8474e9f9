#include "hello.h"

uint64_t tree_run(const char *s, size_t n)
{
	int key[64], left[64], right[64], cnt = 0; size_t m = n < 64 ? n : 64; for (size_t i = 0; i < m; i++) { int k = s[i], x = 0; key[cnt] = k; left[cnt] = right[cnt] = -1; if (cnt) for (;;) { int *nx = k < key[x] ? &left[x] : &right[x]; if (*nx < 0) { *nx = cnt; break; } x = *nx; } cnt++; } return (uint64_t)cnt;
}
