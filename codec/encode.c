/* Object graphs, encoding: from a root with object IDs (root = 1), a work
 * queue and a host-address index (decode.c reads them back, writeback.c
 * applies an image in place). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "codec/codec-internal.h"

#define NONE UINT32_MAX
#define PATH_REGIONS 64 /* an error path shows at most this many hops */

/* A run of count elements of ti at start, reached through some pointer. */
struct region {
	uintptr_t start;
	size_t count;    /* the key: elements the pointer reached */
	size_t ocount;   /* elements of the object, grown when runs merge */
	struct tinfo *ti;
	uint32_t parent; /* region whose content held the pointer, NONE for root/seed */
	uint32_t top;    /* the top-level region holding this one (itself if top-level) */
	uint32_t id;     /* object ID, for top-level regions */
	size_t poff;     /* byte offset of that pointer within the parent */
	bool slice, seeded;
};

/* The key's address lives in the table: a probe rarely touches a region. */
struct hent {
	uintptr_t start;
	uint32_t v; /* region index + 1, 0 empty */
};

struct enc {
	struct ttable *tt;
	struct region *r;
	size_t nr, capr;
	struct hent *hash; /* open addressing over (address, type, count) */
	size_t hcap;
	uint32_t *order; /* top-level regions by object ID - 1 */
	size_t nobj;
	const struct codec_opts *o;
	struct common_err *e;
	struct codec_buf *out;
	bool emitting;
};

/* Large tables on huge pages: random probes into them are TLB-bound, and
 * much more so under paging-based virtualization. */
#define BIG (4u << 20)
void *codec_big_zalloc(size_t n)
{
	if (n < BIG)
		return common_xcalloc(1, n);
	size_t sz = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *p = aligned_alloc(2u << 20, sz);
	if (!p)
		return common_xcalloc(1, n);
	madvise(p, sz, MADV_HUGEPAGE);
	memset(p, 0, n);
	return p;
}

static void *big_grow(void *old, size_t oldn, size_t n)
{
	if (n < BIG)
		return common_xrealloc(old, n);
	void *p = codec_big_zalloc(n);
	if (oldn)
		memcpy(p, old, oldn);
	free(old);
	return p;
}

static size_t rend_bytes(const struct region *r)
{
	return r->ocount * r->ti->t->size;
}

