/* codec: canonical binary primitives, C type descriptors and object-graph
 * images with write-back (SPEC §6.4, §10). */
#ifndef SBX_CODEC_H
#define SBX_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "libcommon/common.h"

/* A growing output buffer. Writers never fail (x-alloc). */
struct codec_buf {
	uint8_t *p;
	size_t len, cap;
};
void codec_buf_init(struct codec_buf *b);
void codec_buf_free(struct codec_buf *b);
uint8_t *codec_buf_reserve(struct codec_buf *b, size_t n); /* n bytes appended, returned */
void codec_buf_grow(struct codec_buf *b, size_t n);        /* room for n more, len unchanged */
void codec_put_u8(struct codec_buf *b, uint8_t v);
void codec_put_u32(struct codec_buf *b, uint32_t v);
void codec_put_u64(struct codec_buf *b, uint64_t v);
void codec_put_uvarint(struct codec_buf *b, uint64_t v); /* LEB128, shortest form */
void codec_put_svarint(struct codec_buf *b, int64_t v);  /* zigzag, then uvarint */
void codec_put_raw(struct codec_buf *b, const void *p, size_t n);
void codec_put_bytes(struct codec_buf *b, const void *p, size_t n); /* uvarint n, bytes */

/* A bounded reader. The first failure sticks: later gets fail too, and
 * r->why / r->at say what went wrong where. */
struct codec_rd {
	const uint8_t *p;
	size_t len, off;
	const char *why; /* NULL while healthy */
	size_t at;       /* byte offset of the failure */
};
void codec_rd_init(struct codec_rd *r, const void *p, size_t len);
int codec_get_u8(struct codec_rd *r, uint8_t *v);
int codec_get_u16(struct codec_rd *r, uint16_t *v);
int codec_get_u32(struct codec_rd *r, uint32_t *v);
int codec_get_u64(struct codec_rd *r, uint64_t *v);
int codec_get_uvarint(struct codec_rd *r, uint64_t *v); /* refuses overlong and > 64 bits */
int codec_get_svarint(struct codec_rd *r, int64_t *v);
int codec_get_raw(struct codec_rd *r, const uint8_t **p, size_t n);
int codec_get_bytes(struct codec_rd *r, const uint8_t **p, size_t *n, size_t max);
int codec_rd_end(struct codec_rd *r);        /* -1 when bytes remain */
int codec_rd_fail(struct codec_rd *r, const char *why); /* record a failure, return -1 */
/* Fill e as "NAME: byte N: WHY" from the reader's failure. */
int codec_rd_err(const struct codec_rd *r, const char *name, struct common_err *e);

enum sbx_kind {
	SBX_K_BOOL = 1, SBX_K_I8, SBX_K_I16, SBX_K_I32, SBX_K_I64,
	SBX_K_U8, SBX_K_U16, SBX_K_U32, SBX_K_U64, SBX_K_F32, SBX_K_F64,
	SBX_K_STRING, /* char *, NUL-terminated; NULL differs from "" */
	SBX_K_FUNC,   /* a function pointer; must be a function of the executable */
	SBX_K_PTR,    /* pointer to one elem (or into an object holding elems) */
	SBX_K_SLICE,  /* struct sbx_slice-shaped {elem *ptr; size_t len, cap;} */
	SBX_K_ARRAY,  /* elem[count], inline */
	SBX_K_STRUCT, /* fields, inline */
	SBX_K_UNION,  /* a struct whose tag field selects one member */
	SBX_K_OPAQUE, /* a pointer that is never transferable unless NULL (FILE *, void *) */
};

struct sbx_type;
struct sbx_field {
	const char *name;
	size_t offset;
	size_t size;                 /* sizeof the C member; checked against type->size */
	const struct sbx_type *type; /* NULL only for an empty union member */
	int64_t tag;                 /* union members: the tag value selecting this one */
};
struct sbx_type {
	enum sbx_kind kind;
	const char *name;
	size_t size;
	const struct sbx_type *elem; /* PTR, SLICE, ARRAY */
	size_t count;                /* ARRAY */
	const struct sbx_field *fields; /* STRUCT fields, UNION members */
	size_t nfields;
	size_t tag_offset;           /* UNION: where the integer tag lives */
	const struct sbx_type *tag;  /* UNION: its integer type */
};

/* The slice shape every SBX_K_SLICE value has. */
struct sbx_slice {
	void *ptr;
	size_t len, cap;
};
#define SBX_SLICE_OF(T) struct { T *ptr; size_t len, cap; }

extern const struct sbx_type sbx_type_bool, sbx_type_i8, sbx_type_i16, sbx_type_i32,
	sbx_type_i64, sbx_type_u8, sbx_type_u16, sbx_type_u32, sbx_type_u64,
	sbx_type_f32, sbx_type_f64, sbx_type_string, sbx_type_fn,
	sbx_type_voidptr, /* "void*": refused unless NULL */
	sbx_type_file;    /* "FILE*": refused unless NULL */

