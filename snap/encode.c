/* snap: the canonical snapshot encoding (SPEC §8.2); the decoder is decode.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"

static const uint8_t zero_page[SNAP_PAGE];

void snap_image_free(struct snap_image *im)
{
	free(im->bytes);
	im->bytes = NULL;
	im->len = 0;
}

static void put_str(struct codec_buf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	codec_put_u32(b, (uint32_t)n);
	codec_put_raw(b, s ? s : "", n);
}

size_t snap_bitmap_len(const struct snap_region *r)
{
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	return (size_t)((pages + 7) / 8);
}

/* Packed size of a decoded region's content. */
size_t snap_packed_len(const struct snap_region *r)
{
	size_t n = 0, bl = snap_bitmap_len(r);
	for (size_t i = 0; i < bl; i++)
		n += (size_t)__builtin_popcount(r->bitmap[i]);
	return n * SNAP_PAGE;
}

/* Where encoded bytes go. In memory: all of them in b. Streamed: small fields
 * are staged in b and copied, region pages read straight, into a ring of
 * reused buffers; a second thread hashes each full buffer (or compares it with
 * the expected image) while this one hands it to the sink and fills the next,
 * so on two cores the time is about that of SHA-256 alone. Counting: nothing
 * is read or kept, only the length is summed. */
#define RING_N 4
#define RING_BUF (2u << 20) /* a multiple of SNAP_CHUNK_MAX */
#define RING_SMALL (256u << 10) /* below RING_BIG bytes: 1 MiB in all, unpopulated */
#define RING_BIG (64ull << 20)
#define SCAN_PAGES 64u      /* pages per zero-page scan: stays in cache */
struct ring {
	uint8_t *mem;          /* RING_N buffers of buf bytes */
	size_t buf;            /* RING_BUF, or RING_SMALL for a small snapshot */
	size_t len[RING_N];
	uint64_t sub, done;    /* buffers submitted, buffers hashed */
	int closing, started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	struct common_sha256 h;
	const struct snap_expect *x; /* compared with x's bytes instead of hashed */
	uint64_t at, differs;  /* bytes compared; the first that differs (or UINT64_MAX) */
	uint64_t mark;         /* saved is h once this many buffers are hashed */
	struct common_sha256 saved;
};
struct snap_out {
	struct codec_buf b;
	int streamed, counting;
	struct ring *rg;
	uint8_t *cur;          /* the ring buffer being filled */
	size_t fill;
	int (*sink)(void *ctx, const uint8_t *p, size_t n, struct common_err *e);
	void *ctx;
	uint64_t total;
	uint8_t **bms;         /* streamed: bitmap of each region read through fill, the
				* root's then each proc's */
	size_t bmi;            /* the next region's in bms */
	const struct snap_expect *x;
	uint64_t zero_at;      /* compared: where a page streamed as non-zero is zero */
	const struct snap_source *src;
	uint8_t *guessed;      /* which of bms are held pages taken for non-zero ones */
	uint8_t *scan;         /* SCAN_PAGES of scratch */
	int (*rewind)(void *ctx, uint64_t at, struct common_err *e); /* the sink's */
	uint64_t mark_total;   /* where the guessed region being streamed starts */
	uint64_t shrunk;       /* bytes the guesses proved wrong took off the length */
};

/* Compare the bytes at rg->at with the expected image's. */
static void ring_compare(struct ring *rg, const uint8_t *p, size_t n)
{
	const struct snap_expect *x = rg->x;
	if (rg->differs == UINT64_MAX) {
		size_t k = 0;
		size_t have = rg->at < x->len ? (size_t)(x->len - rg->at) : 0;
		size_t same = n < have ? n : have;
		if (memcmp(p, x->bytes + rg->at, same))
			while (p[k] == x->bytes[rg->at + k])
				k++;
		else
			k = same;
		if (k < n)
			rg->differs = rg->at + k;
	}
	rg->at += n;
}

static void *ring_hasher(void *arg)
{
	struct ring *rg = arg;
	pthread_mutex_lock(&rg->mu);
	for (;;) {
		while (rg->done == rg->sub && !rg->closing)
			pthread_cond_wait(&rg->cv, &rg->mu);
		if (rg->done == rg->sub)
			break;
		uint64_t i = rg->done % RING_N;
		pthread_mutex_unlock(&rg->mu);
		if (rg->x)
			ring_compare(rg, rg->mem + i * rg->buf, rg->len[i]);
		else
			common_sha256_update(&rg->h, rg->mem + i * rg->buf, rg->len[i]);
		pthread_mutex_lock(&rg->mu);
		if (!rg->x && rg->mark == rg->done + 1)
			common_sha256_copy(&rg->saved, &rg->h);
		rg->done++;
		pthread_cond_broadcast(&rg->cv);
	}
	pthread_mutex_unlock(&rg->mu);
	return NULL;
}

