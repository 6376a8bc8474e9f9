/* A nested tracer rewrites its tracee's path: the child stops (SIGSTOP) just
 * before it opens argv[1]; its parent, the tracer, points the open at argv[2]
 * (unless "-"), as argv[3] says: "stop" writes argv[2] over the path with
 * PTRACE_POKEDATA while the child is stopped; "entry-poke" does so at the
 * openat's syscall-entry stop; "entry-regs" there points the path argument at
 * another buffer with PTRACE_SETREGS. Prints what the open did: sbx judges the
 * path the child really opens. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/ptrace.h>
#include "escape.h"

static char path[256], other[256];

static void child(int rfd)
{
	char go;
	if (read(rfd, &go, 1) != 1)
		_exit(100);
	raise(SIGSTOP);
	int fd = open(path, O_RDONLY);
	_exit(fd >= 0 ? 0 : errno);
}

/* to written over the child's buffer at (its copy of) at. */
static int poke_at(pid_t c, char *at, const char *to)
{
	char buf[sizeof path];
	memset(buf, 0, sizeof buf);
	snprintf(buf, sizeof buf, "%s", to);
	for (size_t off = 0; off < strlen(to) + 1; off += sizeof(long)) {
		long word;
		memcpy(&word, buf + off, sizeof word);
		if (ptrace(PTRACE_POKEDATA, c, at + off, (void *)word) < 0)
			return -1;
	}
	return 0;
}

/* Run c from syscall stop to syscall stop until the entry of its openat. */
static int to_openat_entry(pid_t c)
{
	struct ptrace_syscall_info info;
	int st;
	for (int i = 0; i < 200; i++) {
		if (ptrace(PTRACE_SYSCALL, c, 0, 0) < 0 || waitpid(c, &st, 0) != c || !WIFSTOPPED(st))
			return -1;
		if (WSTOPSIG(st) != (SIGTRAP | 0x80))
			continue;
		if (ptrace(PTRACE_GET_SYSCALL_INFO, c, (void *)sizeof info, &info) <= 0)
			return -1;
		if (info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_openat)
			return 0;
	}
	return -1;
}

/* At the openat's entry: the path argument points at other, which says to. */
static int point_path(pid_t c, const char *to)
{
	struct user_regs_struct r;
	if (poke_at(c, other, to) < 0 || ptrace(PTRACE_GETREGS, c, 0, &r) < 0)
		return -1;
	r.rsi = (unsigned long long)(uintptr_t)other;
	return ptrace(PTRACE_SETREGS, c, 0, &r);
}

static int rewrite(pid_t c, const char *to, const char *how)
{
	if (strcmp(to, "-") == 0)
		return 0;
	if (strcmp(how, "stop") == 0)
		return poke_at(c, path, to);
	if (to_openat_entry(c) < 0)
		return -1;
	return strcmp(how, "entry-regs") == 0 ? point_path(c, to) : poke_at(c, path, to);
}

int main(int argc, char **argv)
{
	int p[2], st = 0;
	if (argc < 4 || pipe(p) < 0)
		return 2;
	snprintf(path, sizeof path, "%s", argv[1]);
	pid_t c = fork();
	if (c == 0)
		child(p[0]);
	if (ptrace(PTRACE_SEIZE, c, 0, PTRACE_O_TRACESYSGOOD) < 0 || write(p[1], "g", 1) != 1 ||
	    waitpid(c, &st, 0) != c || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		printf("no stop to trace (%s, status %#x)\n", strerror(errno), st);
		return 2;
	}
	if (rewrite(c, argv[2], argv[3]) < 0) {
		printf("rewrite: %s\n", strerror(errno));
		return 2;
	}
	if (ptrace(PTRACE_CONT, c, 0, 0) < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
		printf("tracee lost (%s, status %#x)\n", strerror(errno), st);
		return 2;
	}
	printf("open: %s\n", WEXITSTATUS(st) ? strerror(WEXITSTATUS(st)) : "ok");
	return 0;
}
