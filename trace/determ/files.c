/* sbx-run --deterministic (SPEC §9): what stat and getdents tell of files,
 * answered from the run instead of the host file system.
 *
 *   st_dev      a small number per host device, in the order the run first
 *               sees each
 *   st_ino      a number per (device, inode), in the order the run first sees
 *               each (d_ino of getdents64 too): a copy of the inputs made anew
 *               for every run gets the same numbers
 *   times       a time the run wrote (at or after its start, not after the
 *               host's now) becomes a logical time: the first process to see
 *               that (file, time) gives it the later of its own clock and the
 *               last such time plus 1 µs, and every process that sees it is
 *               moved to at least it (a file is never in a reader's future);
 *               an older time (the inputs') is kept as the mtime; atime and
 *               birth time are the mtime, ctime is the mtime unless the run
 *               changed it. Objects under /ns (lease storage) and what is not a
 *               file or symlink (directories, pipes, sockets, devices) report
 *               the epoch.
 *   mount ids   statx's stx_mnt_id is cleared from its mask and zeroed
 *   order       getdents64 entries sorted by name within each call
 * A first sight waits for its task's turn in the parallel schedule (determ.c
 * probes for one first): the numbers are given in one order in every run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include "trace/determ/determ.h"
#include "trace/determ/determ-internal.h"
#include "trace/tracee/tracee.h"

#define DENTS_MAX (1u << 20)  /* getdents64 buffer we sort */
#define FILES_MAX (1u << 19)  /* most identities and times remembered (40 bytes each, half full) */
#define STAMP_GAP_NS 1000     /* logical times the run gives are this far apart */
#define VDEV_MAJOR 0          /* virtual devices: 0:1, 0:2, ... */
#define VINO_FIRST 2          /* the first virtual inode number (root directories' usual) */

enum key_kind { K_DEV = 1, K_INO, K_TIME };

struct entry {
	uint64_t k[4];  /* kind, device, inode, time (ns); k[0] == 0: free */
	uint64_t v;
};

struct trace_determ_files {
	struct entry *tab;
	size_t cap, used;
	uint64_t ndev, nino;
	int64_t start_ns;       /* host wall clock when the run began */
	uint64_t last;          /* the latest logical time given (ns since the run began) */
	int full;               /* the table reached FILES_MAX: later sights fell back */
	int probe;              /* trace_determ_files_probe: look up, add nothing */
	int missing;            /* a probe's lookup found no entry */
};

