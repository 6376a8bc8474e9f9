/* snap: rebuilding a fresh exec of the same image into a snapshot's state by
 * injected syscalls, memory writes and ptrace register sets. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <unistd.h>
#include "snap/snap-internal.h"

#define PAGE_UP(x) (((x) + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1))

static const uint8_t zero_page[SNAP_PAGE];

struct rs {
	struct trace_tracee t;
	const struct snap_state *st;
	uint64_t scratch;
	struct common_err *e;
	/* pieces of the fresh exec's file mappings that already are snapshot file
	 * regions (same file, same offsets): kept, since the guest may not be able
	 * to open the image by its host path (it was executed from a descriptor) */
	uint64_t (*kept)[2];
	size_t nkept;
	/* version 4: the tree's holders and created tasks; k: which process (0
	 * the root, i + 1 procs[i]); root: the root's state (its pipes) */
	struct snap_hosts *h;
	size_t k;
	const struct snap_state *root;
};

static int call(struct rs *s, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		uint64_t a4, uint64_t a5, int64_t *ret)
{
	uint64_t a[6] = { a0, a1, a2, a3, a4, a5 };
	return trace_tracee_inject(&s->t, nr, a, ret, s->e);
}

/* A syscall that must succeed; what names it in the error. */
static int must(struct rs *s, const char *what, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret)
{
	int64_t r;
	if (call(s, nr, a0, a1, a2, a3, a4, a5, &r) < 0)
		return -1;
	if (r < 0 && r > -4096)
		return common_errf(s->e, "restore", "%s: %s", what, strerror((int)-r));
	if (ret)
		*ret = r;
	return 0;
}

static int put_path(struct rs *s, const char *path)
{
	return trace_tracee_write(&s->t, s->scratch, path, strlen(path) + 1, s->e);
}

static int overlaps(const struct snap_state *st, uint64_t a, uint64_t b)
{
	for (size_t i = 0; i < st->nregions; i++)
		if (a < st->regions[i].end && st->regions[i].start < b)
			return 1;
	return 0;
}

static int unmap_all(struct rs *s, uint64_t *vdso_start, uint64_t *vdso_end)
{
	struct trace_map *m;
	size_t n;
	if (trace_proc_maps(s->t.tid, &m, &n, s->e) < 0)
		return -1;
	int rc = 0;
	*vdso_start = *vdso_end = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int k = snap_map_kind(&m[i]);
		if (k == SNAP_REGION_VDSO) {
			*vdso_start = m[i].start;
			*vdso_end = m[i].end;
		}
		/* the tree's shared memory, held by the root before the forks */
		if (k < 0 || k == SNAP_REGION_VDSO ||
		    (s->h && m[i].start < s->h->shm_at + s->h->shm_len && s->h->shm_at < m[i].end))
			continue;
		if (s->t.insn >= m[i].start && s->t.insn < m[i].end) {
			rc = common_errf(s->e, "restore", "the tracee has no vdso to inject from");
			break;
		}
		/* unmap what no snapshot file region continues, piece by piece */
		uint64_t at = m[i].start;
		for (size_t j = 0; k == SNAP_REGION_FILE && j < s->st->nregions && rc == 0; j++) {
			const struct snap_region *r = &s->st->regions[j];
			uint64_t a = r->start > m[i].start ? r->start : m[i].start;
			uint64_t b = r->end < m[i].end ? r->end : m[i].end;
			if (r->kind != SNAP_REGION_FILE || (r->prot & SNAP_PROT_SHARED) || a >= b ||
			    strcmp(r->path, m[i].path) ||
			    m[i].offset + (a - m[i].start) != r->offset + (a - r->start))
				continue;
			if (a > at)
				rc = must(s, "munmap", SYS_munmap, at, a - at, 0, 0, 0, 0, NULL);
			s->kept = common_xrealloc(s->kept, (s->nkept + 1) * sizeof *s->kept);
			s->kept[s->nkept][0] = a;
			s->kept[s->nkept][1] = b;
			s->nkept++;
			at = b;
		}
		if (rc == 0 && at < m[i].end)
			rc = must(s, "munmap", SYS_munmap, at, m[i].end - at, 0, 0, 0, 0, NULL);
	}
	free(m);
	return rc;
}

