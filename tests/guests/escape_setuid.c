/* execve of a setuid-root binary (argv[1], prepared by the test) gains nothing:
 * no_new_privs, a nosuid mount and the user namespace all stand in the way. */
#include <sys/wait.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--show") == 0) {
		printf("euid=%d\n", (int)geteuid());
		return geteuid() == 0 ? 1 : 0;
	}
	if (argc < 2)
		return 2;
	pid_t c = fork();
	if (c == 0) {
		execl(argv[1], argv[1], "--show", "x", (char *)NULL);
		_exit(3);
	}
	int st;
	waitpid(c, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		printf("contained: setuid-root %s ran without privilege\n", argv[1]);
	else {
		printf("ESCAPED or broken: %s status %d\n", argv[1], st);
		escaped = 1;
	}
	return finish();
}
