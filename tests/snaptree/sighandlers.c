/* snaptree guest: timers and signal handlers: SIGUSR1 and SIGUSR2 caught by
 * handlers (one on an alternate stack, one with SA_RESTART and a mask),
 * SIGUSR2 left blocked and pending across the pauses, a periodic timerfd
 * pacing the steps. */
#include <signal.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "fdguest.h"

static volatile sig_atomic_t usr1, usr2;
static char altstack[65536];

static void on_usr1(int sig)
{
	char here;
	usr1 += sig + (&here >= altstack && &here < altstack + sizeof altstack);
}

static void on_usr2(int sig)
{
	usr2 += sig;
}

int main(void)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack };
	struct sigaction a1 = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	struct sigaction a2 = { .sa_handler = on_usr2, .sa_flags = SA_RESTART };
	sigaddset(&a2.sa_mask, SIGUSR1);
	CHECK(sigaltstack(&ss, NULL) == 0 && sigaction(SIGUSR1, &a1, NULL) == 0 &&
	      sigaction(SIGUSR2, &a2, NULL) == 0);
	sigset_t blk;
	sigemptyset(&blk);
	sigaddset(&blk, SIGUSR2);
	int tf = timerfd_create(CLOCK_MONOTONIC, 0);
	struct itimerspec its = { { 0, 50000000 }, { 0, 50000000 } };
	CHECK(tf >= 0 && timerfd_settime(tf, 0, &its, NULL) == 0);
	for (int s = 0; s < STEPS; s++) {
		uint64_t ticks;
		CHECK(read(tf, &ticks, 8) == 8);
		CHECK(raise(SIGUSR1) == 0);
		if (s % 2 == 0) {
			CHECK(sigprocmask(SIG_BLOCK, &blk, NULL) == 0 && raise(SIGUSR2) == 0);
		} else {
			CHECK(sigprocmask(SIG_UNBLOCK, &blk, NULL) == 0);
		}
		printf("step %d usr1 %d usr2 %d\n", s, (int)usr1, (int)usr2);
		fflush(stdout);
	}
	CHECK(sigprocmask(SIG_UNBLOCK, &blk, NULL) == 0);
	printf("end usr1 %d usr2 %d\n", (int)usr1, (int)usr2);
	return 0;
}
