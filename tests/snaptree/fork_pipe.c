/* snaptree guest: a parent and two children joined by pipes. Each child
 * steps 30 times (50 ms apart), writing a line per step into its pipe; the
 * parent reads both pipes to their end, in turn, and prints what came. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void child(int id, int out)
{
	uint64_t h = 1469598103934665603ull + (uint64_t)id;
	for (int s = 0; s < 30; s++) {
		h = (h ^ (uint64_t)s) * 1099511628211ull;
		char line[64];
		int n = snprintf(line, sizeof line, "child %d step %d %016llx\n", id, s,
				 (unsigned long long)h);
		if (write(out, line, (size_t)n) != n)
			_exit(2);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	_exit(id);
}

int main(void)
{
	int p[2][2];
	pid_t kid[2];
	for (int i = 0; i < 2; i++) {
		if (pipe(p[i]) < 0 || (kid[i] = fork()) < 0)
			return 1;
		if (kid[i] == 0) {
			close(p[i][0]);
			child(i + 1, p[i][1]);
		}
		close(p[i][1]);
	}
	for (int i = 0; i < 2; i++) {
		char buf[4096];
		ssize_t n;
		while ((n = read(p[i][0], buf, sizeof buf)) > 0)
			fwrite(buf, 1, (size_t)n, stdout);
		int st;
		if (waitpid(kid[i], &st, 0) != kid[i])
			return 1;
		printf("child %d exit %d\n", i + 1, WEXITSTATUS(st));
	}
	return 0;
}
