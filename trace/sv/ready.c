/* Would this call wait? The schedule (sched.c) asks when an ordered call that
 * can wait for another task of the run (a pipe read, wait4, select/poll, a
 * signal, a futex) holds the least key, so that the task holding the turn never
 * waits in the kernel for a task the schedule holds: a call that would wait is
 * blocked until another task's event makes it ready; and whether a call's fd is
 * the task's own business (a regular file) or others' (a pipe, a socket). Answers are from the host's view of the guest's own
 * objects: its fds duplicated with pidfd_getfd and polled with a zero timeout,
 * its children's states, its pending signals. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"
#include "trace/tracee/tracee.h"

#define FDSET_MAX 1024 /* select's fd_set */
#define POLL_MAX 256   /* pollfd entries looked at; more: assumed ready */

/* 1 when fd of tid is ready for ev (or a call on it would not wait: gone, not
 * pollable, or io and the fd non-blocking), else 0. select and poll wait
 * whatever the fd's flags. */
static int fd_ready(pid_t tid, int fd, short ev, int io)
{
	int pfd = (int)syscall(SYS_pidfd_open, tid, 0);
	if (pfd < 0)
		return 1;
	int d = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	if (d < 0)
		return 1; /* EBADF: the call fails at once */
	int fl = fcntl(d, F_GETFL);
	struct pollfd p = { .fd = d, .events = ev };
	int r = (io && fl >= 0 && (fl & O_NONBLOCK)) || poll(&p, 1, 0) != 0;
	close(d);
	return r;
}

/* A signal pending for tid that a handler catches (or SIGKILL), not blocked by
 * mask (the thread's own mask when mask_at is 0): the call returns for it. */
static int signal_ready(pid_t tid, uint64_t mask_at)
{
	struct trace_status s;
	unsigned long long pnd = 0, shd = 0, blk = 0, cgt = 0;
	if (trace_status_read(tid, &s) < 0)
		return 1;
	trace_status_num(&s, "SigPnd", 16, &pnd);
	trace_status_num(&s, "ShdPnd", 16, &shd);
	trace_status_num(&s, "SigBlk", 16, &blk);
	trace_status_num(&s, "SigCgt", 16, &cgt);
	trace_status_free(&s);
	if (mask_at && trace_mem_read(tid, mask_at, &blk, 8) != 8)
		return 1;
	return ((pnd | shd) & ~blk & (cgt | 1ull << (SIGKILL - 1))) != 0;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 'X';
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 'X';
}

char trace_sv_task_state(pid_t tid)
{
	return proc_state(tid);
}

int trace_sv_parent_alive(pid_t tid)
{
	struct trace_status s;
	unsigned long long pp = 0;
	if (trace_status_read(tid, &s) < 0)
		return 0;
	int ok = trace_status_num(&s, "PPid", 10, &pp) == 0 && pp > 0;
	trace_status_free(&s);
	if (!ok)
		return 0;
	char st = proc_state((pid_t)pp);
	return st != 'Z' && st != 'X';
}

/* wait4/waitid without WNOHANG: a child it may reap is a zombie, or it has
 * none (ECHILD at once). want: a namespace pid, or 0 for any. */
static int child_ready(pid_t tid, pid_t want)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)tid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	int any = 0;
	for (char *p = buf, *end; *p; p = end) {
		long c = strtol(p, &end, 10);
		if (end == p)
			break;
		struct trace_status s;
		pid_t ns = 0;
		if (want && trace_status_read((pid_t)c, &s) == 0) {
			ns = trace_status_nspid(&s);
			trace_status_free(&s);
		}
		if (want && ns != want)
			continue;
		any = 1;
		char st = proc_state((pid_t)c);
		if (st == 'Z' || st == 'X')
			return 1;
	}
	return !any;
}

/* select/pselect6: any fd of the read or write set ready, or a zero timeout. */
static int select_ready(pid_t tid, const uint64_t a[6])
{
	int nfds = (int)a[0];
	uint64_t set[2][FDSET_MAX / 64];
	int64_t ts[2];
	if (a[4] && trace_mem_read(tid, a[4], ts, sizeof ts) == sizeof ts && !ts[0] && !ts[1])
		return 1;
	if (nfds <= 0 || nfds > FDSET_MAX)
		return 1;
	size_t bytes = ((size_t)nfds + 63) / 64 * 8;
	for (int k = 0; k < 2; k++) {
		memset(set[k], 0, sizeof set[k]);
		if (a[1 + k] && trace_mem_read(tid, a[1 + k], set[k], bytes) != (ssize_t)bytes)
			return 1;
	}
	for (int fd = 0; fd < nfds; fd++)
		for (int k = 0; k < 2; k++)
			if ((set[k][fd / 64] >> (fd % 64) & 1) &&
			    fd_ready(tid, fd, k ? POLLOUT : POLLIN, 0))
				return 1;
	return 0;
}

