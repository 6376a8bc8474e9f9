/* snaptree guest: a pty pair split over a fork, the master kept by the
 * parent, the slave by the child. Each step the parent sets the window size
 * through the master and the child reads it through the slave (a pipe orders
 * them, so no byte waits in the pty across a pause); at the end a line goes
 * through the pty with echo. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include "fdguest.h"

static void child(int sl, int in, int out)
{
	char c, line[64];
	for (int s = 0; s < STEPS; s++) {
		struct winsize ws;
		CHECK(read(in, &c, 1) == 1 && ioctl(sl, TIOCGWINSZ, &ws) == 0);
		mix(&ws, sizeof ws);
		printf("child sees %dx%d\n", ws.ws_row, ws.ws_col);
		CHECK(write(out, "k", 1) == 1);
		step_done(s, "child");
	}
	ssize_t n = read(sl, line, sizeof line);
	CHECK(n > 0);
	printf("child read %.*s", (int)n, line);
	fflush(stdout);
	_exit(2);
}

int main(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY), down[2], up[2];
	CHECK(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 && pipe(down) == 0 && pipe(up) == 0);
	int sl = open(ptsname(m), O_RDWR | O_NOCTTY);
	struct termios t;
	CHECK(sl >= 0 && tcgetattr(sl, &t) == 0);
	t.c_oflag &= ~(tcflag_t)ONLCR;
	CHECK(tcsetattr(sl, TCSANOW, &t) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(m);
		child(sl, down[0], up[1]);
	}
	close(sl);
	char c, echo[16];
	for (int s = 0; s < STEPS; s++) {
		struct winsize ws = { (unsigned short)(20 + s), (unsigned short)(80 + s), 0, 0 };
		CHECK(ioctl(m, TIOCSWINSZ, &ws) == 0 && write(down[1], "g", 1) == 1);
		CHECK(read(up[0], &c, 1) == 1);
	}
	CHECK(write(m, "bye\n", 4) == 4 && read(m, echo, sizeof echo) == 4);
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("parent echo %.3s, child exit %d\n", echo, WEXITSTATUS(st));
	return 0;
}
