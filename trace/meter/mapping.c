/* Shared file mappings charged by the page (SPEC §4.1 storage_write): a MAP_SHARED
 * mapping of a regular file open for writing is held without PROT_WRITE, and a
 * store that faults on it is charged the pages of its 64 KiB run not charged yet,
 * then that run is made writable. The table keeps, per address space, the ranges
 * so held and the protection the guest asked for; a page is charged once per
 * mapping (its id, kept across fork and mremap), however often it is stored. A
 * range is trusted only while the kernel's mapping at the address is a shared one
 * of the same file (one the guest unmapped or replaced unseen is not). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include "trace/meter/meter.h"

#define PAGE 4096ull
#define RUN (16 * PAGE)         /* pages charged and opened per fault */
#define RANGES_MAX 65536        /* per address space, as many as vm.max_map_count */

struct range {
	pid_t mm;                /* the address space: the tgid that made it */
	uint64_t lo, hi;
	dev_t dev;
	ino_t ino;
	int prot;                /* what the guest asked for */
	uint64_t id;             /* the mapping's: its pages are charged once */
};

struct run {                     /* the charged pages of one 64 KiB run of a mapping */
	uint64_t id, idx;        /* idx: file offset / RUN; id 0: a free slot */
	uint32_t pages;
};

struct alias {                   /* a CLONE_VM child shares its parent's space */
	pid_t tgid, mm;
};

struct pending {                 /* a mapping call between its entry and exit */
	pid_t tid;
	struct trace_map_call c;
};

struct trace_maps {
	struct range *r;
	size_t n, cap;
	struct run *h;
	size_t hn, hcap;
	struct alias *a;
	size_t an, acap;
	struct pending *p;
	size_t pn, pcap;
	pid_t *f;                /* processes whose protection changes all stop */
	size_t fn, fcap;
	uint64_t next_id;
	uint64_t place;          /* the next address offered in the window */
};

struct trace_maps *trace_maps_new(void)
{
	return common_xcalloc(1, sizeof(struct trace_maps));
}

void trace_maps_free(struct trace_maps *ms)
{
	if (!ms)
		return;
	free(ms->r);
	free(ms->h);
	free(ms->a);
	free(ms->p);
	free(ms->f);
	free(ms);
}

static pid_t mm_of(const struct trace_maps *ms, pid_t tgid)
{
	for (size_t i = 0; i < ms->an; i++)
		if (ms->a[i].tgid == tgid)
			return ms->a[i].mm;
	return tgid;
}

static void grow(void **v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return;
	*cap = *cap ? 2 * *cap : 16;
	*v = common_xrealloc(*v, *cap * size);
}

static void range_push(struct trace_maps *ms, struct range r)
{
	grow((void **)&ms->r, &ms->cap, ms->n, sizeof *ms->r);
	ms->r[ms->n++] = r;
}

/* Every range of mm holding x inside it becomes two, split at x. */
static void range_split(struct trace_maps *ms, pid_t mm, uint64_t x)
{
	for (size_t i = 0; i < ms->n; i++)
		if (ms->r[i].mm == mm && ms->r[i].lo < x && ms->r[i].hi > x) {
			struct range tail = ms->r[i];
			tail.lo = x;
			ms->r[i].hi = x;
			range_push(ms, tail);
		}
}

static int inside(const struct range *r, pid_t mm, uint64_t lo, uint64_t hi)
{
	return r->mm == mm && r->lo >= lo && r->hi <= hi;
}

/* [lo, hi) of mm out of the table. */
static void range_cut(struct trace_maps *ms, pid_t mm, uint64_t lo, uint64_t hi)
{
	range_split(ms, mm, lo);
	range_split(ms, mm, hi);
	for (size_t i = 0; i < ms->n; i++)
		if (inside(&ms->r[i], mm, lo, hi))
			ms->r[i--] = ms->r[--ms->n];
}

