/* snaptree guest: one epoll set over a stream and a datagram socketpair, an
 * eventfd and a periodic timerfd (level-triggered, each with its own data);
 * each step arms some of them and the next collects what epoll reports. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int st[2], dg[2], ev = eventfd(0, EFD_NONBLOCK), ep = epoll_create1(0);
	int tf = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	struct itimerspec its = { { 0, 10000000 }, { 0, 10000000 } };
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, st) == 0 && socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
	CHECK(ev >= 0 && ep >= 0 && tf >= 0 && timerfd_settime(tf, 0, &its, NULL) == 0);
	int fds[4] = { st[1], dg[1], ev, tf };
	for (int i = 0; i < 4; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u64 = 0x100u + (unsigned)i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) == 0);
	}
	for (int s = 0; s < STEPS; s++) {
		struct epoll_event got[8];
		int n = epoll_wait(ep, got, 8, 1000), mask = 0;
		char buf[64];
		uint64_t v;
		for (int i = 0; i < n; i++) {
			unsigned k = (unsigned)(got[i].data.u64 - 0x100u);
			CHECK(k < 4);
			if (k != 3)
				mask |= 1 << k; /* the timer's readiness depends on timing: drained, not counted */
			if (k == 0)
				CHECK(read(st[1], buf, sizeof buf) > 0);
			else if (k == 1)
				CHECK(recv(dg[1], buf, sizeof buf, 0) >= 0);
			else
				CHECK(read(fds[k], &v, 8) == 8);
		}
		if (s % 2 == 0)
			CHECK(write(st[0], "s", 1) == 1);
		if (s % 3 == 0)
			CHECK(send(dg[0], "d", 1, 0) == 1);
		if (s % 5 == 0)
			CHECK(write(ev, &(uint64_t){ 2 }, 8) == 8);
		mix(&mask, sizeof mask);
		snprintf(buf, sizeof buf, "ready %#x", mask);
		step_done(s, buf);
	}
	printf("end %016llx\n", (unsigned long long)fnv);
	return 0;
}
