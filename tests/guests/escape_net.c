/* The network: the run's own loopback only. A listener on the host's loopback
 * (argv[1] port) and any other address are out of reach; rtnetlink reads the
 * run's interfaces but changes none; other netlink protocols, packet and other
 * families are refused. Unix sockets outside are escape_unix's. */
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
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

/* One rtnetlink request of type with an empty body of len bytes (a link, an
 * address or a route on lo); -1 and errno from the kernel's answer. */
static long rtnl_change(int type, size_t len)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0) {
		printf("socket(NETLINK_ROUTE) refused: %s\n", strerror(errno));
		exit(2);
	}
	struct {
		struct nlmsghdr h;
		char body[64];
	} req = { .h = { .nlmsg_len = (uint32_t)NLMSG_LENGTH(len), .nlmsg_type = (uint16_t)type,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL } };
	struct ifinfomsg *ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_INET; /* the index sits at the same place in ifaddrmsg */
	if (type != RTM_NEWROUTE)
		ifi->ifi_index = (int)if_nametoindex("lo");
	struct {
		struct nlmsghdr h;
		struct nlmsgerr err;
	} ack;
	if (send(s, &req, req.h.nlmsg_len, 0) < 0 || recv(s, &ack, sizeof ack, 0) < (ssize_t)sizeof ack ||
	    ack.h.nlmsg_type != NLMSG_ERROR) {
		printf("no rtnetlink answer: %s\n", strerror(errno));
		exit(2);
	}
	close(s);
	errno = -ack.err.error;
	return ack.err.error ? -1 : 0;
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 22;
	try_connect("connect the host's 127.0.0.1", AF_INET, "127.0.0.1", port, ECONNREFUSED, 0);
	try_connect("connect the host's ::1", AF_INET6, "::1", port, ECONNREFUSED, 0);
	try_connect("connect 10.0.0.1", AF_INET, "10.0.0.1", port, ENETUNREACH, 0);
	try_connect("connect 2001:db8::1", AF_INET6, "2001:db8::1", port, ENETUNREACH, 0);
	expect_errno("rtnetlink: a new link", rtnl_change(RTM_NEWLINK, sizeof(struct ifinfomsg)), EPERM, 0);
	expect_errno("rtnetlink: an address on lo", rtnl_change(RTM_NEWADDR, sizeof(struct ifaddrmsg)), EPERM, 0);
	expect_errno("rtnetlink: a route", rtnl_change(RTM_NEWROUTE, sizeof(struct rtmsg)), EPERM, 0);
	expect_refused("socket(NETLINK_NETFILTER)", socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER));
	expect_refused("socket(NETLINK_SOCK_DIAG)", socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG));
	expect_refused("socket(NETLINK_KOBJECT_UEVENT)", socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT));
	expect_refused("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0));
	expect_refused("socket(AF_VSOCK)", socket(40, SOCK_STREAM, 0));
	/* family and protocol compared on 32 bits: high bits smuggle nothing past */
	expect_refused("socket(AF_NETLINK | 1<<32)",
		       syscall(41, (1ul << 32) | AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER));
	expect_refused("socket(NETLINK_ROUTE | 1<<32)",
		       syscall(41, AF_NETLINK, SOCK_RAW, (1ul << 32) | NETLINK_NETFILTER));
	expect_refused("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, (int[2]){ 0, 0 }));
	return finish();
}
