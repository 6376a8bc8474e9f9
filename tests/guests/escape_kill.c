/* Kill the supervisor by its host pid (argv[1]), every visible process (-1)
 * and init: the supervisor is not in this PID namespace and init ignores us. */
#include <signal.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	if (argc > 1) {
		pid_t sup = (pid_t)atoi(argv[1]);
		/* that number is either absent from this PID namespace or one of ours */
		if (kill(sup, SIGKILL) < 0)
			printf("contained: kill(supervisor %d) (%s)\n", (int)sup, strerror(errno));
		else
			printf("kill(%d) reached a process of this sandbox only\n", (int)sup);
	}
	signal(SIGTERM, SIG_IGN);
	kill(-1, SIGTERM); /* every process we can see: only this sandbox */
	kill(1, SIGKILL);  /* init of the PID namespace: signals from inside are dropped */
	kill(1, SIGTERM);
	usleep(300000);
	printf("contained: still running after kill(-1) and kill(1)\n");
	return finish();
}