/* Bytes of [a, b) covered by kept file mapping pieces. */
static uint64_t kept_bytes(const struct rs *s, uint64_t a, uint64_t b)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->nkept; i++) {
		uint64_t x = s->kept[i][0] > a ? s->kept[i][0] : a;
		uint64_t y = s->kept[i][1] < b ? s->kept[i][1] : b;
		if (x < y)
			n += y - x;
	}
	return n;
}

static int map_regions(struct rs *s, uint64_t vs, uint64_t ve)
{
	const struct snap_state *st = s->st;
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		uint64_t len = r->end - r->start;
		int64_t got;
		if (r->kind == SNAP_REGION_VDSO) {
			if (r->start != vs || r->end != ve)
				return common_errf(s->e, "restore", "vdso is at %#" PRIx64 ", the snapshot "
						   "has it at %#" PRIx64 " (address randomisation on?)",
						   vs, r->start);
			continue;
		}
		if (r->kind == SNAP_REGION_HEAP) {
			if (r->start < st->start_brk || r->end > PAGE_UP(st->brk))
				return common_errf(s->e, "restore", "heap region %#" PRIx64
						   " lies outside the brk area", r->start);
			continue;
		}
		if (r->kind == SNAP_REGION_SYSV) {
			if (snap_segment_attach(&s->t, r, s->e) < 0)
				return -1;
			continue;
		}
		if (r->kind == SNAP_REGION_SHM) {
			if (snap_shm_map(&s->t, r, s->root, s->h, s->e) < 0)
				return -1;
			continue;
		}
		if (r->kind == SNAP_REGION_FILE && !(r->prot & SNAP_PROT_SHARED) &&
		    kept_bytes(s, r->start, r->end) == len) {
			if (must(s, "mprotect kept file region", SYS_mprotect, r->start, len,
				 PROT_READ | PROT_WRITE, 0, 0, 0, NULL) < 0)
				return -1;
			continue;
		}
		if (r->kind == SNAP_REGION_FILE) {
			int64_t fd;
			char what[SNAP_STR_MAX + 16];
			snprintf(what, sizeof what, "open %s", r->path);
			if (put_path(s, r->path) < 0 ||
			    must(s, what, SYS_openat, (uint64_t)AT_FDCWD, s->scratch,
				 O_RDONLY | O_CLOEXEC, 0, 0, 0, &fd) < 0)
				return -1;
			int shared = (r->prot & SNAP_PROT_SHARED) != 0;
			int rc = must(s, "mmap file region", SYS_mmap, r->start, len,
				      shared ? PROT_READ : PROT_READ | PROT_WRITE,
				      (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED, (uint64_t)fd,
				      r->offset, &got);
			int64_t ign;
			if (call(s, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0, &ign) < 0 || rc < 0)
				return -1;
		} else {
			uint64_t fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
			if (r->kind == SNAP_REGION_STACK)
				fl |= MAP_GROWSDOWN;
			if (must(s, "mmap region", SYS_mmap, r->start, len, PROT_READ | PROT_WRITE, fl,
				 (uint64_t)-1, 0, &got) < 0)
				return -1;
		}
		if ((uint64_t)got != r->start)
			return common_errf(s->e, "restore", "region %#" PRIx64 " mapped at %#" PRIx64,
					   r->start, (uint64_t)got);
	}
	return 0;
}

/* A shared mapping shows the file as it is now: it must be what was recorded
 * (a page past the end of the file reads as zero at both ends). */
static int check_shared_region(struct rs *s, const struct snap_region *r)
{
	static uint8_t page[SNAP_PAGE];
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	const uint8_t *src = r->packed;
	for (uint64_t p = 0; p < pages; p++) {
		int set = r->bitmap[p / 8] >> (p % 8) & 1;
		if (trace_tracee_read(&s->t, r->start + p * SNAP_PAGE, page, SNAP_PAGE, NULL) < 0)
			memset(page, 0, SNAP_PAGE);
		if (memcmp(page, set ? src : zero_page, SNAP_PAGE))
			return common_errf(s->e, "restore", "shared mapping of %s: the file changed "
					   "since the snapshot (page at offset %" PRIu64 " differs)",
					   r->path, r->offset + p * SNAP_PAGE);
		src += set ? SNAP_PAGE : 0;
	}
	return 0;
}

