/* Job control under the supervisor: a child stops itself (SIGSTOP), the parent
 * sees it stopped (WUNTRACED), continues it (SIGCONT), and it exits 0. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	pid_t c = fork();
	if (c == 0) {
		raise(SIGSTOP);
		_exit(0);
	}
	int st;
	if (waitpid(c, &st, WUNTRACED) != c || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		printf("child did not stop\n");
		return 1;
	}
	printf("child stopped\n");
	kill(c, SIGCONT);
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("child did not finish\n");
		return 1;
	}
	printf("child continued and exited\n");
	return 0;
}
