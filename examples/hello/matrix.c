#include "hello.h"

uint64_t matrix_run(const char *s, size_t n)
{
	uint64_t m[4][4], r[4][4]; for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) m[i][j] = (i * 4 + j + n) % 7; for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) { r[i][j] = 0; for (int k = 0; k < 4; k++) r[i][j] += m[i][k] * m[k][j]; } (void)s; return r[1][2] + r[3][0];
}
