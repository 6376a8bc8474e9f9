#include "hello.h"

uint64_t words_run(const char *s, size_t n)
{
	uint64_t w = 0; int in = 0; for (size_t i = 0; i < n; i++) { int sp = s[i] == ' ' || s[i] == '\n'; if (!sp && !in) w++; in = !sp; } return w;
}
