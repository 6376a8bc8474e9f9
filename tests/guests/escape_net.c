/* The network: the run's own loopback only. A listener on the host's loopback
 * (argv[1] port) and any other address are out of reach; netlink, packet and
 * other families are refused. Unix sockets outside are escape_unix's. */
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "escape.h"

static void try_connect(const char *what, int family, const char *addr, int port, int e1, int e2)
{
	int s = socket(family, SOCK_STREAM, 0);
	if (s < 0) {
		printf("socket(%d) refused: %s\n", family, strerror(errno));
		exit(2);
	}
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	void *a = family == AF_INET ? (void *)&a4 : (void *)&a6;
	inet_pton(family, addr, family == AF_INET ? (void *)&a4.sin_addr : (void *)&a6.sin6_addr);
	expect_errno(what, connect(s, a, family == AF_INET ? sizeof a4 : sizeof a6), e1, e2);
	close(s);
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 22;
	try_connect("connect the host's 127.0.0.1", AF_INET, "127.0.0.1", port, ECONNREFUSED, 0);
	try_connect("connect the host's ::1", AF_INET6, "::1", port, ECONNREFUSED, 0);
	try_connect("connect 10.0.0.1", AF_INET, "10.0.0.1", port, ENETUNREACH, 0);
	try_connect("connect 2001:db8::1", AF_INET6, "2001:db8::1", port, ENETUNREACH, 0);
	expect_refused("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	expect_refused("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0));
	expect_refused("socket(AF_VSOCK)", socket(40, SOCK_STREAM, 0));
	/* the family compared on 32 bits: high bits cannot smuggle AF_NETLINK past */
	expect_refused("socket(AF_NETLINK | 1<<32)", syscall(41, (1ul << 32) | AF_NETLINK, SOCK_RAW, 0));
	expect_refused("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, (int[2]){ 0, 0 }));
	return finish();
}
