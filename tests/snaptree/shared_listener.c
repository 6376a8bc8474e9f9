/* snaptree guest: an abstract Unix listener and a loopback TCP listener made
 * by the parent and inherited by a child that accepts: the parent connects
 * to the first, each step sends a request the child reads after a pause and
 * answers, the answer waiting a pause too; at the end a second client of
 * each must still reach the child through the listeners both kept. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fdguest.h"

static const char name[] = "\0snaptree-shared-listener";

static socklen_t addr(struct sockaddr_un *a)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, name, sizeof name - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof name - 1);
}

static int client(void)
{
	struct sockaddr_un a;
	socklen_t len = addr(&a);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(c >= 0 && connect(c, (struct sockaddr *)&a, len) == 0);
	return c;
}

/* A TCP listener on a loopback port the system picks: its socket and port. */
static int tcp_listener(struct sockaddr_in *a)
{
	socklen_t len = sizeof *a;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)a, sizeof *a) == 0 && listen(l, 2) == 0 &&
	      getsockname(l, (struct sockaddr *)a, &len) == 0);
	return l;
}

static void child(int l, int tl)
{
	int c = accept(l, NULL, NULL);
	char buf[16];
	CHECK(c >= 0);
	for (int s = 0; s < STEPS; s++) {
		pause_ms(30);
		CHECK(read(c, buf, 8) == 8);
		mix(buf, 8);
		printf("child served %.8s\n", buf);
		buf[0] = 'A';
		CHECK(write(c, buf, 8) == 8);
		step_done(s, "child");
	}
	int late = accept(l, NULL, NULL);
	CHECK(late >= 0 && read(late, buf, 4) == 4 && write(late, "ok", 2) == 2);
	printf("late client %.4s\n", buf);
	late = accept(tl, NULL, NULL);
	CHECK(late >= 0 && read(late, buf, 4) == 4 && write(late, "ok", 2) == 2);
	printf("tcp client %.4s\n", buf);
	fflush(stdout);
	_exit(3);
}

int main(void)
{
	struct sockaddr_un a;
	socklen_t len = addr(&a);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, len) == 0 && listen(l, 4) == 0);
	struct sockaddr_in ta;
	int tl = tcp_listener(&ta);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0)
		child(l, tl);
	int c = client();
	char buf[16];
	uint64_t h = 0;
	for (int s = 0; s < STEPS; s++) {
		snprintf(buf, sizeof buf, "req%05d", s);
		CHECK(write(c, buf, 8) == 8);
		pause_ms(40);
		CHECK(read(c, buf, 8) == 8 && buf[0] == 'A');
		h = h * 31 + (uint64_t)buf[7];
	}
	int late = client();
	CHECK(write(late, "late", 4) == 4 && read(late, buf, 2) == 2);
	int tc = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(tc >= 0 && connect(tc, (struct sockaddr *)&ta, sizeof ta) == 0);
	CHECK(write(tc, "tcp!", 4) == 4 && read(tc, buf, 2) == 2);
	int st;
	CHECK(waitpid(kid, &st, 0) == kid);
	printf("parent %llu %.2s, child exit %d\n", (unsigned long long)h, buf, WEXITSTATUS(st));
	return 0;
}
