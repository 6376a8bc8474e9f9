/* snaptree guest: SysV segments attached in several processes: a private one
 * the child inherits over fork (marked for removal), and a keyed one the child
 * attaches again at an address of its own. They take turns through the first;
 * the parent prints what the child wrote into the second. */
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include "fdguest.h"
#include "turns.h"

int main(void)
{
	int a = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	int b = shmget(0x5b0d, 3 * 4096, IPC_CREAT | IPC_EXCL | 0600);
	CHECK(a >= 0 && b >= 0);
	uint8_t *pa = shmat(a, NULL, 0), *pb = shmat(b, NULL, 0);
	CHECK(pa != (void *)-1 && pb != (void *)-1 && shmctl(a, IPC_RMID, NULL) == 0);
	volatile uint32_t *turn = (volatile uint32_t *)pa;
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		/* the keyed segment detached and attached again elsewhere */
		CHECK(shmdt(pb) == 0);
		uint8_t *cb = shmat(shmget(0x5b0d, 0, 0), NULL, 0);
		CHECK(cb != (void *)-1);
		for (int s = 0; s < STEPS; s++) {
			wait_turn(turn, 2u * s + 1, "child");
			cb[(s * 1021) % (3 * 4096)] = (uint8_t)(s + 11);
			pa[64 + s] = cb[(s * 1021) % (3 * 4096)];
			give_turn(turn, 2u * s + 2);
		}
		_exit(5);
	}
	for (int s = 0; s < STEPS; s++) {
		pb[(s * 509) % (3 * 4096)] ^= (uint8_t)(s * 3 + 1);
		give_turn(turn, 2u * s + 1);
		wait_turn(turn, 2u * s + 2, "parent");
		mix(pb, 3 * 4096);
		mix(pa + 64, STEPS);
		step_done(s, "sysv");
	}
	int st;
	struct shmid_ds ds;
	CHECK(waitpid(kid, &st, 0) == kid && shmctl(b, IPC_STAT, &ds) == 0);
	printf("child exit %d, keyed segment attached %lu time(s)\n", WEXITSTATUS(st),
	       (unsigned long)ds.shm_nattch);
	CHECK(shmctl(b, IPC_RMID, NULL) == 0);
	return 0;
}
