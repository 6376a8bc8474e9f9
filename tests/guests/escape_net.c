/* The network: connect to 127.0.0.1 (argv[1] port), IPv6, netlink and packet
 * sockets. Unix sockets outside are escape_unix's. */
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 22;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	expect_refused("socket(AF_INET)", s);
	if (s >= 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		expect_refused("connect 127.0.0.1", connect(s, (struct sockaddr *)&a, sizeof a));
	}
	expect_refused("socket(AF_INET6)", socket(AF_INET6, SOCK_DGRAM, 0));
	expect_refused("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	expect_refused("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0));
	/* the family compared on 32 bits: high bits cannot smuggle AF_INET past */
	expect_refused("socket(AF_INET | 1<<32)", syscall(41, (1ul << 32) | AF_INET, SOCK_STREAM, 0));
	expect_refused("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, (int[2]){ 0, 0 }));
	return finish();
}
