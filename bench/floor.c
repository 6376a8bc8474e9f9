/* bench/floor.c: the least a ptrace supervisor can cost, for bench/run.sh's
 * "floor" variant (run inside bwrap's namespaces): it follows every fork, vfork
 * and clone (a tracer must, to see its tree's execs) and stops at each exec,
 * and nothing else (no seccomp filter, no system-call stops).
 * Usage: floor PROG [ARG...]; exits as PROG does (128+N for a signal). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long opts = PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
		    PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
	unsigned long execs = 0;
	int st, code = 1;
	pid_t child, p;

	if (argc < 2) {
		fprintf(stderr, "usage: floor PROG [ARG...]\n");
		return 2;
	}
	if ((child = fork()) < 0)
		return perror("floor: fork"), 1;
	if (child == 0) {
		raise(SIGSTOP); /* seized while stopped: nothing runs untraced */
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	if (waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st) ||
	    ptrace(PTRACE_SEIZE, child, 0, opts) < 0 || kill(child, SIGCONT) < 0)
		return perror("floor: seize"), 1;
	for (;;) {
		if ((p = waitpid(-1, &st, __WALL)) < 0) {
			if (errno == EINTR)
				continue;
			break; /* no tracee left */
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (p == child)
				code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			continue;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		execs += ev == PTRACE_EVENT_EXEC;
		/* an event (a new tracee, an exec, a group-stop) resumes as is; a
		 * signal-delivery stop delivers its signal */
		ptrace(PTRACE_CONT, p, 0, ev ? 0 : sig);
	}
	if (getenv("FLOOR_EXECS"))
		fprintf(stderr, "floor: %lu execs\n", execs);
	return code;
}
