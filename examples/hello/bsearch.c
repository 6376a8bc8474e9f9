#include "hello.h"

uint64_t bsearch_run(const char *s, size_t n)
{
	static const int a[] = { 1, 3, 5, 7, 11, 13, 17, 19, 23, 29 }; int key = (int)(n % 30); size_t lo = 0, hi = 10; (void)s; while (lo < hi) { size_t mid = (lo + hi) / 2; if (a[mid] < key) lo = mid + 1; else hi = mid; } return lo;
}