static int fill_regions(struct rs *s)
{
	const struct snap_state *st = s->st;
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		if (!snap_region_has_content(s->root, st, i))
			continue;
		if (r->prot & SNAP_PROT_SHARED) {
			if (check_shared_region(s, r) < 0)
				return -1;
			continue;
		}
		uint64_t pages = (r->end - r->start) / SNAP_PAGE;
		const uint8_t *src = r->packed;
		uint64_t p = 0;
		while (p < pages) {
			int set = r->bitmap[p / 8] >> (p % 8) & 1;
			uint64_t q = p;
			while (q < pages && (r->bitmap[q / 8] >> (q % 8) & 1) == set)
				q++;
			uint64_t addr = r->start + p * SNAP_PAGE;
			if (set) {
				size_t len = (size_t)((q - p) * SNAP_PAGE);
				if (trace_tracee_write(&s->t, addr, src, len, s->e) < 0)
					return -1;
				src += len;
			} else if (r->kind == SNAP_REGION_FILE) {
				/* file pages start with the file's bytes; a page past the end of
				 * the file cannot be written and reads as zero anyway */
				for (uint64_t k = p; k < q; k++)
					trace_tracee_write(&s->t, r->start + k * SNAP_PAGE, zero_page,
						       SNAP_PAGE, NULL);
			}
			p = q;
		}
	}
	return 0;
}

static int protect_regions(struct rs *s)
{
	const struct snap_state *st = s->st;
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		uint32_t prot = r->prot & 7u, mapped = r->prot & SNAP_PROT_SHARED ?
			PROT_READ : PROT_READ | PROT_WRITE;
		if (r->kind == SNAP_REGION_VDSO || prot == mapped)
			continue;
		if (must(s, "mprotect", SYS_mprotect, r->start, r->end - r->start, prot, 0, 0, 0,
			 NULL) < 0)
			return -1;
	}
	return 0;
}

static const struct snap_fd *find_fd(const struct snap_state *st, uint32_t fd)
{
	for (size_t i = 0; i < st->nfds; i++)
		if (st->fds[i].fd == fd)
			return &st->fds[i];
	return NULL;
}

/* A descriptor of the tree's skeleton put in place: a pipe end or a copy of
 * the root's standard descriptor, from its holder. */
static int held_fd(struct rs *s, const struct snap_fd *f)
{
	uint32_t from = f->kind == SNAP_FD_PIPE
		? s->h->base + 2 * (uint32_t)f->pos + ((f->flags & O_ACCMODE) == O_WRONLY)
		: f->kind == SNAP_FD_SHM ? s->h->shm_fd + (uint32_t)f->size
		: f->kind == SNAP_FD_SHARED ? s->h->kobj_fd + (uint32_t)f->size - 1
		: s->h->base + 2 * (uint32_t)s->root->npipes + (uint32_t)f->pos;
	if (must(s, "dup3", SYS_dup3, from, f->fd, f->flags & O_CLOEXEC, 0, 0, 0, NULL) < 0)
		return -1;
	if (f->kind != SNAP_FD_STREAM &&
	    must(s, "fcntl(F_SETFL)", SYS_fcntl, f->fd, F_SETFL,
		 f->flags & (O_NONBLOCK | O_APPEND), 0, 0, 0, NULL) < 0)
		return -1;
	return 0;
}

