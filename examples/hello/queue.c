#include "hello.h"

uint64_t queue_run(const char *s, size_t n)
{
	unsigned q[16]; unsigned h = 0, t = 0; uint64_t acc = 0; for (size_t i = 0; i < n; i++) { q[t++ % 16] = (unsigned char)s[i]; if (t - h > 8) acc += q[h++ % 16]; } return acc;
}
