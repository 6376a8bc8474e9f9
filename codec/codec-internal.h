/* codec internals shared by type.c and graph.c; never included elsewhere. */
#ifndef SBX_CODEC_INTERNAL_H
#define SBX_CODEC_INTERNAL_H

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

#endif
