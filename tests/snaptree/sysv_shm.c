/* snaptree guest: SysV shared memory: a private segment already marked for
 * removal, and a keyed one attached at two addresses (a write through one is
 * read through the other); contents change every step across the pauses. */
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int a = shmget(IPC_PRIVATE, 3 * 4096, IPC_CREAT | 0600);
	int b = shmget(0x5b0c, 5000, IPC_CREAT | IPC_EXCL | 0640);
	CHECK(a >= 0 && b >= 0);
	uint8_t *pa = shmat(a, NULL, 0), *pb = shmat(b, NULL, 0);
	const uint8_t *pb2 = shmat(b, NULL, SHM_RDONLY);
	CHECK(pa != (void *)-1 && pb != (void *)-1 && pb2 != (void *)-1);
	CHECK(shmctl(a, IPC_RMID, NULL) == 0);
	for (int s = 0; s < STEPS; s++) {
		pa[(s * 613) % (3 * 4096)] += (uint8_t)s;
		pb[(s * 127) % 5000] = (uint8_t)(s + 1);
		CHECK(pb2[(s * 127) % 5000] == (uint8_t)(s + 1));
		mix(pa, 3 * 4096);
		mix(pb2, 5000);
		step_done(s, "shared");
	}
	struct shmid_ds ds;
	CHECK(shmget(0x5b0c, 0, 0) == b && shmctl(b, IPC_STAT, &ds) == 0);
	printf("segment size %zu attached %lu mode %o\n", (size_t)ds.shm_segsz,
	       (unsigned long)ds.shm_nattch, ds.shm_perm.mode & 0777);
	CHECK(shmctl(b, IPC_RMID, NULL) == 0);
	return 0;
}