/* The run's start on the host's wall clock, as files are stamped. */
static int64_t run_start(void)
{
	struct timespec t0, ts, nap = { 0, 250000 };
	/* File systems stamp from the coarse clock (or a finer one, never behind
	 * it): the run starts at its next tick, so a file written before sbx-run
	 * began (its standard output, say) is never taken for one the run wrote. */
	clock_gettime(CLOCK_REALTIME_COARSE, &t0);
	for (int i = 0; i < 400; i++) {
		clock_gettime(CLOCK_REALTIME_COARSE, &ts);
		if (ts.tv_sec != t0.tv_sec || ts.tv_nsec != t0.tv_nsec)
			break;
		nanosleep(&nap, NULL);
	}
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct trace_determ_files *trace_determ_files_new(void)
{
	struct trace_determ_files *f = common_xcalloc(1, sizeof *f);
	f->start_ns = run_start();
	return f;
}

void trace_determ_files_free(struct trace_determ_files *f)
{
	if (!f)
		return;
	free(f->tab);
	free(f);
}

int trace_determ_files_full(const struct trace_determ_files *f)
{
	return f->full;
}

void trace_determ_files_probe(struct trace_determ_files *f)
{
	f->probe = 1;
	f->missing = 0;
}

int trace_determ_files_probe_end(struct trace_determ_files *f)
{
	f->probe = 0;
	return f->missing;
}

static uint64_t mix(const uint64_t k[4])
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 4; i++) {
		h ^= k[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

static struct entry *slot_of(struct entry *tab, size_t cap, const uint64_t k[4])
{
	size_t i = (size_t)mix(k) & (cap - 1);
	while (tab[i].k[0] && memcmp(tab[i].k, k, sizeof tab[i].k))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static int grow(struct trace_determ_files *f)
{
	size_t cap = f->cap ? 2 * f->cap : 1024;
	struct entry *t = common_xcalloc(cap, sizeof *t);
	for (size_t i = 0; i < f->cap; i++)
		if (f->tab[i].k[0])
			*slot_of(t, cap, f->tab[i].k) = f->tab[i];
	free(f->tab);
	f->tab = t;
	f->cap = cap;
	return 0;
}

/* The value kept for k; when new, fresh(f) is kept and returned, unless the
 * table is full (0: the caller keeps the host's value). */
static uint64_t lookup(struct trace_determ_files *f, const uint64_t k[4],
		       uint64_t (*fresh)(struct trace_determ_files *, void *), void *arg)
{
	if (f->cap) {
		struct entry *e = slot_of(f->tab, f->cap, k);
		if (e->k[0])
			return e->v;
	}
	if (f->probe) {
		f->missing = 1;
		return 1; /* any value: the probe's answer is thrown away */
	}
	if (f->used >= FILES_MAX) {
		f->full = 1;
		return 0;
	}
	if (2 * (f->used + 1) > f->cap)
		grow(f);
	struct entry *e = slot_of(f->tab, f->cap, k);
	memcpy(e->k, k, sizeof e->k);
	e->v = fresh(f, arg);
	f->used++;
	return e->v;
}

static uint64_t next_dev(struct trace_determ_files *f, void *arg)
{
	(void)arg;
	return ++f->ndev;
}

static uint64_t next_ino(struct trace_determ_files *f, void *arg)
{
	(void)arg;
	return VINO_FIRST + f->nino++;
}

/* a time first seen now by a process at clock *ns */
static uint64_t next_time(struct trace_determ_files *f, void *arg)
{
	uint64_t at = *(uint64_t *)arg, v = f->last + STAMP_GAP_NS;
	f->last = at > v ? at : v;
	return f->last;
}

/* a time its writer numbers: the writer's clock */
static uint64_t writer_time(struct trace_determ_files *f, void *arg)
{
	(void)f;
	return *(uint64_t *)arg;
}

static uint64_t vdev(struct trace_determ_files *f, uint64_t dev)
{
	uint64_t k[4] = { K_DEV, dev, 0, 0 };
	uint64_t n = lookup(f, k, next_dev, NULL);
	return n ? makedev(VDEV_MAJOR, n) : dev;
}

static uint64_t vino(struct trace_determ_files *f, uint64_t dev, uint64_t ino)
{
	uint64_t k[4] = { K_INO, dev, ino, 0 };
	uint64_t n = lookup(f, k, next_ino, NULL);
	return n ? n : ino;
}

struct vtime {
	int64_t sec;
	int64_t nsec;
};

/* A host time of file (dev, ino) as the run tells it: 1 and *out when the
 * run wrote it (start <= t <= now), 0 when it is older (or not a time). */
static int run_time(struct trace_determ_files *f, const struct trace_determ_view *v, uint64_t dev,
		    uint64_t ino, struct vtime t, int64_t now, struct vtime *out)
{
	if (t.sec < 0 || t.sec > INT64_MAX / 1000000000 - 1 || t.nsec < 0 || t.nsec >= 1000000000)
		return 0;
	int64_t ns = t.sec * 1000000000 + t.nsec;
	if (ns < f->start_ns || ns > now)
		return 0;
	uint64_t k[4] = { K_TIME, dev, ino, (uint64_t)ns };
	uint64_t at = *v->clock;
	uint64_t lt = lookup(f, k, next_time, &at);
	if (!lt)
		return 0;
	if (*v->clock < lt) /* what a process sees has happened, in its clock too */
		*v->clock = lt;
	uint64_t w = (uint64_t)v->epoch * 1000000000ull + lt;
	out->sec = (int64_t)(w / 1000000000ull);
	out->nsec = (int64_t)(w % 1000000000ull);
	return 1;
}

/* Whether tid's fd is open for writing (its fdinfo's flags). */
static int open_for_writing(pid_t tid, int fd)
{
	unsigned fl;
	return trace_fdinfo(tid, fd, NULL, &fl) == 0 && (fl & O_ACCMODE) != O_RDONLY;
}

void trace_determ_files_written(struct trace_determ_files *f, const struct trace_determ_view *v,
				pid_t tid, int fd)
{
	char path[64];
	struct stat sb;
	struct timespec now;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
	if (v->in_ns || stat(path, &sb) < 0 || !S_ISREG(sb.st_mode) || !open_for_writing(tid, fd))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t n = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	const struct timespec *t[2] = { &sb.st_mtim, &sb.st_ctim };
	*v->clock += STAMP_GAP_NS; /* its next write is a later time */
	for (int i = 0; i < 2; i++) {
		int64_t ns = (int64_t)t[i]->tv_sec * 1000000000 + t[i]->tv_nsec;
		uint64_t k[4] = { K_TIME, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)ns };
		if (ns >= f->start_ns && ns <= n)
			lookup(f, k, writer_time, v->clock);
	}
}

/* mtime, ctime as the run tells them; atime and btime are the mtime */
static void answer_times(struct trace_determ_files *f, const struct trace_determ_view *v,
			 uint32_t mode, uint64_t dev, uint64_t ino, struct vtime *m, struct vtime *c)
{
	struct timespec now;
	/* pipes, sockets, devices, /proc's links: stamped at every write, in the
	 * host's clock ticks, and no build's input; directories: stamped by every
	 * name any task makes in them, unordered opens too, so a look races them */
	if (v->in_ns || !(S_ISREG(mode) || S_ISLNK(mode))) {
		m->sec = c->sec = v->epoch;
		m->nsec = c->nsec = 0;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t n = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	struct vtime rm = *m, rc = *c;
	if (!run_time(f, v, dev, ino, rm, n, m))
		*m = rm;
	if (!run_time(f, v, dev, ino, rc, n, c))
		*c = *m; /* an input's ctime says when it was copied in, not what it is */
}

static int64_t get64(const uint8_t *b, size_t off)
{
	int64_t x;
	memcpy(&x, b + off, 8);
	return x;
}

static uint32_t get32(const uint8_t *b, size_t off)
{
	uint32_t x;
	memcpy(&x, b + off, 4);
	return x;
}

static void put64(uint8_t *b, size_t off, uint64_t x)
{
	memcpy(b + off, &x, 8);
}

static void put32(uint8_t *b, size_t off, uint32_t x)
{
	memcpy(b + off, &x, 4);
}

/* struct stat (x86-64, 144 bytes): st_dev 0, st_ino 8, st_mode 24, st_atim 72, st_mtim 88,
 * st_ctim 104 (each {s64 sec, s64 nsec}) */
void trace_determ_files_stat(struct trace_determ_files *f, const struct trace_determ_view *v,
			     uint8_t st[144])
{
	uint64_t dev = (uint64_t)get64(st, 0), ino = (uint64_t)get64(st, 8);
	struct vtime m = { get64(st, 88), get64(st, 96) }, c = { get64(st, 104), get64(st, 112) };
	answer_times(f, v, get32(st, 24), dev, ino, &m, &c);
	put64(st, 0, vdev(f, dev));
	put64(st, 8, vino(f, dev, ino));
	put64(st, 72, (uint64_t)m.sec);
	put64(st, 80, (uint64_t)m.nsec);
	put64(st, 88, (uint64_t)m.sec);
	put64(st, 96, (uint64_t)m.nsec);
	put64(st, 104, (uint64_t)c.sec);
	put64(st, 112, (uint64_t)c.nsec);
}

/* struct statx (256 bytes): stx_mask 0, stx_mode 0x1c (u16), stx_ino 32, atime 0x40, btime 0x50,
 * ctime 0x60, mtime 0x70 (each {s64 sec, u32 nsec, pad}), dev major 0x88,
 * minor 0x8c, stx_mnt_id 0x90 */
void trace_determ_files_statx(struct trace_determ_files *f, const struct trace_determ_view *v,
			      uint8_t sx[256])
{
	uint32_t mask = get32(sx, 0);
	uint64_t dev = makedev(get32(sx, 0x88), get32(sx, 0x8c)), ino = (uint64_t)get64(sx, 32);
	struct vtime m = { get64(sx, 0x70), get32(sx, 0x78) }, c = { get64(sx, 0x60), get32(sx, 0x68) };
	if (!(mask & STATX_MTIME))
		m = c;
	answer_times(f, v, (uint32_t)(uint16_t)get32(sx, 0x1c), dev, ino, &m, &c);
	uint64_t d = vdev(f, dev);
	put32(sx, 0x88, major(d));
	put32(sx, 0x8c, minor(d));
	if (mask & STATX_INO)
		put64(sx, 32, vino(f, dev, ino));
	for (size_t off = 0x40; off <= 0x70; off += 0x10) {
		static const uint32_t bit[4] = { STATX_ATIME, STATX_BTIME, STATX_CTIME, STATX_MTIME };
		const struct vtime *t = off == 0x60 ? &c : &m;
		if (mask & bit[(off - 0x40) / 0x10]) {
			put64(sx, off, (uint64_t)t->sec);
			put32(sx, off + 8, (uint32_t)t->nsec);
		}
	}
	/* mount ids count the host's mounts since boot: not the run's to tell */
	put32(sx, 0, mask & ~(uint32_t)(0x1000 | 0x4000)); /* STATX_MNT_ID, _UNIQUE */
	put64(sx, 0x90, 0);
}

/* linux_dirent64: d_ino 0, d_off 8, d_reclen 16, d_name 19; entries checked
 * by the caller */
static void dents_ino(struct trace_determ_files *f, uint64_t dev, uint8_t *b, size_t n)
{
	size_t o = 0;
	while (n - o >= 20) {
		uint16_t rl;
		memcpy(&rl, b + o + 16, 2);
		if (rl < 20 || rl > n - o)
			return;
		put64(b, o, vino(f, dev, (uint64_t)get64(b, o)));
		o += rl;
	}
}

struct dent {
	size_t off, len;
	const char *name;
};

static int dent_cmp(const void *x, const void *y)
{
	return strcmp(((const struct dent *)x)->name, ((const struct dent *)y)->name);
}

/* cpu1, cpu2, ...: the CPUs a one-CPU machine does not have */
static int other_cpu(const char *name)
{
	if (strncmp(name, "cpu", 3) || !name[3] || !strcmp(name + 3, "0"))
		return 0;
	for (const char *c = name + 3; *c; c++)
		if (*c < '0' || *c > '9')
			return 0;
	return 1;
}

/* The batch in, sorted into out; its entries (nv), or -1 when it is not the
 * kernel's layout. */
static int dents_sort(const uint8_t *in, size_t n, int one_cpu, uint8_t *out, size_t *len)
{
	struct dent *v = NULL;
	size_t nv = 0, cap = 0, o = 0;
	while (o < n) {
		uint16_t rl;
		if (n - o < 20)
			goto bad;
		memcpy(&rl, in + o + 16, 2);
		if (rl < 20 || rl > n - o || !memchr(in + o + 19, 0, rl - 19u))
			goto bad; /* not the kernel's layout: leave it alone */
		if (nv == cap) {
			cap = cap ? 2 * cap : 64;
			v = common_xrealloc(v, cap * sizeof *v);
		}
		if (!one_cpu || !other_cpu((const char *)in + o + 19))
			v[nv++] = (struct dent){ o, rl, (const char *)in + o + 19 };
		o += rl;
	}
	size_t *slot = common_xcalloc(nv ? nv : 1, sizeof *slot);
	for (size_t i = 0; i < nv; i++)
		slot[i] = v[i].off;
	qsort(v, nv, sizeof *v, dent_cmp);
	o = 0;
	for (size_t i = 0; i < nv; i++) {
		memcpy(out + o, in + v[i].off, v[i].len);
		/* the i-th slot keeps the kernel's i-th d_off (seekdir cookies) */
		memcpy(out + o + 8, in + slot[i] + 8, 8);
		o += v[i].len;
	}
	free(slot);
	free(v);
	*len = o;
	return 0;
bad:
	free(v);
	return -1;
}

size_t trace_determ_files_getdents(struct trace_determ_files *f, struct trace_guest *g,
				   uint64_t addr, size_t n, int one_cpu, int fd)
{
	size_t res = n, o = 0;
	if (n == 0 || n > DENTS_MAX)
		return n;
	uint8_t *in = common_xmalloc(n), *out = common_xmalloc(n);
	if (trace_guest_read(g, addr, in, n) == (ssize_t)n && dents_sort(in, n, one_cpu, out, &o) == 0) {
		char link[64];
		struct stat dir;
		snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)trace_guest_tid(g), fd);
		if (stat(link, &dir) == 0) /* d_ino as stat tells it */
			dents_ino(f, dir.st_dev, out, o);
		if (f->probe)
			res = o;
		else if (o && (trace_mem_write(trace_guest_tid(g), addr, out, o) == (ssize_t)o ||
			       trace_guest_write(g, addr, out, o) == (ssize_t)o))
			res = o;
	}
	free(in);
	free(out);
	return res;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	for (int i = 0; i < 4; i++)
		if (x->k[i] != y->k[i])
			return x->k[i] < y->k[i] ? -1 : 1;
	return 0;
}

/* u64 last, ndev, nino, u32 full, u32 n, entry[n] sorted by key = {u64 kind,
 * device, inode, time, value}: one encoding whatever the table's history. Not
 * the start: a restored run's inputs are those older than its own start. */
void trace_determ_files_save(const struct trace_determ_files *f, struct codec_buf *b)
{
	struct entry *v = common_xcalloc(f->used + 1, sizeof *v);
	size_t n = 0;
	for (size_t i = 0; i < f->cap; i++)
		if (f->tab[i].k[0])
			v[n++] = f->tab[i];
	qsort(v, n, sizeof *v, cmp_entry);
	codec_put_u64(b, f->last);
	codec_put_u64(b, f->ndev);
	codec_put_u64(b, f->nino);
	codec_put_u32(b, (uint32_t)f->full);
	codec_put_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < 4; k++)
			codec_put_u64(b, v[i].k[k]);
		codec_put_u64(b, v[i].v);
	}
	free(v);
}

