/* snaptree guest: a child's own state kept: its working directory, umask,
 * a lowered resource limit and a blocked signal its parent sent it, which it
 * takes with sigwait at the end and reports through its exit status. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int p[2];
	/* a file in it: an empty directory is no namespace cell */
	if (pipe(p) < 0 || mkdir("sub", 0755) < 0 || close(open("sub/mark", O_CREAT | O_WRONLY, 0644)))
		return 1;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	pid_t kid = fork();
	if (kid == 0) {
		struct rlimit rl = { 77, 77 };
		if (chdir("sub") < 0 || setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(2);
		umask(027);
		for (int s = 0; s < 40; s++)
			nap(50);
		char cwd[256];
		getrlimit(RLIMIT_NOFILE, &rl);
		mode_t um = umask(0);
		int sig = 0;
		sigwait(&set, &sig);
		int n = snprintf(cwd + 128, 128, "%s %llu %o %d\n",
				 getcwd(cwd, 128) ? cwd : "?", (unsigned long long)rl.rlim_cur,
				 (unsigned)um, sig);
		if (write(p[1], cwd + 128, (size_t)n) != n)
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	kill(kid, SIGUSR1);
	char buf[256];
	ssize_t n = read(p[0], buf, sizeof buf - 1);
	int st;
	waitpid(kid, &st, 0);
	if (n <= 0)
		return 4;
	buf[n] = 0;
	const char *tail = strrchr(buf, '/');
	say("child %s", tail ? tail : buf);
	say("exit %d\n", WEXITSTATUS(st));
	return 0;
}
