/* Snapshot guest: x87, SSE, AVX registers and MXCSR hold live values across
 * raw syscalls (step boundaries), then are checked. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "snap_regs.h"

static uint8_t in[16][32] __attribute__((aligned(32)));
static uint8_t out[16][32] __attribute__((aligned(32)));

int main(void)
{
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 32; j++)
			in[i][j] = (uint8_t)(i * 37 + j * 11 + 5);
	unsigned mx_in = 0x3f80 | 0x6000, mx_out = 0; /* round toward zero */
	long double x87_out[3];
	__asm__ volatile(
		"ldmxcsr %[mxi]\n\t"
		"fldpi\n\tfld1\n\tfldl2e\n\t"
		"vmovdqa 0(%[in]), %%ymm0\n\t"   "vmovdqa 32(%[in]), %%ymm1\n\t"
		"vmovdqa 64(%[in]), %%ymm2\n\t"  "vmovdqa 96(%[in]), %%ymm3\n\t"
		"vmovdqa 128(%[in]), %%ymm4\n\t" "vmovdqa 160(%[in]), %%ymm5\n\t"
		"vmovdqa 192(%[in]), %%ymm6\n\t" "vmovdqa 224(%[in]), %%ymm7\n\t"
		"vmovdqa 256(%[in]), %%ymm8\n\t" "vmovdqa 288(%[in]), %%ymm9\n\t"
		"vmovdqa 320(%[in]), %%ymm10\n\t" "vmovdqa 352(%[in]), %%ymm11\n\t"
		"vmovdqa 384(%[in]), %%ymm12\n\t" "vmovdqa 416(%[in]), %%ymm13\n\t"
		"vmovdqa 448(%[in]), %%ymm14\n\t" "vmovdqa 480(%[in]), %%ymm15\n\t"
		SNAP_STEP_LOOP
		"vmovdqa %%ymm0, 0(%[out])\n\t"   "vmovdqa %%ymm1, 32(%[out])\n\t"
		"vmovdqa %%ymm2, 64(%[out])\n\t"  "vmovdqa %%ymm3, 96(%[out])\n\t"
		"vmovdqa %%ymm4, 128(%[out])\n\t" "vmovdqa %%ymm5, 160(%[out])\n\t"
		"vmovdqa %%ymm6, 192(%[out])\n\t" "vmovdqa %%ymm7, 224(%[out])\n\t"
		"vmovdqa %%ymm8, 256(%[out])\n\t" "vmovdqa %%ymm9, 288(%[out])\n\t"
		"vmovdqa %%ymm10, 320(%[out])\n\t" "vmovdqa %%ymm11, 352(%[out])\n\t"
		"vmovdqa %%ymm12, 384(%[out])\n\t" "vmovdqa %%ymm13, 416(%[out])\n\t"
		"vmovdqa %%ymm14, 448(%[out])\n\t" "vmovdqa %%ymm15, 480(%[out])\n\t"
		"fstpt 0(%[x87])\n\tfstpt 16(%[x87])\n\tfstpt 32(%[x87])\n\t"
		"stmxcsr %[mxo]\n\t"
		"vzeroupper\n\t"
		: [mxo] "=m"(mx_out)
		: [mxi] "m"(mx_in), [in] "r"(in), [out] "r"(out), [x87] "r"(x87_out)
		: "rax", "rcx", "r11", "r12", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
		  "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15", "st", "st(1)", "st(2)");
	int ok = !memcmp(in, out, sizeof in) && mx_out == mx_in &&
		 x87_out[2] > 3.14159 && x87_out[2] < 3.1416 && x87_out[1] == 1.0L &&
		 x87_out[0] > 1.4426 && x87_out[0] < 1.4427;
	printf("fpu: ymm0-15 %s, mxcsr %#x, x87 %s\n", !memcmp(in, out, sizeof in) ? "kept" : "LOST",
	       mx_out, ok ? "kept" : "LOST");
	return ok ? 0 : 1;
}
