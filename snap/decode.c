/* snap: the decoder of the canonical snapshot encoding (hostile input: every
 * count bounded by the bytes left, every order and reference checked). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"

static int snap_valid_key(const char *k)
{
	if (!*k || *k == '/')
		return 0;
	for (const char *p = k; *p;) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (!s)
			break;
		p = s + 1;
		if (!*p)
			return 0;
	}
	return 1;
}

static int get_str(struct codec_rd *r, char **out)
{
	uint32_t n;
	const uint8_t *p;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_STR_MAX)
		return codec_rd_fail(r, "string longer than 4096 bytes");
	if (codec_get_raw(r, &p, n) < 0)
		return -1;
	if (memchr(p, 0, n))
		return codec_rd_fail(r, "NUL byte inside a string");
	*out = common_xmalloc(n + 1);
	memcpy(*out, p, n);
	(*out)[n] = 0;
	return 0;
}

static int get_fixed(struct codec_rd *r, uint8_t *dst, size_t n)
{
	const uint8_t *p;
	if (codec_get_raw(r, &p, n) < 0)
		return -1;
	memcpy(dst, p, n);
	return 0;
}

/* the legacy area, then each used component: its architectural size, and not
 * all zero (an unused component is left out, never written as its init value) */
int snap_get_xstate(struct codec_rd *r, uint64_t features, uint8_t *xstate)
{
	if ((features & 3) != 3 || features & ~SNAP_XKNOWN)
		return codec_rd_fail(r, "unknown XSAVE features");
	if (get_fixed(r, xstate, SNAP_XLEGACY) < 0)
		return -1;
	if (xstate[5])
		return codec_rd_fail(r, "XSAVE legacy reserved byte set");
	for (int i = 2; i < SNAP_XCOMP; i++) {
		uint32_t len, nz = 0;
		if (!(features & (1ull << i)))
			continue;
		if (codec_get_u32(r, &len) < 0)
			return -1;
		if (len != snap_xcomp_len(i))
			return codec_rd_fail(r, "XSAVE component size");
		uint8_t *dst = xstate + snap_xcomp_off(i);
		if (get_fixed(r, dst, len) < 0)
			return -1;
		for (uint32_t k = 0; k < len; k++)
			nz |= dst[k];
		if (!nz)
			return codec_rd_fail(r, "XSAVE component at its init value");
	}
	return 0;
}

static int same_region_class(const struct snap_region *a, const struct snap_region *b)
{
	if (a->end != b->start || a->prot != b->prot || a->kind != b->kind)
		return 0;
	if (a->kind == SNAP_REGION_FILE)
		return !strcmp(a->path, b->path) && a->offset + (a->end - a->start) == b->offset;
	if (a->kind == SNAP_REGION_SYSV || a->kind == SNAP_REGION_SHM)
		return a->offset + (a->end - a->start) == b->offset;
	return a->kind != SNAP_REGION_VDSO;
}

/* A SysV region names a recorded segment and lies inside it, page-aligned. */
static int sysv_region_bad(const struct snap_state *st, const struct snap_region *g)
{
	uint64_t off = g->offset & 0xffffffffu;
	for (size_t i = 0; i < st->nsegments; i++)
		if (st->segments[i].id == g->offset >> 32)
			return off % SNAP_PAGE || off + (g->end - g->start) >
			       ((st->segments[i].size + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1));
	return 1;
}

/* A region's content: its bitmap (no bit past its end) and non-zero pages. */
static int get_content(struct codec_rd *r, struct snap_region *g)
{
	size_t bl = snap_bitmap_len(g);
	if (codec_get_raw(r, &g->bitmap, bl) < 0)
		return -1;
	uint64_t pages = (g->end - g->start) / SNAP_PAGE;
	if (pages % 8 && g->bitmap[bl - 1] >> (pages % 8))
		return codec_rd_fail(r, "page bitmap has bits past the region end");
	return codec_get_raw(r, &g->packed, snap_packed_len(g));
}

/* root: the tree's root (st itself for the root), whose segments every
 * process's SysV regions name. */
