/* snaptree guest: SIGUSR1 and SIGUSR2 blocked and read through a signalfd;
 * each step raises one, the next step reads it, so a signal stays pending
 * across the pause. */
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	sigaddset(&m, SIGUSR2);
	CHECK(sigprocmask(SIG_BLOCK, &m, NULL) == 0);
	int sfd = signalfd(-1, &m, SFD_CLOEXEC);
	CHECK(sfd >= 0);
	int pending = 0;
	for (int s = 0; s < STEPS; s++) {
		if (pending) {
			struct signalfd_siginfo si;
			CHECK(read(sfd, &si, sizeof si) == sizeof si);
			CHECK((int)si.ssi_signo == pending);
			mix(&si.ssi_signo, 4);
		}
		pending = s % 2 ? SIGUSR2 : SIGUSR1;
		CHECK(raise(pending) == 0);
		step_done(s, pending == SIGUSR1 ? "raised USR1" : "raised USR2");
	}
	struct signalfd_siginfo si;
	CHECK(read(sfd, &si, sizeof si) == sizeof si);
	printf("last %d\n", si.ssi_signo == SIGUSR2);
	return 0;
}
