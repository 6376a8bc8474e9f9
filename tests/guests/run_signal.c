/* Kills itself with the signal named by argv[1] (a number). */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int sig = argc > 1 ? atoi(argv[1]) : SIGTERM;
	signal(sig, SIG_DFL);
	kill(getpid(), sig);
	pause();
	return 0;
}
