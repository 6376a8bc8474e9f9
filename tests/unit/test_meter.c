/* Metering pieces that need no guest: the output relay (order, counts, exact cut at
 * the bounds, EOF), namespace bytes (a namespace the walk cannot measure counts as
 * full), and the meter's own tree accounting. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/meter/meter.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/test_meter.XXXXXX";

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
	/* past a bound the relay reads no more: the writer blocks until killed, as
	 * the supervisor kills a guest when the relay wakes it */
	struct pollfd wake = { .fd = trace_relay_wake_fd(r), .events = POLLIN };
	while (waitpid(p, NULL, WNOHANG) == 0)
		if (poll(&wake, 1, 10) > 0) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
			break;
		}
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

/* A guest that printed and exited before the relay had any allowance (a run's
 * start: output is counted once a bound past it is durable): the output and the
 * supervisor's stop reach the relay in one wake-up, and the last drain still
 * delivers it (a run under load printed nothing: escape.bats, issue 28). */
static void test_relay_drains_unallowed_output(void)
{
	char po[256], *out;
	size_t ol;
	struct common_err e;
	int lost = 0;

	snprintf(po, sizeof po, "%s/out", dir);
	for (int i = 0; i < 300; i++) {
		struct trace_relay *r;
		int w1, w2, fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fo < 0 || trace_relay_open(&r, fo, fo, UINT64_MAX, UINT64_MAX, &e) < 0)
			abort();
		trace_relay_allow(r, 0, 0);
		trace_relay_child_fds(r, &w1, &w2);
		if (write(w1, "b\n", 2) != 2 || trace_relay_start(r, &e) < 0)
			abort();
		trace_relay_finish(r);
		trace_relay_free(r);
		close(fo);
		if (common_read_file(po, 1024, &out, &ol, &e) < 0)
			abort();
		lost += ol != 2 || memcmp(out, "b\n", 2) != 0;
		free(out);
	}
	if (lost)
		fprintf(stderr, "output lost in %d of 300 runs\n", lost);
	CHECK(lost == 0);
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
	CHECK(b > 1000 && over);    /* the crossing chunk counts, nothing after it */
	CHECK(b <= 1000 + 65536);
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
	CHECK(l == 11 && over);     /* records up to the first past the bound */
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

static uint64_t ns_bytes(const char *p)
{
	uint64_t b = 0;

	return trace_meter_ns_bytes(p, &b) < 0 ? UINT64_MAX : b;
}

static void test_ns_bytes(void)
{
	char p[512];

	snprintf(p, sizeof p, "%s/ns", dir);
	mkdir(p, 0755);
	CHECK(ns_bytes(p) == 0);
	put("a", 10);                   /* key "a": 1 + 10 */
	snprintf(p, sizeof p, "%s/ns/d", dir);
	mkdir(p, 0755);
	put("d/bc", 100);               /* key "d/bc": 4 + 100 */
	snprintf(p, sizeof p, "%s/ns", dir);
	CHECK(ns_bytes(p) == 1 + 10 + 4 + 100);
	CHECK(ns_bytes("/nonexistent/dir") == 0); /* not made yet: no cells */
}

/* the tick's walk: the same bytes as the whole walk once a pass ends, and a tree
 * larger than one step still finishes */
static void test_ns_tick(void)
{
	char p[512];
	uint64_t u[TRACE_DIMS];

	for (int i = 0; i < 20000; i++) { /* more entries than one tick looks at */
		snprintf(p, sizeof p, "%s/ns/d/e%d", dir, i);
		mkdir(p, 0755);
	}
	snprintf(p, sizeof p, "%s/ns/d/e7/s", dir);
	if (symlink("target", p) < 0)    /* key "d/e7/s": 6 + 6 */
		abort();
	snprintf(p, sizeof p, "%s/ns", dir);
	struct trace_meter *m = trace_meter_new(p, UINT64_MAX, NULL);
	for (int i = 0; i < 4 * 20000 / 16384 + 2; i++) /* 4 steps a directory */
		trace_meter_tick(m);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] == 1 + 10 + 4 + 100 + 6 + 6);
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] == ns_bytes(p));
	trace_meter_free(m);
}

/* A pass longer than a tick counts what it has seen at every tick: a guest adding
 * entries faster than the walk reads them cannot keep its bytes from counting. */
static void test_ns_partial(void)
{
	char root[512], p[600];
	uint64_t u[TRACE_DIMS];

	snprintf(root, sizeof root, "%s/many", dir);
	mkdir(root, 0755);
	for (int i = 0; i < 20000; i++) {      /* more than a tick looks at: 7 bytes each */
		snprintf(p, sizeof p, "%s/c%05d", root, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, "x", 1) != 1)
			abort();
		close(fd);
	}
	struct trace_meter *m = trace_meter_new(root, UINT64_MAX, NULL);
	trace_meter_tick(m);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] > 0 && u[LEASE_DIM_NAMESPACE_BYTES] < 20000 * 7);
	trace_meter_tick(m);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_NAMESPACE_BYTES] == 20000 * 7);
	trace_meter_free(m);
}