/* A file, directory or device reopened by path at its offset. */
static int path_fd(struct rs *s, const struct snap_fd *f)
{
	int64_t tmp, ign;
	char what[SNAP_STR_MAX + 32];
	snprintf(what, sizeof what, "fd %u: open %s", f->fd, f->path);
	uint64_t fl = f->flags & ~(uint64_t)(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
	if (put_path(s, f->path) < 0 ||
	    must(s, what, SYS_openat, (uint64_t)AT_FDCWD, s->scratch, fl, 0, 0, 0, &tmp) < 0)
		return -1;
	if ((uint64_t)tmp != f->fd) {
		if (must(s, "dup3", SYS_dup3, (uint64_t)tmp, f->fd, f->flags & O_CLOEXEC, 0, 0, 0,
			 NULL) < 0 ||
		    call(s, SYS_close, (uint64_t)tmp, 0, 0, 0, 0, 0, &ign) < 0)
			return -1;
	}
	if (f->kind != SNAP_FD_FILE)
		return 0;
	char p[64];
	uint8_t h[32];
	snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)s->t.tid, f->fd);
	int hfd = open(p, O_RDONLY | O_CLOEXEC);
	if (hfd < 0)
		return common_errno(s->e, errno, "open %s", p);
	struct common_sha256 hs;
	common_sha256_init(&hs);
	uint8_t buf[65536];
	ssize_t n;
	while ((n = read(hfd, buf, sizeof buf)) > 0)
		common_sha256_update(&hs, buf, (size_t)n);
	close(hfd);
	common_sha256_final(&hs, h);
	if (memcmp(h, f->hash, 32))
		return common_errf(s->e, "restore", "fd %u: %s differs from the file the "
				   "snapshot saw", f->fd, f->path);
	return must(s, "lseek", SYS_lseek, f->fd, f->pos, SEEK_SET, 0, 0, 0, NULL);
}

/* The root's standard descriptors 0-2 stay (the supervisor's); version 3 has
 * no others. */
static int kept_std(const struct rs *s, const struct snap_fd *f)
{
	return f->kind == SNAP_FD_STREAM && s->k == 0 && f->fd <= 2;
}

static int restore_fds(struct rs *s)
{
	const struct snap_state *st = s->st;
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)s->t.tid);
	DIR *d = opendir(dir);
	if (!d)
		return common_errno(s->e, errno, "open %s", dir);
	int have[3] = { 0, 0, 0 }, rc = 0;
	struct dirent *de;
	uint32_t close_list[1024];
	size_t nclose = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		uint32_t fd = (uint32_t)strtoul(de->d_name, NULL, 10);
		const struct snap_fd *f = find_fd(st, fd);
		if (fd <= 2)
			have[fd] = 1;
		if ((!f || !kept_std(s, f)) && (!s->h || fd < s->h->base) && nclose < 1024)
			close_list[nclose++] = fd;
	}
	closedir(d);
	for (size_t i = 0; i < nclose && rc == 0; i++)
		rc = must(s, "close", SYS_close, close_list[i], 0, 0, 0, 0, 0, NULL);
	for (size_t i = 0; i < st->nfds && rc == 0; i++) {
		const struct snap_fd *f = &st->fds[i];
		if (f->kind == SNAP_FD_OBJECT)
			continue; /* snap_objects_restore, once every file is open */
		if (kept_std(s, f) || (f->kind == SNAP_FD_STREAM && !s->h))
			rc = f->fd <= 2 && have[f->fd] ? 0 :
				common_errf(s->e, "restore", "standard fd %u is not open", f->fd);
		else if (f->kind == SNAP_FD_PIPE && (f->flags & O_ACCMODE) == O_RDWR)
			rc = path_fd(s, f); /* a named FIFO's, made again at its path */
		else if (f->kind == SNAP_FD_STREAM || f->kind == SNAP_FD_PIPE || f->kind == SNAP_FD_SHM ||
			 f->kind == SNAP_FD_SHARED)
			rc = held_fd(s, f);
		else
			rc = path_fd(s, f);
	}
	/* the holders go once every descriptor is in place */
	size_t held = s->h ? 2 * s->root->npipes + 3 + s->root->nshms + s->root->nkobjs : 0;
	for (uint32_t fd = 0; rc == 0 && fd < held; fd++) {
		int64_t ign;
		rc = call(s, SYS_close, s->h->base + fd, 0, 0, 0, 0, 0, &ign);
	}
	return rc;
}