struct trace_determ_files *trace_determ_files_load(struct codec_rd *r)
{
	struct trace_determ_files *f = common_xcalloc(1, sizeof *f);
	uint32_t full, n;
	struct entry prev = { { 0 }, 0 };
	if (codec_get_u64(r, &f->last) < 0 ||
	    codec_get_u64(r, &f->ndev) < 0 || codec_get_u64(r, &f->nino) < 0 ||
	    codec_get_u32(r, &full) < 0 || codec_get_u32(r, &n) < 0)
		goto bad;
	f->full = full != 0;
	if (full > 1 || n > FILES_MAX) {
		codec_rd_fail(r, "file table count exceeds its bound");
		goto bad;
	}
	if ((uint64_t)n * 40 > r->len - r->off) {
		codec_rd_fail(r, "file table truncated");
		goto bad;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct entry e;
		for (int k = 0; k < 4; k++)
			if (codec_get_u64(r, &e.k[k]) < 0)
				goto bad;
		if (codec_get_u64(r, &e.v) < 0)
			goto bad;
		if (e.k[0] < K_DEV || e.k[0] > K_TIME || (i && cmp_entry(&prev, &e) >= 0)) {
			codec_rd_fail(r, "file table entries are not distinct known keys in order");
			goto bad;
		}
		if (2 * (f->used + 1) > f->cap)
			grow(f);
		*slot_of(f->tab, f->cap, e.k) = e;
		f->used++;
		prev = e;
	}
	return f;
bad:
	trace_determ_files_free(f);
	return NULL;
}

void trace_determ_files_restart(struct trace_determ_files *f)
{
	f->start_ns = run_start();
}

void trace_determ_files_rekey(struct trace_determ_files *f, uint64_t dev, uint64_t ino,
			      uint64_t ndev, uint64_t nino)
{
	if (!f->cap || (dev == ndev && ino == nino))
		return;
	struct entry *t = common_xcalloc(f->cap, sizeof *t);
	for (size_t i = 0; i < f->cap; i++) {
		struct entry e = f->tab[i];
		if (!e.k[0])
			continue;
		if (e.k[0] != K_DEV && e.k[1] == dev && e.k[2] == ino) {
			e.k[1] = ndev;
			e.k[2] = nino;
		}
		struct entry *s = slot_of(t, f->cap, e.k);
		if (!s->k[0]) /* the new identity seen already keeps its own numbers */
			*s = e;
		else
			f->used--;
	}
	free(f->tab);
	f->tab = t;
}