static size_t ranges_of(const struct trace_maps *ms, pid_t mm)
{
	size_t k = 0;

	for (size_t i = 0; i < ms->n; i++)
		k += ms->r[i].mm == mm;
	return k;
}

int trace_maps_any(const struct trace_maps *ms, pid_t tgid)
{
	return ranges_of(ms, mm_of(ms, tgid)) > 0;
}

uint64_t trace_maps_place(struct trace_maps *ms, uint64_t len)
{
	const uint64_t gap = 2ull << 20; /* a huge page's alignment, and room between */
	uint64_t span = ((len + gap - 1) & ~(gap - 1)) + gap, at;

	if (span > TRACE_MAP_WINDOW_HI - TRACE_MAP_WINDOW_LO)
		return 0;
	if (ms->place < TRACE_MAP_WINDOW_LO || span > TRACE_MAP_WINDOW_HI - ms->place)
		ms->place = TRACE_MAP_WINDOW_LO; /* from the start again: the kernel skips what is taken */
	at = ms->place;
	ms->place += span;
	return at;
}

void trace_maps_add(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len,
		    const struct trace_map_call *c)
{
	pid_t mm = mm_of(ms, tgid);
	uint64_t hi = addr + ((len + PAGE - 1) & ~(PAGE - 1));

	range_cut(ms, mm, addr, hi);
	size_t have = ranges_of(ms, mm);
	if (have >= RANGES_MAX) /* more than the kernel keeps: half go (a store there faults) */
		for (size_t i = 0; i < ms->n && have >= RANGES_MAX / 2; i++)
			if (ms->r[i].mm == mm) {
				ms->r[i--] = ms->r[--ms->n];
				have--;
			}
	range_push(ms, (struct range){ mm, addr, hi, c->dev, c->ino, c->prot, ++ms->next_id });
}

int trace_maps_pieces(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len, int prot,
		      struct trace_map_piece *out, size_t max)
{
	pid_t mm = mm_of(ms, tgid);
	uint64_t at = addr, end = addr + len;
	size_t k = 0;

	while (at < end) {
		const struct range *best = NULL;
		for (size_t i = 0; i < ms->n; i++) {
			const struct range *r = &ms->r[i];
			if (r->mm == mm && r->hi > at && r->lo < end && (!best || r->lo < best->lo))
				best = r;
		}
		uint64_t lo = best ? (best->lo > at ? best->lo : at) : end;
		uint64_t hi = best ? (best->hi < end ? best->hi : end) : end;
		if (k + 2 > max)
			return -1;
		if (lo > at) /* not held: as asked */
			out[k++] = (struct trace_map_piece){ at, lo, prot };
		if (best) /* held: writable run by run, at its stores */
			out[k++] = (struct trace_map_piece){ lo, hi, prot & ~PROT_WRITE };
		at = hi;
	}
	return (int)k;
}

void trace_maps_protect(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len, int prot)
{
	pid_t mm = mm_of(ms, tgid);

	range_split(ms, mm, addr);
	range_split(ms, mm, addr + len);
	for (size_t i = 0; i < ms->n; i++)
		if (inside(&ms->r[i], mm, addr, addr + len))
			ms->r[i].prot = prot;
}

int trace_maps_held_prot(const struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len,
			 int *prot)
{
	pid_t mm = mm_of(ms, tgid);

	for (size_t i = 0; i < ms->n; i++)
		if (ms->r[i].mm == mm && ms->r[i].hi > addr && ms->r[i].lo < addr + len) {
			*prot = ms->r[i].prot;
			return 1;
		}
	return 0;
}

uint64_t trace_maps_next(const struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t end)
{
	pid_t mm = mm_of(ms, tgid);
	uint64_t best = end;

	for (size_t i = 0; i < ms->n; i++) {
		const struct range *r = &ms->r[i];
		if (r->mm == mm && r->hi > addr && r->lo < best)
			best = r->lo > addr ? r->lo : addr;
	}
	return best;
}

