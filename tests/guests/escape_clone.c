/* clone(CLONE_UNTRACED) (its child still supervised), namespace flags, clone3,
 * unshare, setns. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

static long raw_clone(unsigned long flags)
{
	long rc = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (rc == 0)
		_exit(0); /* an escaped child would end up here */
	if (rc > 0)
		waitpid((pid_t)rc, NULL, 0);
	return rc;
}

/* clone(CLONE_UNTRACED) runs with the flag dropped: its child is supervised
 * as every other. A refused call (acct) stops in the supervisor, which answers
 * EPERM; with no tracer the filter's trap would answer ENOSYS. -1 (errno
 * EPERM) when the child was supervised, its status otherwise. */
static long untraced(unsigned long flags)
{
	long rc = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	int st = 0;
	if (rc == 0)
		_exit(syscall(SYS_acct, NULL) < 0 && errno == EPERM ? 0 : 1);
	if (rc < 0 || waitpid((pid_t)rc, &st, 0) != rc)
		return rc;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		errno = EPERM;
		return -1;
	}
	return rc;
}

int main(void)
{
	expect_errno("clone(CLONE_UNTRACED): child supervised", untraced(CLONE_UNTRACED), EPERM, EPERM);
	/* the kernel reads 32 bits of flags: CLONE_UNTRACED with high bits set too */
	expect_errno("clone(CLONE_UNTRACED | 1<<40): child supervised",
		     untraced((1ul << 40) | CLONE_UNTRACED), EPERM, EPERM);
	expect_errno("clone(CLONE_NEWUSER)", raw_clone(CLONE_NEWUSER), EPERM, EPERM);
	expect_errno("clone(CLONE_NEWNS)", raw_clone(CLONE_NEWNS), EPERM, EPERM);
	expect_errno("clone(CLONE_NEWPID)", raw_clone(CLONE_NEWPID), EPERM, EPERM);
	expect_errno("clone(CLONE_NEWNET)", raw_clone(CLONE_NEWNET), EPERM, EPERM);
	struct { unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack,
		 stack_size, tls; } args = { .flags = CLONE_UNTRACED, .exit_signal = SIGCHLD };
	long rc = syscall(435 /* clone3 */, &args, sizeof args);
	if (rc == 0)
		_exit(0);
	expect_errno("clone3", rc, ENOSYS, ENOSYS);
	expect_errno("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM, EPERM);
	expect_errno("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM, EPERM);
	int fd = open("/proc/1/ns/mnt", O_RDONLY);
	expect_refused("setns(init's mount ns)", fd < 0 ? -1 : setns(fd, 0));
	/* a plain fork still works */
	pid_t c = fork();
	if (c == 0)
		_exit(7);
	int st;
	waitpid(c, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 7) {
		printf("plain fork broken\n");
		return 2;
	}
	return finish();
}
