/* snaptree guest: a deleted file in /dev/shm mapped shared by a parent and two
 * forked children, as Python multiprocessing's heap is (mkstemp, unlink,
 * ftruncate, mmap MAP_SHARED, fork). Each step the children take turns writing
 * into the mapping, the parent folds it into its hash and prints it. The first
 * child keeps its descriptor, the second holds the mapping only; the parent
 * stores through a second mapping only at the end. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"
#include "turns.h"

#define SIZE (3 * 4096)

static void child(uint8_t *m, volatile uint32_t *turn, uint32_t k)
{
	for (int s = 0; s < STEPS; s++) {
		wait_turn(turn, 3u * s + k, k == 1 ? "first child" : "second child");
		m[4096 + (s * 331 + k * 97) % 8192] ^= (uint8_t)(s * 7 + k);
		m[64 + s] = (uint8_t)(m[64 + s] * 3 + k);
		give_turn(turn, 3u * s + k + 1);
	}
	_exit((int)k);
}

int main(void)
{
	char path[] = "/dev/shm/snaptree-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && unlink(path) == 0 && ftruncate(fd, SIZE) == 0);
	uint8_t *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	/* a second mapping of the last page, first stored into after the steps:
	 * the storage meter holds it unwritable until then, in any snapshot */
	uint8_t *late = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, SIZE - 4096);
	CHECK(late != MAP_FAILED);
	volatile uint32_t *turn = (volatile uint32_t *)m;
	pid_t kid[2];
	for (uint32_t k = 1; k <= 2; k++) {
		kid[k - 1] = fork();
		CHECK(kid[k - 1] >= 0);
		if (kid[k - 1] == 0) {
			if (k == 2)
				CHECK(close(fd) == 0);
			child(m, turn, k);
		}
	}
	for (int s = 0; s < STEPS; s++) {
		m[4096 + (s * 613) % 8192] += (uint8_t)(s + 3);
		give_turn(turn, 3u * s + 1);
		wait_turn(turn, 3u * s + 3, "parent");
		mix(m + 64, SIZE - 64);
		step_done(s, "deleted-shm");
	}
	for (int k = 0; k < 2; k++) {
		int st;
		CHECK(waitpid(kid[k], &st, 0) == kid[k] && WIFEXITED(st));
		printf("child %d exit %d\n", k + 1, WEXITSTATUS(st));
	}
	late[4095] ^= 0x5a;
	printf("late store seen through the first mapping: %02x\n", m[SIZE - 1]);
	struct stat sb;
	CHECK(fstat(fd, &sb) == 0);
	printf("size %lld links %lu mode %o\n", (long long)sb.st_size, (unsigned long)sb.st_nlink,
	       (unsigned)(sb.st_mode & 07777));
	return 0;
}
