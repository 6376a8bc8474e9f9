/* snaptree guest: memory shared through files still named on /dev/shm, as
 * Python's spawn context shares its semaphores: two POSIX named semaphores
 * (sem_open) a parent and its forked child take turns with, and shm_open
 * memory both map shared and write. At the end the parent opens the memory
 * again by name (the same pages), and both names are unlinked. */
#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "fdguest.h"

#define SIZE (2 * 4096)

int main(void)
{
	char go_name[64], back_name[64], mem_name[64];
	snprintf(go_name, sizeof go_name, "/snaptree-go-%d", (int)getpid());
	snprintf(back_name, sizeof back_name, "/snaptree-back-%d", (int)getpid());
	snprintf(mem_name, sizeof mem_name, "/snaptree-mem-%d", (int)getpid());
	sem_t *go = sem_open(go_name, O_CREAT | O_EXCL, 0600, 0);
	sem_t *back = sem_open(back_name, O_CREAT | O_EXCL, 0600, 0);
	int fd = shm_open(mem_name, O_CREAT | O_EXCL | O_RDWR, 0640);
	CHECK(go != SEM_FAILED && back != SEM_FAILED && fd >= 0 && ftruncate(fd, SIZE) == 0);
	uint8_t *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED && close(fd) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		for (int s = 0; s < STEPS; s++) {
			while (sem_wait(go) < 0)
				;
			m[(s * 331) % SIZE] ^= (uint8_t)(s * 7 + 1);
			sem_post(back);
		}
		_exit(5);
	}
	for (int s = 0; s < STEPS; s++) {
		m[(s * 613) % SIZE] += (uint8_t)(s + 3);
		CHECK(sem_post(go) == 0);
		while (sem_wait(back) < 0)
			;
		mix(m, SIZE);
		step_done(s, "named-shm");
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st));
	int again = shm_open(mem_name, O_RDWR, 0);
	uint8_t page[SIZE];
	struct stat sb;
	CHECK(again >= 0 && fstat(again, &sb) == 0 && pread(again, page, SIZE, 0) == SIZE);
	printf("child exit %d, by name: same %d, size %lld, mode %o\n", WEXITSTATUS(st),
	       !memcmp(page, m, SIZE), (long long)sb.st_size, (unsigned)(sb.st_mode & 07777));
	CHECK(sem_unlink(go_name) == 0 && sem_unlink(back_name) == 0 && shm_unlink(mem_name) == 0);
	return 0;
}
