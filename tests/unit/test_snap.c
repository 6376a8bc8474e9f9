/* snap: capture → encode → decode → restore round trips on self-checking guests
 * taken at random syscall steps (zdtm style), plus decoder and store refusals. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/ptrace.h>
#include <unistd.h>
#include "snap/snap.h"
#include "unit.h"

static char guests[4096];
static char tmpdir[4096];
static void explain(const struct snap_state *a, pid_t pid, const char *dir);
static int pass_signal(int st);

static char *read_pipe(int fd)
{
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	ssize_t n;
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while ((n = read(fd, s + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 2)
			s = realloc(s, cap *= 2);
	}
	s[len] = 0;
	return s;
}

/* Start a guest in dir with stdout on a pipe; traced: stopped at its exec. */
static pid_t start(const char *guest, const char *dir, int traced, int *outfd)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(dir) < 0)
			_exit(120);
		dup2(p[1], 1);
		close_range(3, ~0u, 0);
		personality(ADDR_NO_RANDOMIZE);
		if (traced) {
			ptrace(PTRACE_TRACEME, 0, 0, 0);
			raise(SIGSTOP);
		}
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", guests, guest);
		execl(path, guest, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*outfd = p[0];
	if (!traced)
		return pid;
	int st;
	waitpid(pid, &st, 0);
	ptrace(PTRACE_SETOPTIONS, pid, 0,
	       PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
	ptrace(PTRACE_CONT, pid, 0, 0);
	waitpid(pid, &st, 0);
	if (!WIFSTOPPED(st) || st >> 8 != (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) {
		kill(pid, SIGKILL);
		return -1;
	}
	return pid;
}

/* Let a traced guest run to its end, passing its signals on. */
static int finish(pid_t pid)
{
	int st, sig = 0;
	for (;;) {
		ptrace(PTRACE_CONT, pid, 0, sig);
		if (waitpid(pid, &st, 0) < 0)
			return -1;
		if (WIFEXITED(st))
			return WEXITSTATUS(st);
		if (WIFSIGNALED(st))
			return 128 + WTERMSIG(st);
		sig = pass_signal(st);
	}
}

static void wipe(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	if (system(cmd) != 0)
		abort();
}

static char *baseline(const char *guest, const char *dir)
{
	int fd, st;
	wipe(dir);
	pid_t pid = start(guest, dir, 0, &fd);
	waitpid(pid, &st, 0);
	char *s = read_pipe(fd);
	close(fd);
	return s;
}

/* The signal to deliver when resuming from stop status st. */
static int pass_signal(int st)
{
	int s = WSTOPSIG(st);
	return s == (SIGTRAP | 0x80) || s == SIGTRAP ? 0 : s;
}

/* Syscall entries the guest makes (so steps can be drawn from them). */
static long count_steps(const char *guest, const char *dir)
{
	int fd, st;
	long n = 0;
	wipe(dir);
	pid_t pid = start(guest, dir, 1, &fd);
	if (pid < 0)
		return -1;
	int sig = 0;
	for (;;) {
		ptrace(PTRACE_SYSCALL, pid, 0, sig);
		waitpid(pid, &st, 0);
		if (!WIFSTOPPED(st))
			break;
		sig = pass_signal(st);
		struct ptrace_syscall_info si;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80) &&
		    ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0 &&
		    si.op == PTRACE_SYSCALL_INFO_ENTRY)
			n++;
	}
	close(fd);
	return n;
}

/* Run to syscall entry number step, capture there, kill the source; restore
 * into a fresh exec; the guest's whole output must equal want. */
