/* Metering pieces that need no guest: the output relay (order, counts, exact cut at
 * the bounds, EOF), namespace bytes, and the meter's own tree accounting. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/trace.h"

static int passed, failed;
static char dir[] = "/tmp/test_meter.XXXXXX";

#define CHECK(c) do { if (c) passed++; else { failed++; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* Run the relay with bounds over what writer() produces; the delivered bytes land in
 * two files. */
static void relay_run(uint64_t max_bytes, uint64_t max_lines, void (*writer)(int, int),
		      char **out, size_t *outlen, char **err, size_t *errlen,
		      uint64_t *bytes, uint64_t *lines, int *over)
{
	char po[256], pe[256];
	struct trace_relay *r;
	struct common_err e;
	int fo, fe, w1, w2;

	snprintf(po, sizeof po, "%s/out", dir);
	snprintf(pe, sizeof pe, "%s/err", dir);
	fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fo < 0 || fe < 0 || trace_relay_open(&r, fo, fe, max_bytes, max_lines, &e) < 0)
		abort();
	trace_relay_child_fds(r, &w1, &w2);
	pid_t p = fork();
	if (p == 0) {
		writer(w1, w2);
		_exit(0);
	}
	if (trace_relay_start(r, &e) < 0)
		abort();
	waitpid(p, NULL, 0);
	trace_relay_finish(r);
	trace_relay_counts(r, bytes, lines);
	*over = trace_relay_over(r);
	trace_relay_free(r);
	close(fo);
	close(fe);
	if (common_read_file(po, 64u << 20, out, outlen, &e) < 0 ||
	    common_read_file(pe, 64u << 20, err, errlen, &e) < 0)
		abort();
}

static void numbers(int o, int e)
{
	char buf[64];

	for (int i = 0; i < 50000; i++) {
		int n = snprintf(buf, sizeof buf, "%d\n", i);
		if (write(o, buf, (size_t)n) != n)
			_exit(1);
	}
	if (write(e, "to stderr\n", 10) != 10)
		_exit(1);
}

static void test_relay_order(void)
{
	char *out, *err, *want = malloc(1 << 20);
	size_t ol, el, wl = 0;
	uint64_t b, l;
	int over;

	relay_run(UINT64_MAX, UINT64_MAX, numbers, &out, &ol, &err, &el, &b, &l, &over);
	for (int i = 0; i < 50000; i++)
		wl += (size_t)sprintf(want + wl, "%d\n", i);
	CHECK(ol == wl && memcmp(out, want, wl) == 0);
	CHECK(el == 10 && memcmp(err, "to stderr\n", 10) == 0);
	CHECK(b == wl + 10);
	CHECK(l == 50000); /* records count on stdout only */
	CHECK(!over);
	free(out);
	free(err);
	free(want);
}

static void test_relay_bytes_bound(void)
{
	char *out, *err;
	size_t ol, el;
	uint64_t b, l;
	int over;

	relay_run(1000, UINT64_MAX, numbers, &out, &ol, &err, &el, &b, &l, &over);
	CHECK(ol == 1000);          /* exactly the bound is delivered */
	CHECK(el == 0);
	CHECK(b > 1000 && over);    /* the rest was drained and counted */
	CHECK(memcmp(out, "0\n1\n2\n", 6) == 0);
	free(out);
	free(err);
}

