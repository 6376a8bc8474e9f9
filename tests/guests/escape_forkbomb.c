/* A fork bomb: every child forks until fork fails. The per-run process cap
 * (RLIMIT_NPROC in the run's user namespace) stops it; the host is unaffected. */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	int p[2];
	if (pipe(p) < 0)
		return 2;
	pid_t top = fork();
	if (top == 0) {
		close(p[0]);
		for (;;) {
			pid_t c = fork();
			if (c < 0) {
				(void)!write(p[1], "x", 1); /* one byte per fork failure */
				pause();
			}
			if (c > 0)
				pause();
		}
	}
	close(p[1]);
	/* wait until failures are reported, then count the processes we see */
	char b;
	if (read(p[0], &b, 1) != 1)
		return 2;
	usleep(200000);
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] >= '0' && de->d_name[0] <= '9';
	if (d)
		closedir(d);
	printf("processes in the sandbox at the cap: %d\n", n);
	if (n > 0 && n <= 1100)
		printf("contained: fork bomb stopped by the process cap\n");
	else {
		printf("ESCAPED: fork bomb not capped (%d)\n", n);
		escaped = 1;
	}
	kill(-1, SIGKILL); /* everything but us */
	return finish();
}
