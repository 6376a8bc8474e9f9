/* trace/sv: tasks made outside the loop (a restore's injected clones and
 * forks) adopted by it. */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"

void trace_sv_adopt_threads(struct trace_supervisor *sv, pid_t pid)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/task", (int)pid);
	DIR *d = opendir(p);
	struct dirent *de;
	struct tstate *lead = trace_sv_find(sv, pid);
	while (d && (de = readdir(d))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		if (tid <= 0 || tid == pid || trace_sv_find(sv, tid))
			continue;
		struct tstate *c = trace_sv_tstate_new(sv, tid);
		c->announced = 1;
		c->tgid = pid;
		c->ppid = lead ? lead->ppid : 0;
		trace_sv_spawned(sv, pid, tid, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
			     CLONE_THREAD | CLONE_SYSVSEM);
		trace_sv_resume(sv, tid, PTRACE_CONT, 0);
	}
	if (d)
		closedir(d);
}

/* 1 when pid is a zombie (its tracer done with it, its parent not yet). */
static int is_zombie(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'Z';
}

void trace_sv_adopt_tree(struct trace_supervisor *sv, pid_t pid)
{
	char p[96];
	trace_sv_adopt_threads(sv, pid);
	snprintf(p, sizeof p, "/proc/%d/task", (int)pid);
	DIR *d = opendir(p);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *buf = NULL, *at, *end;
		size_t len;
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/%d/task/%s/children", (int)pid, de->d_name);
		if (common_read_file(p, 1u << 20, &buf, &len, NULL) < 0)
			continue;
		for (at = buf;; at = end) {
			pid_t c = (pid_t)strtol(at, &end, 10);
			if (end == at)
				break;
			if (c <= 0 || trace_sv_find(sv, c) || is_zombie(c))
				continue;
			struct tstate *t = trace_sv_tstate_new(sv, c);
			t->announced = 1;
			t->tgid = c;
			t->ppid = pid;
			trace_sv_spawned(sv, pid, c, SIGCHLD);
			trace_sv_adopt_tree(sv, c);
			trace_sv_resume(sv, c, PTRACE_CONT, 0);
		}
		free(buf);
	}
	if (d)
		closedir(d);
}
