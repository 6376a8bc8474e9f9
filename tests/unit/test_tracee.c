/* trace/tracee: /proc fields, memory of a traced child (through and within its
 * page protections), syscalls injected at any stop, and waits that leave the
 * child's exit to whoever reaps it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/tracee/tracee.h"
#include "tests/unit/unit.h"

static char word[64] = "hello from the child";

static void status_fields(void)
{
	struct trace_status s;
	unsigned long long v = 0;
	mode_t um = umask(022);
	umask(um);
	CHECK(trace_status_read(getpid(), &s) == 0);
	CHECK(trace_status_num(&s, "Tgid", 10, &v) == 0 && v == (unsigned long long)getpid());
	CHECK(trace_status_num(&s, "PPid", 10, &v) == 0 && v == (unsigned long long)getppid());
	CHECK(trace_status_num(&s, "Umask", 8, &v) == 0 && v == um);
	CHECK(trace_status_nspid(&s) > 0);
	CHECK(trace_status_field(&s, "Sig") == NULL); /* a prefix of SigQ, SigCgt… is no field */
	CHECK(trace_status_num(&s, "NoSuchField", 10, &v) == -1);
	trace_status_free(&s);
	/* the innermost namespace's id is the last of NSpid's */
	char text[] = "Name:\tx\nNSpid:\t4242\t17\t3\nNSpgid:\t9\n";
	s.text = text;
	CHECK(trace_status_nspid(&s) == 3);
	CHECK(!strncmp(trace_status_field(&s, "Name"), "x\nNSpid:", 8));
	CHECK(trace_status_num(&s, "Name", 10, &v) == -1);
	CHECK(trace_status_read(0x3fffffff, &s) < 0);
}

static void fdinfo_fields(void)
{
	int64_t pos = -1;
	unsigned fl = 0;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && lseek(fd, 1234, SEEK_SET) == 1234);
	CHECK(trace_fdinfo(getpid(), fd, &pos, &fl) == 0 && pos == 1234);
	CHECK((fl & O_ACCMODE) == O_RDONLY && (fl & O_CLOEXEC));
	close(fd);
	CHECK(trace_fdinfo(getpid(), fd, &pos, NULL) == -ENOENT); /* closed */
	CHECK(trace_fdinfo(0x3fffffff, 0, NULL, &fl) < 0);
}

static void proc_files(void)
{
	struct trace_map *m;
	size_t n;
	uint64_t brk0 = 0;
	int text = 0;
	uint64_t here = (uint64_t)(uintptr_t)&status_fields;
	CHECK(trace_proc_maps(getpid(), &m, &n, NULL) == 0);
	for (size_t i = 0; i < n; i++)
		if (here >= m[i].start && here < m[i].end)
			text = m[i].perms[2] == 'x' && m[i].path[0] == '/';
	free(m);
	CHECK(text);
	CHECK(trace_proc_start_brk(getpid(), &brk0, NULL) == 0 && brk0 > 0);
}

/* A child stopped by its own SIGSTOP under PTRACE_TRACEME; it exits with 0 when
 * word and the read-only page hold what the parent wrote. */
static pid_t stopped_child(char *ro)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		_exit(strcmp(word, "written by the parent") || strcmp(ro, "poked") ? 3 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP ? pid : -1;
}

static void memory(pid_t pid, char *ro, char *edge)
{
	char buf[64], s[64];
	uint64_t w = (uint64_t)(uintptr_t)word, r = (uint64_t)(uintptr_t)ro;
	CHECK(trace_mem_read(pid, w, buf, sizeof buf) == (ssize_t)sizeof buf);
	CHECK_STR(buf, "hello from the child");
	CHECK(trace_mem_read_str(pid, w, s, sizeof s) == (ssize_t)strlen("hello from the child"));
	CHECK(trace_mem_read_str(pid, w, s, 6) == -ENAMETOOLONG);
	/* a string that ends where the next page is unmapped is read whole */
	CHECK(trace_mem_read_str(pid, (uint64_t)(uintptr_t)edge, s, sizeof s) == 3);
	CHECK_STR(s, "end");
	CHECK(trace_mem_read_str(pid, (uint64_t)(uintptr_t)edge + 4, s, sizeof s) == -EFAULT);
	CHECK(trace_mem_write(pid, w, "written by the parent", 22) == 22);
	/* the guest's protections hold for process_vm_writev, not for /proc/PID/mem */
	CHECK(trace_mem_write(pid, r, "poked", 6) == -EFAULT);
	CHECK(trace_mem_poke(pid, r, "poked", 6) == 6);
}