void trace_maps_move(struct trace_maps *ms, pid_t tgid, uint64_t old, uint64_t oldlen, uint64_t to,
		     uint64_t newlen, int keep)
{
	pid_t mm = mm_of(ms, tgid);
	uint64_t oend = old + ((oldlen + PAGE - 1) & ~(PAGE - 1));
	uint64_t nend = to + ((newlen + PAGE - 1) & ~(PAGE - 1));
	struct range *moved = NULL;
	size_t k = 0, cap = 0;

	range_split(ms, mm, old);
	range_split(ms, mm, oend);
	for (size_t i = 0; i < ms->n; i++) {
		struct range r = ms->r[i];
		/* old_size 0 maps the pages at old again: that range, as long as asked */
		if (r.mm != mm || !(oldlen ? inside(&r, mm, old, oend) : (old >= r.lo && old < r.hi)))
			continue;
		r.lo = oldlen ? r.lo - old + to : to;
		r.hi = !oldlen || r.hi == oend ? nend : r.hi - old + to; /* a growth is the same file's */
		r.hi = r.hi < nend ? r.hi : nend;
		grow((void **)&moved, &cap, k, sizeof *moved);
		moved[k++] = r;
		if (oldlen && !keep)
			ms->r[i--] = ms->r[--ms->n];
	}
	range_cut(ms, mm, to, nend); /* the kernel unmapped whatever was there */
	for (size_t i = 0; i < k; i++)
		if (moved[i].lo < moved[i].hi)
			range_push(ms, moved[i]);
	free(moved);
}

int trace_maps_filtered(const struct trace_maps *ms, pid_t tgid)
{
	for (size_t i = 0; i < ms->fn; i++)
		if (ms->f[i] == tgid)
			return 1;
	return 0;
}

void trace_maps_filter_set(struct trace_maps *ms, pid_t tgid)
{
	if (trace_maps_filtered(ms, tgid))
		return;
	grow((void **)&ms->f, &ms->fcap, ms->fn, sizeof *ms->f);
	ms->f[ms->fn++] = tgid;
}

void trace_maps_spawn(struct trace_maps *ms, pid_t parent, pid_t child, int shares_vm)
{
	pid_t mm = mm_of(ms, parent);
	size_t n = ms->n;

	if (trace_maps_filtered(ms, parent)) /* a child starts with its creator's filters */
		trace_maps_filter_set(ms, child);

	if (shares_vm) {
		grow((void **)&ms->a, &ms->acap, ms->an, sizeof *ms->a);
		ms->a[ms->an++] = (struct alias){ child, mm };
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (ms->r[i].mm == mm) { /* the same mapping: a page both store is charged once */
			struct range r = ms->r[i];
			r.mm = child;
			range_push(ms, r);
		}
}

void trace_maps_forget(struct trace_maps *ms, pid_t tgid)
{
	for (size_t i = 0; i < ms->an; i++)
		if (ms->a[i].tgid == tgid) {
			ms->a[i] = ms->a[--ms->an];
			return; /* its space is its parent's */
		}
	for (size_t i = 0; i < ms->n; i++)
		if (ms->r[i].mm == tgid)
			ms->r[i--] = ms->r[--ms->n];
}

void trace_maps_gone(struct trace_maps *ms, pid_t tgid)
{
	trace_maps_forget(ms, tgid);
	for (size_t i = 0; i < ms->fn; i++)
		if (ms->f[i] == tgid)
			ms->f[i--] = ms->f[--ms->fn];
}

void trace_maps_pending(struct trace_maps *ms, pid_t tid, const struct trace_map_call *c)
{
	struct trace_map_call old;

	trace_maps_take(ms, tid, &old);
	grow((void **)&ms->p, &ms->pcap, ms->pn, sizeof *ms->p);
	ms->p[ms->pn++] = (struct pending){ tid, *c };
}

int trace_maps_take(struct trace_maps *ms, pid_t tid, struct trace_map_call *c)
{
	for (size_t i = 0; i < ms->pn; i++)
		if (ms->p[i].tid == tid) {
			*c = ms->p[i].c;
			ms->p[i] = ms->p[--ms->pn];
			return 1;
		}
	return 0;
}

/* The charged-pages entry of (id, idx), made when missing. */
static struct run *run_of(struct trace_maps *ms, uint64_t id, uint64_t idx)
{
	if (2 * (ms->hn + 1) > ms->hcap) {
		struct run *old = ms->h;
		size_t ocap = ms->hcap;
		ms->hcap = ocap ? 2 * ocap : 1024;
		ms->h = common_xcalloc(ms->hcap, sizeof *ms->h);
		ms->hn = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].id)
				*run_of(ms, old[i].id, old[i].idx) = old[i];
		free(old);
	}
	size_t i = (size_t)((id * 0x9e3779b97f4a7c15ull) ^ (idx * 0xc2b2ae3d27d4eb4full)) & (ms->hcap - 1);
	while (ms->h[i].id && (ms->h[i].id != id || ms->h[i].idx != idx))
		i = (i + 1) & (ms->hcap - 1);
	if (!ms->h[i].id) {
		ms->h[i] = (struct run){ id, idx, 0 };
		ms->hn++;
	}
	return &ms->h[i];
}