static int roundtrip(const char *guest, const char *dir, long step, const char *want)
{
	struct common_err e = { "", "" };
	int fd, st, ok = 0;
	wipe(dir);
	pid_t pid = start(guest, dir, 1, &fd);
	long n = 0;
	struct snap_image im = { 0 };
	int sig = 0;
	for (;;) {
		ptrace(PTRACE_SYSCALL, pid, 0, sig);
		waitpid(pid, &st, 0);
		if (!WIFSTOPPED(st)) {
			fprintf(stderr, "%s: ended before step %ld\n", guest, step);
			return 0;
		}
		sig = pass_signal(st);
		struct ptrace_syscall_info si;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80) &&
		    ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0 &&
		    si.op == PTRACE_SYSCALL_INFO_ENTRY && ++n == step)
			break;
	}
	struct snap_capture_opts o = { .meta = { .lease = "L-src", .principal = "tester" },
				       .ns_dir = dir };
	if (snap_capture(pid, &o, &im, &e) < 0) {
		fprintf(stderr, "%s step %ld: capture: %s: %s\n", guest, step, e.what, e.why);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return 0;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	char *before = read_pipe(fd);
	close(fd);

	struct snap_state s;
	struct snap_image again = { 0 };
	if (snap_decode(im.bytes, im.len, "snapshot", &s, &e) < 0) {
		fprintf(stderr, "%s step %ld: decode: %s: %s\n", guest, step, e.what, e.why);
		goto out;
	}
	if (snap_encode(&s, &again, &e) < 0 || again.len != im.len ||
	    memcmp(again.bytes, im.bytes, im.len)) {
		fprintf(stderr, "%s step %ld: encode(decode(x)) != x\n", guest, step);
		goto out_state;
	}
	wipe(dir);
	if (snap_cells_write(&s, dir, &e) < 0)
		goto out_state;
	pid = start(guest, dir, 1, &fd);
	if (snap_restore_checked(pid, &s, dir, im.digest, &e) < 0) {
		fprintf(stderr, "%s step %ld: restore: %s: %s\n", guest, step, e.what, e.why);
		explain(&s, pid, dir);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		close(fd);
		goto out_state;
	}
	/* snapshot → restore → snapshot again: nothing ran, so the same digest */
	struct snap_image third = { 0 };
	struct snap_capture_opts o3 = { .meta = s.meta, .ns_dir = dir };
	CHECK(snap_capture(pid, &o3, &third, &e) == 0 && !memcmp(third.digest, im.digest, 32));
	snap_image_free(&third);
	int rc = finish(pid);
	char *after = read_pipe(fd);
	close(fd);
	size_t lb = strlen(before);
	ok = rc == 0 && lb + strlen(after) == strlen(want) && !strncmp(want, before, lb) &&
	     !strcmp(want + lb, after);
	if (!ok)
		fprintf(stderr, "%s step %ld: exit %d, output \"%s\" + \"%s\", want \"%s\"\n", guest,
			step, rc, before, after, want);
	free(after);
out_state:
	snap_state_free(&s);
out:
	snap_image_free(&again);
	snap_image_free(&im);
	free(before);
	return ok;
}