/* The namespace_bytes a fresh meter with bound 1000 reports for root: after enough
 * ticks for a pass (tick) or after a whole sample. */
static uint64_t ns_metered(const char *root, uint64_t bound, int tick)
{
	struct trace_meter *m = trace_meter_new(root, bound, NULL);
	uint64_t u[TRACE_DIMS];

	for (int i = 0; i < (tick ? 4 : 0); i++)
		trace_meter_tick(m);
	if (!tick)
		trace_meter_sample(m);
	trace_meter_usage(m, u);
	trace_meter_free(m);
	return u[LEASE_DIM_NAMESPACE_BYTES];
}

/* A chain of n directories, root/name/d/d..., a 10-byte cell c in the last one: key
 * length 2n + 1. */
static void chain(const char *root, const char *name, int n)
{
	char p[8192];
	int len = snprintf(p, sizeof p, "%s/%s", root, name);

	for (int i = 0; i < n; i++) {
		mkdir(p, 0755);
		len += snprintf(p + len, sizeof p - (size_t)len, i + 1 < n ? "/d" : "/c");
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789", 10) != 10)
		abort();
	close(fd);
}

/* Deeper than the walks go: neither walk measures it, so it counts as full; as deep
 * as they go is measured by both. */
static void test_ns_deep(void)
{
	char root[512];

	snprintf(root, sizeof root, "%s/deep", dir);
	mkdir(root, 0755);
	chain(root, "d", LEASE_NS_DEPTH_MAX);      /* the last directory is 64 deep */
	CHECK(ns_bytes(root) == 2 * LEASE_NS_DEPTH_MAX + 1 + 10);
	CHECK(ns_metered(root, 1000, 1) == 2 * LEASE_NS_DEPTH_MAX + 1 + 10);
	CHECK(ns_metered(root, 1000, 0) == 2 * LEASE_NS_DEPTH_MAX + 1 + 10);
	chain(root, "e", LEASE_NS_DEPTH_MAX + 1);  /* one level more */
	CHECK(ns_bytes(root) == UINT64_MAX);
	CHECK(ns_metered(root, 1000, 1) == 1001);
	CHECK(ns_metered(root, 1000, 0) == 1001);
	/* no bound: nothing to fill, the cells it did see stay */
	CHECK(ns_metered(root, UINT64_MAX, 0) == 0);
}

/* A directory its owner cannot list (000) or cannot search (0600) counts as full;
 * run in a child, which gives up DAC override for good. */
static void test_ns_unreadable(void)
{
	char root[512], h[600];
	int st;

	snprintf(root, sizeof root, "%s/hide", dir);
	mkdir(root, 0755);
	chain(root, "h", 1);                       /* key "h/c": 3 + 10 */
	snprintf(h, sizeof h, "%s/h", root);
	pid_t pid = fork();
	if (pid == 0) {
		int bad = unit_drop_dac() < 0;
		bad |= ns_bytes(root) != 13 || ns_metered(root, 1000, 1) != 13;
		for (int i = 0; i < 2; i++) {
			bad |= chmod(h, i ? 0600 : 0) < 0;
			bad |= ns_bytes(root) != UINT64_MAX;
			bad |= ns_metered(root, 1000, 1) != 1001;
			bad |= ns_metered(root, 1000, 0) != 1001;
		}
		_exit(bad);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	chmod(h, 0755);
}

/* Cells and directories removed while the walks run are skipped: never a failure,
 * never full. */
static void test_ns_vanishing(void)
{
	char root[512], p[600];
	int bad = 0;

	snprintf(root, sizeof root, "%s/churn", dir);
	mkdir(root, 0755);
	for (int i = 0; i < 2000; i++) {
		snprintf(p, sizeof p, "%s/k%d", root, i);
		close(open(p, O_WRONLY | O_CREAT, 0644));
	}
	pid_t pid = fork();
	if (pid == 0) {
		for (unsigned i = 0;; i++) {
			snprintf(p, sizeof p, "%s/k%u", root, i % 2000);
			unlink(p);
			snprintf(p, sizeof p, "%s/d%u", root, i % 64);
			mkdir(p, 0755);
			rmdir(p);
			snprintf(p, sizeof p, "%s/k%u", root, i % 2000);
			close(open(p, O_WRONLY | O_CREAT, 0644));
		}
	}
	/* a walk counting a vanished entry as unmeasurable fails by the 5th pass (20 of 20) */
	for (int i = 0; i < 80; i++) {
		bad |= ns_bytes(root) == UINT64_MAX;
		bad |= ns_metered(root, 1000000, 1) > 1000000;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(!bad);
}

static void test_meter_tree(void)
{
	struct trace_meter *m = trace_meter_new(NULL, UINT64_MAX, NULL);
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
	/* before the guest's exec its descriptors are sbx's own: not counted */
	CHECK(u[LEASE_DIM_TABLE_ELEMENTS] == 0);
	trace_meter_guest_exec(m);
	trace_meter_sample(m);
	trace_meter_usage(m, u);
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
	struct trace_meter *m = trace_meter_new(NULL, UINT64_MAX, NULL);
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

/* storage_write settles each reservation by the call's result: an error stores
 * nothing, a byte count what it says (even past the reservation), another success
 * all reserved; a task gone mid-call is charged all; a refusal is charged whole. */
static void test_meter_store(void)
{
	struct trace_meter *m = trace_meter_new(NULL, UINT64_MAX, NULL);
	uint64_t u[TRACE_DIMS];
	pid_t me = getpid();

	trace_meter_task_new(m, me, me);
	trace_meter_store_begin(m, me, 100, 1);
	CHECK(trace_meter_store_held(m) == 100);
	trace_meter_store_end(m, me, 40);                 /* a short write */
	trace_meter_store_begin(m, me, 100, 1);
	trace_meter_store_end(m, me, -ENOSPC);            /* stored nothing */
	trace_meter_store_begin(m, me, 100, 1);
	trace_meter_store_end(m, me, 150);                /* a raced iovec: what it did */
	trace_meter_store_begin(m, me, 4096, 0);
	trace_meter_store_end(m, me, 0x7f0000000000);     /* an address: all reserved */
	trace_meter_host_write(m, 10);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 40 + 150 + 4096 + 10);
	CHECK(trace_meter_store_held(m) == 40 + 150 + 4096 + 10);
	trace_meter_store_begin(m, me, 1000, 1);
	trace_meter_store_begin(m, me, 7, 1);             /* the first never came back */
	trace_meter_store_end(m, me, 7);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 4296 + 1000 + 7);
	trace_meter_store_begin(m, me, 500, 1);
	trace_meter_task_exit(m, me, me);                 /* gone mid-call: all of it */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 5303 + 500);
	CHECK(trace_meter_store_held(m) == 5803);
	trace_meter_store_refused(m, 1u << 20);
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 5803 + (1u << 20));
	trace_meter_free(m);
}

