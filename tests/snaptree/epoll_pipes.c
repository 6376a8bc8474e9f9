/* snaptree guest: an epoll set over two pipes and a socketpair, bytes left in
 * each across the pauses and collected by the next step (needs pipes with
 * their bytes in a snapshot). */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int p1[2], p2[2], sp[2], ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(pipe(p1) == 0 && pipe(p2) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0 && ep >= 0);
	int rd[3] = { p1[0], p2[0], sp[1] }, wr[3] = { p1[1], p2[1], sp[0] };
	for (int i = 0; i < 3; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rd[i], &e) == 0);
	}
	for (int s = 0; s < STEPS; s++) {
		struct epoll_event got[4];
		int n = epoll_wait(ep, got, 4, 0), mask = 0;
		for (int i = 0; i < n; i++) {
			char buf[64];
			ssize_t k = read(rd[got[i].data.u32], buf, sizeof buf);
			CHECK(k > 0);
			mix(buf, (size_t)k);
			mask |= 1 << got[i].data.u32;
		}
		for (int i = 0; i < 3; i++)
			if ((s + i) % 3 != 0)
				CHECK(write(wr[i], "pipe-bytes", (size_t)(s % 7 + 3)) == s % 7 + 3);
		char line[32];
		snprintf(line, sizeof line, "ready %#x", mask);
		step_done(s, line);
	}
	printf("end %016llx\n", (unsigned long long)fnv);
	return 0;
}
