/* snaptree guest: one eventfd behind four descriptors with different
 * close-on-exec flags, a nonblocking socketpair end dup'd high, and a
 * signalfd whose mask changes mid-run: flags per descriptor and per file. */
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int ev = eventfd(1, 0), sp[2];
	CHECK(ev >= 0 && dup2(ev, 20) == 20 && dup3(ev, 21, O_CLOEXEC) == 21 && fcntl(ev, F_DUPFD, 30) == 30);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) == 0 && dup2(sp[1], 60) == 60);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	CHECK(sigprocmask(SIG_BLOCK, &m, NULL) == 0);
	int sfd = signalfd(-1, &m, SFD_NONBLOCK);
	CHECK(sfd >= 0);
	for (int s = 0; s < STEPS; s++) {
		uint64_t v = 1;
		int fd = (int[]){ 20, 21, 30, ev }[s % 4];
		CHECK(write(fd, &v, 8) == 8);
		char c;
		errno = 0;
		CHECK(read(60, &c, 1) < 0 && errno == EAGAIN);
		if (s == STEPS / 2) {
			sigaddset(&m, SIGUSR2);
			CHECK(sigprocmask(SIG_BLOCK, &m, NULL) == 0 && signalfd(sfd, &m, 0) == sfd);
		}
		int flags = fcntl(20, F_GETFD) * 1 + fcntl(21, F_GETFD) * 2 + fcntl(30, F_GETFD) * 4 +
			    (fcntl(sfd, F_GETFL) & O_NONBLOCK ? 8 : 0);
		mix(&flags, sizeof flags);
		char line[32];
		snprintf(line, sizeof line, "flags %d", flags);
		step_done(s, line);
	}
	uint64_t v;
	CHECK(read(ev, &v, 8) == 8);
	CHECK(raise(SIGUSR2) == 0);
	struct signalfd_siginfo si;
	CHECK(read(sfd, &si, sizeof si) == sizeof si);
	printf("count %llu signal %u\n", (unsigned long long)v, si.ssi_signo);
	return 0;
}
