/* bench guest: touch N MiB of heap with non-zero data, stop at a marker
 * syscall (getppid), then check the data and exit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
	size_t n = mib << 17; /* u64 words */
	uint64_t *p = malloc(n * sizeof *p);
	if (!p)
		return 2;
	for (size_t i = 0; i < n; i++)
		p[i] = i * 0x9e3779b97f4a7c15ull + 1;
	getppid(); /* the marker: the snapshot is taken here */
	if (argc > 2) /* "wait": stay alive for an outside checkpointer */
		for (;;)
			sleep(1);
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != i * 0x9e3779b97f4a7c15ull + 1)
			return 1;
	puts("ok");
	return 0;
}
