/* snaptree guest: threads and processes with interleaved ids: a thread is
 * started, then a child, then another thread; all step, the child exits with
 * its digest, the threads hand theirs back; the root prints them. */
#include <pthread.h>
#include <sys/wait.h>
#include "guest.h"

static void *worker(void *arg)
{
	uint64_t h = (uint64_t)(uintptr_t)arg;
	for (int s = 0; s < 30; s++) {
		h = mix(h, (uint64_t)s);
		nap(50);
	}
	return (void *)(uintptr_t)(h % 1000);
}

int main(void)
{
	pthread_t t1, t2;
	if (pthread_create(&t1, NULL, worker, (void *)1) != 0)
		return 1;
	pid_t kid = fork();
	if (kid == 0)
		_exit((int)((uintptr_t)worker((void *)3) % 200));
	if (pthread_create(&t2, NULL, worker, (void *)2) != 0)
		return 1;
	void *r1, *r2;
	pthread_join(t1, &r1);
	pthread_join(t2, &r2);
	int st;
	waitpid(kid, &st, 0);
	say("threads %lu %lu child %d\n", (unsigned long)(uintptr_t)r1,
	    (unsigned long)(uintptr_t)r2, WEXITSTATUS(st));
	return 0;
}
