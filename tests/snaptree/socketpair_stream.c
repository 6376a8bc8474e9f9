/* snaptree guest: a stream socketpair with bytes queued in both directions
 * across every pause (each step writes a chunk, the next reads it back). */
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int sp[2];
	char buf[4096], got[4096];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	size_t queued = 0;
	for (int s = 0; s < STEPS; s++) {
		if (queued) {
			CHECK(read(sp[1], got, queued) == (ssize_t)queued && read(sp[0], got, 3) == 3);
			mix(got, queued);
		}
		queued = (size_t)(s * 97 % 4000) + 1;
		for (size_t i = 0; i < queued; i++)
			buf[i] = (char)(s + i * 7);
		CHECK(write(sp[0], buf, queued) == (ssize_t)queued && write(sp[1], "ack", 3) == 3);
		step_done(s, "queued");
	}
	CHECK(read(sp[1], got, queued) == (ssize_t)queued);
	mix(got, queued);
	printf("end %016llx\n", (unsigned long long)fnv);
	return 0;
}
