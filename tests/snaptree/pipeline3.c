/* snaptree guest: a three-stage pipeline made by the guest itself: gen writes
 * 80 numbers, square squares them, the root sums and prints every tenth sum. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int a[2], b[2];
	if (pipe(a) < 0 || pipe(b) < 0)
		return 1;
	pid_t gen = fork();
	if (gen == 0) {
		close(a[0]);
		close(b[0]);
		close(b[1]);
		for (uint64_t i = 1; i <= 80; i++) {
			if (write(a[1], &i, sizeof i) != sizeof i)
				_exit(2);
			nap(30);
		}
		_exit(0);
	}
	pid_t sq = fork();
	if (sq == 0) {
		close(a[1]);
		close(b[0]);
		uint64_t v;
		while (read(a[0], &v, sizeof v) == sizeof v) {
			v *= v;
			if (write(b[1], &v, sizeof v) != sizeof v)
				_exit(2);
		}
		_exit(0);
	}
	close(a[0]);
	close(a[1]);
	close(b[1]);
	uint64_t v, sum = 0;
	for (int n = 1; read(b[0], &v, sizeof v) == sizeof v; n++) {
		sum += v;
		if (n % 10 == 0)
			say("%d sum %llu\n", n, (unsigned long long)sum);
	}
	int st1, st2;
	waitpid(gen, &st1, 0);
	waitpid(sq, &st2, 0);
	say("exits %d %d\n", WEXITSTATUS(st1), WEXITSTATUS(st2));
	return 0;
}
