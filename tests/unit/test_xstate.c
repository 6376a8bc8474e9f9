/* XSAVE state between host layouts: the three CPU kinds sbx runs on, as data
 * (CPUID leaf 0xD offsets and sizes), converted into one another; refusals. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snap/snap-internal.h"
#include "unit.h"

struct kind {
	const char *name;
	struct snap_xlayout l;
};

/* AMD EPYC (Zen 4, AVX-512, measured here), Intel Xeon with AVX-512 and
 * protection keys, Intel Xeon with AMX (XCR0 0x600e7). */
static const struct kind kinds[] = {
	{ "AMD EPYC", { .xcr0 = 0xe7, .size = 2432,
			.off = { [2] = 576, [5] = 832, [6] = 896, [7] = 1408 },
			.len = { [2] = 256, [5] = 64, [6] = 512, [7] = 1024 } } },
	{ "Intel Xeon", { .xcr0 = 0x2e7, .size = 2696,
			  .off = { [2] = 576, [5] = 1088, [6] = 1152, [7] = 1664, [9] = 2688 },
			  .len = { [2] = 256, [5] = 64, [6] = 512, [7] = 1024, [9] = 8 } } },
	{ "Intel Xeon AMX", { .xcr0 = 0x600e7, .size = 11008,
			      .off = { [2] = 576, [5] = 1088, [6] = 1152, [7] = 1664,
				       [17] = 2752, [18] = 2816 },
			      .len = { [2] = 256, [5] = 64, [6] = 512, [7] = 1024, [17] = 64,
				       [18] = 8192 } } },
	{ "AVX2 only", { .xcr0 = 0x7, .size = 832, .off = { [2] = 576 }, .len = { [2] = 256 } } },
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static uint8_t host[SNAP_XSTATE_MAX], back[SNAP_XSTATE_MAX];
static uint8_t canon_a[SNAP_XCANON_SIZE], canon_b[SNAP_XCANON_SIZE];

/* a host area as the kernel gives it: every enabled component in use */
static void fill(const struct snap_xlayout *l, uint64_t bv, unsigned seed)
{
	memset(host, 0, sizeof host);
	for (uint32_t i = 0; i < SNAP_XLEGACY; i++)
		host[i] = (uint8_t)(seed + i * 7);
	host[5] = 0;
	memcpy(host + 464, &l->xcr0, 8); /* the kernel's software words */
	memcpy(host + 512, &bv, 8);
	for (int c = 2; c < SNAP_XCOMP; c++)
		for (uint32_t k = 0; (bv & (1ull << c)) && k < l->len[c]; k++)
			host[l->off[c] + k] = (uint8_t)(seed * 31 + c * 13 + k + 1);
}

static void test_layouts_valid(void)
{
	struct common_err e;
	struct snap_xlayout h;
	for (size_t i = 0; i < NKINDS; i++)
		CHECK(snap_xlayout_check(&kinds[i].l, &e) == 0);
	CHECK(snap_xlayout_host(&h, &e) == 0);
	struct snap_xlayout bad = kinds[1].l;
	bad.len[6] = 256;
	CHECK(snap_xlayout_check(&bad, &e) < 0);
	bad = kinds[1].l;
	bad.off[9] = 2692; /* runs past the end */
	CHECK(snap_xlayout_check(&bad, &e) < 0);
}

/* every pair of kinds whose features allow: the same canonical state after
 * A -> canonical -> B -> canonical; component bytes land at B's offsets */
static void test_convert_between_kinds(void)
{
	struct common_err e;
	for (size_t a = 0; a < NKINDS; a++) {
		const struct snap_xlayout *la = &kinds[a].l;
		uint64_t fa;
		fill(la, la->xcr0, (unsigned)a + 1);
		CHECK(snap_xstate_from_host(la, host, la->size, &fa, canon_a, &e) == 0);
		CHECK(fa == la->xcr0);
		for (size_t b = 0; b < NKINDS; b++) {
			const struct snap_xlayout *lb = &kinds[b].l;
			uint64_t f = fa, fb;
			int fits = (fa & ~lb->xcr0) == 0;
			CHECK((snap_xstate_fit(lb, &f, canon_a, &e) == 0) == fits);
			if (!fits)
				continue;
			memset(back, 0xee, sizeof back);
			memcpy(back + 464, &lb->xcr0, 8);
			CHECK(snap_xstate_to_host(lb, f, canon_a, back, lb->size, &e) == 0);
			uint64_t bv;
			memcpy(&bv, back + 512, 8);
			CHECK(bv == f);
			CHECK(!memcmp(back + 464, &lb->xcr0, 8));
			for (int c = 2; c < SNAP_XCOMP; c++)
				if (f & (1ull << c))
					CHECK(!memcmp(back + lb->off[c], host + la->off[c], lb->len[c]));
			CHECK(snap_xstate_from_host(lb, back, lb->size, &fb, canon_b, &e) == 0);
			CHECK(fb == fa && !memcmp(canon_a, canon_b, sizeof canon_a));
		}
	}
}

static void test_refusals_name_the_component(void)
{
	struct common_err e;
	uint64_t f;
	/* AVX-512 state onto a CPU without it */
	fill(&kinds[1].l, 0xe7, 3);
	CHECK(snap_xstate_from_host(&kinds[1].l, host, kinds[1].l.size, &f, canon_a, &e) == 0);
	CHECK(snap_xstate_fit(&kinds[3].l, &f, canon_a, &e) < 0);
	CHECK_STR(e.why, "snapshot uses AVX-512 state; this CPU has none");
	/* AMX tiles onto the AMD layout */
	fill(&kinds[2].l, 0x600e7, 4);
	CHECK(snap_xstate_from_host(&kinds[2].l, host, kinds[2].l.size, &f, canon_a, &e) == 0);
	CHECK(snap_xstate_perm(f) == 18);
	CHECK(snap_xstate_fit(&kinds[0].l, &f, canon_a, &e) < 0);
	CHECK_STR(e.why, "snapshot uses AMX state; this CPU has none");
	/* a short host area is refused, not overrun */
	CHECK(snap_xstate_from_host(&kinds[2].l, host, 2432, &f, canon_a, &e) < 0);
	CHECK(snap_xstate_to_host(&kinds[2].l, 3, canon_a, back, 2432, &e) < 0);
	/* features the layout lacks are never written */
	CHECK(snap_xstate_to_host(&kinds[0].l, 0x600e7, canon_a, back, kinds[0].l.size, &e) < 0);
}

static void test_pkru(void)
{
	struct common_err e;
	const struct snap_xlayout *intel = &kinds[1].l, *amd = &kinds[0].l;
	uint64_t f;
	uint32_t pkru = 0x55555554; /* Linux's default: no key granted */
	fill(intel, intel->xcr0, 5);
	memcpy(host + intel->off[9], &pkru, 4);
	CHECK(snap_xstate_from_host(intel, host, intel->size, &f, canon_a, &e) == 0);
	CHECK(f & (1ull << 9));
	CHECK(snap_xstate_fit(amd, &f, canon_a, &e) == 0);
	CHECK(!(f & (1ull << 9)));
	pkru = 0x55555550; /* key 1 granted: a key-less CPU cannot keep that */
	memcpy(host + intel->off[9], &pkru, 4);
	CHECK(snap_xstate_from_host(intel, host, intel->size, &f, canon_a, &e) == 0);
	CHECK(snap_xstate_fit(amd, &f, canon_a, &e) < 0);
	CHECK_STR(e.why, "snapshot uses PKRU state; this CPU has none");
}

/* XSTATE_BV decides what is used; a set bit over all-zero bytes is init */
static void test_unused_components(void)
{
	struct common_err e;
	const struct snap_xlayout *l = &kinds[2].l;
	uint64_t f;
	fill(l, 0x7, 6);
	host[l->off[6] + 3] = 0x55; /* stale bytes of a component not in XSTATE_BV */
	CHECK(snap_xstate_from_host(l, host, l->size, &f, canon_a, &e) == 0);
	CHECK(f == 0x7);
	CHECK(canon_a[1152 + 3] == 0);
	uint64_t bv = 0x600e7;
	fill(l, 0x7, 6);
	memcpy(host + 512, &bv, 8);
	CHECK(snap_xstate_from_host(l, host, l->size, &f, canon_a, &e) == 0);
	CHECK(f == 0x7);
	CHECK(snap_xstate_perm(f) == 0);
	/* restored: only the used components, the rest left to the kernel's init */
	memset(back, 0xee, sizeof back);
	CHECK(snap_xstate_to_host(l, f, canon_a, back, l->size, &e) == 0);
	memcpy(&bv, back + 512, 8);
	CHECK(bv == 0x7);
	CHECK(back[l->off[18]] == 0 && back[l->off[6]] == 0);
}

int main(void)
{
	test_layouts_valid();
	test_convert_between_kinds();
	test_refusals_name_the_component();
	test_pkru();
	test_unused_components();
	return unit_finish("test_xstate");
}
