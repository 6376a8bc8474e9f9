/* Threads (clone, after glibc's clone3 fallback) and a multithreaded exec. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *work(void *a)
{
	long n = (long)a;
	return (void *)(n * 2);
}

static void *exec_from_thread(void *a)
{
	(void)a;
	execl("/bin/echo", "echo", "exec from a thread", (char *)NULL);
	return NULL;
}

int main(void)
{
	pthread_t t[8];
	long sum = 0;
	for (long i = 0; i < 8; i++)
		if (pthread_create(&t[i], NULL, work, (void *)i) != 0)
			return 1;
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(t[i], &r);
		sum += (long)r;
	}
	printf("threads sum=%ld\n", sum);
	fflush(stdout);
	pthread_t x;
	pthread_create(&x, NULL, exec_from_thread, NULL);
	pthread_join(x, NULL);
	return 1;
}
