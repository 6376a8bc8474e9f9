/* bench: for a guest with N MiB of touched memory, at one stop: the snapshot
 * itself (memory read + canonical encoding + SHA-256, bytes discarded: what
 * restore's re-check runs), the take sbx-snap uses (the same, streamed into
 * chunk files made durable), loading and decoding the stored snapshot, and
 * snap_restore into a fresh exec. Medians of ROUNDS. Prints one JSON line. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <linux/ptrace.h>
#include <time.h>
#include <unistd.h>
#include "snap/snap.h"

#define ROUNDS 3

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* CPU seconds of this process, every thread (the capture hashes on a second
 * one): bytes per CPU second read past a loaded host's wait for a core. */
static double cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof *v, cmp_d);
	return v[ROUNDS / 2];
}

static pid_t start(const char *guest, const char *mib)
{
	pid_t pid = fork();
	if (pid == 0) {
		close_range(3, ~0u, 0);
		personality(ADDR_NO_RANDOMIZE);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		execl(guest, guest, mib, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
	ptrace(PTRACE_CONT, pid, 0, 0);
	waitpid(pid, &st, 0);
	return pid;
}

static void rm_dir(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		exit(1);
}

static int fail(const char *what, const struct common_err *e)
{
	fprintf(stderr, "%s: %s: %s\n", what, e->what, e->why);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *guest = argv[1], *mib = argv[2];
	struct common_err e;
	pid_t pid = start(guest, mib);
	int st;
	for (;;) {
		ptrace(PTRACE_SYSCALL, pid, 0, 0);
		waitpid(pid, &st, 0);
		if (!WIFSTOPPED(st))
			return 1;
		struct ptrace_syscall_info si;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80) &&
		    ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0 &&
		    si.op == PTRACE_SYSCALL_INFO_ENTRY && si.entry.nr == 110)
			break;
	}
	struct snap_capture_opts o = { .meta = { .lease = "bench" } };
	struct snap_manifest m, md;
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/snap_bench.%d", (int)getpid());
	double take[ROUNDS], snap[ROUNDS], snap_cpu[ROUNDS], load[ROUNDS], rest[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		double t0 = now(), c0 = cpu();
		if (snap_capture_digest(pid, &o, &md, &e) < 0)
			return fail("capture", &e);
		double t1 = now();
		snap_cpu[i] = cpu() - c0;
		if (snap_capture_store(pid, &o, dir, &m, &e) < 0)
			return fail("capture_store", &e);
		double t2 = now();
		snap[i] = t1 - t0;
		take[i] = t2 - t1;
		if (i + 1 < ROUNDS)
			rm_dir(dir);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	int restored_exit = 0;
	struct snap_image im;
	for (int i = 0; i < ROUNDS; i++) {
		struct snap_state s;
		double t0 = now();
		if (snap_store_read(dir, &im, &e) < 0 || snap_decode(im.bytes, im.len, "bench", &s, &e) < 0)
			return fail("load", &e);
		double t1 = now();
		pid = start(guest, mib);
		double t2 = now();
		if (snap_restore(pid, &s, &e) < 0)
			return fail("restore", &e);
		double t3 = now();
		load[i] = t1 - t0;
		rest[i] = t3 - t2;
		/* the restored guest checks its memory and must finish with "ok" */
		int sig = 0;
		for (;;) {
			ptrace(PTRACE_CONT, pid, 0, sig);
			waitpid(pid, &st, 0);
			if (!WIFSTOPPED(st))
				break;
			sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
		}
		restored_exit |= WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		snap_state_free(&s);
		if (i + 1 < ROUNDS)
			snap_image_free(&im);
	}
	rm_dir(dir);
	double touched = (double)strtoul(mib, NULL, 10) * 1048576.0;
	double ts = median(snap), tt = median(take), tl = median(load), tr = median(rest);
	double tc = median(snap_cpu);
	printf("{\"touched_mib\":%s,\"image_bytes\":%zu,"
	       "\"snapshot_capture_encode_hash_s\":%.3f,\"snapshot_capture_encode_hash_mb_s\":%.0f,"
	       "\"snapshot_capture_encode_hash_cpu_s\":%.3f,\"snapshot_mb_per_cpu_s\":%.0f,"
	       "\"take_durable_chunks_s\":%.3f,\"take_durable_chunks_mb_s\":%.0f,"
	       "\"load_verify_decode_s\":%.3f,\"restore_s\":%.3f,\"restore_mb_s\":%.0f,"
	       "\"same_digest\":%s,\"restored_exit\":%d}\n",
	       mib, im.len, ts, touched / ts / 1e6, tc, touched / tc / 1e6, tt, touched / tt / 1e6, tl, tr,
	       touched / tr / 1e6,
	       memcmp(m.digest, md.digest, 32) || memcmp(m.digest, im.digest, 32) ? "false" : "true",
	       restored_exit);
	snap_image_free(&im);
	return 0;
}
