/* XSAVE state in a host-independent form: the components a guest uses, each
 * at a fixed canonical offset, converted from and to a host's standard-format
 * NT_X86_XSTATE layout as CPUID leaf 0xD describes it. */
#include <cpuid.h>
#include <inttypes.h>
#include <string.h>

#include "snap/snap-internal.h"

/* The canonical offsets are the architectural standard-format ones of Intel
 * CPUs; AMD packs AVX-512 lower, so a host layout is always read from CPUID. */
static const struct {
	uint32_t off, len;
	const char *name;
} canon[SNAP_XCOMP] = {
	[0] = { 0, 160, "x87" },          [1] = { 160, 256, "SSE" },
	[2] = { 576, 256, "AVX" },        [3] = { 960, 64, "MPX" },
	[4] = { 1024, 64, "MPX" },        [5] = { 1088, 64, "AVX-512" },
	[6] = { 1152, 512, "AVX-512" },   [7] = { 1664, 1024, "AVX-512" },
	[9] = { 2688, 8, "PKRU" },        [17] = { 2752, 64, "AMX" },
	[18] = { 2816, 8192, "AMX" },
};

#define XSTATE_HDR 512u
#define PKRU_LINUX_DEFAULT 0x55555554u
#define XFEATURE_TILEDATA 18

uint32_t snap_xcomp_len(int i)
{
	return i >= 2 && i < SNAP_XCOMP ? canon[i].len : 0;
}

uint32_t snap_xcomp_off(int i)
{
	return i >= 2 && i < SNAP_XCOMP ? canon[i].off : 0;
}

const char *snap_xcomp_name(int i)
{
	return i >= 0 && i < SNAP_XCOMP && canon[i].name ? canon[i].name : "unknown";
}

static uint64_t host_xcr0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32 | lo) & SNAP_XKNOWN;
}

int snap_xlayout_host(struct snap_xlayout *l, struct common_err *e)
{
	unsigned a, b, c, d;
	memset(l, 0, sizeof *l);
	if (__get_cpuid_max(0, NULL) < 0xd)
		return common_errf(e, "XSAVE layout", "CPUID has no leaf 0xD");
	__cpuid_count(1, 0, a, b, c, d);
	if (!(c & bit_OSXSAVE))
		return common_errf(e, "XSAVE layout", "XSAVE is not enabled on this CPU");
	l->xcr0 = host_xcr0();
	l->size = XSTATE_HDR + 64;
	for (int i = 2; i < SNAP_XCOMP; i++) {
		if (!(l->xcr0 & (1ull << i)))
			continue;
		__cpuid_count(0xd, (unsigned)i, a, b, c, d);
		l->off[i] = b;
		l->len[i] = a;
		if (b + a > l->size)
			l->size = b + a;
	}
	return snap_xlayout_check(l, e);
}

int snap_xlayout_check(const struct snap_xlayout *l, struct common_err *e)
{
	if ((l->xcr0 & 3) != 3 || l->xcr0 & ~SNAP_XKNOWN)
		return common_errf(e, "XSAVE layout", "features %#" PRIx64 " not understood", l->xcr0);
	for (int i = 2; i < SNAP_XCOMP; i++) {
		if (!(l->xcr0 & (1ull << i)))
			continue;
		if (l->len[i] != canon[i].len || l->off[i] < XSTATE_HDR + 64 ||
		    l->off[i] + l->len[i] > l->size || l->size > SNAP_XSTATE_MAX)
			return common_errf(e, "XSAVE layout", "component %d (%s) at %u+%u of %u bytes",
					   i, canon[i].name, l->off[i], l->len[i], l->size);
	}
	return 0;
}

static int all_zero(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int snap_xstate_from_host(const struct snap_xlayout *l, const uint8_t *buf, size_t len,
			  uint64_t *features, uint8_t *out, struct common_err *e)
{
	uint64_t bv;
	if (len < l->size)
		return common_errf(e, "capture", "XSAVE area of %zu bytes, this CPU's layout needs %u",
				   len, l->size);
	memset(out, 0, SNAP_XCANON_SIZE);
	memcpy(out, buf, SNAP_XLEGACY);
	out[5] = 0;
	memcpy(&bv, buf + XSTATE_HDR, 8);
	*features = 3;
	/* a component at its init value (all zero) is not used: leave it out */
	for (int i = 2; i < SNAP_XCOMP; i++) {
		uint64_t bit = 1ull << i;
		if (!(bv & l->xcr0 & bit) || all_zero(buf + l->off[i], l->len[i]))
			continue;
		memcpy(out + canon[i].off, buf + l->off[i], canon[i].len);
		*features |= bit;
	}
	return 0;
}

int snap_xstate_fit(const struct snap_xlayout *l, uint64_t *features, const uint8_t *st,
		    struct common_err *e)
{
	uint64_t missing = *features & ~l->xcr0;
	uint32_t pkru;
	memcpy(&pkru, st + canon[9].off, 4);
	/* protection keys at Linux's default grant nothing a key-less CPU lacks */
	if ((missing & (1ull << 9)) && (pkru == 0 || pkru == PKRU_LINUX_DEFAULT)) {
		*features &= ~(1ull << 9);
		missing &= ~(1ull << 9);
	}
	for (int i = 0; i < SNAP_XCOMP; i++)
		if (missing & (1ull << i))
			return common_errf(e, "restore", "snapshot uses %s state; this CPU has none",
					   canon[i].name);
	return 0;
}

int snap_xstate_to_host(const struct snap_xlayout *l, uint64_t features, const uint8_t *st,
			uint8_t *buf, size_t len, struct common_err *e)
{
	if (len < l->size)
		return common_errf(e, "restore", "XSAVE area of %zu bytes, this CPU's layout needs %u",
				   len, l->size);
	if (features & ~l->xcr0)
		return common_errf(e, "restore", "XSAVE features %#" PRIx64 " exceed this CPU's %#"
				   PRIx64, features, l->xcr0);
	uint8_t sw[48];
	memcpy(sw, buf + 464, sizeof sw); /* the kernel's own size and feature words */
	memset(buf, 0, len);
	memcpy(buf, st, SNAP_XLEGACY);
	memcpy(buf + 464, sw, sizeof sw);
	/* exactly the used components: the kernel refuses features it has not
	 * enabled for this task (AMX before ARCH_REQ_XCOMP_PERM) */
	memcpy(buf + XSTATE_HDR, &features, 8);
	for (int i = 2; i < SNAP_XCOMP; i++)
		if (features & (1ull << i))
			memcpy(buf + l->off[i], st + canon[i].off, canon[i].len);
	return 0;
}

uint64_t snap_xstate_perm(uint64_t features)
{
	return features & (1ull << XFEATURE_TILEDATA) ? XFEATURE_TILEDATA : 0;
}
