/* Snapshot guest: 32 MiB of shared anonymous memory filled by the parent,
 * then mapped by four processes (three forked children each check the whole
 * area every 100 ms and add to a counter of their own in it). After 30 rounds
 * the parent prints the children's exit codes and a digest of the area. A
 * snapshot holds the area once, not once per process. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AREA (32u << 20)

static uint64_t digest(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i += 64)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

int main(void)
{
	uint8_t *a = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < AREA; i++)
		a[i] = (uint8_t)(i * 131 + (i >> 12));
	uint64_t want = digest(a + 4096, AREA - 4096);
	pid_t kid[3];
	for (int k = 0; k < 3; k++) {
		if ((kid[k] = fork()) == 0) {
			for (int r = 0; r < 30; r++) {
				if (digest(a + 4096, AREA - 4096) != want)
					_exit(10 + k);
				((volatile uint32_t *)a)[k]++;
				nanosleep(&(struct timespec){ 0, 100 * 1000 * 1000 }, NULL);
			}
			_exit(k);
		}
	}
	int codes = 0;
	for (int k = 0; k < 3; k++) {
		int st;
		if (waitpid(kid[k], &st, 0) != kid[k])
			return 1;
		codes = codes * 100 + WEXITSTATUS(st);
	}
	printf("children %d counters %u %u %u area %016llx\n", codes, ((uint32_t *)a)[0],
	       ((uint32_t *)a)[1], ((uint32_t *)a)[2], (unsigned long long)digest(a, AREA));
	return 0;
}
