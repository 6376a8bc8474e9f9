/* Type descriptors: the built-in scalars, checking a user's descriptors, and
 * the canonical type table both sides of an image must agree on. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec-internal.h"

#define SCALAR(var, k, nm, sz) const struct sbx_type var = { .kind = (k), .name = (nm), .size = (sz) }
SCALAR(sbx_type_bool, SBX_K_BOOL, "bool", 1);
SCALAR(sbx_type_i8, SBX_K_I8, "i8", 1);
SCALAR(sbx_type_i16, SBX_K_I16, "i16", 2);
SCALAR(sbx_type_i32, SBX_K_I32, "i32", 4);
SCALAR(sbx_type_i64, SBX_K_I64, "i64", 8);
SCALAR(sbx_type_u8, SBX_K_U8, "u8", 1);
SCALAR(sbx_type_u16, SBX_K_U16, "u16", 2);
SCALAR(sbx_type_u32, SBX_K_U32, "u32", 4);
SCALAR(sbx_type_u64, SBX_K_U64, "u64", 8);
SCALAR(sbx_type_f32, SBX_K_F32, "f32", 4);
SCALAR(sbx_type_f64, SBX_K_F64, "f64", 8);
SCALAR(sbx_type_string, SBX_K_STRING, "string", sizeof(char *));
SCALAR(sbx_type_fn, SBX_K_FUNC, "function", sizeof(void (*)(void)));
SCALAR(sbx_type_voidptr, SBX_K_OPAQUE, "void*", sizeof(void *));
SCALAR(sbx_type_file, SBX_K_OPAQUE, "FILE*", sizeof(void *));

_Static_assert(sizeof(struct sbx_slice) == 24, "slice is three words");
_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, "LP64 only");

static int codec_is_int(enum sbx_kind k)
{
	return k >= SBX_K_I8 && k <= SBX_K_U64;
}

int codec_is_signed(enum sbx_kind k)
{
	return k >= SBX_K_I8 && k <= SBX_K_I64;
}

static size_t kind_size(enum sbx_kind k)
{
	switch (k) {
	case SBX_K_BOOL: case SBX_K_I8: case SBX_K_U8: return 1;
	case SBX_K_I16: case SBX_K_U16: return 2;
	case SBX_K_I32: case SBX_K_U32: case SBX_K_F32: return 4;
	case SBX_K_I64: case SBX_K_U64: case SBX_K_F64: return 8;
	case SBX_K_STRING: case SBX_K_FUNC: case SBX_K_PTR: case SBX_K_OPAQUE: return 8;
	case SBX_K_SLICE: return sizeof(struct sbx_slice);
	default: return 0; /* aggregates: any */
	}
}

int64_t codec_load_int(const void *p, enum sbx_kind k)
{
	switch (k) {
	case SBX_K_I8: { int8_t v; memcpy(&v, p, 1); return v; }
	case SBX_K_I16: { int16_t v; memcpy(&v, p, 2); return v; }
	case SBX_K_I32: { int32_t v; memcpy(&v, p, 4); return v; }
	case SBX_K_U8: { uint8_t v; memcpy(&v, p, 1); return v; }
	case SBX_K_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
	case SBX_K_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
	default: { int64_t v; memcpy(&v, p, 8); return v; }
	}
}

void codec_store_int(void *p, enum sbx_kind k, int64_t v)
{
	size_t n = kind_size(k);
	/* little-endian: the low n bytes are the value */
	memcpy(p, &v, n);
}

int codec_int_fits(enum sbx_kind k, int64_t sv, uint64_t uv)
{
	switch (k) {
	case SBX_K_I8: return sv >= INT8_MIN && sv <= INT8_MAX;
	case SBX_K_I16: return sv >= INT16_MIN && sv <= INT16_MAX;
	case SBX_K_I32: return sv >= INT32_MIN && sv <= INT32_MAX;
	case SBX_K_I64: return 1;
	case SBX_K_U8: return uv <= UINT8_MAX;
	case SBX_K_U16: return uv <= UINT16_MAX;
	case SBX_K_U32: return uv <= UINT32_MAX;
	case SBX_K_U64: return 1;
	default: return 0;
	}
}

