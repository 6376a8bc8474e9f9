/* Threads racing on a shared counter under a mutex: NT threads start together
 * at a barrier, and each takes the lock ROUNDS times, adds one, and then prints
 * who it was and what it saw. Natively the lines' order follows the host's scheduling;
 * under sbx-run --deterministic it is one order. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NT 4
#define ROUNDS 30

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static int counter;

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		int seen = ++counter;
		pthread_mutex_unlock(&mu);
		dprintf(1, "t%d %d\n", id, seen);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[NT];
	int made = 0;
	pthread_barrier_init(&start, NULL, NT);
	for (int i = 0; i < NT; i++) {
		int rc = pthread_create(&th[i], NULL, worker, (void *)(long)i);
		if (rc) {
			printf("thread %d: %s\n", i, strerror(rc));
			return 1;
		}
		made++;
	}
	for (int i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	printf("threads %d counter %d\n", made, counter);
	return 0;
}
