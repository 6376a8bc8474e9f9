/* Snapshot guest: AVX-512 state (zmm16-31 and opmask k1-k7) holds live values
 * across raw syscalls (step boundaries), then is checked. On a CPU without
 * AVX-512 it says why it skips and still makes the same calls. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "snap_regs.h"

static uint8_t in[16][64] __attribute__((aligned(64)));
static uint8_t out[16][64] __attribute__((aligned(64)));

static int have_avx512(void)
{
	unsigned a, b, c, d, lo, hi;
	if (__get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(1, 0, a, b, c, d);
	if (!(c & bit_OSXSAVE))
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	__cpuid_count(7, 0, a, b, c, d);
	return (b & bit_AVX512F) && (b & bit_AVX512BW) && (lo & 0xe6) == 0xe6;
}

/* only called where CPUID says AVX-512 F and BW are there */
__attribute__((target("avx512f,avx512bw"))) static int hold(void)
{
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 64; j++)
			in[i][j] = (uint8_t)(i * 29 + j * 7 + 3);
	uint64_t k_in = 0xa5c3f00f12345678ull, k_out[7];
	__asm__ volatile(
		"kmovq %[k], %%k1\n\tkshiftlq $1, %%k1, %%k2\n\tkshiftlq $2, %%k1, %%k3\n\t"
		"kshiftlq $3, %%k1, %%k4\n\tkshiftlq $4, %%k1, %%k5\n\tkshiftlq $5, %%k1, %%k6\n\t"
		"kshiftlq $6, %%k1, %%k7\n\t"
		"vmovdqa64 0(%[in]), %%zmm16\n\t"   "vmovdqa64 64(%[in]), %%zmm17\n\t"
		"vmovdqa64 128(%[in]), %%zmm18\n\t" "vmovdqa64 192(%[in]), %%zmm19\n\t"
		"vmovdqa64 256(%[in]), %%zmm20\n\t" "vmovdqa64 320(%[in]), %%zmm21\n\t"
		"vmovdqa64 384(%[in]), %%zmm22\n\t" "vmovdqa64 448(%[in]), %%zmm23\n\t"
		"vmovdqa64 512(%[in]), %%zmm24\n\t" "vmovdqa64 576(%[in]), %%zmm25\n\t"
		"vmovdqa64 640(%[in]), %%zmm26\n\t" "vmovdqa64 704(%[in]), %%zmm27\n\t"
		"vmovdqa64 768(%[in]), %%zmm28\n\t" "vmovdqa64 832(%[in]), %%zmm29\n\t"
		"vmovdqa64 896(%[in]), %%zmm30\n\t" "vmovdqa64 960(%[in]), %%zmm31\n\t"
		SNAP_STEP_LOOP
		"vmovdqa64 %%zmm16, 0(%[out])\n\t"   "vmovdqa64 %%zmm17, 64(%[out])\n\t"
		"vmovdqa64 %%zmm18, 128(%[out])\n\t" "vmovdqa64 %%zmm19, 192(%[out])\n\t"
		"vmovdqa64 %%zmm20, 256(%[out])\n\t" "vmovdqa64 %%zmm21, 320(%[out])\n\t"
		"vmovdqa64 %%zmm22, 384(%[out])\n\t" "vmovdqa64 %%zmm23, 448(%[out])\n\t"
		"vmovdqa64 %%zmm24, 512(%[out])\n\t" "vmovdqa64 %%zmm25, 576(%[out])\n\t"
		"vmovdqa64 %%zmm26, 640(%[out])\n\t" "vmovdqa64 %%zmm27, 704(%[out])\n\t"
		"vmovdqa64 %%zmm28, 768(%[out])\n\t" "vmovdqa64 %%zmm29, 832(%[out])\n\t"
		"vmovdqa64 %%zmm30, 896(%[out])\n\t" "vmovdqa64 %%zmm31, 960(%[out])\n\t"
		"kmovq %%k1, 0(%[ko])\n\tkmovq %%k2, 8(%[ko])\n\tkmovq %%k3, 16(%[ko])\n\t"
		"kmovq %%k4, 24(%[ko])\n\tkmovq %%k5, 32(%[ko])\n\tkmovq %%k6, 40(%[ko])\n\t"
		"kmovq %%k7, 48(%[ko])\n\t"
		"vzeroupper\n\t"
		:
		: [k] "m"(k_in), [in] "r"(in), [out] "r"(out), [ko] "r"(k_out)
		: "rax", "rcx", "r11", "r12", "memory", "xmm16", "xmm17", "xmm18", "xmm19",
		  "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
		  "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6", "k7");
	int kok = 1;
	for (int i = 0; i < 7; i++)
		kok &= k_out[i] == k_in << i;
	int zok = !memcmp(in, out, sizeof in);
	printf("avx512: zmm16-31 %s, k1-k7 %s\n", zok ? "kept" : "LOST", kok ? "kept" : "LOST");
	return zok && kok ? 0 : 1;
}

int main(void)
{
	if (!have_avx512()) {
		snap_steps_only();
		printf("avx512: skipped: this CPU has no AVX-512\n");
		return 0;
	}
	return hold();
}
