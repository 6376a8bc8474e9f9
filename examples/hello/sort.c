#include "hello.h"

uint64_t sort_run(const char *s, size_t n)
{
	unsigned char b[256]; size_t m = n < 256 ? n : 256; for (size_t i = 0; i < m; i++) b[i] = (unsigned char)s[i]; for (size_t i = 1; i < m; i++) for (size_t j = i; j > 0 && b[j - 1] > b[j]; j--) { unsigned char t = b[j]; b[j] = b[j - 1]; b[j - 1] = t; } return m ? b[m / 2] : 0;
}