/* The kernel's mapping of tid holding addr: 1 when it is a shared one of dev:ino,
 * with its bounds and the file offset of its start. */
static int vma_at(pid_t tid, uint64_t addr, dev_t dev, ino_t ino, uint64_t *lo, uint64_t *hi,
		  uint64_t *off)
{
	char path[64], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		unsigned long long s, e, o, in;
		unsigned maj, min;
		char perms[8];
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &s, &e, perms, &o, &maj, &min, &in) == 7 &&
		    addr >= s && addr < e) {
			found = perms[3] == 's' && makedev(maj, min) == dev && (ino_t)in == ino ? 1 : -1;
			*lo = s, *hi = e, *off = o;
		}
		if (!strchr(line, '\n')) /* a long path: skip the rest of its line */
			while (fgets(line, sizeof line, f) && !strchr(line, '\n'))
				;
	}
	fclose(f);
	return found > 0;
}

int trace_maps_store(struct trace_maps *ms, pid_t tid, pid_t tgid, uint64_t addr,
		     struct trace_map_piece *open, uint64_t *charge)
{
	pid_t mm = mm_of(ms, tgid);
	const struct range *r = NULL;
	uint64_t vlo, vhi, voff;

	for (size_t i = 0; i < ms->n && !r; i++)
		if (ms->r[i].mm == mm && addr >= ms->r[i].lo && addr < ms->r[i].hi)
			r = &ms->r[i];
	if (!r || !(r->prot & PROT_WRITE) || !vma_at(tid, addr, r->dev, r->ino, &vlo, &vhi, &voff))
		return 0;
	uint64_t page = addr & ~(PAGE - 1), off = voff + (page - vlo);
	uint64_t lo = page - off % RUN, hi = lo + RUN;
	lo = lo > vlo ? lo : vlo, lo = lo > r->lo ? lo : r->lo;
	hi = hi < vhi ? hi : vhi, hi = hi < r->hi ? hi : r->hi;
	struct run *run = run_of(ms, r->id, off / RUN);
	uint64_t first = (off % RUN) / PAGE - (page - lo) / PAGE;
	*charge = 0;
	for (uint64_t p = first; p < first + (hi - lo) / PAGE; p++)
		if (!(run->pages & (1u << p))) {
			run->pages |= 1u << p;
			*charge += PAGE;
		}
	*open = (struct trace_map_piece){ lo, hi, r->prot };
	return 1;
}
