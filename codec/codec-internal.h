/* codec internals shared by its files; never included elsewhere. */
#ifndef SBX_CODEC_INTERNAL_H
#define SBX_CODEC_INTERNAL_H

#include <stdbool.h>
#include "codec/codec.h"

#define CODEC_MAGIC "SBXG"
#define CODEC_VERSION 1
#define CODEC_BULK_MIN 64      /* numeric arrays this long are one copy */
#define CODEC_MAX_TYPES 4096
#define CODEC_MAX_DEPTH 32     /* inline nesting */
#define CODEC_MAX_PATH (CODEC_MAX_DEPTH + 1)

/* A checked descriptor with what the walkers need precomputed. */
struct tinfo {
	const struct sbx_type *t;
	uint32_t idx;
	unsigned refs : 1;    /* holds a PTR or SLICE somewhere inline */
	unsigned plain : 1;   /* bytes can be copied as they are (no refs, strings, unions, bools) */
	unsigned bulk : 1;    /* numeric scalar */
	unsigned strings : 1; /* holds a STRING somewhere inline */
	uint64_t minenc;      /* fewest encoded bytes of one value */
	struct tinfo *elem;
	struct tinfo **fields; /* nfields entries; NULL for an empty union member */
	struct tinfo *tag;
};

struct ttable {
	struct tinfo **v;
	size_t n, cap;
	struct codec_buf bytes; /* the canonical encoding of the table */
};

int codec_ttable_build(const struct sbx_type *root, struct ttable *tt, struct common_err *e);
void codec_ttable_free(struct ttable *tt);
int codec_is_signed(enum sbx_kind k);
/* Read / write an integer scalar of kind k at p. */
int64_t codec_load_int(const void *p, enum sbx_kind k);
void codec_store_int(void *p, enum sbx_kind k, int64_t v);
/* Does v (read as signed when sv, else unsigned uv) fit kind k? */
int codec_int_fits(enum sbx_kind k, int64_t sv, uint64_t uv);

/* Object graphs (encode.c, decode.c, writeback.c). */
#define CODEC_MAX_STEPS (2 * CODEC_MAX_DEPTH + 2)
#define CODEC_MAX_STRING (1u << 30)
#define CODEC_MAX_OBJECTS (1u << 31)

struct gobj {
	uint8_t *base;
	struct tinfo *ti;
	size_t count;
};

struct codec_graph {
	struct ttable tt;
	struct gobj *obj;
	size_t nobj;
	void *root;
	uint32_t root_id; /* 1-based */
	size_t root_off;
	bool owned;       /* storage came from codec_decode */
};

/* Zeroed storage for a large table, on huge pages when it is large. */
void *codec_big_zalloc(size_t n);
const struct sbx_field *codec_union_member(const struct sbx_type *t, int64_t tag);
/* Decode img against the table tt (borrowed into g->tt by the caller). */
int codec_decode_core(struct codec_graph *g, const void *img, size_t len,
		      const struct codec_opts *o, struct common_err *e);
/* Frees the storage of objects from, on, with the strings they hold. */
void codec_free_storage(struct codec_graph *g, size_t from);

#endif
