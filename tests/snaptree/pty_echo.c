/* snaptree guest: a pty pair of the run's own devpts, the slave in canonical
 * mode with echo; each step writes a line to the master and reads the echo
 * and the line back; the window size and termios must survive. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	CHECK(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
	int sl = open(ptsname(m), O_RDWR | O_NOCTTY);
	struct termios t;
	struct winsize ws = { 33, 101, 0, 0 };
	CHECK(sl >= 0 && tcgetattr(sl, &t) == 0);
	t.c_oflag &= ~(tcflag_t)ONLCR;
	t.c_cc[VERASE] = 0x7f;
	CHECK(tcsetattr(sl, TCSANOW, &t) == 0 && ioctl(m, TIOCSWINSZ, &ws) == 0);
	char buf[128], out[128];
	for (int s = 0; s < STEPS; s++) {
		int n = snprintf(buf, sizeof buf, "line %d\n", s);
		CHECK(write(m, buf, (size_t)n) == n);
		CHECK(read(sl, out, sizeof out) == n);
		ssize_t e = read(m, out, sizeof out);
		CHECK(e == n);
		mix(out, (size_t)e);
		step_done(s, "echoed");
	}
	CHECK(ioctl(sl, TIOCGWINSZ, &ws) == 0 && tcgetattr(sl, &t) == 0);
	printf("window %dx%d echo %d onlcr %d\n", ws.ws_row, ws.ws_col, !!(t.c_lflag & ECHO),
	       !!(t.c_oflag & ONLCR));
	return 0;
}
