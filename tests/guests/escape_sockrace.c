/* A host listener through every door: argv[1] a host socket in view, argv[2] a
 * hard link to it (in a rw bind), argv[3] tries per race. Directly, through a symlink, through a hard link, and while a
 * sibling thread flips the address between the run's own listener and the host
 * socket, and dup2()s the run's connected socket over the descriptor being
 * connected. The host side counts its accepts: the race's own connections may
 * reach the run's listener, never the host's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "escape.h"

#define INSIDE "/ns/inside.sock"

static struct sockaddr_un flip_addr;
static atomic_int stop, target_fd = -1, inside_fd = -1, spare_fd = -1;

static void unix_addr(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof a->sun_path, "%s", path);
}

static int connect_path(const char *path)
{
	struct sockaddr_un a;
	unix_addr(&a, path);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	int rc = connect(s, (struct sockaddr *)&a, sizeof a);
	int e = errno;
	close(s);
	errno = e;
	return rc;
}

/* the run's own listener, drained so its backlog never fills */
static void *drain(void *arg)
{
	int l = *(int *)arg;
	while (!stop) {
		int c = accept(l, NULL, NULL);
		if (c >= 0)
			close(c);
	}
	return NULL;
}

static void *flipper(void *arg)
{
	const char *host = arg;
	for (unsigned i = 0; !stop; i++) {
		snprintf(flip_addr.sun_path, sizeof flip_addr.sun_path, "%s", i & 1 ? host : INSIDE);
		int t = target_fd;
		if (t >= 0)
			dup2(i & 1 ? spare_fd : inside_fd, t);
	}
	return NULL;
}

/* tries connects from the flipped address on a descriptor being swapped */
static void race(const char *host, int tries)
{
	pthread_t th;
	int ok = 0;
	flip_addr.sun_family = AF_UNIX;
	inside_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un in;
	unix_addr(&in, INSIDE);
	if (connect(inside_fd, (struct sockaddr *)&in, sizeof in) < 0)
		exit(2);
	spare_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	pthread_create(&th, NULL, flipper, (void *)host);
	for (int i = 0; i < tries; i++) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		target_fd = s;
		ok += connect(s, (struct sockaddr *)&flip_addr, sizeof flip_addr) == 0;
		target_fd = -1;
		close(s);
	}
	stop = 1;
	pthread_join(th, NULL);
	printf("race: %d tries, %d connected\n", tries, ok);
}

/* the same with an IP socket and address (the run's loopback) swapped against a
 * Unix socket and the host path: the socket judged must be the one connected */
static union { struct sockaddr_un un; struct sockaddr_in in; } ip_addr;
static atomic_int ip_stop;

static void *ip_flipper(void *arg)
{
	const char *host = arg;
	struct sockaddr_in in = ip_addr.in;
	for (unsigned i = 0; !ip_stop; i++) {
		int unix_side = i & 1, t = target_fd;
		if (unix_side)
			unix_addr(&ip_addr.un, host);
		else
			ip_addr.in = in;
		if (t >= 0) {
			int f = socket(unix_side ? AF_UNIX : AF_INET, SOCK_STREAM, 0);
			dup2(f, t);
			close(f);
		}
	}
	return NULL;
}

static void race_ip(const char *host, int tries)
{
	pthread_t th, dr;
	int ok = 0, l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t n = sizeof ip_addr.in;
	ip_addr.in = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	if (bind(l, (struct sockaddr *)&ip_addr.in, n) < 0 || listen(l, 64) < 0 ||
	    getsockname(l, (struct sockaddr *)&ip_addr.in, &n) < 0)
		exit(2);
	stop = 0;
	pthread_create(&dr, NULL, drain, &l);
	pthread_create(&th, NULL, ip_flipper, (void *)host);
	for (int i = 0; i < tries; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		target_fd = s;
		ok += connect(s, (struct sockaddr *)&ip_addr, sizeof ip_addr) == 0;
		target_fd = -1;
		close(s);
	}
	ip_stop = 1;
	pthread_join(th, NULL);
	printf("ip race: %d tries, %d connected\n", tries, ok);
}

int main(int argc, char **argv)
{
	char link_path[200], what[300];
	if (argc < 4)
		return 2;
	const char *host = argv[1];
	int tries = atoi(argv[3]);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a;
	unix_addr(&a, INSIDE);
	unlink(INSIDE);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 64) < 0)
		return 2;
	pthread_t th;
	pthread_create(&th, NULL, drain, &l);

	snprintf(what, sizeof what, "connect unix %s", host);
	expect_errno(what, connect_path(host), ECONNREFUSED, 0);
	snprintf(link_path, sizeof link_path, "/ns/link.sock");
	unlink(link_path);
	if (symlink(host, link_path) < 0)
		return 2;
	expect_errno("connect through a symlink", connect_path(link_path), ECONNREFUSED, 0);
	expect_errno("connect through a hard link", connect_path(argv[2]), ECONNREFUSED, 0);
	race(host, tries);
	race_ip(host, tries);
	return finish();
}
