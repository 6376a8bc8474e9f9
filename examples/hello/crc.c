#include "hello.h"

uint64_t crc_run(const char *s, size_t n)
{
	uint32_t c = 0xffffffffu; for (size_t i = 0; i < n; i++) { c ^= (unsigned char)s[i]; for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & -(c & 1)); } return c ^ 0xffffffffu;
}
