/* snaptree guest: a zombie one level down. The child forks a grandchild that
 * exits 5 at once, steps for 1.6 s, reaps it and exits with its status + 1;
 * the root prints what the child ended with. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	pid_t kid = fork();
	if (kid == 0) {
		pid_t g = fork();
		if (g == 0)
			_exit(5);
		uint64_t h = 1;
		for (int s = 0; s < 40; s++) {
			h = mix(h, (uint64_t)s);
			nap(40);
		}
		int st;
		if (waitpid(g, &st, 0) != g)
			_exit(100);
		_exit(WEXITSTATUS(st) + (int)(h & 1) + 1);
	}
	for (int s = 0; s < 10; s++) {
		say("root step %d\n", s);
		nap(150);
	}
	int st;
	waitpid(kid, &st, 0);
	say("child exit %d\n", WEXITSTATUS(st));
	return 0;
}
