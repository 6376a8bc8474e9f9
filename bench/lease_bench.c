/* Lease transitions per second on one store, in-process (no exec cost):
 * lease_bench DIR LEASES CLIENTS. Each lease: request, fund, activate, 5 observes,
 * settle, expire, destroy = 11 receipts, every one durable (one journal fsync each;
 * records are derived and rebuilt from the journal after a reboot). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>
#include "lease/lease.h"

static int run(const char *dir, int leases)
{
	struct lease_store *s;
	struct common_err e;
	int n = 0;

	if (lease_store_open(dir, &s, &e) < 0)
		common_die(1, &e);
	for (int i = 0; i < leases; i++) {
		struct lease_request req = { .image = "/bin/true", .principal = "bench" };
		json_t *cur, *next, *args;
		req.fees[LEASE_DIM_FUEL] = 1;
		if (lease_request(s, &req, &cur, &e) < 0)
			common_die(1, &e);
		n++;
		for (int step = 0; step < 10; step++) {
			enum lease_edge edge = step == 0 ? LEASE_EDGE_FUND : step == 1 ? LEASE_EDGE_ACTIVATE :
					       step < 7 ? LEASE_EDGE_OBSERVE : step == 7 ? LEASE_EDGE_SETTLE :
					       step == 8 ? LEASE_EDGE_EXPIRE : LEASE_EDGE_DESTROY;
			args = edge == LEASE_EDGE_FUND ? json_pack("{s:i}", "amount", 100) :
			       edge == LEASE_EDGE_OBSERVE ? json_pack("{s:{s:i}}", "usage", "fuel", step) :
			       NULL;
			if (lease_transition(s, NULL, edge, cur, args, &next, &e) < 0)
				common_die(1, &e);
			json_decref(args);
			json_decref(cur);
			cur = next;
			n++;
		}
		json_decref(cur);
	}
	lease_store_close(s);
	return n;
}

/* The disk's own cost: mean latency of a small append + fsync in the store's directory. */
static void disk(const char *dir)
{
	char *p = common_xasprintf("%s.fsync", dir), buf[300];
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	uint64_t t0, t1;

	if (fd < 0)
		return;
	memset(buf, 'x', sizeof buf);
	t0 = common_mono_us();
	for (int i = 0; i < 100; i++)
		if (write(fd, buf, sizeof buf) < 0 || fsync(fd) < 0)
			break;
	t1 = common_mono_us();
	close(fd);
	unlink(p);
	free(p);
	printf("disk: append+fsync %.3f ms (a transition does 1 fsync: its journal append)\n",
	       (double)(t1 - t0) / 100 / 1000);
}

int main(int argc, char **argv)
{
	int leases, clients;
	uint64_t t0, t1;

	common_set_progname("lease_bench");
	if (argc != 4)
		common_dief(2, "usage", "lease_bench DIR LEASES CLIENTS");
	leases = atoi(argv[2]);
	clients = atoi(argv[3]);
	if (clients == 0) {
		disk(argv[1]);
		return 0;
	}
	t0 = common_mono_us();
	if (clients <= 1) {
		int n = run(argv[1], leases);
		t1 = common_mono_us();
		printf("sequential: %d transitions in %.3f s = %.0f transitions/s\n", n,
		       (double)(t1 - t0) / 1e6, n / ((double)(t1 - t0) / 1e6));
		return 0;
	}
	for (int c = 0; c < clients; c++)
		if (fork() == 0)
			_exit(run(argv[1], leases) == leases * 11 ? 0 : 1);
	int bad = 0, st;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	t1 = common_mono_us();
	printf("%d parallel clients: %d transitions in %.3f s = %.0f transitions/s%s\n", clients,
	       clients * leases * 11, (double)(t1 - t0) / 1e6,
	       clients * leases * 11 / ((double)(t1 - t0) / 1e6), bad ? " (A CLIENT FAILED)" : "");
	return bad;
}
