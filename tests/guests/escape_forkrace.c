/* Children killed as soon as they are forked, ROUNDS times, from several
 * parents at once: a child can die before the supervisor sees its parent's
 * fork event. The supervisor must then forget it, not signal its host pid
 * later (the host may have handed that pid to another process).
 * Usage: escape_forkrace ROUNDS [flood]; flood writes to stdout for ever after. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

static void race(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		pid_t c = fork();
		if (c == 0) {
			pause();
			_exit(0);
		}
		if (c > 0) {
			kill(c, SIGKILL);
			waitpid(c, NULL, 0);
		}
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1000;
	pid_t p[4];
	for (int i = 0; i < 4; i++)
		if ((p[i] = fork()) == 0) {
			race(rounds / 4);
			_exit(0);
		}
	for (int i = 0; i < 4; i++)
		waitpid(p[i], NULL, 0);
	printf("forkrace: %d rounds\n", rounds);
	fflush(stdout);
	while (argc > 2 && !strcmp(argv[2], "flood"))
		printf("flood\n");
	return 0;
}
