/* snaptree guest: two eventfds, a periodic timer and a signalfd made before
 * the fork and kept by parent and child, both using the eventfds: each step
 * the parent adds to the first, the child reads it a moment later (the count
 * waits across the pause) and answers on the second, a semaphore the parent
 * takes twice; the child also waits for the timer to expire and takes a
 * signal it raised through the signalfd. */
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int ev = eventfd(0, 0), ack = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	int tick = timerfd_create(CLOCK_MONOTONIC, 0);
	struct itimerspec every = { { 0, 10000000 }, { 0, 10000000 } };
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	CHECK(sigprocmask(SIG_BLOCK, &usr1, NULL) == 0);
	int sig = signalfd(-1, &usr1, SFD_CLOEXEC);
	CHECK(ev >= 0 && ack >= 0 && sig >= 0 && tick >= 0 &&
	      timerfd_settime(tick, 0, &every, NULL) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		for (int s = 0; s < STEPS; s++) {
			uint64_t v, two = 2, n;
			struct signalfd_siginfo si;
			pause_ms(30);
			CHECK(read(ev, &v, 8) == 8);
			mix(&v, 8);
			CHECK(read(tick, &n, 8) == 8 && n >= 1);
			CHECK(raise(SIGUSR1) == 0 && read(sig, &si, sizeof si) == sizeof si &&
			      si.ssi_signo == SIGUSR1);
			printf("child got %llu and a tick\n", (unsigned long long)v);
			CHECK(write(ack, &two, 8) == 8);
			step_done(s, "child");
		}
		_exit(5);
	}
	uint64_t sum = 0;
	for (int s = 0; s < STEPS; s++) {
		uint64_t v = (uint64_t)s + 1, a;
		CHECK(write(ev, &v, 8) == 8);
		for (int k = 0; k < 2; k++) {
			CHECK(read(ack, &a, 8) == 8 && a == 1);
			sum += a;
		}
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("parent took %llu, child exit %d\n", (unsigned long long)sum, WEXITSTATUS(st));
	return 0;
}
