/* snaptree guest: an epoll set made before the fork and kept by both. It
 * watches an eventfd both hold, a pipe's read end the parent then closes, and
 * an eventfd the child makes and adds after the fork; the child waits on the
 * set, the parent feeds the first two each step and waits for an answer. */
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

static void watch(int ep, int fd, uint64_t tag)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = tag };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0);
}

static void child(int ep, int ev, int rd, int ans)
{
	int own = eventfd(0, EFD_NONBLOCK);
	CHECK(own >= 0);
	watch(ep, own, 3);
	for (int s = 0; s < STEPS; s++) {
		uint64_t one = 1, v;
		CHECK(write(own, &one, 8) == 8);
		int seen = 0;
		uint64_t got[4] = { 0 }; /* by tag: the order events come in varies */
		while (seen != 7) {
			struct epoll_event evs[4];
			int n = epoll_wait(ep, evs, 4, -1);
			CHECK(n > 0 || errno == EINTR);
			for (int i = 0; i < n; i++) {
				uint64_t tag = evs[i].data.u64;
				char c;
				CHECK(tag >= 1 && tag <= 3);
				if (tag == 2)
					CHECK(read(rd, &c, 1) == 1 && (v = (uint64_t)c));
				else
					CHECK(read(tag == 1 ? ev : own, &v, 8) == 8);
				seen |= 1 << (tag - 1);
				got[tag] += v;
			}
		}
		mix(got, sizeof got);
		printf("child saw all three\n");
		CHECK(write(ans, "k", 1) == 1);
		step_done(s, "child");
	}
	_exit(4);
}

int main(void)
{
	int ep = epoll_create1(0), ev = eventfd(0, 0), p[2], back[2];
	CHECK(ep >= 0 && ev >= 0 && pipe(p) == 0 && pipe(back) == 0);
	watch(ep, ev, 1);
	watch(ep, p[0], 2);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0)
		child(ep, ev, p[0], back[1]);
	close(p[0]);
	for (int s = 0; s < STEPS; s++) {
		uint64_t v = (uint64_t)s + 1;
		char c = (char)('a' + s % 26);
		CHECK(write(ev, &v, 8) == 8);
		pause_ms(20);
		CHECK(write(p[1], &c, 1) == 1);
		CHECK(read(back[0], &c, 1) == 1);
	}
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("child exit %d\n", WEXITSTATUS(st));
	return 0;
}