static const char *tname(const struct sbx_type *t)
{
	return t->name ? t->name : "(unnamed)";
}

/* One descriptor on its own: sizes, offsets, member shapes. */
static int check_one(const struct sbx_type *t, struct common_err *e)
{
	char what[256];
	snprintf(what, sizeof what, "type %s", tname(t));
	if (t->kind < SBX_K_BOOL || t->kind > SBX_K_OPAQUE)
		return common_errf(e, what, "unknown kind %d", (int)t->kind);
	size_t ks = kind_size(t->kind);
	if (ks && t->size != ks)
		return common_errf(e, what, "size %zu, this kind needs %zu", t->size, ks);
	switch (t->kind) {
	case SBX_K_PTR:
	case SBX_K_SLICE:
		if (!t->elem)
			return common_errf(e, what, "pointer without an element descriptor");
		break;
	case SBX_K_ARRAY:
		if (!t->elem || t->count == 0)
			return common_errf(e, what, "array needs an element descriptor and a count");
		if (t->elem->size == 0 || t->count > SIZE_MAX / t->elem->size ||
		    t->count * t->elem->size != t->size)
			return common_errf(e, what, "size %zu is not %zu x %zu", t->size,
					   t->count, t->elem->size);
		break;
	case SBX_K_STRUCT:
	case SBX_K_UNION: {
		size_t prev_end = 0;
		if (t->nfields == 0 || !t->fields)
			return common_errf(e, what, "no fields");
		if (t->kind == SBX_K_UNION) {
			if (!t->tag || !codec_is_int(t->tag->kind))
				return common_errf(e, what, "tag must be an integer");
			if (t->tag_offset > t->size || t->size - t->tag_offset < t->tag->size)
				return common_errf(e, what, "tag outside the struct");
		}
		for (size_t i = 0; i < t->nfields; i++) {
			const struct sbx_field *f = &t->fields[i];
			const char *fn = f->name ? f->name : "?";
			if (!f->type && t->kind == SBX_K_STRUCT)
				return common_errf(e, what, "field %s has no descriptor", fn);
			if (f->type && f->size != f->type->size)
				return common_errf(e, what, "field %s is %zu bytes but its type %s is %zu",
						   fn, f->size, tname(f->type), f->type->size);
			if (f->offset > t->size || t->size - f->offset < f->size)
				return common_errf(e, what, "field %s lies outside the struct", fn);
			if (t->kind == SBX_K_STRUCT) {
				/* ordered and disjoint, so an offset names one field */
				if (i > 0 && f->offset < prev_end)
					return common_errf(e, what, "field %s overlaps or is out of order", fn);
				prev_end = f->offset + f->size;
			} else {
				size_t to = t->tag_offset, te = to + t->tag->size;
				if (f->size && f->offset < te && to < f->offset + f->size)
					return common_errf(e, what, "member %s overlaps the tag", fn);
				for (size_t j = 0; j < i; j++)
					if (t->fields[j].tag == f->tag)
						return common_errf(e, what, "members %s and %s share tag %lld",
								   t->fields[j].name, fn, (long long)f->tag);
			}
		}
		break;
	}
	default:
		break;
	}
	return 0;
}

