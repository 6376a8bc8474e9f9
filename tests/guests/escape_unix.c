/* Unix sockets outside (argv[1...]: host paths, e.g. in the host's /tmp and
 * /run) and an abstract socket, which lives in the network namespace. */
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int u = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[i]);
		char what[200];
		snprintf(what, sizeof what, "connect unix %s", argv[i]);
		expect_refused(what, connect(u, (struct sockaddr *)&a, sizeof a));
		close(u);
	}
	int u = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un ab = { .sun_family = AF_UNIX };
	memcpy(ab.sun_path, "\0/tmp/.X11-unix/X0", 18);
	expect_refused("connect abstract @/tmp/.X11-unix/X0",
		       connect(u, (struct sockaddr *)&ab, sizeof(sa_family_t) + 18));
	return finish();
}