static uint64_t mix(uintptr_t a, const void *t, size_t n)
{
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
	h ^= (uint64_t)(uintptr_t)t * 0xc2b2ae3d27d4eb4full;
	h ^= (uint64_t)n * 0x165667b19e3779f9ull;
	/* final avalanche: aligned addresses must still spread over the low bits */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

/* The region with this key, or NONE and in *slot where it would go. */
static uint32_t lookup_slot(const struct enc *x, uintptr_t a, const struct tinfo *ti, size_t n,
			    size_t *slot)
{
	*slot = SIZE_MAX;
	if (!x->hcap)
		return NONE;
	size_t m = x->hcap - 1;
	for (size_t i = mix(a, ti, n) & m;; i = (i + 1) & m) {
		const struct hent *h = &x->hash[i];
		if (!h->v) {
			*slot = i;
			return NONE;
		}
		if (h->start != a)
			continue;
		const struct region *r = &x->r[h->v - 1];
		if (r->ti == ti && r->count == n)
			return h->v - 1;
	}
}

static uint32_t lookup(const struct enc *x, uintptr_t a, const struct tinfo *ti, size_t n)
{
	size_t slot;
	return lookup_slot(x, a, ti, n, &slot);
}

static void hash_put(struct enc *x, uint32_t idx)
{
	size_t m = x->hcap - 1;
	const struct region *r = &x->r[idx];
	size_t i = mix(r->start, r->ti, r->count) & m;
	while (x->hash[i].v)
		i = (i + 1) & m;
	x->hash[i] = (struct hent){ r->start, idx + 1 };
}

/* slot: from lookup_slot, or SIZE_MAX to probe again */
static uint32_t add_region_at(struct enc *x, uintptr_t a, struct tinfo *ti, size_t n, size_t slot)
{
	if (x->nr == x->capr) {
		size_t cap = x->capr ? x->capr * 2 : 256;
		x->r = big_grow(x->r, x->capr * sizeof *x->r, cap * sizeof *x->r);
		x->capr = cap;
	}
	if ((x->nr + 1) * 2 > x->hcap) {
		size_t cap = x->hcap ? x->hcap * 2 : 512;
		free(x->hash);
		x->hash = codec_big_zalloc(cap * sizeof *x->hash);
		x->hcap = cap;
		for (uint32_t i = 0; i < x->nr; i++)
			hash_put(x, i);
		slot = SIZE_MAX;
	}
	uint32_t idx = (uint32_t)x->nr++;
	struct region *r = &x->r[idx];
	memset(r, 0, sizeof *r);
	r->start = a;
	r->count = r->ocount = n;
	r->ti = ti;
	r->parent = NONE;
	r->top = idx;
	if (slot == SIZE_MAX)
		hash_put(x, idx);
	else
		x->hash[slot] = (struct hent){ a, idx + 1 };
	return idx;
}

static uint32_t add_region(struct enc *x, uintptr_t a, struct tinfo *ti, size_t n)
{
	return add_region_at(x, a, ti, n, SIZE_MAX);
}

/* Path steps from the start of count elements of ti to a value of type target
 * at byte offset off that must hold need elements of target. Interior
 * pointers into union members are refused. Returns the step count or -1. */
static int offset_path(struct tinfo *ti, size_t count, size_t off, const struct tinfo *target,
		       size_t need, uint64_t *steps)
{
	int ns = 0;
	size_t len = count;

	if (count == 0)
		return off == 0 && ti == target && need == 0 ? (steps[ns++] = 0, ns) : -1;
	for (;;) {
		/* element level: pick the element */
		size_t sz = ti->t->size, idx = off / sz, rem = off % sz;
		if (idx >= len || ns >= CODEC_MAX_STEPS)
			return -1;
		steps[ns++] = idx;
		if (rem == 0 && ti == target)
			return need <= len && idx <= len - need ? ns : -1;
		/* value level: descend inline storage until an array dimension */
		for (;;) {
			if (ti->t->kind == SBX_K_ARRAY) {
				len = ti->t->count;
				ti = ti->elem;
				off = rem;
				break;
			}
			if (ti->t->kind != SBX_K_STRUCT || ns >= CODEC_MAX_STEPS)
				return -1;
			const struct sbx_type *t = ti->t;
			size_t j;
			for (j = 0; j < t->nfields; j++)
				if (rem >= t->fields[j].offset &&
				    rem < t->fields[j].offset + t->fields[j].size)
					break;
			if (j == t->nfields)
				return -1; /* padding */
			steps[ns++] = j;
			rem -= t->fields[j].offset;
			ti = ti->fields[j];
			if (rem == 0 && ti == target)
				return need <= 1 ? ns : -1;
		}
	}
}

/* Render ".field[3].x" for byte offset off in count elements of ti, stopping
 * at the first leaf (or at stop, when given). */
static void inner_path(char *buf, size_t cap, struct tinfo *ti, size_t count, size_t off,
		       bool show_index)
{
	size_t n = strlen(buf);
	size_t len = count;

	for (int guard = 0; guard < CODEC_MAX_STEPS && n + 1 < cap; guard++) {
		size_t sz = ti->t->size;
		if (!sz || len == 0)
			return;
		size_t idx = off / sz;
		off %= sz;
		if (show_index)
			n += (size_t)snprintf(buf + n, cap - n, "[%zu]", idx);
		show_index = true;
		if (n >= cap)
			return;
		for (;;) {
			const struct sbx_type *t = ti->t;
			if (t->kind == SBX_K_ARRAY) {
				len = t->count;
				ti = ti->elem;
				break;
			}
			if (t->kind != SBX_K_STRUCT && t->kind != SBX_K_UNION)
				return;
			size_t j;
			for (j = 0; j < t->nfields; j++)
				if (ti->fields[j] && off >= t->fields[j].offset &&
				    off < t->fields[j].offset + t->fields[j].size)
					break;
			if (j == t->nfields)
				return;
			n += (size_t)snprintf(buf + n, cap - n, ".%s", t->fields[j].name);
			if (n >= cap)
				return;
			off -= t->fields[j].offset;
			ti = ti->fields[j];
		}
	}
}

/* The path of the value at byte offset off inside region reg, from the root. */
static void region_path(const struct enc *x, uint32_t reg, size_t off, char *buf, size_t cap)
{
	uint32_t chain[PATH_REGIONS];
	int n = 0;

	for (uint32_t k = reg; k != NONE && n < PATH_REGIONS; k = x->r[k].parent)
		chain[n++] = k;
	buf[0] = '\0';
	const struct region *first = &x->r[chain[n - 1]];
	if (first->parent != NONE)
		snprintf(buf, cap, "...");
	else if (first->seeded)
		snprintf(buf, cap, "object %u", chain[n - 1] + 1);
	else
		snprintf(buf, cap, "%s", first->ti->t->name ? first->ti->t->name : "root");
	for (int i = n - 1; i >= 0; i--) {
		const struct region *r = &x->r[chain[i]];
		size_t o = i == 0 ? off : x->r[chain[i - 1]].poff;
		inner_path(buf, cap, r->ti, r->ocount, o, r->slice || r->ocount != 1);
	}
}

static int refuse(struct enc *x, uint32_t reg, const uint8_t *p, const char *whyfmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(struct enc *x, uint32_t reg, const uint8_t *p, const char *whyfmt, ...)
{
	char path[400], why[512];
	va_list ap;

	region_path(x, reg, (size_t)((uintptr_t)p - x->r[reg].start), path, sizeof path);
	va_start(ap, whyfmt);
	vsnprintf(why, sizeof why, whyfmt, ap);
	va_end(ap);
	return common_errf(x->e, path, "%s", why);
}

/* A pointer to count elements of ti at q, seen in region reg at p. */
static int reference(struct enc *x, uint32_t reg, const uint8_t *p, uintptr_t q,
		     struct tinfo *ti, size_t count, bool slice)
{
	size_t sz = ti->t->size;
	if (count > SIZE_MAX / sz || count * sz > UINTPTR_MAX - q)
		return refuse(x, reg, p, "%zu elements of %s do not fit in memory", count,
			      ti->t->name);
	size_t slot;
	uint32_t k = lookup_slot(x, q, ti, count, &slot);
	if (!x->emitting) {
		if (k == NONE) {
			if (x->nr >= CODEC_MAX_OBJECTS)
				return refuse(x, reg, p, "more than %u objects", CODEC_MAX_OBJECTS);
			k = add_region_at(x, q, ti, count, slot);
			x->r[k].parent = reg;
			x->r[k].poff = (size_t)((uintptr_t)p - x->r[reg].start);
			x->r[k].slice = slice;
		}
		return 0;
	}
	uint64_t steps[CODEC_MAX_STEPS];
	const struct region *t = &x->r[x->r[k].top];
	int ns = offset_path(t->ti, t->ocount, q - t->start, ti, count, steps);
	if (ns < 0)
		return refuse(x, reg, p, "points into storage laid out as another type");
	codec_put_uvarint(x->out, t->id);
	codec_put_uvarint(x->out, (uint64_t)ns);
	for (int i = 0; i < ns; i++)
		codec_put_uvarint(x->out, steps[i]);
	return 0;
}

const struct sbx_field *codec_union_member(const struct sbx_type *t, int64_t tag)
{
	for (size_t i = 0; i < t->nfields; i++)
		if (t->fields[i].tag == tag)
			return &t->fields[i];
	return NULL;
}

static int walk(struct enc *x, uint32_t reg, const uint8_t *p, struct tinfo *ti, size_t n);

static int walk_string(struct enc *x, uint32_t reg, const uint8_t *p)
{
	const char *s;

	memcpy(&s, p, sizeof s);
	if (!x->emitting)
		return 0;
	if (!s) {
		codec_put_u8(x->out, 0);
		return 0;
	}
	size_t len = strlen(s);
	if (len > CODEC_MAX_STRING)
		return refuse(x, reg, p, "string longer than %u bytes", CODEC_MAX_STRING);
	codec_put_u8(x->out, 1);
	codec_put_bytes(x->out, s, len);
	return 0;
}

/* A function pointer, written only when the caller's check_fn knows it. */
static int walk_func(struct enc *x, uint32_t reg, const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	if (!x->emitting)
		return 0;
	if (v) {
		if (!x->o || !x->o->check_fn)
			return refuse(x, reg, p, "function pointer cannot be verified");
		if (x->o->check_fn(x->o->arg, v, x->e) < 0) {
			char why[sizeof x->e->why];
			snprintf(why, sizeof why, "%s", x->e->why);
			return refuse(x, reg, p, "%s", why);
		}
	}
	codec_put_u64(x->out, v);
	return 0;
}

static int walk_slice(struct enc *x, uint32_t reg, const uint8_t *p, struct tinfo *ti)
{
	struct codec_buf *b = x->out;
	struct sbx_slice s;

	memcpy(&s, p, sizeof s);
	if (!s.ptr) {
		if (s.len || s.cap)
			return refuse(x, reg, p, "NULL slice with len %zu cap %zu", s.len, s.cap);
		if (x->emitting)
			codec_put_u8(b, 0);
		return 0;
	}
	if (s.len > s.cap)
		return refuse(x, reg, p, "slice len %zu exceeds cap %zu", s.len, s.cap);
	if (x->emitting) {
		codec_put_u8(b, 1);
		codec_put_uvarint(b, s.len);
		codec_put_uvarint(b, s.cap);
	}
	return reference(x, reg, p, (uintptr_t)s.ptr, ti->elem, s.cap, true);
}

static int walk_union(struct enc *x, uint32_t reg, const uint8_t *p, struct tinfo *ti)
{
	const struct sbx_type *t = ti->t;
	int64_t tag = codec_load_int(p + t->tag_offset, t->tag->kind);
	const struct sbx_field *m = codec_union_member(t, tag);

	if (!m)
		return refuse(x, reg, p, "tag %lld selects no member of %s", (long long)tag,
			      t->name);
	if (x->emitting) {
		if (codec_is_signed(t->tag->kind))
			codec_put_svarint(x->out, tag);
		else
			codec_put_uvarint(x->out, (uint64_t)tag);
	}
	if (!m->type)
		return 0;
	return walk(x, reg, p + m->offset, ti->fields[m - t->fields], 1);
}

static int walk_value(struct enc *x, uint32_t reg, const uint8_t *p, struct tinfo *ti)
{
	const struct sbx_type *t = ti->t;
	struct codec_buf *b = x->out;

	switch (t->kind) {
	case SBX_K_BOOL:
		if (*p > 1)
			return refuse(x, reg, p, "bool holds %u", *p);
		if (x->emitting)
			codec_put_u8(b, *p);
		return 0;
	case SBX_K_I8: case SBX_K_I16: case SBX_K_I32: case SBX_K_I64:
		if (x->emitting)
			codec_put_svarint(b, codec_load_int(p, t->kind));
		return 0;
	case SBX_K_U8: case SBX_K_U16: case SBX_K_U32: case SBX_K_U64:
		if (x->emitting)
			codec_put_uvarint(b, (uint64_t)codec_load_int(p, t->kind));
		return 0;
	case SBX_K_F32: {
		uint32_t v;
		memcpy(&v, p, 4);
		if (x->emitting)
			codec_put_u32(b, v);
		return 0;
	}
	case SBX_K_F64: {
		uint64_t v;
		memcpy(&v, p, 8);
		if (x->emitting)
			codec_put_u64(b, v);
		return 0;
	}
	case SBX_K_STRING:
		return walk_string(x, reg, p);
	case SBX_K_FUNC:
		return walk_func(x, reg, p);
	case SBX_K_OPAQUE: {
		void *q;
		memcpy(&q, p, sizeof q);
		if (q)
			return refuse(x, reg, p, "%s is not transferable", t->name);
		if (x->emitting)
			codec_put_u8(b, 0);
		return 0;
	}
	case SBX_K_PTR: {
		uintptr_t q;
		memcpy(&q, p, sizeof q);
		if (x->emitting)
			codec_put_u8(b, q ? 1 : 0);
		return q ? reference(x, reg, p, q, ti->elem, 1, false) : 0;
	}
	case SBX_K_SLICE:
		return walk_slice(x, reg, p, ti);
	case SBX_K_ARRAY:
		return walk(x, reg, p, ti->elem, t->count);
	case SBX_K_STRUCT:
		for (size_t i = 0; i < t->nfields; i++)
			if (walk(x, reg, p + t->fields[i].offset, ti->fields[i], 1) < 0)
				return -1;
		return 0;
	case SBX_K_UNION:
		return walk_union(x, reg, p, ti);
	}
	return refuse(x, reg, p, "unknown kind");
}

static int walk(struct enc *x, uint32_t reg, const uint8_t *p, struct tinfo *ti, size_t n)
{
	if (!x->emitting && !ti->refs)
		return 0;
	if (ti->bulk && n >= CODEC_BULK_MIN) {
		if (x->emitting)
			codec_put_raw(x->out, p, n * ti->t->size);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (walk_value(x, reg, p + i * ti->t->size, ti) < 0)
			return -1;
	return 0;
}

static uint32_t find_top(struct enc *x, uint32_t k)
{
	uint32_t t = k;
	while (x->r[t].top != t)
		t = x->r[t].top;
	while (x->r[k].top != t) { /* compress */
		uint32_t next = x->r[k].top;
		x->r[k].top = t;
		k = next;
	}
	return t;
}

struct skey {
	uintptr_t start;
	size_t bytes;
	uint32_t idx;
};

static int by_range(const void *a, const void *b)
{
	const struct skey *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1; /* larger first: containers before contents */
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort by start (radix, stable), then order each run of equal starts. */
static void sort_keys(struct skey *k, size_t n)
{
	if (n < 4096) {
		qsort(k, n, sizeof *k, by_range);
		return;
	}
	struct skey *tmp = big_grow(NULL, 0, n * sizeof *tmp), *a = k, *b = tmp;
	size_t *cnt = common_xmalloc((1u << 16) * sizeof *cnt);
	uintptr_t all_or = 0, all_and = UINTPTR_MAX;
	for (size_t i = 0; i < n; i++) {
		all_or |= k[i].start;
		all_and &= k[i].start;
	}
	for (unsigned shift = 0; shift < 64; shift += 16) {
		if (!(((all_or ^ all_and) >> shift) & 0xffff))
			continue; /* every key has the same digit here */
		memset(cnt, 0, (1u << 16) * sizeof *cnt);
		for (size_t i = 0; i < n; i++)
			cnt[(a[i].start >> shift) & 0xffff]++;
		size_t sum = 0;
		for (size_t d = 0; d < (1 << 16); d++) {
			size_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			b[cnt[(a[i].start >> shift) & 0xffff]++] = a[i];
		struct skey *t = a;
		a = b;
		b = t;
	}
	if (a != k)
		memcpy(k, a, n * sizeof *k);
	free(tmp);
	free(cnt);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && k[j].start == k[i].start)
			j++;
		if (j - i > 1)
			qsort(k + i, j - i, sizeof *k, by_range);
		i = j;
	}
}

static bool holds(const struct region *c, const struct region *r)
{
	uint64_t steps[CODEC_MAX_STEPS];
	return offset_path(c->ti, c->ocount, r->start - c->start, r->ti, r->count, steps) >= 0;
}

/* Group overlapping regions: contained ones become interior, aligned runs of
 * one element type merge, anything else is overlapping storage. */
static int merge(struct enc *x)
{
	struct skey *keys = common_xmalloc((x->nr ? x->nr : 1) * sizeof *keys);
	size_t n = 0;
	uint32_t cur = NONE;
	int rc = 0;

	for (uint32_t i = 0; i < x->nr; i++)
		if (rend_bytes(&x->r[i])) /* empty runs stay objects of their own */
			keys[n++] = (struct skey){ x->r[i].start, rend_bytes(&x->r[i]), i };
	sort_keys(keys, n);
	uintptr_t cur_end = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint32_t k = keys[i].idx;
		/* the common case touches only the sorted keys */
		if (cur == NONE || keys[i].start >= cur_end) {
			cur = k;
			cur_end = keys[i].start + keys[i].bytes;
			continue;
		}
		struct region *r = &x->r[k];
		struct region *c = &x->r[cur];
		uintptr_t cend = c->start + rend_bytes(c), rend = r->start + rend_bytes(r);
		if (r->seeded) {
			rc = refuse(x, k, (const uint8_t *)r->start, "object overlaps another object");
		} else if (rend <= cend && holds(c, r)) {
			r->top = cur;
		} else if (rend == cend && r->start == c->start && !c->seeded && holds(r, c)) {
			c->top = k;
			cur = k;
		} else if (rend > cend && !c->seeded && c->ti == r->ti &&
			   (r->start - c->start) % c->ti->t->size == 0) {
			c->ocount = (rend - c->start) / c->ti->t->size;
			cur_end = rend;
			r->top = cur;
		} else {
			rc = refuse(x, k, (const uint8_t *)r->start,
				    "overlaps storage of another object with a different layout");
		}
	}
	free(keys);
	return rc;
}

static void enc_free(struct enc *x)
{
	free(x->r);
	free(x->hash);
	free(x->order);
}

/* Discovery, grouping, ID assignment and emission for regions already seeded. */
static int encode_core(struct enc *x, uintptr_t root, struct tinfo *root_ti, struct codec_graph *g)
{
	/* the work queue: regions are walked in discovery order */
	uint32_t rootk = lookup(x, root, root_ti, 1);
	if (rootk == NONE)
		rootk = add_region(x, root, root_ti, 1);
	for (size_t i = 0; i < x->nr; i++) {
		struct region *r = &x->r[i];
		if (walk(x, (uint32_t)i, (const uint8_t *)r->start, r->ti, r->ocount) < 0)
			return -1;
	}
	if (merge(x) < 0)
		return -1;
	/* IDs in order of each object's first discovered part: root's is 1 */
	x->order = common_xmalloc(x->nr * sizeof *x->order);
	uint32_t *first = common_xmalloc(x->nr * sizeof *first);
	for (size_t i = 0; i < x->nr; i++)
		first[i] = NONE;
	for (uint32_t i = 0; i < x->nr; i++) {
		uint32_t t = find_top(x, i);
		if (first[t] == NONE) {
			first[t] = i;
			x->r[t].id = (uint32_t)x->nobj + 1;
			x->order[x->nobj++] = t;
		}
	}
	free(first);

	struct codec_buf *b = x->out;
	size_t mark = b->len, guess = x->tt->bytes.len + 64;
	for (size_t i = 0; i < x->nobj; i++) {
		const struct region *r = &x->r[x->order[i]];
		guess += rend_bytes(r) + 4; /* about right for bulk data, generous otherwise */
	}
	codec_buf_grow(b, guess);
	codec_put_raw(b, CODEC_MAGIC, 4);
	codec_put_u8(b, CODEC_VERSION);
	codec_put_raw(b, x->tt->bytes.p, x->tt->bytes.len);
	x->emitting = true;
	/* the root reference */
	uint64_t steps[CODEC_MAX_STEPS];
	const struct region *rt = &x->r[x->r[rootk].top];
	int ns = offset_path(rt->ti, rt->ocount, root - rt->start, root_ti, 1, steps);
	if (ns < 0)
		return common_errf(x->e, root_ti->t->name, "root lies inside another object's layout");
	codec_put_uvarint(b, rt->id);
	codec_put_uvarint(b, (uint64_t)ns);
	for (int i = 0; i < ns; i++)
		codec_put_uvarint(b, steps[i]);
	codec_put_uvarint(b, x->nobj);
	for (size_t i = 0; i < x->nobj; i++) {
		const struct region *r = &x->r[x->order[i]];
		codec_put_uvarint(b, r->ti->idx);
		codec_put_uvarint(b, r->ocount);
	}
	for (size_t i = 0; i < x->nobj; i++) {
		uint32_t k = x->order[i];
		const struct region *r = &x->r[k];
		if (walk(x, k, (const uint8_t *)r->start, r->ti, r->ocount) < 0)
			return -1;
	}
	/* a digest trailer: accidental corruption is always refused */
	uint8_t dg[COMMON_SHA256_LEN];
	common_sha256(b->p + mark, b->len - mark, dg);
	codec_put_raw(b, dg, sizeof dg);
	if (g) {
		g->nobj = x->nobj;
		g->obj = common_xcalloc(x->nobj ? x->nobj : 1, sizeof *g->obj);
		for (size_t i = 0; i < x->nobj; i++) {
			const struct region *r = &x->r[x->order[i]];
			g->obj[i] = (struct gobj){ (uint8_t *)r->start, r->ti, r->ocount };
		}
		g->root = (void *)root;
		g->root_id = rt->id;
		g->root_off = root - rt->start;
	}
	return 0;
}

int codec_encode(const struct sbx_type *t, void *root, const struct codec_opts *o,
		 struct codec_buf *out, struct codec_graph **gp, struct common_err *e)
{
	struct codec_graph *g = common_xcalloc(1, sizeof *g);
	struct enc x = { .o = o, .e = e, .out = out };
	size_t mark = out->len;

	if (gp)
		*gp = NULL;
	if (codec_ttable_build(t, &g->tt, e) < 0) {
		free(g);
		return -1;
	}
	if (!root) {
		codec_ttable_free(&g->tt);
		free(g);
		return common_errf(e, t->name ? t->name : "root", "root is NULL");
	}
	x.tt = &g->tt;
	int rc = encode_core(&x, (uintptr_t)root, g->tt.v[0], g);
	enc_free(&x);
	if (rc < 0 || !gp) {
		if (rc < 0)
			out->len = mark;
		codec_graph_free(g);
		return rc;
	}
	*gp = g;
	return 0;
}

int codec_encode_graph(struct codec_graph *g, const struct codec_opts *o,
		       struct codec_buf *out, struct common_err *e)
{
	struct enc x = { .tt = &g->tt, .o = o, .e = e, .out = out };
	size_t mark = out->len;

	/* the graph's objects keep IDs 1..n, reachable or not */
	for (size_t i = 0; i < g->nobj; i++) {
		uint32_t k = add_region(&x, (uintptr_t)g->obj[i].base, g->obj[i].ti, g->obj[i].count);
		x.r[k].seeded = true;
	}
	int rc = encode_core(&x, (uintptr_t)g->root, g->tt.v[0], NULL);
	enc_free(&x);
	if (rc < 0)
		out->len = mark;
	return rc;
}