/* Inline containment must terminate: a struct cannot hold itself. */
static int check_inline(const struct sbx_type *t, const struct sbx_type **stack, int depth,
			struct common_err *e)
{
	if (check_one(t, e) < 0)
		return -1;
	for (int i = 0; i < depth; i++)
		if (stack[i] == t)
			return common_errf(e, tname(t), "descriptor cycle: %s contains itself inline",
					   tname(t));
	if (depth >= CODEC_MAX_DEPTH)
		return common_errf(e, tname(t), "descriptors nest deeper than %d levels",
				   CODEC_MAX_DEPTH);
	stack[depth] = t;
	if (t->kind == SBX_K_ARRAY)
		return check_inline(t->elem, stack, depth + 1, e);
	if (t->kind == SBX_K_STRUCT || t->kind == SBX_K_UNION) {
		for (size_t i = 0; i < t->nfields; i++) {
			if (!t->fields[i].type)
				continue;
			if (check_inline(t->fields[i].type, stack, depth + 1, e) < 0) {
				common_err_context(e, "%s.%s", tname(t), t->fields[i].name);
				return -1;
			}
		}
	}
	return 0;
}

static struct tinfo *find(struct ttable *tt, const struct sbx_type *t)
{
	for (size_t i = 0; i < tt->n; i++)
		if (tt->v[i]->t == t)
			return tt->v[i];
	return NULL;
}

static struct tinfo *add(struct ttable *tt, const struct sbx_type *t, struct common_err *e)
{
	struct tinfo *ti = find(tt, t);
	if (ti)
		return ti;
	if (tt->n >= CODEC_MAX_TYPES) {
		common_errf(e, tname(t), "more than %d descriptors", CODEC_MAX_TYPES);
		return NULL;
	}
	if (tt->n == tt->cap) {
		tt->cap = tt->cap ? tt->cap * 2 : 16;
		tt->v = common_xrealloc(tt->v, tt->cap * sizeof *tt->v);
	}
	ti = common_xcalloc(1, sizeof *ti);
	ti->t = t;
	ti->idx = (uint32_t)tt->n;
	tt->v[tt->n++] = ti;
	return ti;
}

/* Flags and minimum encoded size; the inline graph is acyclic (checked). */
static void summarize(struct tinfo *ti, uint8_t *done)
{
	if (done[ti->idx])
		return;
	const struct sbx_type *t = ti->t;
	ti->plain = 1;
	switch (t->kind) {
	case SBX_K_BOOL:
		ti->plain = 0; /* 0/1 must be checked */
		ti->minenc = 1;
		break;
	case SBX_K_F32: ti->bulk = 1; ti->minenc = 4; break;
	case SBX_K_F64: ti->bulk = 1; ti->minenc = 8; break;
	case SBX_K_FUNC: ti->plain = 0; ti->minenc = 8; break;
	case SBX_K_STRING: ti->plain = 0; ti->strings = 1; ti->minenc = 1; break;
	case SBX_K_OPAQUE: ti->plain = 0; ti->minenc = 1; break;
	case SBX_K_PTR:
	case SBX_K_SLICE: ti->plain = 0; ti->refs = 1; ti->minenc = 1; break;
	case SBX_K_ARRAY:
		summarize(ti->elem, done);
		ti->plain = ti->elem->plain;
		ti->refs = ti->elem->refs;
		ti->strings = ti->elem->strings;
		ti->minenc = ti->elem->bulk && t->count >= CODEC_BULK_MIN ?
			t->count * t->elem->size : t->count * ti->elem->minenc;
		break;
	case SBX_K_STRUCT:
	case SBX_K_UNION:
		ti->minenc = t->kind == SBX_K_UNION ? 1 : 0;
		if (t->kind == SBX_K_UNION)
			ti->plain = 0;
		for (size_t i = 0; i < t->nfields; i++) {
			struct tinfo *f = ti->fields[i];
			if (!f)
				continue;
			summarize(f, done);
			ti->plain &= f->plain;
			ti->refs |= f->refs;
			ti->strings |= f->strings;
			if (t->kind == SBX_K_STRUCT)
				ti->minenc += f->minenc;
		}
		break;
	default: /* integers */
		ti->bulk = 1;
		ti->minenc = 1;
		break;
	}
	done[ti->idx] = 1;
}

