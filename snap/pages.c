/* snap: a stopped process's pages for the encoder: their bytes, and which of
 * them the kernel holds (told by pagemap without reading them). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "snap/snap-internal.h"

#define PAGEMAP_HELD (3ull << 62) /* present or swapped */
#define HELD_BLOCK 32768u         /* pagemap entries read at once (256 KiB) */

/* The words of the rseq area the kernel writes on its own (cpu_id_start,
 * cpu_id, node_id, mm_cid) depend on where the guest last ran: canonical values. */
static void canon_rseq(uint64_t rseq, uint64_t start, uint8_t *dst, uint64_t len)
{
	static const struct { unsigned off; uint32_t v; } w[] = {
		{ 0, 0 }, { 4, 0xffffffffu }, { 24, 0 }, { 28, 0 } };
	for (size_t i = 0; rseq && i < sizeof w / sizeof w[0]; i++) {
		uint64_t a = rseq + w[i].off;
		if (a >= start && a + 4 <= start + len)
			memcpy(dst + (a - start), &w[i].v, 4);
	}
}

/* Whether pagemap tells region r's held pages: a SysV page may be in the
 * segment yet not in this mapping's page table, and a file's pages are read. */
static int pagemap_tells(int pagemap, const struct snap_region *r)
{
	return pagemap >= 0 && r->kind != SNAP_REGION_FILE && r->kind != SNAP_REGION_SYSV;
}

int snap_pages_read(struct trace_tracee *t, int pagemap, const struct snap_state *st,
		    const struct snap_region *whole, uint64_t first, uint64_t pages, uint8_t *dst,
		    int held, struct common_err *e)
{
	struct snap_region part = *whole;
	const struct snap_region *r = &part;
	part.start = whole->start + first * SNAP_PAGE;
	part.end = part.start + pages * SNAP_PAGE;
	uint64_t *pm = NULL;
	if (!held && pagemap_tells(pagemap, r)) {
		pm = common_xmalloc(pages * 8);
		ssize_t want = (ssize_t)(pages * 8);
		if (pread(pagemap, pm, (size_t)want, (off_t)(r->start / SNAP_PAGE * 8)) != want) {
			free(pm);
			pm = NULL;
		}
	}
	uint64_t i = 0;
	while (i < pages) {
		uint64_t j = i;
		int absent = pm && !(pm[i] & PAGEMAP_HELD);
		while (j < pages && (pm ? (!(pm[j] & PAGEMAP_HELD)) == absent : 1))
			j++;
		uint8_t *d = dst + i * SNAP_PAGE;
		size_t len = (size_t)((j - i) * SNAP_PAGE);
		if (absent) {
			memset(d, 0, len);
		} else if (trace_tracee_read(t, r->start + i * SNAP_PAGE, d, len, NULL) < 0) {
			for (uint64_t k = i; k < j; k++)
				if (trace_tracee_read(t, r->start + k * SNAP_PAGE,
						  dst + k * SNAP_PAGE, SNAP_PAGE, NULL) < 0) {
					if (r->kind != SNAP_REGION_FILE) {
						free(pm);
						return common_errf(e, "capture",
								   "cannot read guest memory at %#" PRIx64,
								   r->start + k * SNAP_PAGE);
					}
					memset(dst + k * SNAP_PAGE, 0, SNAP_PAGE);
				}
		}
		i = j;
	}
	free(pm);
	canon_rseq(st->rseq_len ? st->rseq_ptr : 0, r->start, dst, pages * SNAP_PAGE);
	for (size_t k = 0; k < st->nthreads; k++)
		canon_rseq(st->threads[k].rseq_ptr, r->start, dst, pages * SNAP_PAGE);
	return 0;
}

int64_t snap_pages_held(int pagemap, const struct snap_region *r, uint8_t *bm)
{
	if (!pagemap_tells(pagemap, r))
		return -1;
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	uint64_t *pm = common_xmalloc((size_t)HELD_BLOCK * 8);
	int64_t n = 0;
	for (uint64_t p = 0; p < pages && n >= 0; p += HELD_BLOCK) {
		uint64_t k = pages - p < HELD_BLOCK ? pages - p : HELD_BLOCK;
		ssize_t want = (ssize_t)(k * 8);
		if (pread(pagemap, pm, (size_t)want, (off_t)((r->start / SNAP_PAGE + p) * 8)) != want) {
			n = -1;
			break;
		}
		for (uint64_t i = 0; i < k; i++)
			if (pm[i] & PAGEMAP_HELD) {
				bm[(p + i) / 8] |= (uint8_t)(1u << ((p + i) % 8));
				n++;
			}
	}
	free(pm);
	return n;
}
