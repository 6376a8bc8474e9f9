#include "hello.h"

uint64_t fib_run(const char *s, size_t n)
{
	uint64_t a = 0, b = 1; for (size_t i = 0; i < n % 90; i++) { uint64_t c = a + b; a = b; b = c; } (void)s; return a;
}
