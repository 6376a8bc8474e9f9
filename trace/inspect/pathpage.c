/* Decided path strings out of the guest's reach (SPEC §6.3). A page the guest
 * maps private and read-only is still its own: mprotect() makes it writable and
 * /proc/self/mem writes through it. Here the string goes into a memfd sealed
 * against writes (F_SEAL_WRITE: no write, no writable mapping, no hole punched,
 * by any descriptor), mapped MAP_SHARED and PROT_READ: the kernel then denies
 * the mapping VM_MAYWRITE, so mprotect(PROT_WRITE) fails and a forced write
 * through /proc/self/mem finds no copy-on-write to make. What is left is
 * replacing the page: munmap, mremap, mmap MAP_FIXED, shmat SHM_REMAP and
 * remap_file_pages stop while path decisions are made (TRACE_FILTER_REMAP) and
 * are refused over a live page of the caller's memory; one that passed its stop
 * before the page was placed is still in flight until its exit stop, and a page
 * placed in its range is placed again. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "trace/inspect/inspect-internal.h"
#include "trace/tracee/tracee.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* 6.9: the thread's own descriptor table, not its leader's */
#endif
#ifndef PROCMAP_QUERY /* 6.11 <linux/fs.h>, newer than the system headers */
struct procmap_query {
	uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size;
	uint64_t vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_SHARED 0x08
#endif
#define ERESTART_FIRST 512 /* ERESTARTSYS ... ERESTART_RESTARTBLOCK (include/linux/errno.h) */
#define ERESTART_LAST 516
#define PLACE_TRIES 8 /* pages met by a remap in flight before the call is refused */
#define SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct range {
	pid_t tid;
	uint64_t start, end;
	int arg;       /* the argument register pointed at the page, -1: none */
	uint64_t orig; /* the guest's own pointer it held */
};
struct inspect_pages {
	struct range *live, *flight; /* placed pages; remap calls let run, not yet back */
	size_t nlive, nflight, cap_live, cap_flight;
};

struct inspect_pages *inspect_pages_new(void)
{
	return common_xcalloc(1, sizeof(struct inspect_pages));
}

void inspect_pages_free(struct inspect_pages *r)
{
	if (!r)
		return;
	free(r->live);
	free(r->flight);
	free(r);
}

static void push(struct range **v, size_t *n, size_t *cap, struct range x)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 16;
		*v = common_xrealloc(*v, *cap * sizeof **v);
	}
	(*v)[(*n)++] = x;
}

/* Drop tid's entries; with unmap, unmap each in the stopped thread first. */
static void drop(struct range *v, size_t *n, pid_t tid, int unmap, int at_exit)
{
	size_t k = 0;
	for (size_t i = 0; i < *n; i++) {
		if (v[i].tid != tid) {
			v[k++] = v[i];
			continue;
		}
		uint64_t a[6] = {v[i].start, v[i].end - v[i].start};
		int64_t ret;
		if (unmap && at_exit)
			trace_inject_at_exit(tid, SYS_munmap, a, &ret);
		else if (unmap)
			trace_inject_at_entry(tid, SYS_munmap, a, &ret);
	}
	*n = k;
}

/* A call the kernel will restart (a signal came) reads its path again: the guest's
 * own pointer goes back, so the restart stops and is decided afresh, not sent to
 * a page unmapped now. */
static void restore_args(const struct inspect_pages *r, pid_t tid)
{
	struct user_regs_struct g;
	uint64_t a[6];

	size_t i = 0;
	while (i < r->nlive && !(r->live[i].tid == tid && r->live[i].arg >= 0))
		i++;
	if (i == r->nlive) /* no argument of its points at a page: nothing to put back */
		return;
	if (trace_regs_get(tid, &g) < 0 || (int64_t)g.rax < -ERESTART_LAST ||
	    (int64_t)g.rax > -ERESTART_FIRST)
		return;
	a[0] = g.rdi, a[1] = g.rsi, a[2] = g.rdx, a[3] = g.r10, a[4] = g.r8, a[5] = g.r9;
	for (size_t i = 0; i < r->nlive; i++)
		if (r->live[i].tid == tid && r->live[i].arg >= 0)
			a[r->live[i].arg] = r->live[i].orig;
	trace_regs_set_args(&g, a);
	trace_regs_set(tid, &g);
}

void inspect_pages_drop(struct inspect_pages *r, pid_t tid, int at_exit)
{
	if (at_exit)
		restore_args(r, tid);
	drop(r->live, &r->nlive, tid, 1, at_exit);
}

void inspect_pages_forget(struct inspect_pages *r, pid_t tid)
{
	drop(r->live, &r->nlive, tid, 0, 0);
	drop(r->flight, &r->nflight, tid, 0, 0);
}

void inspect_pages_call_done(struct inspect_pages *r, pid_t tid)
{
	drop(r->flight, &r->nflight, tid, 0, 0);
}

/* Two threads share one memory: the same thread group, or CLONE_VM (vfork). */
static int same_mm(pid_t a, pid_t b)
{
	return a == b || syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0) == 0;
}