static int decode_regions(struct codec_rd *r, struct snap_state *root, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if ((uint64_t)n * 36 > r->len - r->off)
		return codec_rd_fail(r, "region count exceeds the input");
	st->regions = common_xcalloc(n ? n : 1, sizeof *st->regions);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_region *g = &st->regions[i];
		st->nregions = i + 1;
		if (codec_get_u64(r, &g->start) < 0 || codec_get_u64(r, &g->end) < 0 ||
		    codec_get_u32(r, &g->prot) < 0 || codec_get_u32(r, &g->kind) < 0 ||
		    codec_get_u64(r, &g->offset) < 0 || get_str(r, &g->path) < 0)
			return -1;
		if (g->start >= g->end || g->start % SNAP_PAGE || g->end % SNAP_PAGE ||
		    g->end > ((uint64_t)1 << 47))
			return codec_rd_fail(r, "region bounds are not page-aligned user addresses");
		if (g->prot & ~15u ||
		    g->kind > (st->version >= 5 ? SNAP_REGION_SHM :
			       st->version >= 4 ? SNAP_REGION_SYSV : SNAP_REGION_VDSO))
			return codec_rd_fail(r, "unknown region protection or kind");
		if (g->kind == SNAP_REGION_SYSV && sysv_region_bad(root, g))
			return codec_rd_fail(r, "SysV region outside its segment");
		if ((g->prot & SNAP_PROT_SHARED) && (g->kind != SNAP_REGION_FILE || (g->prot & 2)))
			return codec_rd_fail(r, "a shared region is not a read-only file mapping");
		if ((g->kind == SNAP_REGION_FILE) != (g->path[0] == '/') ||
		    (g->kind != SNAP_REGION_FILE && g->kind != SNAP_REGION_SYSV &&
		     g->kind != SNAP_REGION_SHM && g->offset))
			return codec_rd_fail(r, "region path or offset does not fit its kind");
		if (g->kind != SNAP_REGION_FILE) {
			free(g->path);
			g->path = NULL;
		}
		if (i && g->start < st->regions[i - 1].end)
			return codec_rd_fail(r, "regions overlap or are not sorted");
		if (i && same_region_class(&st->regions[i - 1], g))
			return codec_rd_fail(r, "adjacent compatible regions are not merged");
		/* an object's number and a page-aligned offset below 4 GiB (check_shms) */
		if (g->kind == SNAP_REGION_SHM &&
		    ((g->offset & 0xffffffffu) % SNAP_PAGE ||
		     (g->offset & 0xffffffffu) + (g->end - g->start) > ((uint64_t)1 << 32)))
			return codec_rd_fail(r, "shared memory region offset invalid");
		if (snap_region_has_content(root, st, i) && get_content(r, g) < 0)
			return -1;
	}
	return 0;
}

/* pending[n], the thread's then the process's, in queue order */
static int decode_pending(struct codec_rd *r, struct snap_state *st, uint32_t n)
{
	if (n > SNAP_PENDING_MAX || (uint64_t)n * 136 > r->len - r->off)
		return codec_rd_fail(r, "pending signal count out of range");
	st->pending = common_xcalloc(n ? n : 1, sizeof *st->pending);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_sigpend *q = &st->pending[i];
		st->npending = i + 1;
		if (codec_get_u32(r, &q->sig) < 0 || codec_get_u32(r, &q->shared) < 0 ||
		    get_fixed(r, q->info, 128) < 0)
			return -1;
		if (q->sig < 1 || q->sig > SNAP_NSIG || q->shared > 1 ||
		    (i && q->shared < st->pending[i - 1].shared))
			return codec_rd_fail(r, "pending signal invalid or out of order");
	}
	return 0;
}

