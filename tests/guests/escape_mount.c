/* mount, umount, pivot_root, chroot, the new mount API, open_by_handle_at. */
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	expect_errno("mount tmpfs on /tmp", mount("none", "/tmp", "tmpfs", 0, NULL), EPERM, EPERM);
	expect_errno("remount / rw", mount(NULL, "/", NULL, MS_REMOUNT, NULL), EPERM, EPERM);
	expect_errno("bind / onto /ns", mount("/", "/ns", NULL, MS_BIND, NULL), EPERM, EPERM);
	expect_errno("umount /proc", umount2("/proc", MNT_DETACH), EPERM, EPERM);
	expect_errno("pivot_root", syscall(SYS_pivot_root, "/ns", "/ns"), EPERM, EPERM);
	expect_errno("chroot", chroot("/ns"), EPERM, EPERM);
	expect_errno("open_tree", syscall(428, AT_FDCWD, "/", 1), EPERM, EPERM);
	expect_errno("fsopen", syscall(430, "tmpfs", 0), EPERM, EPERM);
	expect_errno("mount_setattr", syscall(442, AT_FDCWD, "/", 0, NULL, 0), EPERM, EPERM);
	char h[64] = { 0 };
	expect_errno("open_by_handle_at", syscall(304, AT_FDCWD, h, O_RDONLY), EPERM, EPERM);
	return finish();
}
