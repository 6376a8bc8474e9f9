/* A nested tracer rewrites its tracee's path: the child stops (SIGSTOP) just
 * before it opens argv[1]; the parent, its tracer, writes argv[2] over the path
 * with PTRACE_POKEDATA (unless argv[2] is "-") and lets it go. Prints what the
 * open did: sbx judges the path the child really opens. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

static char path[256];

static void child(int rfd)
{
	char go;
	if (read(rfd, &go, 1) != 1)
		_exit(100);
	raise(SIGSTOP);
	int fd = open(path, O_RDONLY);
	_exit(fd >= 0 ? 0 : errno);
}

static int poke_path(pid_t c, const char *to)
{
	char buf[sizeof path];
	memset(buf, 0, sizeof buf);
	snprintf(buf, sizeof buf, "%s", to);
	for (size_t off = 0; off < strlen(to) + 1; off += sizeof(long)) {
		long word;
		memcpy(&word, buf + off, sizeof word);
		if (ptrace(PTRACE_POKEDATA, c, path + off, (void *)word) < 0)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int p[2], st = 0;
	if (argc < 3 || pipe(p) < 0)
		return 2;
	snprintf(path, sizeof path, "%s", argv[1]);
	pid_t c = fork();
	if (c == 0)
		child(p[0]);
	if (ptrace(PTRACE_SEIZE, c, 0, 0) < 0 || write(p[1], "g", 1) != 1 ||
	    waitpid(c, &st, 0) != c || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		printf("no stop to trace (%s, status %#x)\n", strerror(errno), st);
		return 2;
	}
	if (strcmp(argv[2], "-") != 0 && poke_path(c, argv[2]) < 0) {
		printf("POKEDATA: %s\n", strerror(errno));
		return 2;
	}
	if (ptrace(PTRACE_CONT, c, 0, 0) < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
		printf("tracee lost (%s, status %#x)\n", strerror(errno), st);
		return 2;
	}
	printf("open: %s\n", WEXITSTATUS(st) ? strerror(WEXITSTATUS(st)) : "ok");
	return 0;
}