/* u32 nfds, fd[] sorted by number */
static int decode_fds(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if ((uint64_t)n * 60 > r->len - r->off)
		return codec_rd_fail(r, "fd count exceeds the input");
	st->fds = common_xcalloc(n ? n : 1, sizeof *st->fds);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_fd *f = &st->fds[i];
		st->nfds = i + 1;
		if (codec_get_u32(r, &f->fd) < 0 || codec_get_u32(r, &f->kind) < 0 ||
		    codec_get_u32(r, &f->flags) < 0 || codec_get_u64(r, &f->pos) < 0 ||
		    get_str(r, &f->path) < 0 || get_fixed(r, f->hash, 32) < 0 ||
		    codec_get_u64(r, &f->size) < 0)
			return -1;
		if (i && f->fd <= st->fds[i - 1].fd)
			return codec_rd_fail(r, "descriptors are not sorted");
		int v4 = st->version >= 4;
		/* a named FIFO's end (version 5) has its path */
		int bare = f->kind == SNAP_FD_STREAM || f->kind == SNAP_FD_OBJECT ||
			   f->kind == SNAP_FD_SHM || f->kind == SNAP_FD_SHARED ||
			   (f->kind == SNAP_FD_PIPE && (st->version < 5 || !f->path[0]));
		if (f->kind > (st->version >= 6 ? SNAP_FD_SHARED : st->version >= 5 ? SNAP_FD_SHM
										    : SNAP_FD_OBJECT) ||
		    f->fd > (1u << 20) ||
		    (f->kind >= SNAP_FD_PIPE && !v4) ||
		    bare != (f->path[0] == 0) || (!bare && f->path[0] != '/') ||
		    (f->kind == SNAP_FD_STREAM && (v4 ? f->pos > 2 : f->fd > 2 || f->pos)))
			return codec_rd_fail(r, "descriptor kind, number or path invalid");
		/* a shared object may be a process's standard descriptor (the
		 * root's too, which it put there itself) */
		if ((f->kind == SNAP_FD_OBJECT || f->kind == SNAP_FD_SHARED) &&
		    ((f->fd <= 2 && f->kind == SNAP_FD_OBJECT) || f->pos ||
		     (f->kind == SNAP_FD_SHARED && f->size > SNAP_OBJ_MAX) ||
		     f->flags & ~(uint32_t)(O_CLOEXEC | O_NONBLOCK) ||
		     memcmp(f->hash, (const uint8_t[32]){0}, 32)))
			return codec_rd_fail(r, "object descriptor with a position, hash or flags");
		if (f->kind == SNAP_FD_PIPE && (f->size > (f->path[0] ? 07777u : 0) ||
						memcmp(f->hash, (const uint8_t[32]){0}, 32)))
			return codec_rd_fail(r, "pipe end with a hash or a mode out of range");
		if (f->kind == SNAP_FD_PIPE && (f->flags & O_ACCMODE) == O_RDWR &&
		    (st->version < 7 || !f->path[0]))
			return codec_rd_fail(r, "pipe end opened for reading and writing that is no "
					     "named FIFO's (version 7)");
		if (f->kind == SNAP_FD_SHM &&
		    (f->flags & ~(uint32_t)(O_CLOEXEC | O_NONBLOCK | O_APPEND) || f->size > SNAP_OBJ_MAX ||
		     f->pos > SNAP_MAX_BYTES || memcmp(f->hash, (const uint8_t[32]){0}, 32)))
			return codec_rd_fail(r, "memfd descriptor with a hash, flags or number out of range");
	}
	return 0;
}

/* u32 ncells, cell[] sorted by key */
static int decode_cells(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if ((uint64_t)n * 12 > r->len - r->off)
		return codec_rd_fail(r, "cell count exceeds the input");
	st->cells = common_xcalloc(n ? n : 1, sizeof *st->cells);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_cell *c = &st->cells[i];
		st->ncells = i + 1;
		if (get_str(r, &c->key) < 0 || codec_get_u64(r, &c->len) < 0)
			return -1;
		if (!snap_valid_key(c->key))
			return codec_rd_fail(r, "cell key is not a plain relative path");
		if (i && strcmp(st->cells[i - 1].key, c->key) >= 0)
			return codec_rd_fail(r, "cells are not in key order");
		if (c->len > r->len - r->off)
			return codec_rd_fail(r, "cell value exceeds the input");
		if (codec_get_raw(r, &c->val, (size_t)c->len) < 0)
			return -1;
	}
	return 0;
}

/* The optional determinism record after the cells: tagged, bounded, and its
 * contents checked whole (a restore continues a trace from it). */
