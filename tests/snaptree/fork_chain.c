/* snaptree guest: a chain of five processes, each the parent of the next;
 * each steps 30 times (40 ms apart) and exits with a digest of its steps,
 * which its parent folds into its own; the root prints the whole chain's. */
#include <sys/wait.h>
#include "guest.h"

static int link_of(int depth)
{
	pid_t kid = -1;
	if (depth < 4 && (kid = fork()) == 0)
		_exit(link_of(depth + 1));
	uint64_t h = (uint64_t)depth + 1;
	for (int s = 0; s < 30; s++) {
		h = mix(h, (uint64_t)(s * (depth + 1)));
		nap(40);
	}
	int st = 0;
	if (kid > 0 && (waitpid(kid, &st, 0) != kid || !WIFEXITED(st)))
		return 255;
	return (int)((h ^ (uint64_t)WEXITSTATUS(st) * 31) % 251);
}

int main(void)
{
	say("chain %d\n", link_of(0));
	return 0;
}
