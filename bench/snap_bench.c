/* bench: snap_capture (memory read + canonical encoding + SHA-256) and
 * snap_restore of a guest with N MiB of touched memory. Prints one JSON line. */
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

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
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
	struct snap_image im;
	struct snap_manifest m;
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/snap_bench.%d", (int)getpid());
	/* the path sbx-snap take uses: streamed into chunk files, synced */
	double ts = now();
	if (snap_capture_store(pid, &o, dir, &m, &e) < 0) {
		fprintf(stderr, "capture_store: %s: %s\n", e.what, e.why);
		return 1;
	}
	double te = now();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	double t0 = now();
	if (snap_capture(pid, &o, &im, &e) < 0) {
		fprintf(stderr, "capture: %s: %s\n", e.what, e.why);
		return 1;
	}
	double t1 = now();
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	struct snap_state s;
	if (snap_decode(im.bytes, im.len, "bench", &s, &e) < 0)
		return 1;
	pid = start(guest, mib);
	double t2 = now();
	if (snap_restore(pid, &s, &e) < 0) {
		fprintf(stderr, "restore: %s: %s\n", e.what, e.why);
		return 1;
	}
	double t3 = now();
	/* the restored guest checks its memory and must finish with "ok" */
	int sig = 0;
	for (;;) {
		ptrace(PTRACE_CONT, pid, 0, sig);
		waitpid(pid, &st, 0);
		if (!WIFSTOPPED(st))
			break;
		sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
	}
	double touched = (double)strtoul(mib, NULL, 10) * 1048576.0;
	printf("{\"touched_mib\":%s,\"image_bytes\":%zu,\"take_to_chunks_s\":%.3f,"
	       "\"take_mb_s\":%.0f,\"capture_in_memory_s\":%.3f,\"capture_in_memory_mb_s\":%.0f,"
	       "\"same_digest\":%s,\"restore_s\":%.3f,\"restore_mb_s\":%.0f,\"restored_exit\":%d}\n",
	       mib, im.len, te - ts, touched / (te - ts) / 1e6, t1 - t0, touched / (t1 - t0) / 1e6,
	       memcmp(m.digest, im.digest, 32) ? "false" : "true", t3 - t2,
	       touched / (t3 - t2) / 1e6, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	snap_state_free(&s);
	snap_image_free(&im);
	return 0;
}
