/* io_uring would run file and socket operations without a syscall each. */
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	char params[120] = { 0 };
	expect_errno("io_uring_setup", syscall(425, 8, params), ENOSYS, ENOSYS);
	expect_errno("io_uring_enter", syscall(426, 0, 0, 0, 0, 0, 0), ENOSYS, ENOSYS);
	expect_errno("io_uring_register", syscall(427, 0, 0, 0, 0), ENOSYS, ENOSYS);
	return finish();
}
