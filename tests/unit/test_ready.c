/* trace/sv/ready.c: would a call wait for another task? Asked of this very
 * process (pidfd_getfd and /proc work on oneself as on a tracee): pipes empty
 * and full, children running and exited, select and poll sets, signals pending
 * and blocked. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "tests/unit/unit.h"

static void on_usr1(int sig)
{
	(void)sig;
}

static void pipes(pid_t me)
{
	int p[2];
	CHECK(pipe(p) == 0);
	uint64_t rd[6] = { (uint64_t)p[0], 0, 1 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_read, rd) == 0); /* empty: it would wait */
	CHECK(write(p[1], "x", 1) == 1);
	CHECK(trace_sv_call_ready(me, TRACE_SYS_read, rd) == 1);
	char c;
	CHECK(read(p[0], &c, 1) == 1);
	close(p[1]);
	CHECK(trace_sv_call_ready(me, TRACE_SYS_read, rd) == 1); /* EOF */
	close(p[0]);
	CHECK(pipe2(p, O_NONBLOCK) == 0);
	rd[0] = (uint64_t)p[0];
	CHECK(trace_sv_call_ready(me, TRACE_SYS_read, rd) == 1); /* EAGAIN at once */
	/* select and poll wait whatever the descriptor's flags */
	fd_set set;
	FD_ZERO(&set);
	FD_SET(p[0], &set);
	uint64_t sel[6] = { (uint64_t)p[0] + 1, (uint64_t)(uintptr_t)&set, 0, 0, 0, 0 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_select, sel) == 0);
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	uint64_t pl[6] = { (uint64_t)(uintptr_t)&pf, 1, (uint64_t)-1 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_poll, pl) == 0);
	pl[2] = 0; /* a zero timeout returns at once */
	CHECK(trace_sv_call_ready(me, TRACE_SYS_poll, pl) == 1);
	pl[2] = (uint64_t)-1;
	CHECK(write(p[1], "y", 1) == 1);
	CHECK(trace_sv_call_ready(me, TRACE_SYS_select, sel) == 1);
	CHECK(trace_sv_call_ready(me, TRACE_SYS_poll, pl) == 1);
	close(p[0]);
	close(p[1]);
}

static void children(pid_t me)
{
	uint64_t w[6] = { (uint64_t)-1, 0, 0, 0 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_wait4, w) == 1); /* no child: ECHILD */
	pid_t c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	CHECK(trace_sv_call_ready(me, TRACE_SYS_wait4, w) == 0);
	CHECK(trace_sv_task_state(c) == 'S' || trace_sv_task_state(c) == 'R');
	CHECK(trace_sv_parent_alive(c) == 1);
	w[2] = WNOHANG;
	CHECK(trace_sv_call_ready(me, TRACE_SYS_wait4, w) == 1);
	w[2] = 0;
	kill(c, SIGKILL);
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT) == 0); /* a zombie, kept */
	CHECK(trace_sv_task_state(c) == 'Z');
	CHECK(trace_sv_call_ready(me, TRACE_SYS_wait4, w) == 1);
	CHECK(waitpid(c, NULL, 0) == c);
	CHECK(trace_sv_task_state(c) == 'X');
}

static void signals(pid_t me)
{
	sigset_t usr1, none, old;
	sigemptyset(&usr1);
	sigemptyset(&none);
	sigaddset(&usr1, SIGUSR1);
	signal(SIGUSR1, on_usr1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	uint64_t a[6] = { 0 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_pause, a) == 0);
	raise(SIGUSR1); /* pending, blocked */
	CHECK(trace_sv_call_ready(me, TRACE_SYS_pause, a) == 0);
	a[0] = (uint64_t)(uintptr_t)&none; /* sigsuspend unblocks it: returns at once */
	CHECK(trace_sv_call_ready(me, TRACE_SYS_rt_sigsuspend, a) == 1);
	a[0] = (uint64_t)(uintptr_t)&usr1;
	CHECK(trace_sv_call_ready(me, TRACE_SYS_rt_sigsuspend, a) == 0);
	sigprocmask(SIG_SETMASK, &old, NULL); /* delivered here */
	CHECK(trace_sv_call_ready(me, TRACE_SYS_pause, a) == 0);
	signal(SIGUSR1, SIG_DFL);
}

int main(void)
{
	pid_t me = getpid();
	pipes(me);
	children(me);
	signals(me);
	/* a call that cannot wait for another task is always ready */
	uint64_t a[6] = { 0 };
	CHECK(trace_sv_call_ready(me, TRACE_SYS_getpid, a) == 1);
	return unit_finish("test_ready");
}
