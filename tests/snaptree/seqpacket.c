/* snaptree guest: a seqpacket socketpair with records queued both ways
 * across the pauses. */
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int sp[2];
	char buf[512];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
	for (int s = 0; s < STEPS; s++) {
		if (s) {
			ssize_t a = recv(sp[1], buf, sizeof buf, 0);
			CHECK(a > 0);
			mix(buf, (size_t)a);
			ssize_t b = recv(sp[0], buf, sizeof buf, 0);
			CHECK(b > 0);
			mix(buf, (size_t)b);
		}
		int n = snprintf(buf, sizeof buf, "record %d", s);
		CHECK(send(sp[0], buf, (size_t)n, 0) == n && send(sp[1], buf, 3, 0) == 3);
		step_done(s, "sent");
	}
	printf("end %016llx\n", (unsigned long long)fnv);
	return 0;
}