/* One set of buffers per process, kept between snapshots: on this kind of
 * machine first-touching memory costs more than hashing it. */
static uint8_t *ring_cache;

static uint8_t *ring_mem(struct common_err *e)
{
	uint8_t *m = __atomic_exchange_n(&ring_cache, NULL, __ATOMIC_ACQ_REL);
	if (m)
		return m;
	size_t len = (size_t)RING_N * RING_BUF, huge = 2u << 20;
	uint8_t *raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		common_errno(e, errno, "map snapshot buffers");
		return NULL;
	}
	/* 2 MiB aligned for huge pages, populated in one call */
	m = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
	if (m > raw)
		munmap(raw, (size_t)(m - raw));
	munmap(m + len, (size_t)(raw + huge - m));
	madvise(m, len, MADV_HUGEPAGE);
	if (madvise(m, len, MADV_POPULATE_WRITE) < 0)
		memset(m, 0, len);
	return m;
}

/* A snapshot of len bytes. One below RING_BIG gets small buffers of its own,
 * unpopulated, unless a ring is cached: populating 8 MiB of fresh huge pages
 * took a fifth of the CPU of a 3-process restore (its re-check) here. */
static int ring_start(struct snap_out *o, uint64_t len, struct common_err *e)
{
	struct ring *rg = common_xcalloc(1, sizeof *rg);
	o->rg = rg;
	rg->buf = RING_BUF;
	if (len < RING_BIG && !__atomic_load_n(&ring_cache, __ATOMIC_ACQUIRE)) {
		rg->buf = RING_SMALL;
		rg->mem = common_xmalloc((size_t)RING_N * rg->buf);
	} else if (!(rg->mem = ring_mem(e))) {
		return -1;
	}
	pthread_mutex_init(&rg->mu, NULL);
	pthread_cond_init(&rg->cv, NULL);
	rg->x = o->x;
	rg->differs = UINT64_MAX;
	rg->mark = UINT64_MAX;
	if (!o->x)
		common_sha256_init(&rg->h);
	int err = pthread_create(&rg->th, NULL, ring_hasher, rg);
	if (err)
		return common_errno(e, err, "start the hashing thread");
	rg->started = 1;
	o->cur = rg->mem;
	o->fill = 0;
	return 0;
}

/* Hand the current buffer to the hasher and the sink; wait for a free one. */
static int ring_submit(struct snap_out *o, struct common_err *e)
{
	struct ring *rg = o->rg;
	if (o->fill == 0)
		return 0;
	pthread_mutex_lock(&rg->mu);
	rg->len[rg->sub % RING_N] = o->fill;
	uint64_t next = ++rg->sub;
	pthread_cond_broadcast(&rg->cv);
	pthread_mutex_unlock(&rg->mu);
	o->total += o->fill;
	if (o->sink && o->sink(o->ctx, o->cur, o->fill, e) < 0)
		return -1;
	pthread_mutex_lock(&rg->mu);
	while (rg->done + RING_N <= next)
		pthread_cond_wait(&rg->cv, &rg->mu);
	pthread_mutex_unlock(&rg->mu);
	o->cur = rg->mem + (next % RING_N) * rg->buf;
	o->fill = 0;
	return 0;
}

/* Where a guessed region starts: every byte before it submitted, the hash's
 * state there saved (by the hasher once it gets there). */
static int ring_mark(struct snap_out *o, struct common_err *e)
{
	struct ring *rg = o->rg;
	if (ring_submit(o, e) < 0)
		return -1;
	pthread_mutex_lock(&rg->mu);
	rg->mark = rg->sub;
	if (rg->done == rg->sub)
		common_sha256_copy(&rg->saved, &rg->h);
	pthread_mutex_unlock(&rg->mu);
	o->mark_total = o->total;
	return 0;
}

/* Back to the mark: the hasher idle, its state the saved one, the sink's
 * bytes after the mark gone, the buffer being filled emptied. */
static int ring_rewind(struct snap_out *o, struct common_err *e)
{
	struct ring *rg = o->rg;
	pthread_mutex_lock(&rg->mu);
	while (rg->done != rg->sub)
		pthread_cond_wait(&rg->cv, &rg->mu);
	pthread_mutex_unlock(&rg->mu);
	common_sha256_copy(&rg->h, &rg->saved);
	o->fill = 0;
	o->total = o->mark_total;
	return o->rewind ? o->rewind(o->ctx, o->mark_total, e) : 0;
}

