/* snaptree guest: children asleep in another program (/bin/sleep) while the
 * parent steps; it prints how each ended. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	pid_t kid[2];
	const char *len[2] = { "1", "2" };
	for (int i = 0; i < 2; i++)
		if ((kid[i] = fork()) == 0) {
			execl("/bin/sleep", "sleep", len[i], (char *)NULL);
			_exit(127);
		}
	uint64_t h = 1;
	for (int s = 0; s < 20; s++) {
		h = mix(h, (uint64_t)s);
		say("step %d %016llx\n", s, (unsigned long long)h);
		nap(50);
	}
	for (int i = 0; i < 2; i++) {
		int st;
		waitpid(kid[i], &st, 0);
		say("sleep %s exit %d\n", len[i], WEXITSTATUS(st));
	}
	return 0;
}