static int restore_signals(struct rs *s)
{
	const struct snap_state *st = s->st;
	int64_t tgid, tid, got = 0;
	/* signals the rebuild raised (SIGCHLD of the tree's skeleton) go first */
	uint64_t wait[3] = { ~0ull, 0, 0 };
	if (s->h && trace_tracee_write(&s->t, s->scratch, wait, sizeof wait, s->e) < 0)
		return -1;
	for (int i = 0; s->h && got >= 0 && i < SNAP_PENDING_MAX; i++)
		if (call(s, SYS_rt_sigtimedwait, s->scratch, 0, s->scratch + 8, 8, 0, 0, &got) < 0)
			return -1;
	/* queued signals go back in order, sent by the guest to itself (so any
	 * si_code is accepted), while everything is blocked */
	if (st->npending && (must(s, "getpid", SYS_getpid, 0, 0, 0, 0, 0, 0, &tgid) < 0 ||
			     must(s, "gettid", SYS_gettid, 0, 0, 0, 0, 0, 0, &tid) < 0))
		return -1;
	for (size_t i = 0; i < st->npending; i++) {
		const struct snap_sigpend *q = &st->pending[i];
		if (trace_tracee_write(&s->t, s->scratch, q->info, sizeof q->info, s->e) < 0)
			return -1;
		if (q->shared ? must(s, "rt_sigqueueinfo", SYS_rt_sigqueueinfo, (uint64_t)tgid, q->sig,
				     s->scratch, 0, 0, 0, NULL) < 0
			      : must(s, "rt_tgsigqueueinfo", SYS_rt_tgsigqueueinfo, (uint64_t)tgid,
				     (uint64_t)tid, q->sig, s->scratch, 0, 0, NULL) < 0)
			return -1;
	}
	/* an action already as the image has it needs no call (about 35 us each
	 * here): after an exec each is SIG_DFL or SIG_IGN with no flags, mask or
	 * restorer; the re-check compares every action */
	struct trace_status ps;
	unsigned long long ign = 0, cgt = ~0ull;
	if (trace_status_read(s->t.tid, &ps) == 0) {
		if (trace_status_num(&ps, "SigIgn", 16, &ign) < 0 ||
		    trace_status_num(&ps, "SigCgt", 16, &cgt) < 0)
			cgt = ~0ull;
		trace_status_free(&ps);
	}
	for (int sig = 1; sig <= SNAP_NSIG; sig++) {
		const struct snap_sigact *a = &st->sigact[sig - 1];
		unsigned long long bit = 1ull << (sig - 1);
		if (sig == 9 || sig == 19 ||
		    (!(cgt & bit) && !a->flags && !a->restorer && !a->mask &&
		     ((a->handler == (uint64_t)SIG_DFL && !(ign & bit)) ||
		      (a->handler == (uint64_t)SIG_IGN && (ign & bit)))))
			continue;
		char what[48];
		snprintf(what, sizeof what, "rt_sigaction(%d)", sig);
		if (trace_tracee_write(&s->t, s->scratch, &st->sigact[sig - 1], 32, s->e) < 0 ||
		    must(s, what, SYS_rt_sigaction, (uint64_t)sig, s->scratch, 0, 8, 0, 0, NULL) < 0)
			return -1;
	}
	uint8_t ss[24];
	memset(ss, 0, sizeof ss);
	/* SS_ONSTACK is derived by the kernel from the stack pointer */
	uint32_t fl = st->ss_flags & ~(uint32_t)SS_ONSTACK;
	memcpy(ss, &st->ss_sp, 8);
	memcpy(ss + 8, &fl, 4);
	memcpy(ss + 16, &st->ss_size, 8);
	if (trace_tracee_write(&s->t, s->scratch, ss, sizeof ss, s->e) < 0 ||
	    must(s, "sigaltstack", SYS_sigaltstack, s->scratch, 0, 0, 0, 0, 0, NULL) < 0)
		return -1;
	return 0;
}

/* A dynamically enabled component (AMX tile data) is the guest's to ask for
 * before the kernel accepts its state. */
static int xstate_permit(struct rs *s, uint64_t features)
{
	uint64_t f = snap_xstate_perm(features);
	if (!f)
		return 0;
	return must(s, "arch_prctl(ARCH_REQ_XCOMP_PERM)", SYS_arch_prctl, 0x1023, f, 0, 0, 0, 0,
		    NULL);
}

/* The last process of the tree that is rebuilt (0: the root). */
static size_t last_live(const struct snap_state *root)
{
	size_t last = 0;
	for (size_t k = 0; k < root->nprocs; k++)
		if (!root->procs[k].zombie)
			last = k + 1;
	return last;
}

/* Process k of the tree (0: the root, made from a fresh exec; others made by
 * the root's skeleton) rebuilt into st. */