static void emit(struct codec_buf *b, const struct tinfo *ti)
{
	const struct sbx_type *t = ti->t;
	codec_put_u8(b, (uint8_t)t->kind);
	codec_put_bytes(b, tname(t), strlen(tname(t)));
	codec_put_uvarint(b, t->size);
	switch (t->kind) {
	case SBX_K_PTR:
	case SBX_K_SLICE:
		codec_put_uvarint(b, ti->elem->idx);
		break;
	case SBX_K_ARRAY:
		codec_put_uvarint(b, ti->elem->idx);
		codec_put_uvarint(b, t->count);
		break;
	case SBX_K_STRUCT:
	case SBX_K_UNION:
		if (t->kind == SBX_K_UNION) {
			codec_put_uvarint(b, t->tag_offset);
			codec_put_uvarint(b, ti->tag->idx);
		}
		codec_put_uvarint(b, t->nfields);
		for (size_t i = 0; i < t->nfields; i++) {
			const struct sbx_field *f = &t->fields[i];
			codec_put_bytes(b, f->name ? f->name : "", f->name ? strlen(f->name) : 0);
			codec_put_uvarint(b, f->offset);
			if (t->kind == SBX_K_UNION) {
				codec_put_svarint(b, f->tag);
				codec_put_uvarint(b, ti->fields[i] ? ti->fields[i]->idx + 1 : 0);
			} else {
				codec_put_uvarint(b, ti->fields[i]->idx);
			}
		}
		break;
	default:
		break;
	}
}

int codec_type_check(const struct sbx_type *t, struct common_err *e)
{
	struct ttable tt = {0};
	int rc = codec_ttable_build(t, &tt, e);
	codec_ttable_free(&tt);
	return rc;
}

int codec_ttable_build(const struct sbx_type *root, struct ttable *tt, struct common_err *e)
{
	const struct sbx_type *stack[CODEC_MAX_DEPTH];

	memset(tt, 0, sizeof *tt);
	codec_buf_init(&tt->bytes);
	if (!root)
		return common_errf(e, "type", "no root descriptor");
	if (!add(tt, root, e))
		goto fail;
	/* breadth-first: the order is the table's canonical order */
	for (size_t i = 0; i < tt->n; i++) {
		struct tinfo *ti = tt->v[i];
		const struct sbx_type *t = ti->t;
		if (check_inline(t, stack, 0, e) < 0)
			goto fail;
		if (t->elem && (t->kind == SBX_K_PTR || t->kind == SBX_K_SLICE ||
				t->kind == SBX_K_ARRAY)) {
			if (!(ti->elem = add(tt, t->elem, e)))
				goto fail;
		}
		if (t->kind == SBX_K_UNION && !(ti->tag = add(tt, t->tag, e)))
			goto fail;
		if (t->kind == SBX_K_STRUCT || t->kind == SBX_K_UNION) {
			ti->fields = common_xcalloc(t->nfields, sizeof *ti->fields);
			for (size_t j = 0; j < t->nfields; j++)
				if (t->fields[j].type && !(ti->fields[j] = add(tt, t->fields[j].type, e)))
					goto fail;
		}
	}
	uint8_t *done = common_xcalloc(tt->n, 1);
	for (size_t i = 0; i < tt->n; i++)
		summarize(tt->v[i], done);
	free(done);
	codec_put_uvarint(&tt->bytes, tt->n);
	for (size_t i = 0; i < tt->n; i++)
		emit(&tt->bytes, tt->v[i]);
	return 0;
fail:
	codec_ttable_free(tt);
	return -1;
}

void codec_ttable_free(struct ttable *tt)
{
	for (size_t i = 0; i < tt->n; i++) {
		free(tt->v[i]->fields);
		free(tt->v[i]);
	}
	free(tt->v);
	codec_buf_free(&tt->bytes);
	memset(tt, 0, sizeof *tt);
}
