/* snaptree guest: a pipe made 256 KiB large holding 200 KiB, drained slowly;
 * its size is printed again at the end. */
#include <fcntl.h>
#include <sys/wait.h>
#include "guest.h"

int main(void)
{
	int p[2];
	if (pipe(p) < 0 || fcntl(p[1], F_SETPIPE_SZ, 256 * 1024) < 256 * 1024)
		return 1;
	pid_t kid = fork();
	if (kid == 0) {
		static unsigned char buf[200 * 1024];
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (unsigned char)(i % 253);
		if (write(p[1], buf, sizeof buf) != (ssize_t)sizeof buf)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	uint64_t h = 1;
	static unsigned char c[5 * 1024];
	ssize_t n;
	for (int s = 0; (n = read(p[0], c, sizeof c)) > 0; s++) {
		for (ssize_t i = 0; i < n; i++)
			h = mix(h, c[i]);
		say("chunk %d %zd %016llx\n", s, n, (unsigned long long)h);
		nap(40);
	}
	int st;
	waitpid(kid, &st, 0);
	say("size %d child %d\n", fcntl(p[0], F_GETPIPE_SZ), WEXITSTATUS(st));
	return 0;
}
