/* snaptree guest: a child's own socket pair, one end made its standard input:
 * each step it sends a line through the other end, pauses (the line waits),
 * then reads it from fd 0. */
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && dup2(sv[0], 0) == 0);
		close(sv[0]);
		for (int s = 0; s < STEPS; s++) {
			char line[32], back[32];
			int n = snprintf(line, sizeof line, "to stdin %02d", s);
			CHECK(write(sv[1], line, (size_t)n) == n);
			pause_ms(20);
			CHECK(read(0, back, sizeof back) == n);
			mix(back, (size_t)n);
			printf("%.*s\n", n, back);
			step_done(s, "child");
		}
		_exit(9);
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("child exit %d\n", WEXITSTATUS(st));
	return 0;
}
