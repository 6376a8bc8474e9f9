/* The warm sandbox (sbx_sandbox_open/_call/_close): call_warm MODE [N]
 * calls      N calls in one sandbox, each result right; a counter the callback
 *            bumps in a global counts 1..N across the calls (one guest process)
 * isolated   the same with warm_isolated: the counter starts from 0 in every
 *            call (each call a fresh fork of the warm guest)
 * crash      (isolated) a callback that aborts fails its call, changes nothing on
 *            the host, and the next call in the same sandbox works
 * dies       (not isolated) a callback that aborts ends the warm guest: that call,
 *            the next one and the close fail, naming the signal
 * closed     a call and a close after close, and on a handle never opened, fail
 * threads    two host threads share one sandbox, N calls each, all right
 * time       N warm calls of a trivial callback (forked, and shared) against N
 *            cold sbx_calls, in us per call (a measurement, no verdict)
 * Prints one line per mode ending in "ok" when every check held. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sbx.h"

struct job { long in, out, seen; };
static const struct sbx_field job_f[] = {
	SBX_FIELD_AUTO(struct job, in),
	SBX_FIELD_AUTO(struct job, out),
	SBX_FIELD_AUTO(struct job, seen),
};
static const struct sbx_type job_t = SBX_STRUCT("job", struct job, job_f);

static long counter; /* the guest's memory between calls */

static void compute(void *arg)
{
	struct job *j = arg;
	j->out = 3 * j->in + 1;
	j->seen = ++counter;
}

static void crash(void *arg)
{
	struct job *j = arg;
	j->out = -1;
	abort();
}

static void trivial(void *arg)
{
	(void)arg;
}

static int fail(const char *what, const struct common_err *e)
{
	printf("%s: %s: %s\n", what, e->what, e->why);
	return 1;
}

/* n calls; the counter seen counts up (shared 1), is 1 each time (0), or is not
 * checked (-1: other threads call too) */
static int calls(int h, long n, int shared)
{
	struct common_err e = {0};
	for (long i = 1; i <= n; i++) {
		struct job j = { i, 0, 0 };
		if (sbx_sandbox_call(h, compute, &job_t, &j, &e) < 0)
			return fail("call", &e);
		if (j.out != 3 * i + 1 || (shared >= 0 && j.seen != (shared ? i : 1))) {
			printf("call %ld: out %ld seen %ld\n", i, j.out, j.seen);
			return 1;
		}
	}
	return 0;
}

static void *thread_calls(void *arg)
{
	return (void *)(long)calls(*(int *)arg, 20, -1);
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* us per warm call of the trivial callback, or -1 */
static double warm_us(long n, int isolated, struct common_err *e)
{
	struct sbx_sandbox sb = { .err = e, .warm_isolated = isolated };
	struct job j = { 1, 0, 0 };
	int h = sbx_sandbox_open(&sb);
	if (h < 0)
		return -1;
	sbx_sandbox_call(h, trivial, &job_t, &j, e); /* the first call warms page tables */
	double t0 = now_us();
	for (long i = 0; i < n; i++)
		if (sbx_sandbox_call(h, trivial, &job_t, &j, e) < 0)
			return -1;
	double us = (now_us() - t0) / (double)n;
	return sbx_sandbox_close(h, e) < 0 ? -1 : us;
}

static int timed(long n)
{
	struct common_err e = {0};
	struct sbx_sandbox sb = { .err = &e };
	struct job j = { 1, 0, 0 };
	double fork_us = warm_us(n, 1, &e), shared_us = warm_us(n, 0, &e);
	if (fork_us < 0 || shared_us < 0)
		return fail("warm call", &e);
	double t0 = now_us();
	for (long i = 0; i < n; i++)
		if (sbx_call(&sb, trivial, &job_t, &j) < 0)
			return fail("cold call", &e);
	double cold = (now_us() - t0) / (double)n;
	printf("warm (isolated, a fork per call): %.0f us/call, warm: %.0f us/call, "
	       "cold: %.0f us/call\n", fork_us, shared_us, cold);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";
	long n = argc > 2 ? atol(argv[2]) : 20;
	struct common_err e = {0};
	struct sbx_sandbox sb = { .err = &e, .warm_isolated = !strcmp(mode, "isolated") ||
							       !strcmp(mode, "crash") };
	if (!strcmp(mode, "time"))
		return timed(n);
	int h = sbx_sandbox_open(&sb), bad = 0;
	if (h < 0)
		return fail("open", &e);
	if (!strcmp(mode, "calls") || !strcmp(mode, "isolated")) {
		bad = calls(h, n, !sb.warm_isolated);
	} else if (!strcmp(mode, "crash")) {
		struct job j = { 5, 7, 9 };
		bad = sbx_sandbox_call(h, crash, &job_t, &j, &e) == 0 || j.out != 7 || j.seen != 9;
		printf("crash: %s: %s\n", e.what, e.why);
		bad = bad || calls(h, 2, -1);
	} else if (!strcmp(mode, "dies")) {
		struct job j = { 5, 7, 9 };
		bad = sbx_sandbox_call(h, crash, &job_t, &j, &e) == 0 || j.out != 7;
		printf("dies: %s: %s\n", e.what, e.why);
		bad = bad || sbx_sandbox_call(h, compute, &job_t, &j, &e) == 0 || j.out != 7;
		bad = bad || sbx_sandbox_close(h, &e) == 0 || !strstr(e.why, "signal 6");
		printf("close: %s: %s\n%s%s\n", e.what, e.why, mode, bad ? " FAILED" : " ok");
		return bad;
	} else if (!strcmp(mode, "threads")) {
		pthread_t t[2];
		void *r0, *r1;
		pthread_create(&t[0], NULL, thread_calls, &h);
		pthread_create(&t[1], NULL, thread_calls, &h);
		pthread_join(t[0], &r0);
		pthread_join(t[1], &r1);
		bad = r0 || r1;
	} else if (!strcmp(mode, "closed")) {
		struct job j = { 1, 0, 0 };
		if (sbx_sandbox_close(h, &e) < 0)
			return fail("close", &e);
		bad = sbx_sandbox_call(h, compute, &job_t, &j, &e) == 0 || j.out != 0;
		printf("after close: %s: %s\n", e.what, e.why);
		bad = bad || sbx_sandbox_close(h, &e) == 0 || sbx_sandbox_call(h + 1, compute, &job_t, &j, &e) == 0;
		printf("%s%s\n", mode, bad ? " FAILED" : " ok");
		return bad;
	} else {
		printf("unknown mode %s\n", mode);
		return 2;
	}
	if (sbx_sandbox_close(h, &e) < 0)
		return fail("close", &e);
	printf("%s%s\n", mode, bad ? " FAILED" : " ok");
	return bad;
}
