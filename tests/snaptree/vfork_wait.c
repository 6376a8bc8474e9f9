/* snaptree guest (tests/chain.bats): a parent waiting in vfork for its child,
 * which naps for a minute before it exits: the parent stops for nothing until. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	pid_t kid = vfork();
	if (kid == 0) {
		say("child napping\n");
		nap(60000);
		_exit(0);
	}
	int st;
	waitpid(kid, &st, 0);
	say("child exit %d\n", WEXITSTATUS(st));
	return 0;
}
