/* Snapshot guest: an AMX tile register holds live values across raw syscalls
 * (step boundaries), then is checked. On a CPU without AMX, or where the
 * kernel does not grant it, it says why it skips and makes the same calls. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "snap_regs.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static uint8_t cfg[64] __attribute__((aligned(64)));
static uint8_t in[16][64] __attribute__((aligned(64)));
static uint8_t out[16][64] __attribute__((aligned(64)));

static const char *why_no_amx(void)
{
	unsigned a, b, c, d, lo, hi;
	if (__get_cpuid_max(0, NULL) < 7)
		return "this CPU has no AMX";
	__cpuid_count(1, 0, a, b, c, d);
	if (!(c & bit_OSXSAVE))
		return "this CPU has no AMX";
	__cpuid_count(7, 0, a, b, c, d);
	if (!(d & (1u << 24)))
		return "this CPU has no AMX";
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 0x60000) != 0x60000)
		return "the kernel has not enabled AMX state";
	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
		return "the kernel refused AMX permission";
	return NULL;
}

int main(void)
{
	const char *why = why_no_amx();
	if (why) {
		snap_steps_only();
		printf("amx: skipped: %s\n", why);
		return 0;
	}
	cfg[0] = 1; /* palette 1; tmm0: 16 rows of 64 bytes */
	cfg[16] = 64;
	cfg[48] = 16;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 64; j++)
			in[i][j] = (uint8_t)(i * 17 + j * 5 + 9);
	__asm__ volatile(
		"ldtilecfg (%[cfg])\n\t"
		"mov $64, %%rdx\n\t"
		"tileloadd (%[in],%%rdx,1), %%tmm0\n\t"
		SNAP_STEP_LOOP
		"mov $64, %%rdx\n\t"
		"tilestored %%tmm0, (%[out],%%rdx,1)\n\t"
		"tilerelease\n\t"
		:
		: [cfg] "r"(cfg), [in] "r"(in), [out] "r"(out)
		: "rax", "rcx", "rdx", "r11", "r12", "memory");
	int ok = !memcmp(in, out, sizeof in);
	printf("amx: tmm0 %s\n", ok ? "kept" : "LOST");
	return ok ? 0 : 1;
}
