/* snaptree guest: kernel objects of a child process. The child makes an
 * eventfd (semaphore), a periodic timerfd, a signalfd for SIGUSR1 and an epoll
 * set over them, and steps through them, printing; the parent holds an eventfd
 * of its own whose counter grows meanwhile, and prints it at the end. */
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include "fdguest.h"

static void child(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
	int ev = eventfd(5, EFD_SEMAPHORE | EFD_CLOEXEC), sf = signalfd(-1, &set, SFD_NONBLOCK);
	int tf = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), ep = epoll_create1(0);
	CHECK(ev > 2 && sf > 2 && tf > 2 && ep > 2);
	struct itimerspec its = { { 0, 20000000 }, { 0, 20000000 } };
	CHECK(timerfd_settime(tf, 0, &its, NULL) == 0);
	struct epoll_event e1 = { EPOLLIN, { .u64 = 101 } }, e2 = { EPOLLIN, { .u64 = 202 } };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e1) == 0 && epoll_ctl(ep, EPOLL_CTL_ADD, sf, &e2) == 0);
	for (int s = 0; s < STEPS; s++) {
		uint64_t one = 1, got = 0, ticks = 0;
		CHECK(write(ev, &one, 8) == 8);
		if (s % 3 == 0)
			CHECK(raise(SIGUSR1) == 0);
		struct epoll_event out[4];
		int n = epoll_wait(ep, out, 4, 1000);
		CHECK(n >= 1);
		uint64_t sum = 0;
		for (int i = 0; i < n; i++)
			sum += out[i].data.u64;
		CHECK(read(ev, &got, 8) == 8 && got == 1);
		struct signalfd_siginfo si;
		ssize_t r = read(sf, &si, sizeof si);
		int sig = r == (ssize_t)sizeof si ? (int)si.ssi_signo : 0;
		/* expirations depend on the clock: only that some came */
		while (read(tf, &ticks, 8) != 8)
			pause_ms(5);
		CHECK(ticks >= 1);
		mix(&sum, sizeof sum);
		mix(&sig, sizeof sig);
		step_done(s, "child objects");
	}
	uint64_t left;
	CHECK(read(ev, &left, 8) == 8);
	printf("child semaphore still held %llu\n", (unsigned long long)left);
	fflush(stdout);
	_exit(4);
}

int main(void)
{
	int mine = eventfd(0, 0);
	CHECK(mine > 2);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(mine); /* an object both processes held would be refused */
		child();
	}
	int st;
	for (uint64_t k = 0; waitpid(kid, &st, WNOHANG) == 0; k++) {
		uint64_t v = k % 7 + 1;
		CHECK(write(mine, &v, 8) == 8);
		pause_ms(30);
	}
	uint64_t count;
	CHECK(read(mine, &count, 8) == 8 && count > 0);
	printf("child exit %d, parent eventfd counted\n", WEXITSTATUS(st));
	return 0;
}