/* Stop the hasher (after the last buffer when digest is not NULL). */
static void ring_end(struct snap_out *o, uint8_t digest[32])
{
	struct ring *rg = o->rg;
	if (!rg)
		return;
	if (rg->started) {
		pthread_mutex_lock(&rg->mu);
		rg->closing = 1;
		pthread_cond_broadcast(&rg->cv);
		pthread_mutex_unlock(&rg->mu);
		pthread_join(rg->th, NULL);
		pthread_mutex_destroy(&rg->mu);
		pthread_cond_destroy(&rg->cv);
	}
	uint8_t ignored[32];
	if (rg->h.ctx)
		common_sha256_final(&rg->h, digest ? digest : ignored);
	common_sha256_free(&rg->saved);
	if (rg->x && rg->differs < o->zero_at)
		o->zero_at = rg->differs;
	uint8_t *spare = NULL;
	if (rg->buf != RING_BUF)
		free(rg->mem);
	else if (rg->mem && !__atomic_compare_exchange_n(&ring_cache, &spare, rg->mem, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		munmap(rg->mem, (size_t)RING_N * RING_BUF);
	free(rg);
	o->rg = NULL;
}

static int out_bytes(struct snap_out *o, const uint8_t *p, size_t n, struct common_err *e)
{
	if (o->counting) {
		o->total += n;
		return 0;
	}
	while (n) {
		if (o->fill == o->rg->buf && ring_submit(o, e) < 0)
			return -1;
		size_t k = o->rg->buf - o->fill < n ? o->rg->buf - o->fill : n;
		memcpy(o->cur + o->fill, p, k);
		o->fill += k;
		p += k;
		n -= k;
	}
	return 0;
}

/* Streamed: move the staged small fields on. */
static int out_flush(struct snap_out *o, struct common_err *e)
{
	if (!o->streamed || o->b.len == 0)
		return 0;
	int rc = out_bytes(o, o->b.p, o->b.len, e);
	o->b.len = 0;
	return rc;
}

/* Bytes that need not be staged (packed pages, cell values). */
static int out_big(struct snap_out *o, const uint8_t *p, size_t n, struct common_err *e)
{
	if (!o->streamed) {
		codec_put_raw(&o->b, p, n);
		return 0;
	}
	if (out_flush(o, e) < 0)
		return -1;
	return out_bytes(o, p, n, e);
}

static int page_is_zero(const uint8_t *p)
{
	return !memcmp(p, zero_page, SNAP_PAGE);
}

/* In memory: raw region bytes read into the image, then all-zero pages squeezed out. */
static int put_region_fill(struct codec_buf *b, const struct snap_region *r,
			   snap_fill_fn fill, void *ctx, struct common_err *e)
{
	size_t bl = snap_bitmap_len(r);
	size_t bytes = (size_t)(r->end - r->start);
	size_t base = b->len;
	codec_buf_reserve(b, bl + bytes);
	uint8_t *bm = b->p + base, *raw = bm + bl;
	memset(bm, 0, bl);
	if (fill(ctx, r, 0, bytes / SNAP_PAGE, raw, e) < 0) {
		b->len = base;
		return -1;
	}
	uint8_t *dst = raw;
	for (size_t i = 0; i < bytes / SNAP_PAGE; i++) {
		uint8_t *src = raw + i * SNAP_PAGE;
		if (page_is_zero(src))
			continue;
		bm[i / 8] |= (uint8_t)(1u << (i % 8));
		if (dst != src)
			memmove(dst, src, SNAP_PAGE);
		dst += SNAP_PAGE;
	}
	b->len = (size_t)(dst - b->p);
	return 0;
}

/* Streamed, first pass: which pages of [first, end) of a region are non-zero. */
struct scan_job {
	const struct snap_region *r;
	const struct snap_source *src;
	uint64_t first, end;
	uint8_t *bm, *buf;
	const uint8_t *only; /* pages outside it are zero, those in it held */
	int rc;
	struct common_err e;
};

#define BIT(bm, p) ((bm)[(p) / 8] >> ((p) % 8) & 1)
/* Pages already set in the bitmap (the expected image's, or found non-zero
 * already) are not read here. */
static void *scan_pages(void *arg)
{
	struct scan_job *j = arg;
	snap_fill_fn fill = j->only ? j->src->read : j->src->fill;
	for (uint64_t p = j->first; p < j->end; p += SCAN_PAGES) {
		uint64_t end = j->end - p < SCAN_PAGES ? j->end : p + SCAN_PAGES;
		for (uint64_t a = p, b; a < end; a = b) {
			if (BIT(j->bm, a) || (j->only && !BIT(j->only, a))) {
				b = a + 1;
				continue;
			}
			for (b = a + 1; b < end && !BIT(j->bm, b) && (!j->only || BIT(j->only, b)); b++)
				;
			if (fill(j->src->ctx, j->r, a, b - a, j->buf, &j->e) < 0) {
				j->rc = -1;
				return NULL;
			}
			for (uint64_t i = a; i < b; i++)
				if (!page_is_zero(j->buf + (i - a) * SNAP_PAGE))
					j->bm[i / 8] |= (uint8_t)(1u << (i % 8));
		}
	}
	return NULL;
}

/* The bitmap of a region (malloc'd); a big one is scanned in two halves on
 * both cores, since nothing can be hashed before its bitmap is known. With the
 * expected image's bitmap (preset), only the pages it leaves out are read;
 * with only, only the pages it holds. */
#define SCAN_SPLIT 4096u    /* pages (16 MiB): below, a thread costs more than it saves */
static uint8_t *region_bitmap(const struct snap_region *r, const struct snap_source *src,
			      const uint8_t *preset, const uint8_t *only, uint8_t *scan,
			      struct common_err *e)
{
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	struct scan_job a = { r, src, 0, pages, common_xcalloc(1, snap_bitmap_len(r) + 1), scan,
			      only, 0, { "", "" } };
	for (uint64_t p = 0; preset && p < pages; p++)
		a.bm[p / 8] |= (uint8_t)(BIT(preset, p) << (p % 8));
	struct scan_job b = a;
	pthread_t th;
	int two = 0;
	if (pages >= SCAN_SPLIT) {
		/* halves on a byte boundary of the bitmap: each thread owns its bytes */
		a.end = b.first = pages / 2 / (8 * SCAN_PAGES) * (8 * SCAN_PAGES);
		b.buf = common_xmalloc((size_t)SCAN_PAGES * SNAP_PAGE);
		two = pthread_create(&th, NULL, scan_pages, &b) == 0;
		if (!two)
			scan_pages(&b);
	}
	scan_pages(&a);
	if (two)
		pthread_join(th, NULL);
	if (b.buf != a.buf)
		free(b.buf);
	if (a.rc < 0 || b.rc < 0) {
		if (e)
			*e = a.rc < 0 ? a.e : b.e;
		free(a.bm);
		return NULL;
	}
	return a.bm;
}

/* Streamed, second pass: each run of non-zero pages read straight into the
 * ring. miss (not NULL): bm holds the held pages, each checked as it is read;
 * stopped at the first zero one, *miss (else UINT64_MAX). */
static int put_region_runs(struct snap_out *o, const struct snap_region *r, const uint8_t *bm,
			   uint64_t *miss, struct common_err *e)
{
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	/* compared: pages x holds are read here first, pagemap asked */
	snap_fill_fn read = o->x ? o->src->fill : o->src->read;
	for (uint64_t p = 0; p < pages;) {
		if (!BIT(bm, p)) {
			p++;
			continue;
		}
		uint64_t q = p + 1;
		while (q < pages && BIT(bm, q))
			q++;
		if (o->counting) {
			o->total += (q - p) * SNAP_PAGE;
			p = q;
			continue;
		}
		while (p < q) {
			if (o->rg->buf - o->fill < SNAP_PAGE && ring_submit(o, e) < 0)
				return -1;
			uint64_t room = (o->rg->buf - o->fill) / SNAP_PAGE;
			uint64_t n = q - p < room ? q - p : room;
			uint8_t *dst = o->cur + o->fill;
			if (read(o->src->ctx, r, p, n, dst, e) < 0)
				return -1;
			for (uint64_t k = 0; miss && k < n; k++)
				if (page_is_zero(dst + k * SNAP_PAGE)) {
					*miss = p + k;
					return 0;
				}
			/* compared: a page taken from the expected bitmap unread must not be zero */
			for (uint64_t k = 0; o->x && k < n; k++)
				if (page_is_zero(dst + k * SNAP_PAGE) &&
				    o->total + o->fill + k * SNAP_PAGE < o->zero_at)
					o->zero_at = o->total + o->fill + k * SNAP_PAGE;
			o->fill += (size_t)(n * SNAP_PAGE);
			p += n;
		}
	}
	if (miss)
		*miss = UINT64_MAX;
	return 0;
}

static uint64_t bits(const uint8_t *bm, size_t len)
{
	uint64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += (uint64_t)__builtin_popcount(bm[i]);
	return n;
}

/* The exact bitmap of a region whose held pages (guess) were streamed as
 * non-zero up to miss, a zero one: those before it were read non-zero, the
 * ones after it are read again here. */
static uint8_t *exact_bitmap(struct snap_out *o, const struct snap_region *r,
			     const uint8_t *guess, uint64_t miss, struct common_err *e)
{
	size_t bl = snap_bitmap_len(r);
	uint8_t *before = common_xcalloc(1, bl + 1), *only = common_xmalloc(bl + 1);
	memcpy(before, guess, miss / 8);
	before[miss / 8] = (uint8_t)(guess[miss / 8] & ((1u << (miss % 8)) - 1));
	memcpy(only, guess, bl);
	only[miss / 8] &= (uint8_t)~(1u << (miss % 8));
	uint8_t *bm = region_bitmap(r, o->src, before, only, o->scan, e);
	free(before);
	free(only);
	return bm;
}

/* A region taken with its held pages for a bitmap: streamed from a mark; on
 * a zero page, back to the mark and again with the exact bitmap (bms[at]). */
static int put_region_guessed(struct snap_out *o, const struct snap_region *r, size_t at,
			      struct common_err *e)
{
	uint64_t miss;
	size_t bl = snap_bitmap_len(r);
	if (out_flush(o, e) < 0 || ring_mark(o, e) < 0)
		return -1;
	codec_put_raw(&o->b, o->bms[at], bl);
	if (out_flush(o, e) < 0 || put_region_runs(o, r, o->bms[at], &miss, e) < 0)
		return -1;
	if (miss == UINT64_MAX)
		return 0;
	uint8_t *bm = exact_bitmap(o, r, o->bms[at], miss, e);
	if (!bm || ring_rewind(o, e) < 0) {
		free(bm);
		return -1;
	}
	o->shrunk += (bits(o->bms[at], bl) - bits(bm, bl)) * SNAP_PAGE;
	free(o->bms[at]);
	o->bms[at] = bm;
	o->guessed[at] = 0;
	codec_put_raw(&o->b, bm, bl);
	return out_flush(o, e) < 0 ? -1 : put_region_runs(o, r, bm, NULL, e);
}

void snap_put_xstate(struct codec_buf *b, uint64_t features, const uint8_t *xstate)
{
	codec_put_raw(b, xstate, SNAP_XLEGACY);
	for (int i = 2; i < SNAP_XCOMP; i++)
		if (features & (1ull << i)) {
			codec_put_u32(b, snap_xcomp_len(i));
			codec_put_raw(b, xstate + snap_xcomp_off(i), snap_xcomp_len(i));
		}
}

static int encode_process(const struct snap_state *root, const struct snap_state *st,
			  uint32_t ver, snap_fill_fn fill, void *ctx, struct snap_out *o,
			  struct common_err *e);
static int encode_tree(const struct snap_state *st, uint32_t ver, snap_fill_fn fill, void *ctx,
		       struct snap_out *o, struct common_err *e);

static int encode_body(const struct snap_state *st, snap_fill_fn fill, void *ctx,
		       struct snap_out *o, struct common_err *e)
{
	struct codec_buf *b = &o->b;
	put_str(b, SNAP_DOMAIN);
	uint32_t ver = st->version ? st->version : SNAP_VERSION;
	codec_put_u32(b, ver);
	put_str(b, st->meta.lease);
	put_str(b, st->meta.principal);
	put_str(b, st->meta.host_program);
	put_str(b, st->meta.ns_prefix);
	codec_put_raw(b, st->meta.image, 32);
	codec_put_u64(b, st->meta.step);
	codec_put_raw(b, st->meta.trace_head, 32);
	for (int i = 0; i < SNAP_NUSAGE; i++)
		codec_put_u64(b, st->meta.usage[i]);
	o->bmi = 0;
	if (encode_process(st, st, ver, fill, ctx, o, e) < 0)
		return -1;
	if (ver >= 4 && encode_tree(st, ver, fill, ctx, o, e) < 0)
		return -1;
	codec_put_u32(b, (uint32_t)st->ncells);
	for (size_t i = 0; i < st->ncells; i++) {
		put_str(b, st->cells[i].key);
		codec_put_u64(b, st->cells[i].len);
		if (out_big(o, st->cells[i].val, (size_t)st->cells[i].len, e) < 0)
			return -1;
	}
	if (st->determ) {
		put_str(b, SNAP_DETERM_TAG);
		codec_put_u64(b, st->determ_len);
		if (out_big(o, st->determ, st->determ_len, e) < 0)
			return -1;
	}
	return out_flush(o, e);
}

/* A region's content: its bitmap and non-zero pages (bm: its streamed bitmap). */
static int put_content(struct snap_out *o, const struct snap_region *r, const uint8_t *bm,
		       snap_fill_fn fill, void *ctx, struct common_err *e)
{
	int rc;
	if (bm && o->guessed[o->bmi - 1] && !o->counting) {
		rc = put_region_guessed(o, r, o->bmi - 1, e);
	} else if (bm) {
		codec_put_raw(&o->b, bm, snap_bitmap_len(r));
		rc = out_flush(o, e) < 0 ? -1 : put_region_runs(o, r, bm, NULL, e);
	} else if (r->bitmap) {
		codec_put_raw(&o->b, r->bitmap, snap_bitmap_len(r));
		rc = out_big(o, r->packed, snap_packed_len(r), e);
	} else if (!fill || o->streamed) {
		rc = common_errf(e, "encode snapshot", "region %#llx has no content",
				 (unsigned long long)r->start);
	} else {
		rc = put_region_fill(&o->b, r, fill, ctx, e);
	}
	return rc < 0 || out_flush(o, e) < 0 ? -1 : 0;
}

/* One process: CPU state, signals, threads, memory layout, descriptors, regions. */
static int encode_process(const struct snap_state *root, const struct snap_state *st,
			  uint32_t ver, snap_fill_fn fill, void *ctx, struct snap_out *o,
			  struct common_err *e)
{
	struct codec_buf *b = &o->b;
	codec_put_u64(b, st->xfeatures);
	for (int i = 0; i < SNAP_NREGS; i++)
		codec_put_u64(b, st->regs[i]);
	snap_put_xstate(b, st->xfeatures, st->xstate);
	codec_put_u64(b, st->sigmask);
	for (int i = 0; i < SNAP_NSIG; i++) {
		codec_put_u64(b, st->sigact[i].handler);
		codec_put_u64(b, st->sigact[i].flags);
		codec_put_u64(b, st->sigact[i].restorer);
		codec_put_u64(b, st->sigact[i].mask);
	}
	codec_put_u64(b, st->ss_sp);
	codec_put_u32(b, st->ss_flags);
	codec_put_u64(b, st->ss_size);
	codec_put_u32(b, (uint32_t)st->npending);
	for (size_t i = 0; i < st->npending; i++) {
		codec_put_u32(b, st->pending[i].sig);
		codec_put_u32(b, st->pending[i].shared);
		codec_put_raw(b, st->pending[i].info, 128);
	}
	codec_put_u64(b, st->rseq_ptr);
	codec_put_u32(b, st->rseq_len);
	codec_put_u32(b, st->rseq_sig);
	if (ver >= 3)
		snap_threads_put(b, st);
	codec_put_u64(b, st->start_brk);
	codec_put_u64(b, st->brk);
	codec_put_u32(b, st->umask);
	put_str(b, st->cwd);
	for (int i = 0; i < SNAP_NRLIMIT; i++) {
		codec_put_u64(b, st->rlim[i][0]);
		codec_put_u64(b, st->rlim[i][1]);
	}
	codec_put_u32(b, (uint32_t)st->nfds);
	for (size_t i = 0; i < st->nfds; i++) {
		const struct snap_fd *f = &st->fds[i];
		codec_put_u32(b, f->fd);
		codec_put_u32(b, f->kind);
		codec_put_u32(b, f->flags);
		codec_put_u64(b, f->pos);
		put_str(b, f->path);
		codec_put_raw(b, f->hash, 32);
		codec_put_u64(b, f->size);
	}
	if (ver >= 4)
		snap_objects_put(b, st);
	codec_put_u32(b, (uint32_t)st->nregions);
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		codec_put_u64(b, r->start);
		codec_put_u64(b, r->end);
		codec_put_u32(b, r->prot);
		codec_put_u32(b, r->kind);
		codec_put_u64(b, r->offset);
		put_str(b, r->path);
		const uint8_t *bm = o->bms ? o->bms[o->bmi++] : NULL;
		if (snap_region_has_content(root, st, i) && put_content(o, r, bm, fill, ctx, e) < 0)
			return -1;
	}
	return 0;
}

/* Version 8's tmpfs entries. */
static int encode_tmps(const struct snap_state *st, struct snap_out *o, struct common_err *e)
{
	codec_put_u32(&o->b, (uint32_t)st->ntmps);
	for (size_t i = 0; i < st->ntmps; i++) {
		const struct snap_tmp *t = &st->tmps[i];
		codec_put_u32(&o->b, t->mount);
		put_str(&o->b, t->path);
		codec_put_u32(&o->b, t->kind);
		codec_put_u32(&o->b, t->mode);
		if (t->kind == SNAP_TMP_SYMLINK)
			put_str(&o->b, t->target);
		if (t->kind != SNAP_TMP_FILE)
			continue;
		codec_put_u64(&o->b, t->size);
		if (out_big(o, t->bytes, (size_t)t->size, e) < 0)
			return -1;
	}
	return out_flush(o, e);
}

/* Version 4's other processes and the pipes of the tree. */
static int encode_tree(const struct snap_state *st, uint32_t ver, snap_fill_fn fill, void *ctx,
		       struct snap_out *o, struct common_err *e)
{
	put_str(&o->b, st->exe);
	codec_put_u32(&o->b, (uint32_t)st->nprocs);
	for (size_t i = 0; i < st->nprocs; i++) {
		const struct snap_state *p = &st->procs[i];
		codec_put_u32(&o->b, p->pid);
		codec_put_u32(&o->b, p->ppid);
		codec_put_u32(&o->b, p->zombie);
		if (p->zombie) {
			codec_put_u32(&o->b, p->wstatus);
			continue;
		}
		put_str(&o->b, p->exe);
		if (encode_process(st, p, ver, fill, ctx, o, e) < 0)
			return -1;
	}
	codec_put_u32(&o->b, (uint32_t)st->npipes);
	for (size_t i = 0; i < st->npipes; i++) {
		codec_put_u32(&o->b, st->pipes[i].capacity);
		codec_put_u64(&o->b, st->pipes[i].len);
		if (out_big(o, st->pipes[i].bytes, (size_t)st->pipes[i].len, e) < 0)
			return -1;
	}
	if (ver < 5)
		return out_flush(o, e);
	codec_put_u32(&o->b, (uint32_t)st->nshms);
	for (size_t i = 0; i < st->nshms; i++) {
		const struct snap_shm *g = &st->shms[i];
		codec_put_u32(&o->b, g->kind);
		codec_put_u32(&o->b, g->sealable);
		put_str(&o->b, g->name);
		codec_put_u64(&o->b, g->size);
		if (ver >= 7)
			codec_put_u32(&o->b, g->mode);
		if (put_content(o, &g->content, o->bms ? o->bms[o->bmi++] : NULL, fill, ctx, e) < 0)
			return -1;
	}
	if (ver >= 6)
		snap_kobjs_put(&o->b, st);
	return ver >= 8 ? encode_tmps(st, o, e) : out_flush(o, e);
}

int snap_encode_with(const struct snap_state *st, snap_fill_fn fill, void *ctx,
		     struct snap_image *out, struct common_err *e)
{
	struct snap_out o;
	memset(&o, 0, sizeof o);
	codec_buf_init(&o.b);
	/* one reservation up front: region contents dominate the size */
	size_t guess = 65536 + SNAP_XCANON_SIZE;
	for (size_t i = 0; i < st->nregions; i++)
		guess += (size_t)(st->regions[i].end - st->regions[i].start) / 8 * 9 + 64;
	for (size_t i = 0; i < st->ncells; i++)
		guess += st->cells[i].len + 64;
	codec_buf_reserve(&o.b, guess);
	o.b.len = 0;
	if (encode_body(st, fill, ctx, &o, e) < 0) {
		codec_buf_free(&o.b);
		return -1;
	}
	out->bytes = o.b.p;
	out->len = o.b.len;
	common_sha256(out->bytes, out->len, out->digest);
	return 0;
}

int snap_encode(const struct snap_state *st, struct snap_image *out, struct common_err *e)
{
	return snap_encode_with(st, NULL, NULL, out, e);
}

/* The expected image's bitmap of region r, the root's (k = 0) or proc k - 1's
 * region i, or shared memory object i (k = SIZE_MAX): where its layout is r's. */
static const uint8_t *expected_bitmap(const struct snap_expect *x, size_t k, size_t i,
				      const struct snap_region *r)
{
	const struct snap_state *p = !x || k == SIZE_MAX ? NULL : k == 0 ? x->st :
				     k <= x->st->nprocs ? &x->st->procs[k - 1] : NULL;
	const struct snap_region *q = p && i < p->nregions ? &p->regions[i] :
				      x && k == SIZE_MAX && i < x->st->nshms ? &x->st->shms[i].content :
				      NULL;
	return q && q->bitmap && q->start == r->start && q->end == r->end ? q->bitmap : NULL;
}

/* The bitmap of each region streamed (o->bms, in encoding order): from the
 * expected image's where it is the same, read, or the held pages guessed. */
#define GUESS_MIN 256u /* held pages: below, reading twice costs less than a mark */
static int plan_bitmaps(const struct snap_state *st, struct snap_out *o, struct common_err *e)
{
	for (size_t k = 0, at = 0; k <= st->nprocs + 1; k++) {
		const struct snap_state *p = k <= st->nprocs ? (k ? &st->procs[k - 1] : st) : NULL;
		/* the shared memory objects come after the last process */
		size_t n = p ? p->nregions : st->nshms;
		for (size_t i = 0; i < n; i++, at++) {
			const struct snap_region *r = p ? &p->regions[i] : &st->shms[i].content;
			if (r->bitmap || (p && !snap_region_has_content(st, p, i)))
				continue;
			uint8_t *bm = common_xcalloc(1, snap_bitmap_len(r) + 1);
			int64_t held = o->x || !o->src->held ? -1 : o->src->held(o->src->ctx, r, bm);
			o->guessed[at] = held >= GUESS_MIN;
			if (!o->guessed[at]) {
				free(bm);
				bm = region_bitmap(r, o->src, expected_bitmap(o->x, p ? k : SIZE_MAX, i, r),
						   NULL, o->scan, e);
			}
			if (!(o->bms[at] = bm))
				return -1;
		}
	}
	return 0;
}

/* The exact length (every guess replaced by the exact bitmap) into *len. */
static int exact_length(const struct snap_state *st, struct snap_out *o, size_t nbm,
			uint64_t *len, struct common_err *e)
{
	for (size_t at = 0; at < nbm; at++) {
		if (!o->guessed[at])
			continue;
		const struct snap_region *r = NULL;
		for (size_t k = 0, i = at; !r; k++) {
			const struct snap_state *p = k <= st->nprocs ? (k ? &st->procs[k - 1] : st) : NULL;
			size_t n = p ? p->nregions : st->nshms;
			if (i < n)
				r = p ? &p->regions[i] : &st->shms[i].content;
			else
				i -= n;
		}
		uint8_t *bm = region_bitmap(r, o->src, NULL, o->bms[at], o->scan, e);
		if (!bm)
			return -1;
		free(o->bms[at]);
		o->bms[at] = bm;
		o->guessed[at] = 0;
	}
	o->counting = 1;
	o->total = 0;
	int rc = encode_body(st, NULL, NULL, o, e);
	*len = o->total;
	return rc;
}

/* Admitted: by the length with every guess right, else by the exact one. */
static int admit_length(const struct snap_state *st, struct snap_out *o, size_t nbm,
			snap_admit_fn admit, void *actx, uint64_t *len, struct common_err *e)
{
	if (!admit || admit(actx, *len, e) == 0)
		return 0;
	size_t g = 0;
	while (g < nbm && !o->guessed[g])
		g++;
	if (g == nbm || exact_length(st, o, nbm, len, e) < 0)
		return -1;
	return admit(actx, *len, e);
}

int snap_encode_stream(const struct snap_state *st, const struct snap_source *src,
		       struct snap_expect *x, const char *dir, snap_admit_fn admit, void *actx,
		       struct snap_manifest *m, struct common_err *e)
{
	struct snap_chunk_sink cs = { .dir = dir, .fd = -1 };
	struct snap_out o;
	int rc = 0, made = 0;
	memset(&o, 0, sizeof o);
	codec_buf_init(&o.b);
	o.streamed = 1;
	o.x = x;
	o.src = src;
	o.zero_at = UINT64_MAX;
	size_t nbm = st->nregions + st->nshms;
	for (size_t k = 0; k < st->nprocs; k++)
		nbm += st->procs[k].nregions;
	o.bms = common_xcalloc(nbm + 1, sizeof *o.bms);
	o.guessed = common_xcalloc(nbm + 1, 1);
	o.scan = common_xmalloc((size_t)SCAN_PAGES * SNAP_PAGE);
	rc = plan_bitmaps(st, &o, e);
	/* the length before any byte is written: exact, or (guesses) an upper bound */
	o.counting = 1;
	if (rc == 0)
		rc = encode_body(st, NULL, NULL, &o, e);
	uint64_t len = o.total;
	if (rc == 0)
		rc = admit_length(st, &o, nbm, admit, actx, &len, e);
	if (rc == 0 && dir) {
		if (mkdir(dir, 0700) < 0)
			rc = common_errno(e, errno, "create %s", dir);
		made = rc == 0;
		o.sink = snap_chunk_write;
		o.rewind = snap_chunk_rewind;
		o.ctx = &cs;
	}
	o.counting = 0;
	o.total = 0;
	if (rc == 0)
		rc = ring_start(&o, len, e);
	if (rc == 0)
		rc = encode_body(st, NULL, NULL, &o, e);
	if (rc == 0)
		rc = ring_submit(&o, e);
	ring_end(&o, rc == 0 ? m->digest : NULL);
	if (cs.fd >= 0)
		close(cs.fd);
	if (rc == 0 && o.total != len - o.shrunk)
		rc = common_errf(e, "capture", "the guest's memory changed while it was read");
	/* the guesses that were wrong made the admitted length an upper bound */
	if (rc == 0 && o.shrunk && admit)
		rc = admit(actx, o.total, e);
	/* encodings of two lengths, the same up to the shorter's end, differ there */
	uint64_t end = x && o.total < x->len ? o.total : x ? x->len : 0;
	if (x)
		x->differs = o.total != x->len && end < o.zero_at ? end : o.zero_at;
	m->len = o.total;
	m->chunks = (uint32_t)((o.total + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX);
	if (rc == 0 && dir)
		rc = snap_manifest_write(dir, m, e);
	for (size_t i = 0; i < nbm; i++)
		free(o.bms[i]);
	free(o.bms);
	free(o.guessed);
	free(o.scan);
	codec_buf_free(&o.b);
	if (rc < 0 && made)
		common_rm_rf(dir, NULL);
	return rc;
}

uint64_t snap_cells_bytes(const struct snap_state *st)
{
	uint64_t n = 0;
	for (size_t i = 0; i < st->ncells; i++)
		n += strlen(st->cells[i].key) + st->cells[i].len;
	return n;
}
