/* Object graphs, write-back: an image decoded into scratch storage first,
 * checked, then applied in place over the host's graph. */
#include <stdlib.h>
#include <string.h>
#include "codec/codec-internal.h"

struct span {
	uintptr_t base;
	size_t size;
	uint32_t k;
};

static int by_base(const void *a, const void *b)
{
	uintptr_t x = ((const struct span *)a)->base, y = ((const struct span *)b)->base;
	return x < y ? -1 : x > y;
}

struct wb {
	struct codec_graph *host, *scr;
	struct span *spans;
};

/* Scratch address -> final address: into a host object, or unchanged for a new one. */
static uintptr_t relocate(const struct wb *w, uintptr_t q)
{
	size_t lo = 0, hi = w->scr->nobj;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (w->spans[mid].base <= q)
			lo = mid;
		else
			hi = mid;
	}
	const struct span *s = &w->spans[lo];
	if (q < s->base || q > s->base + s->size || s->k >= w->host->nobj)
		return q;
	return (uintptr_t)w->host->obj[s->k].base + (q - s->base);
}

static void translate(const struct wb *w, uint8_t *p, const struct tinfo *ti, size_t n)
{
	const struct sbx_type *t = ti->t;
	if (!ti->refs)
		return;
	for (size_t i = 0; i < n; i++, p += t->size) {
		if (t->kind == SBX_K_PTR || t->kind == SBX_K_SLICE) {
			uintptr_t q;
			memcpy(&q, p, sizeof q);
			if (q) {
				q = relocate(w, q);
				memcpy(p, &q, sizeof q);
			}
		} else if (t->kind == SBX_K_ARRAY) {
			translate(w, p, ti->elem, t->count);
		} else if (t->kind == SBX_K_STRUCT) {
			for (size_t j = 0; j < t->nfields; j++)
				translate(w, p + t->fields[j].offset, ti->fields[j], 1);
		} else if (t->kind == SBX_K_UNION) {
			const struct sbx_field *m =
				codec_union_member(t, codec_load_int(p + t->tag_offset, t->tag->kind));
			if (m && m->type)
				translate(w, p + m->offset, ti->fields[m - t->fields], 1);
		}
	}
}

/* Copy n checked scratch elements s over host elements h. Strings move:
 * an unchanged one keeps the host pointer, a changed one takes the scratch copy. */
static void apply(uint8_t *h, uint8_t *s, const struct tinfo *ti, size_t n)
{
	const struct sbx_type *t = ti->t;
	if (ti->plain) {
		memcpy(h, s, n * t->size);
		return;
	}
	for (size_t i = 0; i < n; i++, h += t->size, s += t->size) {
		switch (t->kind) {
		case SBX_K_STRING: {
			char *hs, *ss;
			memcpy(&hs, h, sizeof hs);
			memcpy(&ss, s, sizeof ss);
			if ((!hs && !ss) || (hs && ss && strcmp(hs, ss) == 0))
				free(ss);
			else
				memcpy(h, &ss, sizeof ss);
			memset(s, 0, sizeof ss);
			break;
		}
		case SBX_K_ARRAY:
			apply(h, s, ti->elem, t->count);
			break;
		case SBX_K_STRUCT:
			for (size_t j = 0; j < t->nfields; j++)
				apply(h + t->fields[j].offset, s + t->fields[j].offset, ti->fields[j], 1);
			break;
		case SBX_K_UNION: {
			int64_t ht = codec_load_int(h + t->tag_offset, t->tag->kind);
			int64_t st = codec_load_int(s + t->tag_offset, t->tag->kind);
			if (ht != st) {
				/* the old member's bytes go; bytes outside tag and members stay */
				for (size_t j = 0; j < t->nfields; j++)
					memset(h + t->fields[j].offset, 0, t->fields[j].size);
				codec_store_int(h + t->tag_offset, t->tag->kind, st);
			}
			const struct sbx_field *m = codec_union_member(t, st);
			if (m && m->type)
				apply(h + m->offset, s + m->offset, ti->fields[m - t->fields], 1);
			break;
		}
		default:
			memcpy(h, s, t->size);
			break;
		}
	}
}

int codec_writeback(struct codec_graph *g, const void *img, size_t len,
		    const struct codec_opts *o, struct common_err *e)
{
	struct codec_graph s = { .tt = g->tt };

	/* scratch decode against the host's own type table */
	if (codec_decode_core(&s, img, len, o, e) < 0)
		return -1;
	int rc = 0;
	if (s.nobj < g->nobj) {
		rc = common_errf(e, "state result", "%zu objects, the call sent %zu", s.nobj, g->nobj);
		goto out;
	}
	for (size_t i = 0; i < g->nobj; i++) {
		if (s.obj[i].ti != g->obj[i].ti || s.obj[i].count != g->obj[i].count) {
			rc = common_errf(e, "state result", "object %zu changed type or length", i + 1);
			goto out;
		}
	}
	if (s.root_id != g->root_id || s.root_off != g->root_off) {
		rc = common_errf(e, "state result", "root moved to another object");
		goto out;
	}
	/* everything checked: nothing below can fail */
	struct wb w = { .host = g, .scr = &s };
	w.spans = common_xmalloc(s.nobj * sizeof *w.spans);
	for (size_t i = 0; i < s.nobj; i++)
		w.spans[i] = (struct span){ (uintptr_t)s.obj[i].base,
					    s.obj[i].count * s.obj[i].ti->t->size, (uint32_t)i };
	qsort(w.spans, s.nobj, sizeof *w.spans, by_base);
	for (size_t i = 0; i < s.nobj; i++)
		translate(&w, s.obj[i].base, s.obj[i].ti, s.obj[i].count);
	free(w.spans);
	for (size_t i = 0; i < g->nobj; i++) {
		apply(g->obj[i].base, s.obj[i].base, g->obj[i].ti, g->obj[i].count);
		free(s.obj[i].base);
		s.obj[i].base = NULL;
	}
	/* objects the guest created now belong to the host */
	for (size_t i = g->nobj; i < s.nobj; i++)
		s.obj[i].base = NULL;
out:
	codec_free_storage(&s, 0);
	free(s.obj);
	return rc;
}

