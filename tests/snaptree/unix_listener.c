/* snaptree guest: an abstract Unix listener with one client connected and
 * accepted at the start; requests and answers cross the pauses in flight;
 * at the end a new client must still reach the listener. */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "fdguest.h"

static const char name[] = "\0snaptree-unix-listener";

static int client(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, name, sizeof name - 1);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&a,
				(socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof name - 1)) == 0);
	return c;
}

int main(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, name, sizeof name - 1);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&a,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof name - 1)) == 0);
	CHECK(listen(l, 4) == 0);
	int c = client(), srv = accept(l, NULL, NULL);
	CHECK(srv >= 0);
	char buf[64];
	for (int s = 0; s < STEPS; s++) {
		if (s) {
			CHECK(read(srv, buf, 8) == 8);
			mix(buf, 8);
			CHECK(write(srv, buf, 8) == 8 && read(c, buf, 8) == 8);
		}
		snprintf(buf, sizeof buf, "req%05d", s);
		CHECK(write(c, buf, 8) == 8);
		step_done(s, "request in flight");
	}
	int c2 = client(), s2 = accept(l, NULL, NULL);
	CHECK(s2 >= 0 && write(c2, "late", 4) == 4 && read(s2, buf, 4) == 4);
	printf("late client %.4s\n", buf);
	return 0;
}