static int decode_determ(struct codec_rd *r, struct snap_state *st)
{
	char *tag = NULL;
	uint64_t n;
	if (get_str(r, &tag) < 0)
		return -1;
	int known = !strcmp(tag, SNAP_DETERM_TAG);
	free(tag);
	if (!known)
		return codec_rd_fail(r, "unknown record after the cells");
	if (codec_get_u64(r, &n) < 0)
		return -1;
	if (n > SNAP_DETERM_MAX || n > r->len - r->off)
		return codec_rd_fail(r, "determinism record exceeds its bound or the input");
	if (codec_get_raw(r, &st->determ, (size_t)n) < 0)
		return -1;
	const char *why = trace_determ_record_why(st->determ, (size_t)n, trace_rec_state_why);
	if (why)
		return codec_rd_fail(r, strstr(why, "truncated") ? "determinism record is truncated"
				     : "determinism record is corrupt");
	st->determ_len = (size_t)n;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Every pid and tid of the tree distinct; every process's parent earlier in it. */
static int check_ids(struct codec_rd *r, const struct snap_state *st)
{
	size_t n = 1 + st->nthreads, k = 0;
	for (size_t i = 0; i < st->nprocs; i++)
		n += 1 + st->procs[i].nthreads;
	uint32_t *ids = common_xcalloc(n, sizeof *ids);
	for (size_t i = 0; i <= st->nprocs; i++) {
		const struct snap_state *p = i ? &st->procs[i - 1] : st;
		ids[k++] = i ? p->pid : p->tid;
		for (size_t j = 0; j < p->nthreads; j++)
			ids[k++] = p->threads[j].tid;
	}
	qsort(ids, n, sizeof *ids, cmp_u32);
	int dup = 0;
	for (size_t i = 1; i < n; i++)
		dup |= ids[i] == ids[i - 1];
	free(ids);
	return dup ? codec_rd_fail(r, "a pid or tid appears twice") : 0;
}

/* Each pipe end names a pipe of the tree, the ends of a named FIFO its one
 * path and mode; each pipe is used. */
static int check_pipes(struct codec_rd *r, const struct snap_state *st)
{
	const struct snap_fd **first = common_xcalloc(st->npipes + 1, sizeof *first);
	int bad = 0;
	for (size_t i = 0; i <= st->nprocs; i++) {
		const struct snap_state *p = i ? &st->procs[i - 1] : st;
		for (size_t j = 0; j < p->nfds; j++) {
			const struct snap_fd *f = &p->fds[j];
			if (f->kind != SNAP_FD_PIPE)
				continue;
			if (f->pos >= st->npipes)
				bad = 1;
			else if (!first[f->pos])
				first[f->pos] = f;
			else
				bad |= strcmp(first[f->pos]->path, f->path) || first[f->pos]->size != f->size;
		}
	}
	uint8_t *used = common_xcalloc(st->npipes + 1, 1);
	for (size_t i = 0; i < st->npipes; i++)
		used[i] = first[i] != NULL;
	free(first);
	for (size_t i = 0; i < st->npipes; i++)
		bad |= !used[i];
	free(used);
	return bad ? codec_rd_fail(r, "a pipe end names no pipe (or another FIFO than its "
				   "other ends), or a pipe is unused") : 0;
}

static int decode_process(struct codec_rd *r, struct snap_state *root, struct snap_state *st,
			  uint32_t ver);

/* Each shared memory region and memfd descriptor names an object; a region of
 * anonymous memory lies inside it; the descriptors of one object share one
 * offset; each object is used. */
static int check_shms(struct codec_rd *r, const struct snap_state *st)
{
	uint8_t *used = common_xcalloc(st->nshms + 1, 1);
	uint64_t *pos = common_xcalloc(st->nshms + 1, sizeof *pos);
	int bad = 0;
	for (size_t k = 0; k <= st->nprocs && !bad; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		for (size_t i = 0; i < p->nregions && !bad; i++) {
			const struct snap_region *g = &p->regions[i];
			uint64_t j = g->offset >> 32;
			if (g->kind != SNAP_REGION_SHM)
				continue;
			bad = j >= st->nshms || (st->shms[j].kind == SNAP_SHM_ANON &&
						 (g->offset & 0xffffffffu) + (g->end - g->start) >
						 st->shms[j].content.end);
			if (!bad)
				used[j] = 1;
		}
		for (size_t i = 0; i < p->nfds && !bad; i++) {
			const struct snap_fd *f = &p->fds[i];
			if (f->kind != SNAP_FD_SHM)
				continue;
			bad = f->size >= st->nshms || st->shms[f->size].kind == SNAP_SHM_ANON ||
			      st->shms[f->size].kind == SNAP_SHM_NAMED ||
			      (used[f->size] & 2 && pos[f->size] != f->pos);
			if (!bad) {
				used[f->size] |= 3;
				pos[f->size] = f->pos;
			}
		}
	}
	for (size_t j = 0; j < st->nshms; j++)
		bad |= !used[j];
	free(used);
	free(pos);
	return bad ? codec_rd_fail(r, "a shared memory region or memfd names no object, or an "
				   "object is unused") : 0;
}

/* A deleted file's path (version 7): absolute, its last part a name, short
 * enough to be written in one page. */
static int file_path_ok(const char *p)
{
	const char *last = strrchr(p, '/');
	return p[0] == '/' && strlen(p) <= SNAP_SHM_PATH_MAX && last[1] && strcmp(last, "/.") &&
	       strcmp(last, "/..");
}

/* Version 5: u32 nshms, shm[]. */
static int decode_shms(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_OBJ_MAX || (uint64_t)n * 20 > r->len - r->off)
		return codec_rd_fail(r, "shared memory object count out of range");
	st->shms = common_xcalloc(n ? n : 1, sizeof *st->shms);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_shm *g = &st->shms[i];
		st->nshms = i + 1;
		if (codec_get_u32(r, &g->kind) < 0 || codec_get_u32(r, &g->sealable) < 0 ||
		    get_str(r, &g->name) < 0 || codec_get_u64(r, &g->size) < 0 ||
		    (st->version >= 7 && codec_get_u32(r, &g->mode) < 0))
			return -1;
		if (g->kind > (st->version >= 7 ? SNAP_SHM_NAMED : SNAP_SHM_MEMFD) || g->sealable > 1 ||
		    g->size > SNAP_MAX_BYTES ||
		    (g->kind == SNAP_SHM_ANON ? g->name[0] || g->sealable || !g->size
		     : g->kind == SNAP_SHM_MEMFD ? strlen(g->name) > SNAP_SHM_NAME_MAX
		     : g->sealable || !file_path_ok(g->name)))
			return codec_rd_fail(r, "shared memory object kind, name or size invalid");
		if (g->kind >= SNAP_SHM_FILE ? g->mode > 07777 : g->mode != 0)
			return codec_rd_fail(r, "shared memory object mode invalid");
		g->content = (struct snap_region){ .start = 0, .kind = SNAP_REGION_ANON,
			.end = (g->size + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1) };
		if (get_content(r, &g->content) < 0)
			return -1;
	}
	return check_shms(r, st);
}

