/* Memory no sample of a process's own mappings shows: MIB MiB held in an unmapped
 * memfd, in unmapped SysV shared memory, or by a thread whose group leader has
 * exited; then it waits to be stopped (at most 20 s).
 * usage: meter_hold memfd|shm|leaderless MIB */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

static size_t mib;

static void *toucher(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < mib; i++) {
		char *p = malloc(1 << 20);
		if (p)
			memset(p, 1, 1 << 20);
	}
	sleep(20);
	exit(0);
}

static int unmapped(int shm)
{
	for (size_t i = 0; i < mib; i++) {
		void *p;
		if (shm) {
			int id = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
			if (id < 0 || (p = shmat(id, NULL, 0)) == (void *)-1)
				return 1;
			memset(p, 1, 1 << 20);
			shmdt(p);
		} else {
			int fd = memfd_create("held", 0);
			if (fd < 0 || ftruncate(fd, 1 << 20) < 0 ||
			    (p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
				return 1;
			memset(p, 1, 1 << 20);
			munmap(p, 1 << 20); /* the fd alone keeps it */
		}
	}
	sleep(20);
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t t;
	if (argc < 3 || (mib = (size_t)atol(argv[2])) == 0) {
		fprintf(stderr, "usage: meter_hold memfd|shm|leaderless MIB\n");
		return 2;
	}
	if (strcmp(argv[1], "memfd") == 0 || strcmp(argv[1], "shm") == 0)
		return unmapped(argv[1][0] == 's');
	if (strcmp(argv[1], "leaderless") == 0 && pthread_create(&t, NULL, toucher, NULL) == 0)
		pthread_exit(NULL); /* the leader goes; its thread holds the memory */
	return 2;
}
