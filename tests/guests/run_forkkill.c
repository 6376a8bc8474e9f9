/* Parents SIGKILLed while they fork: a parent killed at its fork reports no
 * fork event, and the child it made must still run. Every grandchild holds the
 * pipe's write end, so the read below ends only when all of them are gone.
 * Usage: run_forkkill ROUNDS; prints how long the last grandchildren took to go. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fork_forever(void)
{
	for (;;) {
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		if (c > 0)
			waitpid(c, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	long longest = 0;
	int slow = 0;
	for (int r = 0; r < rounds; r++) {
		int p[2];
		if (pipe(p) < 0)
			return 1;
		pid_t a = fork();
		if (a < 0)
			return 1;
		if (a == 0) {
			close(p[0]);
			fork_forever();
		}
		close(p[1]);
		usleep(2000 + (unsigned)(r * 331) % 3000);
		kill(a, SIGKILL);
		waitpid(a, NULL, 0);
		long t0 = now_ms();
		char b;
		while (read(p[0], &b, 1) > 0)
			;
		close(p[0]);
		long waited = now_ms() - t0;
		slow += waited >= 100;
		if (waited > longest)
			longest = waited;
	}
	printf("forkkill: %d rounds, %d waited >= 100 ms, longest %ld ms\n", rounds, slow, longest);
	return 0;
}