static uint64_t end_of(uint64_t start, uint64_t len)
{
	uint64_t e = start + len;
	if (e < start || e > UINT64_MAX - 4095)
		return UINT64_MAX;
	return (e + 4095) & ~(uint64_t)4095;
}

/* The address ranges a call may unmap or replace: 0, 1 or 2 of them. */
static int remap_ranges(const struct trace_stop *st, struct range out[2])
{
	const uint64_t *a = st->args;
	int n = 0;

	switch (st->arch_ok ? st->nr : -1) {
	case TRACE_SYS_munmap:
	case TRACE_SYS_remap_file_pages:
		out[n++] = (struct range){st->tid, a[0] & ~4095ull, end_of(a[0], a[1]), -1, 0};
		break;
	case TRACE_SYS_mmap:
		if ((uint32_t)a[3] & MAP_FIXED)
			out[n++] = (struct range){st->tid, a[0] & ~4095ull, end_of(a[0], a[1]), -1, 0};
		break;
	case TRACE_SYS_mremap:
		out[n++] = (struct range){st->tid, a[0] & ~4095ull, end_of(a[0], a[1] > a[2] ? a[1] : a[2]), -1, 0};
		if ((uint32_t)a[3] & MREMAP_FIXED)
			out[n++] = (struct range){st->tid, a[4] & ~4095ull, end_of(a[4], a[2]), -1, 0};
		break;
	case TRACE_SYS_shmat: /* the segment's size is not in the call: all above it */
		if ((uint32_t)a[2] & SHM_REMAP)
			out[n++] = (struct range){st->tid, a[1] & ~4095ull, UINT64_MAX, -1, 0};
		break;
	}
	return n;
}

/* The lowest start of the entries of v that overlap x in x's memory; 0: none. */
static uint64_t overlaps(const struct range *v, size_t n, const struct range *x)
{
	uint64_t low = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].start < x->end && x->start < v[i].end && same_mm(v[i].tid, x->tid) &&
		    (!low || v[i].start < low))
			low = v[i].start ? v[i].start : 1;
	return low;
}

int inspect_pages_remap_errno(struct inspect_pages *r, const struct trace_stop *st, int *flight)
{
	struct range x[2];
	int n = remap_ranges(st, x);

	*flight = n > 0;
	for (int i = 0; i < n; i++)
		if (overlaps(r->live, r->nlive, &x[i]))
			return EPERM; /* as for a sealed mapping (mseal) */
	for (int i = 0; i < n; i++) /* let run: it may land after a page is placed */
		push(&r->flight, &r->nflight, &r->cap_flight, x[i]);
	return 0;
}

/* The guest's descriptor fd of tid, as a descriptor of ours. */
static int take_fd(pid_t tid, int fd)
{
	int pfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD), err;
	if (pfd < 0)
		return -errno;
	int f = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	err = errno;
	close(pfd);
	return f < 0 ? -err : f;
}

/* The memfd f, fresh (no seals, empty), filled with s and sealed; its bytes
 * checked after the seal, when nothing can change them any more. */
