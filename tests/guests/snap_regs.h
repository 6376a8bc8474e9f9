/* What the register guests share: a loop of 200 raw getppid calls, each a step
 * boundary, run while the registers under test hold their values (an asm string
 * for the middle of their asm statement), and the same calls where the CPU
 * lacks those registers. */
#ifndef SNAP_REGS_H
#define SNAP_REGS_H
#define SNAP_STEP_LOOP \
	"mov $200, %%r12\n" \
	"1:\n\t" \
	"mov $110, %%eax\n\t" \
	"syscall\n\t" \
	"dec %%r12\n\t" \
	"jnz 1b\n\t"

static inline void snap_steps_only(void)
{
	__asm__ volatile(SNAP_STEP_LOOP ::: "rax", "rcx", "r11", "r12", "memory");
}
#endif
