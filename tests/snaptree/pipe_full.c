/* snaptree guest: bytes waiting in a pipe. A child writes 48 KiB at once and
 * exits; the parent reads it back 1 KiB every 40 ms, printing a running digest. */
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int p[2];
	if (pipe(p) < 0)
		return 1;
	pid_t kid = fork();
	if (kid == 0) {
		static unsigned char buf[48 * 1024];
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (unsigned char)(i * 7 + i / 251);
		close(p[0]);
		if (write(p[1], buf, sizeof buf) != (ssize_t)sizeof buf)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	uint64_t h = 1;
	unsigned char c[1024];
	ssize_t n;
	for (int s = 0; (n = read(p[0], c, sizeof c)) > 0; s++) {
		for (ssize_t i = 0; i < n; i++)
			h = mix(h, c[i]);
		say("chunk %d %zd %016llx\n", s, n, (unsigned long long)h);
		nap(40);
	}
	int st;
	waitpid(kid, &st, 0);
	say("child %d\n", WEXITSTATUS(st));
	return 0;
}