/* poll/ppoll: any entry ready, or a zero timeout. */
static int poll_ready(pid_t tid, const uint64_t a[6], int ppoll)
{
	struct pollfd v[POLL_MAX];
	int64_t ts[2];
	if (!ppoll && (int)a[2] == 0)
		return 1;
	if (ppoll && a[2] && trace_mem_read(tid, a[2], ts, sizeof ts) == sizeof ts && !ts[0] && !ts[1])
		return 1;
	if (a[1] == 0 || a[1] > POLL_MAX)
		return 1;
	if (trace_mem_read(tid, a[0], v, a[1] * sizeof *v) != (ssize_t)(a[1] * sizeof *v))
		return 1;
	for (size_t i = 0; i < a[1]; i++)
		if (v[i].fd >= 0 && fd_ready(tid, v[i].fd, v[i].events, 0))
			return 1;
	return 0;
}

/* The signal mask a call waits with: pselect6's {sigset, size} at a[5]. */
static uint64_t pselect_mask(pid_t tid, uint64_t at)
{
	uint64_t pair[2];
	if (!at || trace_mem_read(tid, at, pair, sizeof pair) != sizeof pair)
		return 0;
	return pair[0];
}

int trace_sv_call_ready(pid_t tid, long nr, const uint64_t a[6])
{
	switch (nr) {
	case TRACE_SYS_read:
	case TRACE_SYS_readv:
	case TRACE_SYS_recvfrom:
	case TRACE_SYS_recvmsg:
	case TRACE_SYS_accept:
	case TRACE_SYS_accept4:
		return fd_ready(tid, (int)a[0], POLLIN, 1) || signal_ready(tid, 0);
	case TRACE_SYS_wait4:
		return (a[2] & WNOHANG) || child_ready(tid, (pid_t)a[0] > 0 ? (pid_t)a[0] : 0) ||
		       signal_ready(tid, 0);
	case TRACE_SYS_waitid:
		return (a[3] & WNOHANG) || signal_ready(tid, 0) ||
		       child_ready(tid, a[0] == P_PID ? (pid_t)a[1] : 0);
	case TRACE_SYS_select:
		return signal_ready(tid, 0) || select_ready(tid, a);
	case TRACE_SYS_pselect6:
		return signal_ready(tid, pselect_mask(tid, a[5])) || select_ready(tid, a);
	case TRACE_SYS_poll:
		return signal_ready(tid, 0) || poll_ready(tid, a, 0);
	case TRACE_SYS_ppoll:
		return signal_ready(tid, a[3]) || poll_ready(tid, a, 1);
	case TRACE_SYS_epoll_wait:
	case TRACE_SYS_epoll_pwait:
	case TRACE_SYS_epoll_pwait2:
		return (nr == TRACE_SYS_epoll_wait && (int)a[3] == 0) ||
		       signal_ready(tid, nr == TRACE_SYS_epoll_wait ? 0 : a[4]) ||
		       fd_ready(tid, (int)a[0], POLLIN, 0);
	case TRACE_SYS_pause:
		return signal_ready(tid, 0);
	case TRACE_SYS_rt_sigsuspend:
		return signal_ready(tid, a[0]);
	default:
		return 1;
	}
}

int trace_sv_futex_ready(pid_t tid, const uint64_t a[6])
{
	int op = (int)(a[1] & FUTEX_CMD_MASK);
	uint32_t v;
	if (op != FUTEX_WAIT && op != FUTEX_WAIT_BITSET)
		return 1;
	return trace_mem_read(tid, a[0], &v, sizeof v) != sizeof v || v != (uint32_t)a[2];
}

int trace_sv_fd_private(pid_t tid, int fd)
{
	char path[64];
	struct stat s;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
	if (stat(path, &s) < 0)
		return 1; /* EBADF: the call fails at once */
	if (S_ISREG(s.st_mode) || S_ISDIR(s.st_mode))
		return 1;
	/* the memory devices: null 3, zero 5, full 7, random 8, urandom 9 */
	unsigned mi = minor(s.st_rdev);
	return S_ISCHR(s.st_mode) && major(s.st_rdev) == 1 &&
	       (mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9);
}