/* On a digest mismatch: say which part differs. */
static void explain(const struct snap_state *a, pid_t pid, const char *dir)
{
	struct snap_capture_opts o = { .meta = a->meta, .ns_dir = dir };
	struct snap_image im;
	struct snap_state b;
	struct common_err e;
	if (snap_capture(pid, &o, &im, &e) < 0 || snap_decode(im.bytes, im.len, "again", &b, &e) < 0)
		return;
	for (int i = 0; i < SNAP_NREGS; i++)
		if (a->regs[i] != b.regs[i])
			fprintf(stderr, "  reg %d: %#llx vs %#llx\n", i, (unsigned long long)a->regs[i],
				(unsigned long long)b.regs[i]);
	for (uint32_t i = 0; i < a->xsize && i < b.xsize; i++)
		if (a->xstate[i] != b.xstate[i])
			fprintf(stderr, "  xstate byte %u: %02x vs %02x\n", i, a->xstate[i], b.xstate[i]);
	if (a->sigmask != b.sigmask || a->brk != b.brk || a->umask != b.umask ||
	    strcmp(a->cwd, b.cwd) || a->ss_sp != b.ss_sp || a->ss_flags != b.ss_flags)
		fprintf(stderr, "  misc differs (brk %#llx vs %#llx)\n", (unsigned long long)a->brk,
			(unsigned long long)b.brk);
	if (memcmp(a->sigact, b.sigact, sizeof a->sigact))
		fprintf(stderr, "  sigactions differ\n");
	if (memcmp(a->rlim, b.rlim, sizeof a->rlim))
		fprintf(stderr, "  rlimits differ\n");
	for (size_t i = 0; i < a->nfds || i < b.nfds; i++)
		if (i >= a->nfds || i >= b.nfds || a->fds[i].fd != b.fds[i].fd ||
		    a->fds[i].pos != b.fds[i].pos || a->fds[i].flags != b.fds[i].flags ||
		    memcmp(a->fds[i].hash, b.fds[i].hash, 32))
			fprintf(stderr, "  fd entry %zu differs\n", i);
	for (size_t i = 0; i < a->nregions || i < b.nregions; i++) {
		const struct snap_region *x = i < a->nregions ? &a->regions[i] : NULL;
		const struct snap_region *y = i < b.nregions ? &b.regions[i] : NULL;
		if (!x || !y || x->start != y->start || x->end != y->end || x->prot != y->prot ||
		    x->kind != y->kind || x->offset != y->offset)
			fprintf(stderr, "  region %zu: %llx-%llx p%u k%u vs %llx-%llx p%u k%u\n", i,
				x ? (unsigned long long)x->start : 0, x ? (unsigned long long)x->end : 0,
				x ? x->prot : 0, x ? x->kind : 0, y ? (unsigned long long)y->start : 0,
				y ? (unsigned long long)y->end : 0, y ? y->prot : 0, y ? y->kind : 0);
		else if (x->kind != SNAP_REGION_VDSO) {
			uint64_t pages = (x->end - x->start) / SNAP_PAGE;
			if (memcmp(x->bitmap, y->bitmap, (pages + 7) / 8))
				fprintf(stderr, "  region %zu %llx: page bitmap differs\n", i,
					(unsigned long long)x->start);
		}
	}
	if (a->ncells != b.ncells)
		fprintf(stderr, "  cells %zu vs %zu\n", a->ncells, b.ncells);
	snap_state_free(&b);
	snap_image_free(&im);
}

static void guest_rounds(const char *guest, unsigned *seed, int rounds)
{
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/%s", tmpdir, guest);
	char *want = baseline(guest, dir);
	CHECK(strlen(want) > 0);
	long steps = count_steps(guest, dir);
	CHECK(steps > 10);
	for (int i = 0; i < rounds && steps > 10; i++) {
		long step = 1 + (long)(rand_r(seed) % (unsigned long)steps);
		if (i == 0)
			step = steps / 2;
		int ok = roundtrip(guest, dir, step, want);
		if (!ok)
			fprintf(stderr, "  (guest %s, step %ld of %ld)\n", guest, step, steps);
		CHECK(ok);
	}
	free(want);
}

/* A small snapshot for decoder and store tests. */
static int small_image(struct snap_image *im)
{
	char dir[4200];
	struct common_err e;
	int fd, st;
	snprintf(dir, sizeof dir, "%s/small", tmpdir);
	wipe(dir);
	pid_t pid = start("snap_fpu", dir, 1, &fd);
	struct snap_capture_opts o = { .meta = { .lease = "L1" }, .ns_dir = dir };
	int rc = snap_capture(pid, &o, im, &e);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(fd);
	return rc;
}

static void test_decoder(const struct snap_image *im)
{
	struct snap_state s;
	struct common_err e;
	CHECK(snap_decode(im->bytes, im->len, "x", &s, &e) == 0);
	snap_state_free(&s);
	/* every truncation refused */
	int refused = 0, tries = 0;
	for (size_t cut = 0; cut < im->len; cut += 1 + cut / 3, tries++)
		refused += snap_decode(im->bytes, cut, "x", &s, &e) < 0;
	CHECK(refused == tries);
	/* trailing garbage refused */
	uint8_t *b = malloc(im->len + 1);
	memcpy(b, im->bytes, im->len);
	b[im->len] = 0;
	CHECK(snap_decode(b, im->len + 1, "x", &s, &e) < 0);
	/* a wrong domain string refused */
	b[4] ^= 1;
	CHECK(snap_decode(b, im->len, "x", &s, &e) < 0);
	CHECK(strstr(e.why, "domain") != NULL);
	free(b);
}

