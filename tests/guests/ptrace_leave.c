/* A tracer that exits without detaching: a task seizes its sibling, stops it
 * (PTRACE_INTERRUPT) and exits; with argv[1] "exitkill" it set
 * PTRACE_O_EXITKILL first. The sibling waits on a pipe its parent writes once
 * the tracer is gone. Prints how the sibling ended: natively it runs on
 * and exits 7, or is killed with its tracer. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

static void tracer(pid_t c, long opts)
{
	int st;
	if (ptrace(PTRACE_SEIZE, c, 0, (void *)opts) < 0) {
		printf("SEIZE: %s\n", strerror(errno));
		fflush(stdout);
		_exit(2);
	}
	if (ptrace(PTRACE_INTERRUPT, c, 0, 0) < 0 || waitpid(c, &st, __WALL) != c || !WIFSTOPPED(st))
		_exit(3);
	_exit(0); /* still its tracer, the tracee stopped */
}

int main(int argc, char **argv)
{
	long opts = argc > 1 && strcmp(argv[1], "exitkill") == 0 ? PTRACE_O_EXITKILL : 0;
	int st, p[2];
	char go;
	if (pipe(p) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	pid_t c = fork();
	if (c == 0) /* waits for its go, which comes once its tracer is gone */
		_exit(read(p[0], &go, 1) == 1 ? 7 : 1);
	pid_t t = fork();
	if (t == 0)
		tracer(c, opts);
	if (waitpid(t, &st, 0) != t || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		kill(c, SIGKILL);
		printf("tracer failed\n");
		return 2;
	}
	if (write(p[1], "g", 1) < 0 && errno != EPIPE)
		return 2;
	if (waitpid(c, &st, 0) != c)
		return 2;
	if (WIFEXITED(st))
		printf("tracee: exited %d\n", WEXITSTATUS(st));
	else
		printf("tracee: killed by %d\n", WTERMSIG(st));
	return 0;
}
