/* ptrace the parent, PTRACE_TRACEME, and seize a sibling. */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	expect_errno("ptrace(ATTACH, parent)", ptrace(PTRACE_ATTACH, getppid(), 0, 0), EPERM, EPERM);
	expect_errno("ptrace(TRACEME)", ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM, EPERM);
	pid_t c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	expect_errno("ptrace(SEIZE, sibling)", ptrace(PTRACE_SEIZE, c, 0, 0), EPERM, EPERM);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return finish();
}