static void test_store(const struct snap_image *im)
{
	char dir[4200], p[4300];
	struct snap_image back;
	struct common_err e;
	snprintf(dir, sizeof dir, "%s/store/snap1", tmpdir);
	wipe(dir);
	rmdir(dir);
	CHECK(snap_store_write(dir, im, &e) == 0);
	CHECK(snap_store_write(dir, im, &e) < 0); /* never overwritten */
	CHECK(snap_store_read(dir, &back, &e) == 0);
	CHECK(back.len == im->len && !memcmp(back.bytes, im->bytes, im->len) &&
	      !memcmp(back.digest, im->digest, 32));
	snap_image_free(&back);
	uint32_t chunks = (uint32_t)((im->len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX);
	CHECK(snap_persist_bytes(im->len) ==
	      im->len + 44 + strlen("snapshot/") * (chunks + 1) + 64 * (chunks + 1) +
	      strlen("/manifest") + 7u * chunks);

	/* a corrupted chunk */
	snprintf(p, sizeof p, "%s/000001", dir);
	int fd = open(p, O_RDWR);
	uint8_t c;
	CHECK(pread(fd, &c, 1, 100) == 1);
	c ^= 0x40;
	CHECK(pwrite(fd, &c, 1, 100) == 1);
	CHECK(snap_store_read(dir, &back, &e) < 0);
	CHECK(strstr(e.why, "digest") != NULL);
	c ^= 0x40;
	CHECK(pwrite(fd, &c, 1, 100) == 1);
	close(fd);
	CHECK(snap_store_read(dir, &back, &e) == 0);
	snap_image_free(&back);

	/* a wrong manifest length */
	snprintf(p, sizeof p, "%s/manifest", dir);
	uint8_t m[44], m2[44];
	fd = open(p, O_RDWR);
	CHECK(pread(fd, m, 44, 0) == 44);
	memcpy(m2, m, 44);
	m2[32] ^= 1;
	CHECK(pwrite(fd, m2, 44, 0) == 44);
	CHECK(snap_store_read(dir, &back, &e) < 0);
	CHECK(pwrite(fd, m, 44, 0) == 44);
	close(fd);

	/* a missing chunk */
	char q[4300];
	snprintf(p, sizeof p, "%s/000000", dir);
	snprintf(q, sizeof q, "%s/moved", dir);
	CHECK(rename(p, q) == 0);
	CHECK(snap_store_read(dir, &back, &e) < 0);
	CHECK(strstr(e.why, "missing") != NULL || strstr(e.what, "000000") != NULL);
	CHECK(rename(q, p) == 0);
	CHECK(snap_store_read(dir, &back, &e) == 0);
	snap_image_free(&back);
}

static void test_refusals(void)
{
	struct common_err e;
	struct snap_image im;
	/* a multi-threaded process is refused, not mis-captured: ourselves
	 * after starting a thread is not traced, so use a fake: pid 1's task
	 * count is irrelevant; capture of an untraced process fails cleanly */
	CHECK(snap_capture(getppid(), &(struct snap_capture_opts){ 0 }, &im, &e) < 0);
}

int main(int argc, char **argv)
{
	(void)argc;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(guests, sizeof guests, "%s/../guests", dirname(self));
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test_snap.%d", (int)getpid());
	wipe(tmpdir);
	unsigned seed = getenv("SBX_SNAP_SEED") ? (unsigned)atoi(getenv("SBX_SNAP_SEED"))
						: (unsigned)time(NULL);
	fprintf(stderr, "%s: seed %u (SBX_SNAP_SEED)\n", argv[0], seed);

	struct snap_image im;
	CHECK(small_image(&im) == 0);
	if (im.len) {
		test_decoder(&im);
		test_store(&im);
		snap_image_free(&im);
	}
	test_refusals();
	const char *g[] = { "snap_heap", "snap_stack", "snap_fpu", "snap_files", "snap_misc",
			    "snap_heap_static", "snap_misc_static" };
	const char *only = getenv("SBX_SNAP_GUEST");
	for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
		if (!only || !strcmp(only, g[i]))
			guest_rounds(g[i], &seed, 3);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		return 1;
	return unit_finish("test_snap");
}