/* Version 4: u32 nprocs, proc[] sorted by pid, u32 npipes, pipe[]. */
static int decode_tree(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	if (get_str(r, &st->exe) < 0 || codec_get_u32(r, &n) < 0)
		return -1;
	if (st->exe[0] != '/')
		return codec_rd_fail(r, "the root's program is not an absolute path");
	if (n > SNAP_PROCS_MAX)
		return codec_rd_fail(r, "more processes than a snapshot holds");
	st->procs = common_xcalloc(n ? n : 1, sizeof *st->procs);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_state *p = &st->procs[i];
		st->nprocs = i + 1;
		p->version = st->version;
		if (codec_get_u32(r, &p->pid) < 0 || codec_get_u32(r, &p->ppid) < 0 ||
		    codec_get_u32(r, &p->zombie) < 0)
			return -1;
		int parent = p->ppid == st->tid;
		for (uint32_t j = 0; j < i && !parent; j++)
			parent = st->procs[j].pid == p->ppid && !st->procs[j].zombie;
		if (p->zombie > 1 || p->pid <= (i ? st->procs[i - 1].pid : st->tid) || !parent)
			return codec_rd_fail(r, "process out of order, or its parent not before it");
		if (p->zombie ? codec_get_u32(r, &p->wstatus) < 0
			      : get_str(r, &p->exe) < 0 || decode_process(r, st, p, st->version) < 0)
			return -1;
		if (!p->zombie && p->exe[0] != '/')
			return codec_rd_fail(r, "a process's program is not an absolute path");
		if (!p->zombie && p->tid != p->pid)
			return codec_rd_fail(r, "a process's leader tid is not its pid");
		/* segments are the tree's, recorded in the root; objects another
		 * process shares are refused (version 4: the root's only) */
		if (p->nsegments || (p->nobjects && st->version < 5))
			return codec_rd_fail(r, "descriptor objects or SysV segments outside the "
					     "root process");
		if (p->zombie && (p->wstatus & ~0xff7fu))
			return codec_rd_fail(r, "zombie wait status invalid");
	}
	if (check_ids(r, st) < 0 || codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_PIPES_MAX)
		return codec_rd_fail(r, "more pipes than a snapshot holds");
	st->pipes = common_xcalloc(n ? n : 1, sizeof *st->pipes);
	for (uint32_t i = 0; i < n; i++) {
		struct snap_pipe *q = &st->pipes[i];
		st->npipes = i + 1;
		if (codec_get_u32(r, &q->capacity) < 0 || codec_get_u64(r, &q->len) < 0)
			return -1;
		if (q->capacity < SNAP_PAGE || q->capacity > SNAP_PIPE_BYTES_MAX ||
		    q->capacity % SNAP_PAGE || q->len > q->capacity)
			return codec_rd_fail(r, "pipe capacity or length invalid");
		if (codec_get_raw(r, &q->bytes, (size_t)q->len) < 0)
			return -1;
	}
	if (check_pipes(r, st) < 0)
		return -1;
	if (st->version >= 5 && decode_shms(r, st) < 0)
		return -1;
	if (st->version >= 6 && snap_kobjs_get(r, st) < 0)
		return -1;
	return st->version >= 8 ? snap_tmps_get(r, st) : 0;
}

