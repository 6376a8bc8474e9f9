/* i386 syscalls through int 0x80 from a 64-bit guest, and x32 numbers. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

static long int80(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return ret;
}

static void expect_no_run(const char *what, long ret)
{
	if (ret == -ENOSYS || ret == -EPERM) {
		printf("contained: %s (%ld)\n", what, ret);
	} else {
		printf("ESCAPED: %s (returned %ld)\n", what, ret);
		escaped = 1;
	}
	fflush(stdout);
}

static sigjmp_buf jb;
static void on_segv(int s)
{
	(void)s;
	siglongjmp(jb, 1);
}

int main(void)
{
	/* kernels without i386 emulation fault on int 0x80: contained as well */
	signal(SIGSEGV, on_segv);
	if (sigsetjmp(jb, 1)) {
		printf("contained: int 0x80 faults (kernel without i386 emulation)\n");
		goto x32;
	}
	static const char msg[] = "ESCAPED: i386 write ran\n";
	expect_no_run("int 0x80 write(1, …) [i386 #4]", int80(4, 1, (long)(unsigned)(uintptr_t)msg, sizeof msg - 1));
	/* i386 socketcall (102) collides with x86-64 getuid */
	expect_no_run("int 0x80 socketcall [i386 #102]", int80(102, 1, 0, 0));
	expect_no_run("int 0x80 getpid [i386 #20]", int80(20, 0, 0, 0));
x32:;
	long r = syscall(0x40000000 | SYS_getpid);
	expect_errno("x32 getpid", r, ENOSYS, EPERM);
	r = syscall(0x40000000 | 1, 1, msg, sizeof msg - 1); /* x32 write */
	expect_errno("x32 write", r, ENOSYS, EPERM);
	r = syscall(1000);
	expect_errno("unknown syscall 1000", r, ENOSYS, ENOSYS);
	return finish();
}