static void injection(pid_t pid, const char *hidden)
{
	struct trace_tracee t;
	struct user_regs_struct saved, now;
	uint64_t none[6] = { 0 };
	int64_t ret = 0;
	CHECK(trace_regs_get(pid, &saved) == 0);
	CHECK(trace_tracee_open(&t, pid, NULL) == 0);
	CHECK(trace_tracee_find_syscall(&t, NULL) == 0 && t.insn != 0);
	CHECK(trace_tracee_inject(&t, SYS_getpid, none, &ret, NULL) == 0 && ret == pid);
	CHECK(trace_tracee_inject(&t, SYS_getppid, none, &ret, NULL) == 0 && ret == getpid());
	uint64_t bad[6] = { (uint64_t)-1 };
	CHECK(trace_tracee_inject(&t, SYS_close, bad, &ret, NULL) == 0 && ret == -EBADF);
	char back[22];
	CHECK(trace_tracee_read(&t, (uint64_t)(uintptr_t)word, back, sizeof back, NULL) == 0);
	CHECK(!memcmp(back, "written by the parent", sizeof back));
	CHECK(trace_tracee_read(&t, 8, back, 1, NULL) == -1);
	/* a read across into a PROT_NONE page: process_vm_readv stops short at
	 * it, the rest comes through /proc/PID/mem (a snapshot reads guard pages) */
	uint64_t h = (uint64_t)(uintptr_t)hidden;
	CHECK(trace_mem_read(pid, h, back, 8) == 4);
	memset(back, 0, sizeof back);
	CHECK(trace_tracee_read(&t, h, back, 8, NULL) == 0);
	CHECK(!memcmp(back, "seenhide", 8));
	CHECK(trace_mem_write(pid, h, "SEENHIDE", 8) == 4);
	CHECK(trace_tracee_write(&t, h, "SEENHIDE", 8, NULL) == 0);
	CHECK(trace_tracee_read(&t, h, back, 8, NULL) == 0 && !memcmp(back, "SEENHIDE", 8));
	trace_tracee_close(&t);
	CHECK(trace_regs_set(pid, &saved) == 0);
	CHECK(trace_regs_get(pid, &now) == 0 && now.rip == saved.rip && now.rsp == saved.rsp);
}

/* The exit is looked at, not reaped: waitpid still collects it. */
static void exit_left(pid_t pid)
{
	int st = 0;
	CHECK(ptrace(PTRACE_CONT, pid, NULL, NULL) == 0);
	CHECK(trace_wait_stop(pid, &st) == -ESRCH);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A running child met by PTRACE_SEIZE is stopped at a step boundary. */
static void interrupt(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		for (;;)
			pause();
	}
	int st;
	CHECK(ptrace(PTRACE_SEIZE, pid, NULL, (void *)PTRACE_O_EXITKILL) == 0);
	CHECK(trace_tracee_interrupt(pid, 0, NULL) == 0);
	CHECK(trace_syscall_op(pid) >= 0);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

int main(void)
{
	status_fields();
	fdinfo_fields();
	proc_files();
	char *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *guard = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED || two == MAP_FAILED || guard == MAP_FAILED)
		return 1;
	memcpy(guard + 4092, "seenhide", 8);
	mprotect(guard + 4096, 4096, PROT_NONE);
	char *edge = two + 4096 - 4;
	memcpy(edge, "end", 4);
	munmap(two + 4096, 4096);
	mprotect(ro, 4096, PROT_READ);
	pid_t pid = stopped_child(ro);
	CHECK(pid > 0);
	if (pid > 0) {
		memory(pid, ro, edge);
		injection(pid, guard + 4092);
		exit_left(pid);
	}
	interrupt();
	return unit_finish("test_tracee");
}
