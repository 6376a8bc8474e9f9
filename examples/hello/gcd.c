#include "hello.h"

uint64_t gcd_run(const char *s, size_t n)
{
	uint64_t a = n + 1071, b = 462; (void)s; while (b) { uint64_t t = a % b; a = b; b = t; } return a;
}
