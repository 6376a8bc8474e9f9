/* snaptree guest: the root puts a socket pair to its child at fd 1 (dup2, as
 * a coprocess connected by a socket) and a file of its own at fd 2, and
 * keeps writing to both; the child prefixes what it reads and prints it on the
 * run's stdout. Restored, the root's lines still go through the child and into
 * the file. */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

static void relay(int in)
{
	FILE *f = fdopen(in, "r");
	char line[128];
	if (!f)
		_exit(2);
	while (fgets(line, sizeof line, f))
		printf("child got: %s", line), fflush(stdout);
	_exit(0);
}

int main(void)
{
	int p[2], out = dup(1);
	CHECK(out > 2 && socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(p[1]);
		relay(p[0]);
	}
	int log = open("log.txt", O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0644);
	CHECK(log >= 0 && dup2(p[1], 1) == 1 && dup2(log, 2) == 2);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0 && close(log) == 0);
	for (int s = 0; s < STEPS; s++) {
		char line[32];
		int n = snprintf(line, sizeof line, "step %d\n", s);
		CHECK(write(1, line, (size_t)n) == n && write(2, line, (size_t)n) == n);
		pause_ms(50);
	}
	CHECK(close(1) == 0);
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	char buf[1024];
	int lr = open("log.txt", O_RDONLY);
	ssize_t n = lr >= 0 ? read(lr, buf, sizeof buf) : -1;
	CHECK(n > 0);
	mix(buf, (size_t)n);
	CHECK((stdout = fdopen(out, "w")) != NULL);
	printf("child %d log %zd bytes %016llx\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
	       n, (unsigned long long)fnv);
	return 0;
}
