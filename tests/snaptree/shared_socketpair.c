/* snaptree guest: a stream pair split between parent and child (each closes
 * the other's end) and a datagram pair both keep whole. Each step both sides
 * send before they pause, so bytes wait in both directions across every
 * pause; then each reads what the other sent. */
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

static void read_full(int fd, char *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, buf + got, n - got);
		CHECK(r > 0);
		got += (size_t)r;
	}
}

int main(void)
{
	int st[2], dg[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, st) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	int me = kid ? st[0] : st[1];
	close(kid ? st[1] : st[0]);
	char msg[32], buf[64];
	for (int s = 0; s < STEPS; s++) {
		snprintf(msg, sizeof msg, "%s %04d;", kid ? "down" : "up  ", s);
		CHECK(write(me, msg, 10) == 10);
		if (!kid)
			for (int k = 0; k < 2; k++) {
				int n = snprintf(msg, sizeof msg, "dgram %d.%d", s, k);
				CHECK(send(dg[1], msg, (size_t)n, 0) == n);
			}
		pause_ms(kid ? 40 : 30);
		read_full(me, buf, 10);
		mix(buf, 10);
		if (kid) {
			for (int k = 0; k < 2; k++) {
				ssize_t n = recv(dg[0], buf, sizeof buf, 0);
				CHECK(n > 0);
				mix(buf, (size_t)n);
			}
			continue;
		}
		printf("child read %.10s\n", buf);
		step_done(s, "child");
	}
	if (!kid)
		_exit(7);
	int status;
	CHECK(waitpid(kid, &status, 0) == kid);
	printf("parent %016llx, child exit %d\n", (unsigned long long)fnv, WEXITSTATUS(status));
	return 0;
}
