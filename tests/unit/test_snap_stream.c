/* snap: the streamed encoder reads a region whose held pages it is told once,
 * and its bytes are the in-memory encoder's whatever the guess: a fixed state
 * pinned to its digest, the chunks after a wrong guess, the admitted length;
 * then a real guest's capture, streamed, stored and in memory. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <linux/ptrace.h>
#include <dirent.h>
#include "snap/snap-internal.h"
#include "unit.h"

static uint8_t xstate[SNAP_XCANON_SIZE];

/* Regions of the fixed state: pages, a zero page the kernel holds (a wrong
 * guess; UINT64_MAX: none), a run of pages it does not hold. */
static const struct { uint64_t pages, zero_held, hole, hole_len; } shape[] = {
	{ 300, 150, 200, 10 },        /* wrong in the middle */
	{ 600, UINT64_MAX, 0, 0 },    /* right */
	{ 10, 4, 7, 2 },              /* too small to guess: read twice */
	{ 1000, 999, 0, 0 },          /* wrong at the last page, 62 chunks back */
	{ 512, 0, 1, 100 },           /* wrong at the first page */
};
#define NREG (sizeof shape / sizeof shape[0])
static struct snap_region regions[NREG];
static uint64_t reads[NREG];    /* pages read through the source, per region */

static size_t region_no(const struct snap_region *r)
{
	return (size_t)(r - regions);
}

static int page_zero(size_t k, uint64_t p)
{
	return p == shape[k].zero_held || (p >= shape[k].hole && p < shape[k].hole + shape[k].hole_len);
}

static int fake_fill(void *ctx, const struct snap_region *r, uint64_t first, uint64_t n,
		     uint8_t *dst, struct common_err *e)
{
	(void)ctx, (void)e;
	size_t k = region_no(r);
	reads[k] += n;
	for (uint64_t p = first; p < first + n; p++, dst += SNAP_PAGE)
		for (size_t i = 0; i < SNAP_PAGE; i++)
			dst[i] = page_zero(k, p) ? 0 : (uint8_t)((k * 131 + p * 7 + i) | 1);
	return 0;
}

static int64_t fake_held(void *ctx, const struct snap_region *r, uint8_t *bm)
{
	(void)ctx;
	size_t k = region_no(r);
	int64_t n = 0;
	for (uint64_t p = 0; p < shape[k].pages; p++)
		if (p < shape[k].hole || p >= shape[k].hole + shape[k].hole_len) {
			bm[p / 8] |= (uint8_t)(1u << (p % 8));
			n++;
		}
	return n;
}

static void fixed_state(struct snap_state *s)
{
	memset(s, 0, sizeof *s);
	s->version = 8;
	s->meta = (struct snap_meta){ .lease = "L1", .principal = "", .host_program = "",
				      .ns_prefix = "" };
	s->xfeatures = 3;
	s->xstate = xstate;
	s->regs[15] = (uint64_t)-1;
	s->tid = s->pid = 1;
	s->cwd = "/";
	s->exe = "/bin/sh";
	uint64_t at = 0x10000000;
	for (size_t k = 0; k < NREG; k++) {
		regions[k] = (struct snap_region){ .start = at, .end = at + shape[k].pages * SNAP_PAGE,
						   .prot = 3, .kind = SNAP_REGION_ANON };
		at = regions[k].end + SNAP_PAGE;
	}
	s->regions = regions;
	s->nregions = NREG;
}

/* The digest of the fixed state's encoding on main before reading once. */
static const char pinned[] = "06eae872ea821ce563e37d5d1ad0238ac009263f4527865a32171e8bdec9fc44";

struct admit_log { uint64_t limit, last; int calls; };