/* The descriptor of a scalar or string C expression, chosen by its C type. */
#define SBX_TYPE_OF(x) _Generic((x), \
	_Bool: &sbx_type_bool, char: &sbx_type_i8, signed char: &sbx_type_i8, \
	unsigned char: &sbx_type_u8, short: &sbx_type_i16, unsigned short: &sbx_type_u16, \
	int: &sbx_type_i32, unsigned: &sbx_type_u32, long: &sbx_type_i64, \
	unsigned long: &sbx_type_u64, long long: &sbx_type_i64, \
	unsigned long long: &sbx_type_u64, float: &sbx_type_f32, double: &sbx_type_f64, \
	char *: &sbx_type_string, const char *: &sbx_type_string)

#define SBX_MEMBER_SIZE(T, f) sizeof(((T *)0)->f)
/* A field of struct T with an explicit descriptor (sizes checked at use). */
#define SBX_FIELD(T, f, ty) { #f, offsetof(T, f), SBX_MEMBER_SIZE(T, f), (ty), 0 }
/* A scalar or string field whose descriptor follows from its C type. */
#define SBX_FIELD_AUTO(T, f) SBX_FIELD(T, f, SBX_TYPE_OF(((T *)0)->f))
/* A union member at T.f selected when the tag equals tagval. */
#define SBX_MEMBER(T, f, ty, tagval) { #f, offsetof(T, f), SBX_MEMBER_SIZE(T, f), (ty), (tagval) }
#define SBX_NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define SBX_STRUCT(nm, T, fieldarr) { .kind = SBX_K_STRUCT, .name = (nm), .size = sizeof(T), \
	.fields = (fieldarr), .nfields = SBX_NELEM(fieldarr) }
#define SBX_PTR(nm, elemty) { .kind = SBX_K_PTR, .name = (nm), .size = sizeof(void *), \
	.elem = (elemty) }
#define SBX_SLICE(nm, elemty) { .kind = SBX_K_SLICE, .name = (nm), \
	.size = sizeof(struct sbx_slice), .elem = (elemty) }
/* The inline array member T.f of elements described by elemty. */
#define SBX_ARRAY(nm, T, f, elemty) { .kind = SBX_K_ARRAY, .name = (nm), \
	.size = SBX_MEMBER_SIZE(T, f), \
	.count = SBX_MEMBER_SIZE(T, f) / sizeof(((T *)0)->f[0]), .elem = (elemty) }
/* A struct T whose integer field tagf selects one of the members. */
#define SBX_UNION(nm, T, tagf, memberarr) { .kind = SBX_K_UNION, .name = (nm), \
	.size = sizeof(T), .fields = (memberarr), .nfields = SBX_NELEM(memberarr), \
	.tag_offset = offsetof(T, tagf), .tag = SBX_TYPE_OF(((T *)0)->tagf) }
#define SBX_OPAQUE(nm) { .kind = SBX_K_OPAQUE, .name = (nm), .size = sizeof(void *) }

/* Check a descriptor and everything it reaches: sizes, offsets, members,
 * inline cycles. The error names the type and field. */
int codec_type_check(const struct sbx_type *t, struct common_err *e);

/* Image: "SBXG" u8 version, the type table (every descriptor reachable from the
 * root, canonical), the root reference, the object directory (type, element
 * count per object ID, root's object = 1) and each object's content in ID order.
 * A reference is an object ID plus a path (element index, then field/element
 * indexes) so interior pointers stay interior. A SHA-256 of all of that ends
 * the image, so a truncated or corrupted image is always refused. */
struct codec_opts {
	/* Accept a function pointer value (0) or refuse it (-1, e filled).
	 * NULL: every non-NULL function pointer is refused. */
	int (*check_fn)(void *arg, uint64_t addr, struct common_err *e);
	void *arg;
	uint64_t max_alloc; /* decode storage budget in bytes; 0 = 2 GiB */
};

struct codec_graph;
/* Encode the graph reachable from root (of type t) into out (appended). The
 * graph (ID -> host object) is kept in *g for codec_writeback. Refusals name
 * the path to the value ("ctx.inputs[2].fs: FILE* is not transferable"). */
int codec_encode(const struct sbx_type *t, void *root, const struct codec_opts *o,
		 struct codec_buf *out, struct codec_graph **g, struct common_err *e);
/* Decode an image into fresh typed allocations, one per object ID. On failure
 * nothing is left allocated. The graph owns that storage. */
int codec_decode(const struct sbx_type *t, const void *img, size_t len,
		 const struct codec_opts *o, void **root, struct codec_graph **g,
		 struct common_err *e);
/* Encode a graph again keeping its IDs (the guest's result): every object of
 * g is written even when no longer reachable; new objects get new IDs. */
int codec_encode_graph(struct codec_graph *g, const struct codec_opts *o,
		       struct codec_buf *out, struct common_err *e);
/* Apply a result image to the objects of g in place. The whole result is
 * decoded and checked in scratch storage first; any error changes nothing.
 * New objects become new malloc'd allocations owned by the caller; replaced
 * strings are malloc'd too, and old host storage is never freed. */
int codec_writeback(struct codec_graph *g, const void *img, size_t len,
		    const struct codec_opts *o, struct common_err *e);
/* Free the graph; storage it allocated (codec_decode) is freed with its strings. */
void codec_graph_free(struct codec_graph *g);

#endif
