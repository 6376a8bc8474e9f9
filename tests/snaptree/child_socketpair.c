/* snaptree guest: socket pairs of a child process with bytes queued across
 * every pause: a stream pair and a datagram pair, each step's messages read
 * the step after. The parent keeps a pair of its own with a message queued
 * all along, read at the end. */
#include <sys/socket.h>
#include <sys/wait.h>
#include "fdguest.h"

static void child(void)
{
	int st[2], dg[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, st) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg) == 0);
	for (int s = 0; s < STEPS; s++) {
		char msg[64];
		int n = snprintf(msg, sizeof msg, "stream %d;", s);
		CHECK(write(st[0], msg, (size_t)n) == n);
		for (int k = 0; k < 3; k++) {
			n = snprintf(msg, sizeof msg, "dgram %d.%d", s, k);
			CHECK(send(dg[1], msg, (size_t)n, 0) == n);
		}
		if (s > 0) {
			char buf[256];
			ssize_t got = read(st[1], buf, sizeof buf);
			CHECK(got > 0);
			mix(buf, (size_t)got);
			for (int k = 0; k < 3; k++) {
				got = recv(dg[0], buf, sizeof buf, 0);
				CHECK(got > 0);
				mix(buf, (size_t)got);
			}
		}
		step_done(s, "child pairs");
	}
	_exit(6);
}

int main(void)
{
	int mine[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, mine) == 0);
	CHECK(send(mine[0], "parent's packet", 15, 0) == 15);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(mine[0]);
		close(mine[1]);
		child();
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	char buf[64];
	ssize_t n = recv(mine[1], buf, sizeof buf, 0);
	CHECK(n == 15);
	printf("child exit %d, parent read %.*s\n", WEXITSTATUS(st), (int)n, buf);
	return 0;
}
