/* ptrace reaches the run's own tasks only: the parent (sbx's init), TRACEME
 * (its tracer would be init), every pid this PID namespace shows or not
 * (1..32768) and the host pids in argv (sbx-run's, its invoker's) are refused;
 * seizing its own child and reading its memory works (the supervisor serves
 * it), so the refusals are the boundary's and not a ptrace that never works. */
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

/* Attach to pid: refused, or an escape (then let go). */
static void reach(pid_t pid, int *refused)
{
	long rc = ptrace(PTRACE_SEIZE, pid, 0, 0);
	if (rc < 0 && (errno == ESRCH || errno == EPERM)) {
		(*refused)++;
		return;
	}
	char what[64];
	snprintf(what, sizeof what, "ptrace(SEIZE, %d)", (int)pid);
	expect_errno(what, rc, ESRCH, EPERM);
	if (rc == 0)
		ptrace(PTRACE_DETACH, pid, 0, 0);
}

static char mark[16] = "parent";

/* Its own child: seized, interrupted, its registers and memory read, let go. */
static void own_child(void)
{
	int p[2];
	char go;
	if (pipe(p) < 0)
		exit(2);
	pid_t c = fork();
	if (c == 0) {
		strcpy(mark, "in-child");
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	int st = 0;
	struct user_regs_struct r;
	char seen[16] = "";
	struct iovec lv = { seen, sizeof seen }, rv = { mark, sizeof mark };
	if (read(p[0], &go, 1) != 1 || ptrace(PTRACE_SEIZE, c, 0, 0) < 0 ||
	    ptrace(PTRACE_INTERRUPT, c, 0, 0) < 0 || waitpid(c, &st, __WALL) != c ||
	    !WIFSTOPPED(st) || ptrace(PTRACE_GETREGS, c, 0, &r) < 0 ||
	    process_vm_readv(c, &lv, 1, &rv, 1, 0) != (ssize_t)sizeof seen ||
	    ptrace(PTRACE_DETACH, c, 0, 0) < 0) {
		printf("ptrace of its own child failed (%s, status %#x)\n", strerror(errno), st);
		exit(2);
	}
	printf("own child: seized, stopped, rip %s, memory \"%s\", detached\n", r.rip ? "read" : "zero",
	       seen);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
}

int main(int argc, char **argv)
{
	int refused = 0, tried = 0;
	expect_errno("ptrace(ATTACH, parent)", ptrace(PTRACE_ATTACH, getppid(), 0, 0), EPERM, EPERM);
	expect_errno("ptrace(TRACEME)", ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM, EPERM);
	for (pid_t pid = 1; pid <= 32768; pid++, tried++)
		reach(pid, &refused);
	for (int i = 1; i < argc; i++, tried++)
		reach(atoi(argv[i]), &refused);
	if (refused == tried)
		printf("contained: ptrace(SEIZE) of %d pids\n", tried);
	own_child();
	return finish();
}
