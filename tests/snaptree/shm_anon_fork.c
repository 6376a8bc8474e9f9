/* snaptree guest: shared anonymous memory inherited over fork. Parent and
 * child take turns through a counter in the shared mapping: each step the
 * parent writes a value, the child folds the whole shared area into a hash it
 * writes back, and the parent prints it; a private page written by both
 * stays private. */
#include <sys/mman.h>
#include <sys/wait.h>
#include "fdguest.h"
#include "turns.h"

#define SHARED (3 * 4096)

int main(void)
{
	uint8_t *sh = mmap(NULL, SHARED, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint8_t *priv = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED && priv != MAP_FAILED);
	volatile uint32_t *turn = (volatile uint32_t *)sh;
	volatile uint64_t *answer = (volatile uint64_t *)(sh + 8);
	memset(priv, 'p', 4096);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		memset(priv, 'c', 4096);
		for (int s = 0; s < STEPS; s++) {
			wait_turn(turn, 2u * s + 1, "child");
			sh[4096 + (s * 331) % 8192] ^= (uint8_t)(s * 7 + 1);
			fnv = 1469598103934665603ull;
			mix(sh + 4096, SHARED - 4096);
			mix(priv, 64);
			*answer = fnv;
			give_turn(turn, 2u * s + 2);
		}
		_exit(7);
	}
	for (int s = 0; s < STEPS; s++) {
		sh[4096 + (s * 613) % 8192] += (uint8_t)(s + 3);
		give_turn(turn, 2u * s + 1);
		wait_turn(turn, 2u * s + 2, "parent");
		fnv = *answer;
		mix(priv, 64);
		step_done(s, "shared-anon");
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("child exit %d, private page still %c\n", WEXITSTATUS(st), priv[100]);
	return 0;
}
