/* Signals to the guest's own process group: kill(0, SIG) reaches every process
 * of the caller's group, which must be the sandbox's, never sbx-run's or its
 * caller's. Usage: escape_pgrp kill|stop. Prints the group and session as the
 * guest sees them (0: a leader outside this PID namespace). */
#include <signal.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	int stop = argc > 1 && !strcmp(argv[1], "stop");
	printf("pgrp=%d sid=%d\n", (int)getpgrp(), (int)getsid(0));
	fflush(stdout);
	/* the guest is in its own group: it stops or dies here too */
	kill(0, stop ? SIGSTOP : SIGKILL);
	printf("continued\n");
	return 0;
}
