/* Kernel attack surface: bpf, userfaultfd, perf_event_open, keyctl, kexec,
 * module loading, seccomp user notification, TIOCSTI (also with high bits). */
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	expect_errno("bpf", syscall(321, 0, NULL, 0), EPERM, EPERM);
	expect_errno("userfaultfd", syscall(323, 0), EPERM, EPERM);
	char attr[128] = { 0 };
	expect_errno("perf_event_open", syscall(298, attr, 0, -1, -1, 0), EPERM, EPERM);
	expect_errno("keyctl", syscall(250, 0, 0, 0, 0, 0), EPERM, EPERM);
	expect_errno("add_key", syscall(248, "user", "k", "v", 1, -2), EPERM, EPERM);
	expect_errno("kexec_load", syscall(246, 0, 0, NULL, 0), EPERM, EPERM);
	expect_errno("init_module", syscall(175, NULL, 0, ""), EPERM, EPERM);
	expect_errno("finit_module", syscall(313, 0, "", 0), EPERM, EPERM);
	struct sock_filter f[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, f };
	expect_errno("seccomp(NEW_LISTENER)",
		     syscall(317, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog), EPERM, EPERM);
	char c = 'x';
	expect_errno("ioctl(TIOCSTI)", ioctl(0, TIOCSTI, &c), EPERM, EPERM);
	expect_errno("ioctl(TIOCSTI | 1<<32)", syscall(16, 0, (1ul << 32) | TIOCSTI, &c), EPERM, EPERM);
	expect_errno("iopl", syscall(172, 3), EPERM, EPERM);
	expect_errno("reboot", syscall(169, 0xfee1dead, 672274793, 0x1234567, NULL), EPERM, EPERM);
	return finish();
}
