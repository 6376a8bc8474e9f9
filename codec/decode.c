/* Object graphs, decoding: typed allocation per ID before any content, every
 * reference and length checked against the image and the storage budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec-internal.h"

#define DEFAULT_BUDGET (2ull << 30)

struct dec {
	struct codec_rd r;
	struct codec_graph *g;
	const struct codec_opts *o;
	uint64_t budget; /* bytes of storage still allowed */
	struct common_err fnerr;
};

/* Resolve a reference to need elements of target; NULL with r failed. */
static uint8_t *resolve(struct dec *d, const struct tinfo *target, size_t need)
{
	uint64_t id, ns;
	struct codec_rd *r = &d->r;

	if (codec_get_uvarint(r, &id) < 0 || codec_get_uvarint(r, &ns) < 0)
		return NULL;
	if (id == 0 || id > d->g->nobj)
		return codec_rd_fail(r, "reference to an unknown object"), NULL;
	if (ns == 0 || ns > CODEC_MAX_STEPS)
		return codec_rd_fail(r, "reference path length out of range"), NULL;
	const struct gobj *ob = &d->g->obj[id - 1];
	struct tinfo *ti = ob->ti;
	uint8_t *p = ob->base;
	size_t len = ob->count;
	bool element = true; /* the next step indexes len elements of ti */
	for (uint64_t i = 0; i < ns; i++) {
		uint64_t s;
		if (codec_get_uvarint(r, &s) < 0)
			return NULL;
		bool last = i + 1 == ns;
		if (element) {
			if (len == 0 ? (s != 0 || need != 0 || !last) : s >= len)
				return codec_rd_fail(r, "reference index out of range"), NULL;
			if (last && ti == target && (need > len || s > len - need))
				return codec_rd_fail(r, "reference range exceeds its array"), NULL;
			p += s * ti->t->size;
			element = false;
		} else if (ti->t->kind == SBX_K_STRUCT) {
			if (s >= ti->t->nfields)
				return codec_rd_fail(r, "reference field out of range"), NULL;
			p += ti->t->fields[s].offset;
			ti = ti->fields[s];
			if (last && need > 1)
				return codec_rd_fail(r, "reference range exceeds a field"), NULL;
		} else {
			return codec_rd_fail(r, "reference path enters a non-aggregate"), NULL;
		}
		if (!element && ti->t->kind == SBX_K_ARRAY && !last) {
			len = ti->t->count;
			ti = ti->elem;
			element = true;
		}
	}
	if (ti != target || element)
		return codec_rd_fail(r, "reference has the wrong type"), NULL;
	return p;
}

static int fill(struct dec *d, uint8_t *p, struct tinfo *ti, size_t n);

/* An integer of kind k, refused (at its start) when it does not fit. */
static int fill_int(struct codec_rd *r, uint8_t *p, enum sbx_kind k)
{
	size_t at = r->off;
	int64_t v;

	if (codec_is_signed(k)) {
		if (codec_get_svarint(r, &v) < 0)
			return -1;
		if (!codec_int_fits(k, v, 0)) {
			r->off = at;
			return codec_rd_fail(r, "integer does not fit its field");
		}
	} else {
		uint64_t u;
		if (codec_get_uvarint(r, &u) < 0)
			return -1;
		if (!codec_int_fits(k, 0, u)) {
			r->off = at;
			return codec_rd_fail(r, "integer does not fit its field");
		}
		v = (int64_t)u;
	}
	codec_store_int(p, k, v);
	return 0;
}

static int fill_string(struct dec *d, uint8_t *p)
{
	struct codec_rd *r = &d->r;
	uint8_t tag;
	const uint8_t *s;
	size_t len;

	if (codec_get_u8(r, &tag) < 0)
		return -1;
	if (tag > 1)
		return codec_rd_fail(r, "bad string tag");
	if (tag == 0)
		return 0;
	if (codec_get_bytes(r, &s, &len, CODEC_MAX_STRING) < 0)
		return -1;
	if (memchr(s, 0, len))
		return codec_rd_fail(r, "string holds a NUL byte");
	if (len + 1 > d->budget)
		return codec_rd_fail(r, "storage budget exhausted");
	d->budget -= len + 1;
	char *c = common_xmalloc(len + 1);
	memcpy(c, s, len);
	c[len] = '\0';
	memcpy(p, &c, sizeof c);
	return 0;
}

