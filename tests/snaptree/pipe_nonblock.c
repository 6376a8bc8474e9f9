/* snaptree guest: a non-blocking, close-on-exec pipe polled until a child's
 * lines arrive (EAGAIN in between); the parent prints each line it gets. */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int p[2];
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return 1;
	pid_t kid = fork();
	if (kid == 0) {
		close(p[0]);
		for (int s = 0; s < 25; s++) {
			char line[32];
			int n = snprintf(line, sizeof line, "tick %02d\n", s);
			if (write(p[1], line, (size_t)n) != n)
				_exit(2);
			nap(80);
		}
		_exit(0);
	}
	close(p[1]);
	int got = 0;
	char buf[9];
	for (;;) {
		ssize_t n = read(p[0], buf, 8);
		if (n == 0)
			break;
		if (n < 0 && errno == EAGAIN) {
			nap(10);
			continue;
		}
		if (n != 8)
			return 3;
		say("got %.7s\n", buf);
		got++;
	}
	int st;
	waitpid(kid, &st, 0);
	say("lines %d flags %d\n", got, fcntl(p[0], F_GETFL) & O_NONBLOCK ? 1 : 0);
	return 0;
}
