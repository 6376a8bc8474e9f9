/* snaptree guest: one process, 40 steps of heap work 50 ms apart, a line
 * with the running hash after each (flushed: the snapshot falls between
 * lines already written and lines still to come). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
	size_t n = 1 << 15;
	uint64_t *v = malloc(n * sizeof *v), h = 1469598103934665603ull;
	if (!v)
		return 2;
	for (size_t i = 0; i < n; i++)
		v[i] = i * 0x9e3779b97f4a7c15ull;
	for (int s = 0; s < 40; s++) {
		for (size_t i = 0; i < n; i++) {
			v[i] ^= v[(i * 7 + (size_t)s) % n] + (uint64_t)s;
			h = (h ^ v[i]) * 1099511628211ull;
		}
		printf("step %d %016llx\n", s, (unsigned long long)h);
		fflush(stdout);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	return 0;
}