/* A function pointer, accepted only when the caller's check_fn knows it. */
static int fill_func(struct dec *d, uint8_t *p)
{
	struct codec_rd *r = &d->r;
	uint64_t v;
	size_t at = r->off;

	if (codec_get_u64(r, &v) < 0)
		return -1;
	if (v && (!d->o || !d->o->check_fn || d->o->check_fn(d->o->arg, v, &d->fnerr) < 0)) {
		r->off = at;
		return codec_rd_fail(r, "function pointer is not a function of this executable");
	}
	memcpy(p, &v, 8);
	return 0;
}

static int fill_slice(struct dec *d, uint8_t *p, struct tinfo *ti)
{
	struct codec_rd *r = &d->r;
	uint8_t tag;
	struct sbx_slice s = {0};

	if (codec_get_u8(r, &tag) < 0)
		return -1;
	if (tag > 1)
		return codec_rd_fail(r, "bad slice tag");
	if (tag) {
		uint64_t len, cap;
		if (codec_get_uvarint(r, &len) < 0 || codec_get_uvarint(r, &cap) < 0)
			return -1;
		if (len > cap || cap > SIZE_MAX / ti->elem->t->size)
			return codec_rd_fail(r, "slice len exceeds cap");
		if (!(s.ptr = resolve(d, ti->elem, (size_t)cap)))
			return -1;
		s.len = (size_t)len;
		s.cap = (size_t)cap;
	}
	memcpy(p, &s, sizeof s);
	return 0;
}

static int fill_union(struct dec *d, uint8_t *p, struct tinfo *ti)
{
	const struct sbx_type *t = ti->t;
	struct codec_rd *r = &d->r;
	int64_t tag;
	size_t at = r->off;

	if (codec_is_signed(t->tag->kind)) {
		if (codec_get_svarint(r, &tag) < 0)
			return -1;
	} else {
		uint64_t u;
		if (codec_get_uvarint(r, &u) < 0)
			return -1;
		tag = (int64_t)u;
	}
	const struct sbx_field *m = codec_union_member(t, tag);
	if (!m || !codec_int_fits(t->tag->kind, tag, (uint64_t)tag)) {
		r->off = at;
		return codec_rd_fail(r, "union tag selects no member");
	}
	codec_store_int(p + t->tag_offset, t->tag->kind, tag);
	return m->type ? fill(d, p + m->offset, ti->fields[m - t->fields], 1) : 0;
}

static int fill_value(struct dec *d, uint8_t *p, struct tinfo *ti)
{
	const struct sbx_type *t = ti->t;
	struct codec_rd *r = &d->r;

	switch (t->kind) {
	case SBX_K_BOOL: {
		uint8_t v;
		if (codec_get_u8(r, &v) < 0)
			return -1;
		if (v > 1)
			return codec_rd_fail(r, "bool is not 0 or 1");
		*p = v;
		return 0;
	}
	case SBX_K_I8: case SBX_K_I16: case SBX_K_I32: case SBX_K_I64:
	case SBX_K_U8: case SBX_K_U16: case SBX_K_U32: case SBX_K_U64:
		return fill_int(r, p, t->kind);
	case SBX_K_F32: {
		uint32_t v;
		if (codec_get_u32(r, &v) < 0)
			return -1;
		memcpy(p, &v, 4);
		return 0;
	}
	case SBX_K_F64: {
		uint64_t v;
		if (codec_get_u64(r, &v) < 0)
			return -1;
		memcpy(p, &v, 8);
		return 0;
	}
	case SBX_K_STRING:
		return fill_string(d, p);
	case SBX_K_FUNC:
		return fill_func(d, p);
	case SBX_K_OPAQUE: {
		uint8_t v;
		if (codec_get_u8(r, &v) < 0)
			return -1;
		return v ? codec_rd_fail(r, "opaque pointer is not NULL") : 0;
	}
	case SBX_K_PTR: {
		uint8_t tag;
		if (codec_get_u8(r, &tag) < 0)
			return -1;
		if (tag > 1)
			return codec_rd_fail(r, "bad pointer tag");
		uint8_t *q = NULL;
		if (tag && !(q = resolve(d, ti->elem, 1)))
			return -1;
		memcpy(p, &q, sizeof q);
		return 0;
	}
	case SBX_K_SLICE:
		return fill_slice(d, p, ti);
	case SBX_K_ARRAY:
		return fill(d, p, ti->elem, t->count);
	case SBX_K_STRUCT:
		for (size_t i = 0; i < t->nfields; i++)
			if (fill(d, p + t->fields[i].offset, ti->fields[i], 1) < 0)
				return -1;
		return 0;
	case SBX_K_UNION:
		return fill_union(d, p, ti);
	}
	return codec_rd_fail(r, "unknown kind");
}

