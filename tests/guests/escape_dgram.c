/* A host datagram socket (argv[1]) through sendmmsg: the second message of the
 * vector names it, the first the run's own socket (argv[2], bound here). */
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	struct sockaddr_un own = { .sun_family = AF_UNIX }, host = { .sun_family = AF_UNIX };
	snprintf(own.sun_path, sizeof own.sun_path, "%s", argv[2]);
	snprintf(host.sun_path, sizeof host.sun_path, "%s", argv[1]);
	int r = socket(AF_UNIX, SOCK_DGRAM, 0), s = socket(AF_UNIX, SOCK_DGRAM, 0);
	unlink(argv[2]);
	if (bind(r, (struct sockaddr *)&own, sizeof own) < 0)
		return 2;
	char x = 'x';
	struct iovec iov = { &x, 1 };
	struct mmsghdr v[2] = {
		{ .msg_hdr = { .msg_name = &own, .msg_namelen = sizeof own, .msg_iov = &iov, .msg_iovlen = 1 } },
		{ .msg_hdr = { .msg_name = &host, .msg_namelen = sizeof host, .msg_iov = &iov, .msg_iovlen = 1 } },
	};
	expect_errno("sendmmsg to the host", sendmmsg(s, v, 2, 0), ECONNREFUSED, 0);
	expect_errno("sendmmsg to the host alone", sendmmsg(s, v + 1, 1, 0), ECONNREFUSED, 0);
	printf("own: %d\n", (int)sendmmsg(s, v, 1, 0));
	return finish();
}
