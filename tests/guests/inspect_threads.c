/* Eight threads, each alternating an open the inspector denies (/deny/N) with one it
 * allows (/proc/self/status); every result is checked. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define THREADS 8
#define ROUNDS 100

static int bad[THREADS];

static void *worker(void *arg)
{
	long id = (long)arg;
	char deny[64];

	snprintf(deny, sizeof deny, "/deny/%ld", id);
	for (int i = 0; i < ROUNDS; i++) {
		int fd = open(deny, O_RDONLY);
		if (fd >= 0 || errno != EACCES)
			bad[id]++;
		fd = open("/proc/self/status", O_RDONLY);
		if (fd < 0)
			bad[id]++;
		else
			close(fd);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	int total = 0;

	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += bad[i];
	}
	printf("threads: %d wrong results\n", total);
	return total != 0;
}