static int fill(struct dec *d, uint8_t *p, struct tinfo *ti, size_t n)
{
	if (ti->bulk && n >= CODEC_BULK_MIN) {
		const uint8_t *src;
		if (codec_get_raw(&d->r, &src, n * ti->t->size) < 0)
			return -1;
		memcpy(p, src, n * ti->t->size);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (fill_value(d, p + i * ti->t->size, ti) < 0)
			return -1;
	return 0;
}

/* Free the strings held inline in n elements of ti at p. */
static void free_strings(uint8_t *p, const struct tinfo *ti, size_t n)
{
	const struct sbx_type *t = ti->t;
	if (!ti->strings)
		return;
	for (size_t i = 0; i < n; i++, p += t->size) {
		if (t->kind == SBX_K_STRING) {
			char *s;
			memcpy(&s, p, sizeof s);
			free(s);
			memset(p, 0, sizeof s);
		} else if (t->kind == SBX_K_ARRAY) {
			free_strings(p, ti->elem, t->count);
		} else if (t->kind == SBX_K_STRUCT) {
			for (size_t j = 0; j < t->nfields; j++)
				free_strings(p + t->fields[j].offset, ti->fields[j], 1);
		} else if (t->kind == SBX_K_UNION) {
			const struct sbx_field *m =
				codec_union_member(t, codec_load_int(p + t->tag_offset, t->tag->kind));
			if (m && m->type)
				free_strings(p + m->offset, ti->fields[m - t->fields], 1);
		}
	}
}

void codec_free_storage(struct codec_graph *g, size_t from)
{
	for (size_t i = from; i < g->nobj; i++) {
		if (!g->obj[i].base)
			continue;
		free_strings(g->obj[i].base, g->obj[i].ti, g->obj[i].count);
		free(g->obj[i].base);
		g->obj[i].base = NULL;
	}
}

/* Digest, magic, version and type table: the image is one this program wrote
 * with these descriptors. *len loses the digest; r reads what follows the table. */
static int check_preamble(const struct codec_graph *g, struct codec_rd *r, const void *img,
			  size_t *len, struct common_err *e)
{
	const uint8_t *magic, *tab;
	uint8_t ver, dg[COMMON_SHA256_LEN];

	if (*len < 5 + COMMON_SHA256_LEN)
		return common_errf(e, "state image", "%zu bytes is too short", *len);
	*len -= COMMON_SHA256_LEN;
	common_sha256(img, *len, dg);
	if (memcmp(dg, (const uint8_t *)img + *len, sizeof dg) != 0)
		return common_errf(e, "state image", "digest mismatch (truncated or corrupted)");
	codec_rd_init(r, img, *len);
	if (codec_get_raw(r, &magic, 4) < 0 || codec_get_u8(r, &ver) < 0)
		return codec_rd_err(r, "state image", e);
	if (memcmp(magic, CODEC_MAGIC, 4) != 0) {
		r->off = 0;
		codec_rd_fail(r, "not an sbx object-graph image");
		return codec_rd_err(r, "state image", e);
	}
	if (ver != CODEC_VERSION) {
		r->off = 4;
		codec_rd_fail(r, "unsupported image version");
		return codec_rd_err(r, "state image", e);
	}
	size_t tlen = g->tt.bytes.len;
	if (r->len - r->off < tlen || memcmp(r->p + r->off, g->tt.bytes.p, tlen) != 0) {
		size_t i = 0;
		while (i < tlen && r->off + i < r->len && r->p[r->off + i] == g->tt.bytes.p[i])
			i++;
		r->off += i;
		codec_rd_fail(r, r->off == r->len ? "truncated type table"
				 : "type table differs from this program's descriptors");
		return codec_rd_err(r, "state image", e);
	}
	(void)codec_get_raw(r, &tab, tlen);
	return 0;
}

/* The root reference, skipped over: it is resolved once storage exists. */
static int skip_root(struct codec_rd *r, uint64_t *rid)
{
	uint64_t rns, step;

	if (codec_get_uvarint(r, rid) < 0 || codec_get_uvarint(r, &rns) < 0)
		return -1;
	if (rns == 0 || rns > CODEC_MAX_STEPS)
		return codec_rd_fail(r, "root path length out of range");
	for (uint64_t i = 0; i < rns; i++)
		if (codec_get_uvarint(r, &step) < 0)
			return -1;
	return 0;
}

/* The object table: each object's type and count, bounded by what the image
 * can hold and by the storage budget, which it then spends. */
static int read_objects(struct dec *d, size_t len)
{
	struct codec_rd *r = &d->r;
	struct codec_graph *g = d->g;
	uint64_t nobj, minbytes = 0, storage = 0;

	if (codec_get_uvarint(r, &nobj) < 0)
		return -1;
	if (nobj == 0 || nobj > CODEC_MAX_OBJECTS || nobj > (r->len - r->off) / 2)
		return codec_rd_fail(r, "object count out of range");
	g->obj = common_xcalloc((size_t)nobj, sizeof *g->obj);
	g->nobj = (size_t)nobj;
	for (size_t i = 0; i < g->nobj; i++) {
		uint64_t ti, count;
		if (codec_get_uvarint(r, &ti) < 0 || codec_get_uvarint(r, &count) < 0)
			return -1;
		if (ti >= g->tt.n)
			return codec_rd_fail(r, "object type out of range");
		struct tinfo *t = g->tt.v[ti];
		uint64_t sz = t->t->size;
		/* every element costs at least minenc bytes: bounds storage by the image */
		uint64_t per = t->bulk && count >= CODEC_BULK_MIN ? sz : t->minenc;
		if (count > len || (per && count > (len - minbytes) / per))
			return codec_rd_fail(r, "object larger than the image can hold");
		minbytes += count * per;
		if (count > d->budget / sz || storage + count * sz > d->budget)
			return codec_rd_fail(r, "storage budget exhausted");
		storage += count * sz;
		g->obj[i].ti = t;
		g->obj[i].count = (size_t)count;
	}
	if (minbytes > r->len - r->off)
		return codec_rd_fail(r, "objects larger than the image can hold");
	d->budget -= storage;
	return 0;
}

/* Storage for every object, the root resolved into it, then the contents. */
static int fill_objects(struct dec *d, size_t root_at, uint64_t rid)
{
	struct codec_rd *r = &d->r;
	struct codec_graph *g = d->g;

	for (size_t i = 0; i < g->nobj; i++) {
		size_t sz = g->obj[i].count * g->obj[i].ti->t->size;
		g->obj[i].base = codec_big_zalloc(sz ? sz : 1);
	}
	size_t content_at = r->off;
	r->off = root_at;
	uint8_t *root = resolve(d, g->tt.v[0], 1);
	if (!root)
		return -1;
	g->root = root;
	g->root_id = (uint32_t)rid;
	g->root_off = (size_t)(root - g->obj[rid - 1].base);
	r->off = content_at;
	for (size_t i = 0; i < g->nobj; i++)
		if (fill(d, g->obj[i].base, g->obj[i].ti, g->obj[i].count) < 0)
			return -1;
	return codec_rd_end(r);
}

/* Decode img against the table tt (borrowed into g->tt by the caller). */
int codec_decode_core(struct codec_graph *g, const void *img, size_t len,
		      const struct codec_opts *o, struct common_err *e)
{
	struct dec d = { .g = g, .o = o };
	struct codec_rd *r = &d.r;
	uint64_t rid;

	d.budget = o && o->max_alloc ? o->max_alloc : DEFAULT_BUDGET;
	if (check_preamble(g, r, img, &len, e) < 0)
		return -1;
	size_t root_at = r->off;
	if (skip_root(r, &rid) < 0)
		return codec_rd_err(r, "state image", e);
	if (read_objects(&d, len) < 0 || fill_objects(&d, root_at, rid) < 0)
		goto bad;
	g->owned = true;
	return 0;
bad:
	codec_free_storage(g, 0);
	free(g->obj);
	g->obj = NULL;
	g->nobj = 0;
	codec_rd_err(r, "state image", e);
	if (e && d.fnerr.why[0] && r->why && strstr(r->why, "function")) {
		size_t n = strlen(e->why);
		snprintf(e->why + n, sizeof e->why - n, " (%s)", d.fnerr.why);
	}
	return -1;
}

int codec_decode(const struct sbx_type *t, const void *img, size_t len,
		 const struct codec_opts *o, void **root, struct codec_graph **gp,
		 struct common_err *e)
{
	struct codec_graph *g = common_xcalloc(1, sizeof *g);

	*gp = NULL;
	if (codec_ttable_build(t, &g->tt, e) < 0) {
		free(g);
		return -1;
	}
	if (codec_decode_core(g, img, len, o, e) < 0) {
		codec_graph_free(g);
		return -1;
	}
	*root = g->root;
	*gp = g;
	return 0;
}

void codec_graph_free(struct codec_graph *g)
{
	if (!g)
		return;
	if (g->owned)
		codec_free_storage(g, 0);
	free(g->obj);
	codec_ttable_free(&g->tt);
	free(g);
}

