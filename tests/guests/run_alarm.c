/* Signals reach the guest: SIGALRM interrupts pause(), SIGCHLD arrives. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got_alrm, got_chld;
static void on_alrm(int s) { (void)s; got_alrm = 1; }
static void on_chld(int s) { (void)s; got_chld = 1; }

int main(void)
{
	signal(SIGALRM, on_alrm);
	signal(SIGCHLD, on_chld);
	alarm(1);
	pause();
	if (fork() == 0)
		_exit(0);
	while (!got_chld)
		pause();
	wait(NULL);
	printf("alarm=%d chld=%d\n", (int)got_alrm, (int)got_chld);
	return got_alrm && got_chld ? 0 : 1;
}