static int rebuild(pid_t pid, const struct snap_state *st, struct snap_hosts *h, size_t k,
		   const struct snap_state *root, struct common_err *e)
{
	struct rs s = { .t = { .memfd = -1 }, .st = st, .e = e,
			.h = root->version >= 4 ? h : NULL, .k = k, .root = root };
	uint8_t cur[SNAP_XSTATE_MAX];
	size_t xlen = sizeof cur;
	uint64_t sb, vs, ve;
	int64_t r;
	int rc = -1, err;

	struct snap_xlayout xl;
	uint64_t xf = st->xfeatures;
	if (snap_xlayout_host(&xl, e) < 0 || snap_xstate_fit(&xl, &xf, st->xstate, e) < 0)
		return -1;
	memset(cur, 0, sizeof cur);
	if ((err = trace_xstate_get(pid, cur, &xlen)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGSET NT_X86_XSTATE of %d", (int)pid);
	if (snap_xstate_to_host(&xl, xf, st->xstate, cur, xlen, e) < 0)
		return -1;
	if (trace_proc_start_brk(pid, &sb, e) < 0)
		return -1;
	if (sb != st->start_brk)
		return common_errf(e, "restore", "brk starts at %#" PRIx64 ", the snapshot's at %#"
				   PRIx64 " (different image or address randomisation on)",
				   sb, st->start_brk);
	if ((err = trace_sigmask_set(pid, SNAP_INJECT_MASK)) < 0)
		return common_errno(e, -err, "PTRACE_SETSIGMASK");
	if (trace_tracee_open(&s.t, pid, e) < 0)
		return -1;
	/* a forked process's heap is its parent's: let go of while still mapped
	 * (brk cannot shrink over a hole), grown again below */
	if (trace_tracee_find_syscall(&s.t, e) < 0 || xstate_permit(&s, xf) < 0 ||
	    (k && call(&s, SYS_brk, st->start_brk, 0, 0, 0, 0, 0, &r) < 0) ||
	    unmap_all(&s, &vs, &ve) < 0)
		goto out;
	/* a forked process has its parent's brk until it sets its own */
	if (st->brk != st->start_brk || k) {
		if (call(&s, SYS_brk, st->brk, 0, 0, 0, 0, 0, &r) < 0)
			goto out;
		if ((uint64_t)r != st->brk) {
			common_errf(e, "restore", "brk(%#" PRIx64 ") gave %#" PRIx64, st->brk,
				    (uint64_t)r);
			goto out;
		}
	}
	/* a scratch page for path strings and structs, outside every region */
	for (uint64_t a = 0x10000000; !s.scratch; a += 0x100000) {
		if (a > ((uint64_t)1 << 46)) {
			common_errf(e, "restore", "no free address for a scratch page");
			goto out;
		}
		if (overlaps(st, a - SNAP_PAGE, a + 2 * SNAP_PAGE) || (a < ve && vs < a + SNAP_PAGE))
			continue;
		if (a >= st->start_brk && a < PAGE_UP(st->brk) + SNAP_PAGE)
			continue;
		if (must(&s, "mmap scratch", SYS_mmap, a, SNAP_PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0, &r) < 0)
			goto out;
		s.scratch = (uint64_t)r;
	}
	if (k == 0 && s.h && snap_tree_skeleton(&s.t, s.scratch, st, h, e) < 0)
		goto out;
	/* segments marked for removal again once the last process attached them */
	if (snap_segments_create(pid, st, e) < 0 || map_regions(&s, vs, ve) < 0 ||
	    fill_regions(&s) < 0 || (k == last_live(root) && snap_segments_finish(&s.t, root, e) < 0))
		goto out;
	/* each process lets go of the holder mapping once its own are made */
	if (s.h && h->shm_len &&
	    must(&s, "munmap shared memory holder", SYS_munmap, h->shm_at, h->shm_len, 0, 0, 0, 0,
		 NULL) < 0)
		goto out;
	if (common_fault_fails("restore-rebuild")) {
		common_errf(e, "restore", "failure injected after the memory was rebuilt");
		goto out;
	}
	/* the kernel fills the area's cpu words again once the guest runs */
	if (st->rseq_len &&
	    must(&s, "rseq registration", SYS_rseq, st->rseq_ptr, st->rseq_len, 0, st->rseq_sig,
		 0, 0, NULL) < 0)
		goto out;
	if (restore_fds(&s) < 0 || snap_objects_restore(&s.t, s.scratch, st, e) < 0 ||
	    snap_kobjs_watch(&s.t, s.scratch, st, root, k, e) < 0 ||
	    restore_signals(&s) < 0 ||
	    snap_threads_restore(&s.t, s.scratch, st, &xl, s.h ? h->threads[k] : NULL, e) < 0)
		goto out;
	if (put_path(&s, st->cwd) < 0 ||
	    must(&s, "chdir", SYS_chdir, s.scratch, 0, 0, 0, 0, 0, NULL) < 0 ||
	    must(&s, "umask", SYS_umask, st->umask, 0, 0, 0, 0, 0, NULL) < 0 ||
	    must(&s, "munmap scratch", SYS_munmap, s.scratch, SNAP_PAGE, 0, 0, 0, 0, NULL) < 0 ||
	    protect_regions(&s) < 0)
		goto out;
	for (int i = 0; i < SNAP_NRLIMIT; i++) {
		struct rlimit rl = { st->rlim[i][0], st->rlim[i][1] }, old;
		if (trace_prlimit(pid, i, NULL, &old) == 0 && old.rlim_cur == rl.rlim_cur &&
		    old.rlim_max == rl.rlim_max)
			continue;
		if ((err = trace_prlimit(pid, i, &rl, NULL)) < 0) {
			common_errno(e, -err, "restore rlimit %d", i);
			goto out;
		}
	}
	if ((err = trace_sigmask_set(pid, st->sigmask)) < 0) {
		common_errno(e, -err, "PTRACE_SETSIGMASK");
		goto out;
	}
	if ((err = trace_xstate_set(pid, cur, xlen)) < 0) {
		common_errno(e, -err, "PTRACE_SETREGSET NT_X86_XSTATE");
		goto out;
	}
	struct user_regs_struct regs;
	memcpy(&regs, st->regs, sizeof regs);
	if ((err = trace_regs_set(pid, &regs)) < 0) {
		common_errno(e, -err, "PTRACE_SETREGS");
		goto out;
	}
	rc = 0;
out:
	trace_tracee_close(&s.t);
	free(s.kept);
	return rc;
}

/* A root that ran another program than the image (sh's exec of a command)
 * runs it afresh first; its path is written just below the fresh stack's top. */
static int root_program(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	char p[64], exe[SNAP_STR_MAX];
	snprintf(p, sizeof p, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(p, exe, sizeof exe - 1);
	if (n < 0)
		return common_errno(e, errno, "readlink %s", p);
	exe[n] = 0;
	if (!strcmp(exe, st->exe))
		return 0;
	struct trace_tracee t = { .memfd = -1 };
	struct user_regs_struct r;
	int rc = trace_tracee_open(&t, pid, e), err;
	if (rc == 0 && (err = trace_regs_get(pid, &r)) < 0)
		rc = common_errno(e, -err, "PTRACE_GETREGS of %d", (int)pid);
	if (rc == 0)
		rc = trace_tracee_find_syscall(&t, e);
	if (rc == 0)
		rc = snap_exec_program(&t, (r.rsp - 2 * SNAP_PAGE) & ~(uint64_t)15, st->exe, e);
	trace_tracee_close(&t);
	return rc;
}

int snap_restore(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	struct snap_hosts h;
	memset(&h, 0, sizeof h);
	/* files there by path are reopened by the rebuild */
	if (snap_tmps_write(pid, st, e) < 0 || (st->version >= 4 && root_program(pid, st, e) < 0))
		return -1;
	int rc = rebuild(pid, st, &h, 0, st, e);
	for (size_t k = 0; rc == 0 && k < st->nprocs; k++)
		if (!st->procs[k].zombie)
			rc = rebuild(h.proc[k], &st->procs[k], &h, k + 1, st, e);
	snap_hosts_free(&h);
	return rc;
}

/* Resource limits sbx-run derives from the lease (memory, table_elements,
 * --max-procs): the fresh exec of the target run already has them. */
static const int target_rlimits[] = { RLIMIT_AS, RLIMIT_NOFILE, RLIMIT_NPROC };
#define NTARGET (sizeof target_rlimits / sizeof target_rlimits[0])

/* A state that cannot live within the target's bounds is refused before the
 * rebuild, naming the dimension. */
static int fits_target(const struct snap_state *st, const struct rlimit *t,
		       struct common_err *e)
{
	uint64_t mapped = 0;
	for (size_t i = 0; i < st->nregions; i++)
		mapped += st->regions[i].end - st->regions[i].start;
	if (t[0].rlim_cur != RLIM_INFINITY && mapped > t[0].rlim_cur)
		return common_errf(e, "restore", "memory: the snapshot maps %llu bytes, the target "
				   "run's address-space bound is %llu", (unsigned long long)mapped,
				   (unsigned long long)t[0].rlim_cur);
	if (st->nfds && t[1].rlim_cur != RLIM_INFINITY && st->fds[st->nfds - 1].fd >= t[1].rlim_cur)
		return common_errf(e, "restore", "table_elements: the snapshot has descriptor %u open, "
				   "the target run allows descriptors below %llu",
				   st->fds[st->nfds - 1].fd, (unsigned long long)t[1].rlim_cur);
	return 0;
}

int snap_restore_checked(pid_t pid, const struct snap_state *st, const char *ns_dir,
			 const struct snap_image *want, struct common_err *e)
{
	struct rlimit target[NTARGET];
	int err;
	for (size_t i = 0; i < NTARGET; i++)
		if ((err = trace_prlimit(pid, target_rlimits[i], NULL, &target[i])) < 0)
			return common_errno(e, -err, "read the target's rlimit %d", target_rlimits[i]);
	if (fits_target(st, target, e) < 0)
		return -1;
	struct snap_state bounded = *st;
	uint32_t mask = 0;
	for (size_t i = 0; i < NTARGET; i++) {
		bounded.rlim[target_rlimits[i]][0] = target[i].rlim_cur;
		bounded.rlim[target_rlimits[i]][1] = target[i].rlim_max;
		mask |= 1u << target_rlimits[i];
	}
	if (snap_restore(pid, &bounded, e) < 0)
		return -1;
	struct snap_capture_opts o = { .meta = st->meta, .ns_dir = ns_dir, .rlim_mask = mask,
				       .rlim = st->rlim, .version = st->version, .expect = st,
				       .determ = st->determ, .determ_len = st->determ_len };
	uint64_t differs;
	/* compared with the image just verified, streamed: nothing hashed again,
	 * no image-sized buffer */
	if (snap_capture_compare(pid, &o, want, &differs, e) < 0) {
		common_err_context(e, "re-capture after restore");
		return -1;
	}
	if (differs == UINT64_MAX)
		return 0;
	const char *dbg = getenv("SBX_SNAP_DEBUG");
	struct snap_image im;
	if (dbg && snap_capture(pid, &o, &im, NULL) == 0) {
		/* for diagnosing a mismatch: the rebuilt encoding */
		common_write_atomic(dbg, im.bytes, im.len, 0600, NULL);
		snap_image_free(&im);
	}
	char hex[65];
	common_hex(want->digest, 32, hex);
	return common_errf(e, "restore", "rebuilt state differs from snapshot %s at byte %" PRIu64
			   " of %zu", hex, differs, want->len);
}

int snap_cells_write(const struct snap_state *st, const char *dir, struct common_err *e)
{
	if (common_mkdir_p(dir, 0755, e) < 0)
		return -1;
	for (size_t i = 0; i < st->ncells; i++) {
		const struct snap_cell *c = &st->cells[i];
		char *path = common_xasprintf("%s/%s", dir, c->key);
		char *slash = strrchr(path, '/');
		int rc = 0;
		if (slash > path + strlen(dir)) {
			*slash = 0;
			rc = common_mkdir_p(path, 0755, e);
			*slash = '/';
		}
		if (rc == 0)
			rc = common_write_atomic(path, c->val, (size_t)c->len, 0644, e);
		free(path);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Undo snap_cells_write in a namespace that was empty: the cells, then the
 * directories they made, deepest first (one still holding something stays). */
void snap_cells_remove(const struct snap_state *st, const char *dir)
{
	for (size_t i = st->ncells; i-- > 0;) {
		char *path = common_xasprintf("%s/%s", dir, st->cells[i].key);
		(void)unlink(path);
		for (char *slash; (slash = strrchr(path, '/')) && slash > path + strlen(dir);) {
			*slash = 0;
			if (rmdir(path) < 0)
				break;
		}
		free(path);
	}
}