/* A plain write settled at its thread's next stop by its wchar's growth: what it
 * wrote, nothing for a failed one, at most what it reserved; its task's end settles too. */
static void test_meter_store_lazy(void)
{
	struct trace_meter *m = trace_meter_new(NULL, UINT64_MAX, NULL);
	static char b[5000];
	uint64_t u[TRACE_DIMS];
	pid_t me = getpid();
	char path[256];
	int fd;

	snprintf(path, sizeof path, "%s/lazy", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	trace_meter_task_new(m, me, me);
	trace_meter_store_begin(m, me, 1000, 1);
	CHECK(trace_meter_store_lazy(m, me) == 1);
	CHECK(write(fd, b, 600) == 600);                /* the call, unseen at its exit */
	CHECK(trace_meter_store_held(m) == 1000);         /* reserved until the next stop */
	trace_meter_store_stopped(m, me);
	CHECK(trace_meter_store_held(m) == 600);
	trace_meter_store_stopped(m, me);                 /* settled once */
	trace_meter_store_begin(m, me, 100, 1);
	CHECK(trace_meter_store_lazy(m, me) == 1);
	CHECK(syscall(SYS_write, fd, 8, 100) < 0);      /* EFAULT: it stored nothing */
	trace_meter_store_stopped(m, me);
	trace_meter_store_begin(m, me, 100, 1);
	CHECK(trace_meter_store_lazy(m, me) == 1);
	CHECK(write(fd, b, sizeof b) == (ssize_t)sizeof b);
	trace_meter_store_stopped(m, me);                 /* never past the reservation */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 600 + 100);
	trace_meter_store_begin(m, me, 0, 1);
	CHECK(trace_meter_store_lazy(m, me) == 0);        /* nothing reserved: nothing to settle */
	trace_meter_store_begin(m, me, 300, 0);
	CHECK(trace_meter_store_lazy(m, me) == 0);        /* not by its result */
	trace_meter_store_end(m, me, 0);
	trace_meter_store_begin(m, me, 50, 1);
	CHECK(trace_meter_store_lazy(m, me) == 1);
	CHECK(write(fd, b, 20) == 20);
	trace_meter_task_exit(m, me, me);                 /* its end settles it */
	trace_meter_usage(m, u);
	CHECK(u[LEASE_DIM_STORAGE_WRITE] == 700 + 300 + 20);
	CHECK(trace_meter_store_held(m) == 1020);
	close(fd);
	trace_meter_free(m);
}

int main(void)
{
	struct common_err e;

	if (!mkdtemp(dir))
		return 1;
	test_relay_order();
	test_relay_drains_unallowed_output();
	test_relay_bytes_bound();
	test_relay_lines_bound();
	test_ns_bytes();
	test_ns_tick();
	test_ns_partial();
	test_ns_deep();
	test_ns_unreadable();
	test_ns_vanishing();
	test_meter_tree();
	test_meter_reaped();
	test_meter_store();
	test_meter_store_lazy();
	common_rm_rf(dir, &e);
	return unit_finish("test_meter");
}
