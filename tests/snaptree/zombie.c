/* snaptree guest: zombies kept. Two children end at once (exit 7, SIGTERM);
 * the parent steps for 2 s, then reaps them and prints how each ended. */
#include <signal.h>
#include <sys/wait.h>
#include "guest.h"

static void ended(pid_t pid, const char *name)
{
	int st;
	if (waitpid(pid, &st, WNOHANG) != pid)
		_exit(3);
	if (WIFEXITED(st))
		say("%s exited %d\n", name, WEXITSTATUS(st));
	else
		say("%s killed by %d\n", name, WTERMSIG(st));
}

int main(void)
{
	pid_t a = fork();
	if (a == 0)
		_exit(7);
	pid_t b = fork();
	if (b == 0) {
		raise(SIGTERM);
		_exit(1);
	}
	uint64_t h = 1;
	for (int s = 0; s < 40; s++) {
		h = mix(h, (uint64_t)s);
		say("step %d %016llx\n", s, (unsigned long long)h);
		nap(50);
	}
	ended(a, "a");
	ended(b, "b");
	return 0;
}
