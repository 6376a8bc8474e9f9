/* snaptree guest: a child that runs another program: cat copies what the
 * parent writes into a pipe, 40 lines 50 ms apart, to stdout. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int p[2];
	if (pipe(p) < 0)
		return 1;
	pid_t kid = fork();
	if (kid == 0) {
		dup2(p[0], 0);
		close(p[0]);
		close(p[1]);
		execl("/bin/cat", "cat", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	for (int s = 0; s < 40; s++) {
		char line[32];
		int n = snprintf(line, sizeof line, "cat line %d\n", s);
		if (write(p[1], line, (size_t)n) != n)
			return 2;
		nap(50);
	}
	close(p[1]);
	int st;
	waitpid(kid, &st, 0);
	say("cat exit %d\n", WEXITSTATUS(st));
	return 0;
}