/* One process body (encode_process) of root's tree. */
static int decode_process(struct codec_rd *r, struct snap_state *root, struct snap_state *st,
			  uint32_t ver)
{
	uint32_t n;
	if (codec_get_u64(r, &st->xfeatures) < 0)
		return -1;
	if ((st->xfeatures & 3) != 3 || st->xfeatures & ~SNAP_XKNOWN)
		return codec_rd_fail(r, "unknown XSAVE features");
	for (int i = 0; i < SNAP_NREGS; i++)
		if (codec_get_u64(r, &st->regs[i]) < 0)
			return -1;
	st->xstate = common_xcalloc(1, SNAP_XCANON_SIZE);
	if (snap_get_xstate(r, st->xfeatures, st->xstate) < 0 ||
	    codec_get_u64(r, &st->sigmask) < 0)
		return -1;
	for (int i = 0; i < SNAP_NSIG; i++)
		if (codec_get_u64(r, &st->sigact[i].handler) < 0 ||
		    codec_get_u64(r, &st->sigact[i].flags) < 0 ||
		    codec_get_u64(r, &st->sigact[i].restorer) < 0 ||
		    codec_get_u64(r, &st->sigact[i].mask) < 0)
			return -1;
	if (codec_get_u64(r, &st->ss_sp) < 0 || codec_get_u32(r, &st->ss_flags) < 0 ||
	    codec_get_u64(r, &st->ss_size) < 0 || codec_get_u32(r, &n) < 0)
		return -1;
	if (decode_pending(r, st, n) < 0)
		return -1;
	if (codec_get_u64(r, &st->rseq_ptr) < 0 || codec_get_u32(r, &st->rseq_len) < 0 ||
	    codec_get_u32(r, &st->rseq_sig) < 0)
		return -1;
	if (st->rseq_len ? (st->rseq_len < 32 || st->rseq_len > 1024 || st->rseq_ptr % 32 ||
			    st->rseq_ptr >= ((uint64_t)1 << 47))
			 : (st->rseq_ptr || st->rseq_sig)) {
		codec_rd_fail(r, "rseq registration out of range");
		return -1;
	}
	if (ver >= 3 && snap_threads_get(r, st) < 0)
		return -1;
	if (codec_get_u64(r, &st->start_brk) < 0 ||
	    codec_get_u64(r, &st->brk) < 0 || codec_get_u32(r, &st->umask) < 0 ||
	    get_str(r, &st->cwd) < 0)
		return -1;
	if (st->umask > 0777 || st->cwd[0] != '/') {
		codec_rd_fail(r, "bad umask or relative cwd");
		return -1;
	}
	for (int i = 0; i < SNAP_NRLIMIT; i++)
		if (codec_get_u64(r, &st->rlim[i][0]) < 0 || codec_get_u64(r, &st->rlim[i][1]) < 0)
			return -1;
	if (decode_fds(r, st) < 0 ||
	    (ver >= 4 && (snap_objects_get(r, st) < 0 || snap_objects_check(r, st) < 0)) ||
	    decode_regions(r, root, st) < 0)
		return -1;
	return 0;
}

