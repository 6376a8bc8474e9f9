/* The cost of one system call under each interception mechanism sbx could
 * use, on this host: native, a ptrace stop at every call (PTRACE_SYSCALL),
 * seccomp's RET_TRACE to a ptrace tracer, seccomp user notification answered
 * with FLAG_CONTINUE (with and without SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP),
 * and an in-process SIGSYS handler that makes the call itself.
 * Usage: syscall_bench MECHANISM CALL N   (CALL: getpid, openat, execve)
 * Prints "MECHANISM CALL N NS_PER_CALL". Built static (bench/syscall.sh), so an
 * execve chain of itself does the fewest calls a process can. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

static long call_nr;
static const char *self, *link_name = "chain"; /* what the next link of a chain is */

/* the one syscall instruction the SIGSYS filter lets through */
extern char gadget_after[];
long gadget(long nr, long a, long b, long c, long d, long e, long f);
__asm__(".text\n.globl gadget\ngadget:\n"
	"mov %rdi, %rax\nmov %rsi, %rdi\nmov %rdx, %rsi\nmov %rcx, %rdx\n"
	"mov %r8, %r10\nmov %r9, %r8\nmov 8(%rsp), %r9\n"
	"syscall\n.globl gadget_after\ngadget_after:\nret\n");

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* seccomp: ACTION for call_nr (unless made from the gadget, for SIGSYS), else allow */
static void install_filter(unsigned action, unsigned flags, int *listener)
{
	uint64_t ip = (uint64_t)(uintptr_t)gadget_after;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)call_nr, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ip, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(ip >> 32), 1, 0),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog p = { sizeof f / sizeof f[0], f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("no_new_privs");
	long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p);
	if (rc < 0)
		die("seccomp");
	if (listener)
		*listener = (int)rc;
}

/* the measured loop; an execve chain runs once per process */
static void workload(long n)
{
	if (call_nr == SYS_execve) {
		char arg[32];
		snprintf(arg, sizeof arg, "%ld", n - 1);
		if (n <= 0)
			exit(0);
		char *argv[] = { (char *)self, (char *)link_name, "execve", arg, NULL };
		execve(self, argv, (char *[]){ NULL });
		die("execve");
	}
	for (long i = 0; i < n; i++) {
		if (call_nr == SYS_getpid) {
			syscall(SYS_getpid);
		} else {
			int fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY);
			if (fd < 0)
				die("openat");
			close(fd);
		}
	}
}

static void on_sigsys(int sig, siginfo_t *si, void *vctx)
{
	ucontext_t *uc = vctx;
	greg_t *r = uc->uc_mcontext.gregs;
	(void)sig;
	(void)si;
	r[REG_RAX] = gadget(r[REG_RAX], r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10],
			    r[REG_R8], r[REG_R9]);
}

/* an exec made from the handler keeps SIGSYS blocked in the next image: unblock it */
static void sigsys_handler(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	sigset_t sys;
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	if (sigaction(SIGSYS, &sa, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &sys, NULL) < 0)
		die("sigaction");
}

/* a child runs the workload under ptrace; every stop is answered at once */
static void run_ptrace(long n, int seccomp_trace)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		if (seccomp_trace)
			install_filter(SECCOMP_RET_TRACE, 0, NULL);
		workload(n);
		exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	long opt = PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL | PTRACE_O_TRACEEXEC |
		   (seccomp_trace ? PTRACE_O_TRACESECCOMP : 0);
	if (ptrace(PTRACE_SETOPTIONS, pid, 0, opt) < 0)
		die("PTRACE_SETOPTIONS");
	int req = seccomp_trace ? PTRACE_CONT : PTRACE_SYSCALL;
	ptrace(req, pid, 0, 0);
	while (waitpid(pid, &st, 0) == pid && !WIFEXITED(st) && !WIFSIGNALED(st)) {
		int sig = WSTOPSIG(st);
		int pass = sig == SIGTRAP || sig == (SIGTRAP | 0x80) || (st >> 16) ? 0 : sig;
		ptrace(req, pid, 0, pass);
	}
}

