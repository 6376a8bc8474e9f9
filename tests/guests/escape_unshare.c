/* New namespaces from inside: unshare and setns. */
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	expect_errno("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM, EPERM);
	expect_errno("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM, EPERM);
	expect_errno("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET), EPERM, EPERM);
	expect_errno("unshare(CLONE_NEWTIME)", unshare(0x80), EPERM, EPERM);
	if (unshare(CLONE_FILES | CLONE_FS) == 0)
		printf("unshare(CLONE_FILES|CLONE_FS) allowed: no new namespace\n");
	else
		printf("unshare(CLONE_FILES|CLONE_FS) failed: %s\n", strerror(errno));
	int fd = open("/proc/1/ns/mnt", O_RDONLY);
	expect_refused("setns(init's mount ns)", fd < 0 ? -1 : setns(fd, 0));
	fd = open("/proc/self/ns/user", O_RDONLY);
	expect_errno("setns(own user ns)", setns(fd, CLONE_NEWUSER), EPERM, EPERM);
	return finish();
}
