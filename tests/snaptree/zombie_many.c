/* snaptree guest: children ending one by one (100 ms apart, exit codes 1-8)
 * while nobody waits; the parent reaps them all at the end, in order. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	pid_t kid[8];
	for (int i = 0; i < 8; i++)
		if ((kid[i] = fork()) == 0) {
			nap(100 * (i + 1));
			_exit(i + 1);
		}
	for (int s = 0; s < 30; s++) {
		say("step %d\n", s);
		nap(50);
	}
	for (int i = 0; i < 8; i++) {
		int st;
		if (waitpid(kid[i], &st, 0) != kid[i])
			return 1;
		say("child %d exit %d\n", i, WEXITSTATUS(st));
	}
	return 0;
}