static void test_relay_lines_bound(void)
{
	char *out, *err;
	size_t ol, el;
	uint64_t b, l;
	int over;

	relay_run(UINT64_MAX, 10, numbers, &out, &ol, &err, &el, &b, &l, &over);
	CHECK(ol == 20 && memcmp(out, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", 20) == 0);
	CHECK(l == 50000 && over);
	free(out);
	free(err);
}

static void put(const char *name, size_t n)
{
	char p[512];
	int fd;
	char *buf = calloc(1, n + 1);

	snprintf(p, sizeof p, "%s/ns/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, n) != (ssize_t)n)
		abort();
	close(fd);
	free(buf);
}

static void test_ns_bytes(void)
{
	char p[512];

	snprintf(p, sizeof p, "%s/ns", dir);
	mkdir(p, 0755);
	CHECK(trace_meter_ns_bytes(p) == 0);
	put("a", 10);                   /* key "a": 1 + 10 */
	snprintf(p, sizeof p, "%s/ns/d", dir);
	mkdir(p, 0755);
	put("d/bc", 100);               /* key "d/bc": 4 + 100 */
	snprintf(p, sizeof p, "%s/ns", dir);
	CHECK(trace_meter_ns_bytes(p) == 1 + 10 + 4 + 100);
	CHECK(trace_meter_ns_bytes("/nonexistent/dir") == 0);
}

/* the tick's walk: a step at a time, the same bytes as the whole walk once a
 * pass ends, and a tree larger than one step still finishes */
static void test_ns_tick(void)
{
	char p[512];
	uint64_t u[TRACE_DIMS];
	int ticks = 0;

	for (int i = 0; i < 20000; i++) { /* more entries than one tick looks at */
		snprintf(p, sizeof p, "%s/ns/d/e%d", dir, i);
		mkdir(p, 0755);
	}
	snprintf(p, sizeof p, "%s/ns/d/e7/s", dir);
	if (symlink("target", p) < 0)    /* key "d/e7/s": 6 + 6 */
		abort();
	snprintf(p, sizeof p, "%s/ns", dir);
	struct trace_meter *m = trace_meter_new(p, NULL);
	do {
		trace_meter_tick(m);
		trace_meter_usage(m, u);
	} while (u[LEASE_DIM_NAMESPACE_BYTES] == 0 && ++ticks < 10);
	CHECK(ticks >= 1);              /* not in one step */
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] == 1 + 10 + 4 + 100 + 6 + 6);
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] == trace_meter_ns_bytes(p));
	trace_meter_free(m);
}

static void test_meter_tree(void)
{
	struct trace_meter *m = trace_meter_new(NULL, NULL);
	uint64_t u[TRACE_DIMS], lim[TRACE_DIMS];
	pid_t p = fork();

	if (p == 0) {
		volatile unsigned long x = 0;
		for (unsigned long i = 0; i < 100000000ul; i++)
			x += i;
		pause();
		if (x == 1)
			_exit(1);
		_exit(0);
	}
	trace_meter_task_new(m, 0, p);
	usleep(200000);
	trace_meter_sample(m);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_FUEL] > 10000);       /* it spun */
	CHECK(u[LEASE_DIM_MEMORY] > 0);
	CHECK(u[LEASE_DIM_TABLE_ELEMENTS] >= 3);
	trace_meter_task_exit(m, 0, p);         /* taken while it still exists */
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	uint64_t fuel = u[LEASE_DIM_FUEL];
	trace_meter_sample(m);                  /* the exited task's time stays */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_FUEL] >= fuel);
	for (int d = 0; d < TRACE_DIMS; d++)
		lim[d] = UINT64_MAX;
	CHECK(trace_meter_over(m, lim) == NULL);
	lim[LEASE_DIM_FUEL] = 1;
	CHECK(trace_meter_over(m, lim) && strcmp(trace_meter_over(m, lim), "fuel") == 0);
	trace_meter_free(m);
}

/* A task reaped without an exit stop is dropped from polling with its last
 * figures kept: usage never goes lower and is never counted twice. */
static void test_meter_reaped(void)
{
	struct trace_meter *m = trace_meter_new(NULL, NULL);
	uint64_t u[TRACE_DIMS], fuel;
	pid_t p = fork();

	if (p == 0) {
		volatile unsigned long x = 0;
		for (unsigned long i = 0; i < 50000000ul; i++)
			x += i;
		pause();
		_exit(x == 1);
	}
	trace_meter_task_new(m, 0, p);
	usleep(150000);
	trace_meter_sample(m);
	trace_meter_usage(m, u);
	fuel = u[LEASE_DIM_FUEL];
	CHECK(fuel > 0);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	trace_meter_sample(m);                  /* gone: folded, never lower */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_FUEL] >= fuel);
	trace_meter_sample(m);                  /* and not counted twice */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_FUEL] >= fuel && u[LEASE_DIM_FUEL] <= fuel + fuel / 4 + 1000);
	trace_meter_free(m);
}

int main(void)
{
	struct common_err e;

	if (!mkdtemp(dir))
		return 1;
	test_relay_order();
	test_relay_bytes_bound();
	test_relay_lines_bound();
	test_ns_bytes();
	test_ns_tick();
	test_meter_tree();
	test_meter_reaped();
	common_rm_rf(dir, &e);
	printf("test_meter: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
