/* snaptree guest: a memfd shared by a parent and its child, both through the
 * descriptor they inherited (one open file: one offset) and through shared
 * mappings at their addresses. The child appends a record per step with
 * write(2) and updates a counter in the mapping; the parent reads the records
 * through its mapping, the shared offset and the size, and prints them. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"
#include "turns.h"

#define MAPPED (4 * 4096)

int main(void)
{
	int fd = memfd_create("snaptree memfd", MFD_ALLOW_SEALING);
	CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && lseek(fd, 4096, SEEK_SET) == 4096);
	uint8_t *m = mmap(NULL, MAPPED, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	volatile uint32_t *turn = (volatile uint32_t *)m;
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		for (int s = 0; s < STEPS; s++) {
			wait_turn(turn, 2u * s + 1, "child");
			char rec[64];
			int n = snprintf(rec, sizeof rec, "rec %02d %08x;", s, (unsigned)(s * 2654435761u));
			/* records stay inside the mapping: 36 of at most 64 bytes past 4096 */
			if (write(fd, rec, (size_t)n) != n)
				_exit(2);
			m[64 + s] = (uint8_t)n;
			give_turn(turn, 2u * s + 2);
		}
		_exit(0);
	}
	uint64_t seen = 4096;
	for (int s = 0; s < STEPS; s++) {
		give_turn(turn, 2u * s + 1);
		wait_turn(turn, 2u * s + 2, "parent");
		struct stat sb;
		off_t at = lseek(fd, 0, SEEK_CUR);
		CHECK(fstat(fd, &sb) == 0 && at == sb.st_size);
		mix(m + seen, (size_t)(at - (off_t)seen));
		mix(m + 64, (size_t)s + 1);
		printf("size %lld ", (long long)sb.st_size);
		seen = (uint64_t)at;
		step_done(s, "memfd");
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char buf[32];
	CHECK(pread(fd, buf, 12, 4096) == 12);
	printf("first record %.12s seals %d\n", buf, fcntl(fd, F_GET_SEALS));
	return 0;
}
