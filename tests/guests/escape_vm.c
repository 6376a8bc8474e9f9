/* Other processes' memory: process_vm_writev/readv, /proc/PID/mem of init, of
 * an outside pid (argv[1], absent from this PID namespace), pidfd_getfd, kcmp. */
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	char buf[16] = "x", dst[16];
	struct iovec l = { buf, sizeof buf }, r = { dst, sizeof dst };
	expect_errno("process_vm_writev(parent)", process_vm_writev(getppid(), &l, 1, &r, 1, 0), EPERM, EPERM);
	expect_errno("process_vm_readv(self)", process_vm_readv(getpid(), &l, 1, &r, 1, 0), EPERM, EPERM);
	expect_refused("open /proc/1/mem (sbx's init)", open("/proc/1/mem", O_RDWR));
	if (argc > 1) {
		char p[64];
		snprintf(p, sizeof p, "/proc/%s/mem", argv[1]);
		char what[100];
		snprintf(what, sizeof what, "open %s (outside pid)", p);
		expect_refused(what, open(p, O_RDWR));
	}
	pid_t c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	int pfd = (int)syscall(434 /* pidfd_open */, c, 0);
	expect_errno("pidfd_getfd(sibling, 0)", syscall(438, pfd, 0, 0), EPERM, EPERM);
	expect_errno("kcmp", syscall(312, getpid(), c, 0, 0, 0), EPERM, EPERM);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return finish();
}
