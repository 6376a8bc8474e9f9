/* Symlink swap of the exec path: a thread retargets /ns/prog between two
 * binaries while the guest execs it; whatever runs is a file of the sandbox,
 * and the supervisor reports the real binary (/proc/PID/exe) at the exec event. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

static atomic_int stop;
static void *swapper(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		unlink("/ns/prog.tmp");
		(void)!symlink("/bin/true", "/ns/prog.tmp");
		rename("/ns/prog.tmp", "/ns/prog");
		unlink("/ns/prog.tmp");
		(void)!symlink("/bin/false", "/ns/prog.tmp");
		rename("/ns/prog.tmp", "/ns/prog");
	}
	return NULL;
}

int main(void)
{
	(void)!symlink("/bin/true", "/ns/prog");
	pthread_t t;
	pthread_create(&t, NULL, swapper, NULL);
	int t0 = 0, t1 = 0, other = 0;
	for (int i = 0; i < 30; i++) {
		pid_t c = fork();
		if (c == 0) {
			execl("/ns/prog", "prog", (char *)NULL);
			_exit(99);
		}
		int st;
		waitpid(c, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			t0++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
			t1++;
		else
			other++;
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("true=%d false=%d other=%d\n", t0, t1, other);
	printf("contained: every exec ran a binary of the sandbox\n");
	return finish();
}
