/* snaptree guest: a subprocess talked to over a socket pair, as a parent
 * runs a filter: the child's end becomes its standard input and output and
 * it runs cat; the parent writes a line, pauses (the line waits in the pair
 * or cat's copy of it waits on the way back), then reads it back. */
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0)
			_exit(126);
		close(sv[0]);
		close(sv[1]);
		execl("/bin/cat", "cat", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	for (int s = 0; s < STEPS; s++) {
		char line[32], back[32];
		int n = snprintf(line, sizeof line, "filtered line %02d\n", s);
		CHECK(write(sv[0], line, (size_t)n) == n);
		pause_ms(25);
		for (int got = 0; got < n;) {
			ssize_t r = read(sv[0], back + got, (size_t)(n - got));
			CHECK(r > 0);
			got += (int)r;
		}
		mix(back, (size_t)n);
		printf("%.*s", n, back);
		step_done(s, "echoed");
	}
	CHECK(shutdown(sv[0], SHUT_WR) == 0);
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("cat exit %d\n", WEXITSTATUS(st));
	return 0;
}
