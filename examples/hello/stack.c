#include "hello.h"

uint64_t stack_run(const char *s, size_t n)
{
	int st[64], sp = 0; uint64_t depth = 0; for (size_t i = 0; i < n; i++) { if (s[i] == '(' && sp < 64) st[sp++] = 1; else if (s[i] == ')' && sp > 0) sp--; if ((uint64_t)sp > depth) depth = (uint64_t)sp; } (void)st; return depth;
}