int snap_decode(const uint8_t *buf, size_t len, const char *name, struct snap_state *st,
		struct common_err *e)
{
	struct codec_rd r;
	char *dom = NULL;
	uint32_t ver;
	memset(st, 0, sizeof *st);
	if (len > SNAP_MAX_BYTES)
		return common_errf(e, name, "snapshot of %zu bytes exceeds the %llu-byte bound", len,
				   (unsigned long long)SNAP_MAX_BYTES);
	codec_rd_init(&r, buf, len);
	if (get_str(&r, &dom) < 0)
		goto bad;
	if (strcmp(dom, SNAP_DOMAIN)) {
		free(dom);
		codec_rd_fail(&r, "not a snapshot (domain string differs)");
		goto bad;
	}
	free(dom);
	if (codec_get_u32(&r, &ver) < 0)
		goto bad;
	if (ver < 2 || ver > SNAP_VERSION) {
		codec_rd_fail(&r, "unsupported snapshot version");
		goto bad;
	}
	st->version = ver;
	if (get_str(&r, &st->meta.lease) < 0 || get_str(&r, &st->meta.principal) < 0 ||
	    get_str(&r, &st->meta.host_program) < 0 || get_str(&r, &st->meta.ns_prefix) < 0 ||
	    get_fixed(&r, st->meta.image, 32) < 0 || codec_get_u64(&r, &st->meta.step) < 0 ||
	    get_fixed(&r, st->meta.trace_head, 32) < 0)
		goto bad;
	for (int i = 0; i < SNAP_NUSAGE; i++)
		if (codec_get_u64(&r, &st->meta.usage[i]) < 0)
			goto bad;
	if (decode_process(&r, st, st, ver) < 0 || (ver >= 4 && decode_tree(&r, st) < 0) ||
	    decode_cells(&r, st) < 0 || (r.off < r.len && decode_determ(&r, st) < 0))
		goto bad;
	if (codec_rd_end(&r) < 0)
		goto bad;
	return 0;
bad:
	codec_rd_err(&r, name, e);
	snap_state_free(st);
	return -1;
}

void snap_state_free(struct snap_state *st)
{
	free(st->meta.lease);
	free(st->meta.principal);
	free(st->meta.host_program);
	free(st->meta.ns_prefix);
	free(st->xstate);
	free(st->pending);
	for (size_t i = 0; i < st->nthreads; i++) {
		free(st->threads[i].xstate);
		free(st->threads[i].pending);
	}
	free(st->threads);
	free(st->cwd);
	for (size_t i = 0; i < st->nfds; i++)
		free(st->fds[i].path);
	free(st->fds);
	snap_objects_free(st);
	for (size_t i = 0; i < st->nregions; i++)
		free(st->regions[i].path);
	free(st->regions);
	for (size_t i = 0; i < st->ncells; i++)
		free(st->cells[i].key);
	free(st->cells);
	for (size_t i = 0; i < st->nprocs; i++)
		snap_state_free(&st->procs[i]);
	free(st->procs);
	free(st->pipes);
	snap_shms_free(st);
	snap_kobjs_free(st);
	snap_tmps_free(st);
	free(st->exe);
	memset(st, 0, sizeof *st);
}
