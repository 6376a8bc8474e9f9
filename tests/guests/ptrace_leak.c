/* A leak for LeakSanitizer to find at exit, with argv[1] threads parked: its
 * stop-the-world attaches every thread with ptrace (built with clang
 * -fsanitize=address by tests/guests/ptrace.mk). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t ready;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static void *kept; /* reachable: not a leak */

static void *park(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&ready);
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	pthread_t t;
	pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++)
		pthread_create(&t, NULL, park, NULL);
	pthread_barrier_wait(&ready);
	kept = malloc(100);
	char *lost = malloc(7);
	strcpy(lost, "leaked");
	lost = NULL;
	printf("threads %d\n", n);
	fflush(stdout);
	return 0;
}
