/* x32 system call numbers (bit 30) and numbers the table does not know. */
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	static const char msg[] = "ESCAPED: x32 write ran\n";
	expect_errno("x32 getpid", syscall(0x40000000 | SYS_getpid), ENOSYS, EPERM);
	expect_errno("x32 write", syscall(0x40000000 | 1, 1, msg, sizeof msg - 1), ENOSYS, EPERM);
	expect_errno("x32 openat", syscall(0x40000000 | 257, -100, "/etc/passwd", 0), ENOSYS, EPERM);
	expect_errno("unknown syscall 1000", syscall(1000), ENOSYS, ENOSYS);
	expect_errno("unknown syscall 511", syscall(511), ENOSYS, ENOSYS);
	return finish();
}
