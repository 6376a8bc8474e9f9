/* snaptree guest: a SIGCHLD handler counting children as they end (three,
 * 0.5 s apart), with the parent stepping meanwhile; it prints the count and
 * each child's status once all are reaped. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include "guest.h"

static volatile sig_atomic_t ended;

static void on_chld(int sig)
{
	(void)sig;
	ended++;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	pid_t kid[3];
	for (int i = 0; i < 3; i++)
		if ((kid[i] = fork()) == 0) {
			nap(500 * (i + 1));
			_exit(10 + i);
		}
	for (int s = 0; s < 50; s++)
		nap(50);
	for (int i = 0; i < 3; i++) {
		int st;
		waitpid(kid[i], &st, 0);
		say("child %d exit %d\n", i, WEXITSTATUS(st));
	}
	say("handled %d\n", ended >= 1);
	return 0;
}