static int fill_sealed(int f, const char *s, size_t len)
{
	struct stat sb;
	char *back = common_xcalloc(1, len);
	int rc = 0;

	if (fstat(f, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size != 0 ||
	    fcntl(f, F_GET_SEALS) != 0)
		rc = -EAGAIN; /* not the memfd just made: its number was reused meanwhile */
	else if (ftruncate(f, (off_t)len) < 0 || pwrite(f, s, strlen(s) + 1, 0) != (ssize_t)strlen(s) + 1)
		rc = -errno;
	else if (fcntl(f, F_ADD_SEALS, SEALS) < 0)
		rc = errno == EBUSY ? -EAGAIN : -errno; /* a writable mapping of it exists */
	else if (pread(f, back, len, 0) != (ssize_t)len || strcmp(back, s) != 0)
		rc = -EAGAIN;
	for (size_t i = strlen(s); rc == 0 && i < len; i++)
		if (back[i])
			rc = -EAGAIN; /* written before the seal */
	free(back);
	return rc;
}

/* The mapping at addr in tid is f's, whole, shared and not writable. */
static int mapped_is(pid_t tid, uint64_t addr, size_t len, int f)
{
	char p[64];
	struct stat sb;
	struct procmap_query q = {.size = sizeof q, .query_addr = addr};

	snprintf(p, sizeof p, "/proc/%d/maps", (int)tid);
	int m = open(p, O_RDONLY | O_CLOEXEC), rc;
	if (m < 0)
		return -errno;
	rc = ioctl(m, PROCMAP_QUERY, &q) < 0 ? -errno : 0;
	close(m);
	if (rc < 0)
		return rc;
	if (fstat(f, &sb) < 0)
		return -errno;
	if (q.vma_start != addr || q.vma_end != addr + len || q.inode != sb.st_ino ||
	    makedev(q.dev_major, q.dev_minor) != sb.st_dev ||
	    (q.vma_flags & (PROCMAP_QUERY_VMA_WRITABLE | PROCMAP_QUERY_VMA_SHARED)) !=
		    PROCMAP_QUERY_VMA_SHARED)
		return -EAGAIN;
	return 0;
}

/* A syscall run in tid at its seccomp stop: -ESRCH when the thread is gone. */
static int inject(pid_t tid, long nr, const uint64_t a[6], int64_t *ret)
{
	int rc = trace_inject_at_entry(tid, nr, a, ret);
	return rc < 0 && rc != -EIO ? -ESRCH : rc;
}

/* One try: memfd_create in the guest, filled and sealed from here, mapped
 * there (at *hint exactly, when not 0), its descriptor closed. 1 when the page
 * landed in a remap in flight or its place was taken: try again at *hint. */
static int place_once(struct inspect_pages *r, pid_t tid, uint64_t name_addr, const char *s,
		      size_t len, uint64_t *hint, uint64_t *addr)
{
	uint64_t a[6] = {name_addr, MFD_CLOEXEC | MFD_ALLOW_SEALING};
	int64_t fd, got, ret;
	int rc, f;

	if ((rc = inject(tid, SYS_memfd_create, a, &fd)) < 0)
		return rc;
	if (fd < 0)
		return (int)fd;
	if ((f = take_fd(tid, (int)fd)) < 0) {
		rc = f;
		goto close_guest;
	}
	if ((rc = fill_sealed(f, s, len)) < 0)
		goto close_ours;
	uint64_t m[6] = {*hint, len, PROT_READ, MAP_SHARED | (*hint ? MAP_FIXED_NOREPLACE : 0),
			 (uint64_t)fd, 0};
	if ((rc = inject(tid, SYS_mmap, m, &got)) < 0)
		goto close_ours;
	if (got < 0 && got > -4096) {
		rc = got == -EEXIST && *hint > len ? 1 : (int)got;
		*hint -= len;
		goto close_ours;
	}
	struct range x = {tid, (uint64_t)got, (uint64_t)got + len, -1, 0};
	/* live from here: a remap stopping now is refused */
	push(&r->live, &r->nlive, &r->cap_live, x);
	rc = mapped_is(tid, x.start, len, f);
	uint64_t low = overlaps(r->flight, r->nflight, &x);
	if (low) {
		r->nlive--; /* theirs to unmap (it may be gone already): never unmapped by us */
		rc = low > len ? 1 : -EAGAIN;
		*hint = (low - len) & ~4095ull; /* below every range in flight there */
	}
	*addr = x.start;
close_ours:
	close(f);
close_guest:
	a[0] = (uint64_t)fd;
	int cr = inject(tid, SYS_close, a, &ret);
	return cr < 0 && rc >= 0 ? cr : rc;
}

int inspect_page_place(struct inspect_pages *r, pid_t tid, uint64_t name_addr, const char *s,
		       uint64_t *addr)
{
	size_t len = (strlen(s) + 1 + 4095) & ~(size_t)4095;
	uint64_t hint = 0;
	int rc = 1;

	for (int i = 0; i < PLACE_TRIES && rc == 1; i++)
		rc = place_once(r, tid, name_addr, s, len, &hint, addr);
	return rc == 1 ? -EAGAIN : rc;
}

int inspect_path_arg(struct inspect_pages *r, const struct trace_stop *st, long nr, int k,
		     const char *s, uint64_t args[6])
{
	const struct trace_sysinfo *si = trace_sys_by_nr(nr);
	int seen = 0;

	for (int i = 0; si && i < 6; i++) {
		if (si->arg[i] != TRACE_ARG_PATH || seen++ != k)
			continue;
		/* memfd_create's name: the NUL ending the guest's own string */
		uint64_t name = st->args[i] + (st->raw[k] ? strlen(st->raw[k]) : 0);
		int rc = inspect_page_place(r, st->tid, name, s, &args[i]);
		if (rc == 0) /* placed last: what a restart of the call gets back */
			r->live[r->nlive - 1].arg = i, r->live[r->nlive - 1].orig = st->args[i];
		return rc;
	}
	return -EINVAL;
}

int inspect_real_paths(const struct trace_stop *st, char real[2][PATH_MAX])
{
	int err = 0;

	for (int k = 0; k < 2; k++) {
		int r = 0;
		real[k][0] = 0;
		if (st->sys && st->path[k] && st->path[k][0])
			r = trace_path_real(st->tid, st->path[k],
					    trace_sys_follows_last(st->sys, st->args, k), real[k]);
		if (r < 0)
			real[k][0] = 0;
		if (r == -ENOTDIR)
			err = ENOTDIR;
	}
	return err;
}

const char *inspect_page_form(const struct trace_stop *st, int k, const char real[2][PATH_MAX])
{
	const char *p = st->path[k];

	/* an exec keeps its spelling (a script's $0; the exec event names the file);
	 * /proc/PID is read as the caller's own by the resolver, and a deleted
	 * directory has no path left: those keep theirs too */
	if (!real[k][0] || !st->raw[k][0] || (trace_sys_facts(st->nr) & TRACE_FACT_EXEC) ||
	    (!strncmp(p, "/proc/", 6) && p[6] >= '0' && p[6] <= '9') || strstr(p, " (deleted)"))
		return st->raw[k];
	return real[k];
}
