/* Helpers of the snaptree guests: output written straight to fd 1 (no stdio
 * buffer a fork would copy), naps that spread the work over a few seconds. */
#ifndef SNAPTREE_GUEST_H
#define SNAPTREE_GUEST_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n > 0 && write(1, line, (size_t)n) != n)
		_exit(99);
}

static inline void nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 1099511628211ull;
}
#endif
