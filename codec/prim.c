/* Canonical binary primitives: little-endian fixed integers, shortest-form
 * varints, length-prefixed bytes, and a bounded reader whose first error sticks. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "codec/codec.h"

void codec_buf_init(struct codec_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
}

void codec_buf_free(struct codec_buf *b)
{
	free(b->p);
	codec_buf_init(b);
}

/* Large buffers live on huge pages: page faults dominate copying into fresh
 * memory otherwise (and far more so under paging-based virtualization). */
static void set_cap(struct codec_buf *b, size_t cap)
{
	const size_t huge = 2u << 20;
	if (cap < 2 * huge) {
		b->p = common_xrealloc(b->p, cap);
		b->cap = cap;
		return;
	}
	cap = (cap + huge - 1) & ~(huge - 1);
	uint8_t *p = aligned_alloc(huge, cap);
	if (!p) {
		b->p = common_xrealloc(b->p, cap);
		b->cap = cap;
		return;
	}
	madvise(p, cap, MADV_HUGEPAGE);
	if (b->len)
		memcpy(p, b->p, b->len);
	free(b->p);
	b->p = p;
	b->cap = cap;
}

void codec_buf_grow(struct codec_buf *b, size_t n)
{
	if (n <= b->cap - b->len)
		return;
	if (n > SIZE_MAX - b->len)
		abort();
	set_cap(b, b->len + n);
}

uint8_t *codec_buf_reserve(struct codec_buf *b, size_t n)
{
	if (n > SIZE_MAX - b->len)
		abort(); /* cannot happen with real memory; x-alloc would abort too */
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
		set_cap(b, cap);
	}
	uint8_t *at = b->p + b->len;
	b->len += n;
	return at;
}

static void put_le(struct codec_buf *b, uint64_t v, unsigned n)
{
	uint8_t *at = codec_buf_reserve(b, n);
	for (unsigned i = 0; i < n; i++)
		at[i] = (uint8_t)(v >> (8 * i));
}

void codec_put_u8(struct codec_buf *b, uint8_t v) { put_le(b, v, 1); }
void codec_put_u32(struct codec_buf *b, uint32_t v) { put_le(b, v, 4); }
void codec_put_u64(struct codec_buf *b, uint64_t v) { put_le(b, v, 8); }

void codec_put_uvarint(struct codec_buf *b, uint64_t v)
{
	uint8_t tmp[10];
	unsigned n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	memcpy(codec_buf_reserve(b, n), tmp, n);
}

void codec_put_svarint(struct codec_buf *b, int64_t v)
{
	codec_put_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void codec_put_raw(struct codec_buf *b, const void *p, size_t n)
{
	if (n)
		memcpy(codec_buf_reserve(b, n), p, n);
}

void codec_put_bytes(struct codec_buf *b, const void *p, size_t n)
{
	codec_put_uvarint(b, n);
	codec_put_raw(b, p, n);
}

void codec_rd_init(struct codec_rd *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->why = NULL;
	r->at = 0;
}

int codec_rd_fail(struct codec_rd *r, const char *why)
{
	if (!r->why) {
		r->why = why;
		r->at = r->off;
	}
	return -1;
}

static int get_le(struct codec_rd *r, uint64_t *v, unsigned n)
{
	if (r->why)
		return -1;
	if (r->len - r->off < n)
		return codec_rd_fail(r, "truncated");
	uint64_t x = 0;
	for (unsigned i = 0; i < n; i++)
		x |= (uint64_t)r->p[r->off + i] << (8 * i);
	r->off += n;
	*v = x;
	return 0;
}

int codec_get_u8(struct codec_rd *r, uint8_t *v)
{
	uint64_t x = 0;
	if (get_le(r, &x, 1) < 0)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

int codec_get_u16(struct codec_rd *r, uint16_t *v)
{
	uint64_t x = 0;
	if (get_le(r, &x, 2) < 0)
		return -1;
	*v = (uint16_t)x;
	return 0;
}

int codec_get_u32(struct codec_rd *r, uint32_t *v)
{
	uint64_t x = 0;
	if (get_le(r, &x, 4) < 0)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

int codec_get_u64(struct codec_rd *r, uint64_t *v)
{
	return get_le(r, v, 8);
}

int codec_get_uvarint(struct codec_rd *r, uint64_t *v)
{
	uint64_t x = 0;
	size_t start = r->off;

	if (r->why)
		return -1;
	for (unsigned i = 0;; i++) {
		if (r->off >= r->len)
			return codec_rd_fail(r, "truncated varint");
		uint8_t c = r->p[r->off++];
		if (i == 9 && c > 1) {
			r->off = start;
			return codec_rd_fail(r, "varint overflows 64 bits");
		}
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			/* one encoding per value: a final zero byte after the first is padding */
			if (c == 0 && i > 0) {
				r->off = start;
				return codec_rd_fail(r, "overlong varint");
			}
			break;
		}
	}
	*v = x;
	return 0;
}

int codec_get_svarint(struct codec_rd *r, int64_t *v)
{
	uint64_t u;
	if (codec_get_uvarint(r, &u) < 0)
		return -1;
	*v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
	return 0;
}

int codec_get_raw(struct codec_rd *r, const uint8_t **p, size_t n)
{
	if (r->why)
		return -1;
	if (r->len - r->off < n)
		return codec_rd_fail(r, "truncated");
	*p = r->p + r->off;
	r->off += n;
	return 0;
}

int codec_get_bytes(struct codec_rd *r, const uint8_t **p, size_t *n, size_t max)
{
	uint64_t len;
	size_t start = r->off;

	if (codec_get_uvarint(r, &len) < 0)
		return -1;
	if (len > max) {
		r->off = start;
		return codec_rd_fail(r, "length exceeds limit");
	}
	if (codec_get_raw(r, p, (size_t)len) < 0)
		return -1;
	*n = (size_t)len;
	return 0;
}

int codec_rd_end(struct codec_rd *r)
{
	if (r->why)
		return -1;
	if (r->off != r->len)
		return codec_rd_fail(r, "trailing bytes");
	return 0;
}

int codec_rd_err(const struct codec_rd *r, const char *name, struct common_err *e)
{
	return common_errf(e, name, "byte %zu: %s", r->at, r->why ? r->why : "invalid");
}