static void send_fd(int sock, int fd)
{
	char buf[CMSG_SPACE(sizeof fd)] = { 0 }, c = 0;
	struct iovec io = { &c, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof buf };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof fd);
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	if (sendmsg(sock, &m, 0) < 0)
		die("sendmsg");
}

static int recv_fd(int sock)
{
	char buf[CMSG_SPACE(sizeof(int))], c;
	struct iovec io = { &c, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof buf };
	int fd;
	if (recvmsg(sock, &m, 0) < 1)
		die("recvmsg");
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
	return fd;
}

/* a child runs the workload; this process answers its notifications */
static void run_unotify(long n, int sync)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		die("socketpair");
	pid_t pid = fork();
	if (pid == 0) {
		int l;
		install_filter(SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER, &l);
		send_fd(sv[1], l);
		close(l);
		char go;
		if (read(sv[1], &go, 1) != 1)
			die("read");
		workload(n);
		exit(0);
	}
	int l = recv_fd(sv[0]);
	if (sync && ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 0) < 0)
		die("SECCOMP_IOCTL_NOTIF_SET_FLAGS");
	if (write(sv[0], "g", 1) != 1)
		die("write");
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	for (;;) {
		memset(&req, 0, sizeof req);
		if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR)
				continue;
			break; /* ENOENT/EBADF: the child is gone */
		}
		resp = (struct seccomp_notif_resp){ .id = req.id,
						    .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
		ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
	int st;
	waitpid(pid, &st, 0);
}

static void run_plain(long n, int sigsys)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (sigsys) {
			sigsys_handler();
			install_filter(SECCOMP_RET_TRAP, 0, NULL);
		}
		workload(n);
		exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "syscall_bench: workload failed (status %#x)\n", st), exit(2);
}

int main(int argc, char **argv)
{
	self = "/proc/self/exe";
	if (argc != 4)
		return fprintf(stderr, "usage: syscall_bench native|ptrace|seccomp-trace|"
			       "unotify|unotify-sync|sigsys getpid|openat|execve N\n"), 2;
	call_nr = !strcmp(argv[2], "getpid") ? SYS_getpid : !strcmp(argv[2], "openat") ?
		  SYS_openat : !strcmp(argv[2], "execve") ? SYS_execve : -1;
	long n = atol(argv[3]);
	if (!strncmp(argv[1], "chain", 5) && n == 0)
		return 0; /* the chain's last link */
	if (call_nr < 0 || n <= 0)
		return fprintf(stderr, "syscall_bench: unknown call %s or bad N\n", argv[2]), 2;
	if (!strncmp(argv[1], "chain", 5)) { /* a link of the execve chain */
		link_name = argv[1];
		if (!strcmp(argv[1], "chain-sigsys")) /* exec reset the handler; the filter stays */
			sigsys_handler();
		workload(n);
		return 0;
	}
	if (!strcmp(argv[1], "sigsys"))
		link_name = "chain-sigsys";
	double t0 = now_ns();
	if (!strcmp(argv[1], "native"))
		run_plain(n, 0);
	else if (!strcmp(argv[1], "sigsys"))
		run_plain(n, 1);
	else if (!strcmp(argv[1], "ptrace"))
		run_ptrace(n, 0);
	else if (!strcmp(argv[1], "seccomp-trace"))
		run_ptrace(n, 1);
	else if (!strcmp(argv[1], "unotify"))
		run_unotify(n, 0);
	else if (!strcmp(argv[1], "unotify-sync"))
		run_unotify(n, 1);
	else
		return fprintf(stderr, "syscall_bench: unknown mechanism %s\n", argv[1]), 2;
	printf("%s %s %ld %.0f\n", argv[1], argv[2], n, (now_ns() - t0) / (double)n);
	return 0;
}