static int fake_admit(void *ctx, uint64_t len, struct common_err *e)
{
	struct admit_log *a = ctx;
	a->calls++;
	a->last = len;
	return len > a->limit ? common_errf(e, "snapshot", "%llu bytes over the limit",
					    (unsigned long long)len) : 0;
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void test_fixed(void)
{
	struct snap_state s;
	struct snap_image im = { 0 }, back = { 0 };
	struct snap_manifest m;
	struct common_err e;
	char hex[COMMON_SHA256_HEX], dir[] = "/tmp/test_snap_stream.XXXXXX";
	fixed_state(&s);
	CHECK(snap_encode_with(&s, fake_fill, NULL, &im, &e) == 0);
	common_hex(im.digest, 32, hex);
	CHECK_STR(hex, pinned);

	/* streamed, digest only: region 1 (guessed right) read once */
	struct snap_source src = { fake_fill, fake_fill, fake_held, NULL };
	memset(reads, 0, sizeof reads);
	CHECK(snap_encode_stream(&s, &src, NULL, NULL, NULL, NULL, &m, &e) == 0);
	CHECK(m.len == im.len && !memcmp(m.digest, im.digest, 32));
	CHECK(reads[1] == 600);
	CHECK(reads[2] == 10 + 7); /* scanned, then its non-zero pages */

	/* stored: the chunks cut back by every wrong guess hold the same bytes */
	CHECK(mkdtemp(dir) != NULL);
	char *sd = common_xasprintf("%s/snap", dir);
	struct admit_log adm = { UINT64_MAX, 0, 0 };
	CHECK(snap_encode_stream(&s, &src, NULL, sd, fake_admit, &adm, &m, &e) == 0);
	CHECK(m.len == im.len && !memcmp(m.digest, im.digest, 32));
	CHECK(adm.last == im.len);
	CHECK(count_files(sd) == (int)m.chunks + 1);
	CHECK(snap_store_read(sd, &back, &e) == 0 && back.len == im.len &&
	      !memcmp(back.bytes, im.bytes, im.len));
	snap_image_free(&back);
	common_rm_rf(sd, NULL);

	/* a limit the guessed length passes but the exact one meets: admitted */
	adm = (struct admit_log){ im.len, 0, 0 };
	CHECK(snap_encode_stream(&s, &src, NULL, sd, fake_admit, &adm, &m, &e) == 0);
	CHECK(adm.calls >= 2 && adm.last == im.len && m.len == im.len);
	common_rm_rf(sd, NULL);
	/* one byte less: refused, nothing made */
	adm = (struct admit_log){ im.len - 1, 0, 0 };
	CHECK(snap_encode_stream(&s, &src, NULL, sd, fake_admit, &adm, &m, &e) < 0);
	CHECK(access(sd, F_OK) < 0 && errno == ENOENT);
	common_rm_rf(dir, NULL);
	free(sd);
	snap_image_free(&im);
}

/* A guest of regions between PROT_NONE gaps: dense, a zero page first, last,
 * read-faulted zero pages (the kernel's zero page), zero pages scattered,
 * pages never touched; stopped at getppid. */
#define GUEST_PAGES 2048u
#define GUEST_AT 0x200000000000ull
static void guest(void)
{
	size_t pg = SNAP_PAGE, sz = (size_t)GUEST_PAGES * pg;
	uint8_t *base = mmap((void *)GUEST_AT, (sz + pg) * 6, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (base == MAP_FAILED)
		_exit(2);
	for (int r = 0; r < 6; r++) {
		uint8_t *p = base + r * (sz + pg);
		volatile uint8_t sum = 0;
		mprotect(p, sz, PROT_READ | PROT_WRITE);
		for (size_t i = 0; i < sz; i += 8)
			*(uint64_t *)(p + i) = i * 0x9e3779b97f4a7c15ull + (uint64_t)r + 1;
		if (r == 1)
			memset(p, 0, pg);
		if (r == 2)
			memset(p + sz - pg, 0, pg);
		if (r == 3) {
			madvise(p + sz / 2, sz / 4, MADV_DONTNEED);
			for (size_t i = sz / 2; i < sz / 2 + sz / 4; i += pg)
				sum += p[i];
		}
		for (size_t i = pg * 3; r == 4 && i < sz; i += pg * 97)
			memset(p + i, 0, pg);
		if (r == 5)
			madvise(p + pg * 10, pg * 600, MADV_DONTNEED);
	}
	syscall(SYS_getppid);
	_exit(0);
}

static pid_t start_guest(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		close_range(3, ~0u, 0);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		guest();
	}
	int st;
	waitpid(pid, &st, 0);
	ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
	for (;;) {
		struct ptrace_syscall_info si;
		ptrace(PTRACE_SYSCALL, pid, 0, 0);
		if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st))
			return -1;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80) &&
		    ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) > 0 &&
		    si.op == PTRACE_SYSCALL_INFO_ENTRY && si.entry.nr == SYS_getppid)
			return pid;
	}
}

static void test_guest(void)
{
	struct snap_capture_opts o = { .meta = { .lease = "L1" } };
	struct snap_image im = { 0 }, back = { 0 };
	struct snap_manifest m, md;
	struct common_err e;
	char dir[] = "/tmp/test_snap_stream.XXXXXX";
	pid_t pid = start_guest();
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	CHECK(snap_capture(pid, &o, &im, &e) == 0);
	CHECK(snap_capture_digest(pid, &o, &md, &e) == 0);
	CHECK(md.len == im.len && !memcmp(md.digest, im.digest, 32));
	CHECK(mkdtemp(dir) != NULL);
	char *sd = common_xasprintf("%s/snap", dir);
	CHECK(snap_capture_store(pid, &o, sd, &m, &e) == 0);
	CHECK(m.len == im.len && !memcmp(m.digest, im.digest, 32));
	CHECK(count_files(sd) == (int)m.chunks + 1);
	CHECK(snap_store_read(sd, &back, &e) == 0 && back.len == im.len &&
	      !memcmp(back.bytes, im.bytes, im.len));
	/* the guest's zero pages are squeezed out */
	struct snap_state st;
	CHECK(snap_decode(im.bytes, im.len, "x", &st, &e) == 0);
	uint64_t pages = 0;
	for (size_t i = 0; i < st.nregions; i++)
		if (st.regions[i].start >= GUEST_AT && st.regions[i].start < GUEST_AT + (1ull << 30))
			pages += snap_packed_len(&st.regions[i]) / SNAP_PAGE;
	uint64_t zero = 1 + 1 + GUEST_PAGES / 4 + (GUEST_PAGES - 3 + 96) / 97 + 600;
	CHECK(pages == 6 * (uint64_t)GUEST_PAGES - zero);
	snap_state_free(&st);
	snap_image_free(&back);
	snap_image_free(&im);
	common_rm_rf(dir, NULL);
	free(sd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int main(void)
{
	test_fixed();
	test_guest();
	return unit_finish("test_snap_stream");
}
