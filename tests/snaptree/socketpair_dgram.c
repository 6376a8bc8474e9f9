/* snaptree guest: a datagram socketpair holding several datagrams of
 * different sizes (one empty) across each pause: boundaries must survive. */
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int sp[2];
	char buf[2048];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) == 0);
	int queued = 0;
	for (int s = 0; s < STEPS; s++) {
		char line[64] = "";
		for (int k = 0; k < queued; k++) {
			ssize_t n = recv(sp[1], buf, sizeof buf, MSG_DONTWAIT);
			CHECK(n >= 0);
			mix(buf, (size_t)n);
			snprintf(line + strlen(line), sizeof line - strlen(line), "%zd,", n);
		}
		queued = s % 4 + 1;
		for (int k = 0; k < queued; k++) {
			size_t len = (size_t)((s * 31 + k * 113) % 1500) * (k != 1);
			memset(buf, 'a' + k, len);
			CHECK(send(sp[0], buf, len, 0) == (ssize_t)len);
		}
		step_done(s, line[0] ? line : "-");
	}
	printf("end %016llx\n", (unsigned long long)fnv);
	return 0;
}
