/* snaptree guest: a stream socketpair holding about 150 KiB queued in one
 * direction across the pauses (nonblocking writer), drained a slice a step. */
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int sp[2], size = 1 << 20;
	static char buf[200000];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) == 0);
	CHECK(setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size) == 0);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 131 + i / 977);
	size_t sent = 0, got = 0;
	while (sent < 150000) {
		ssize_t n = write(sp[0], buf + sent, 150000 - sent);
		CHECK(n > 0);
		sent += (size_t)n;
	}
	for (int s = 0; s < STEPS; s++) {
		char in[4096];
		ssize_t n = read(sp[1], in, 4096 - (size_t)s);
		CHECK(n == 4096 - s);
		CHECK(memcmp(in, buf + got, (size_t)n) == 0);
		got += (size_t)n;
		mix(in, (size_t)n);
		step_done(s, "drained");
	}
	printf("left %zu\n", sent - got);
	return 0;
}
