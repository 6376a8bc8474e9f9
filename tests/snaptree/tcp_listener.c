/* snaptree guest: a loopback TCP listener held (no connection open) through
 * the pauses; before and after, a client connects and is answered: the
 * listener is rebuilt with its address and backlog. */
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fdguest.h"

static void exchange(int l, const char *what)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(5151),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[8];
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0 && write(c, what, 4) == 4 && read(s, buf, 4) == 4);
	close(c);
	close(s);
	printf("%.4s answered\n", buf);
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(5151),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 16) == 0);
	exchange(l, "boot");
	for (int s = 0; s < STEPS; s++) {
		mix(&s, sizeof s);
		step_done(s, "listening");
	}
	struct sockaddr_in got;
	socklen_t gl = sizeof got;
	CHECK(getsockname(l, (struct sockaddr *)&got, &gl) == 0);
	printf("bound port %d\n", ntohs(got.sin_port));
	exchange(l, "done");
	return 0;
}
