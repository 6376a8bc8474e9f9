/* trace/determ/tsc.c: the rdtsc/rdtscp decoder, and the answer at a SIGSEGV stop.
 * A child sends itself the SIGSEGV a faulting rdtsc raises (SI_KERNEL: a
 * process may queue any code to itself) just before the instruction, so the
 * emulation is exercised on every host, also where rdtsc never faults. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/determ/determ.h"
#include "tests/unit/unit.h"

static void decoder(void)
{
	static const struct { uint8_t b[4]; size_t n; int insn; size_t len; } cases[] = {
		{ { 0x0f, 0x31 }, 2, TRACE_TSC_RDTSC, 2 },
		{ { 0x0f, 0x31, 0x90 }, 3, TRACE_TSC_RDTSC, 2 },
		{ { 0x0f, 0x01, 0xf9 }, 3, TRACE_TSC_RDTSCP, 3 },
		{ { 0x0f, 0x01, 0xf9, 0xc3 }, 4, TRACE_TSC_RDTSCP, 3 },
		{ { 0x0f, 0x01, 0xf9 }, 2, TRACE_TSC_NONE, 0 },  /* cut short */
		{ { 0x0f, 0x31 }, 1, TRACE_TSC_NONE, 0 },
		{ { 0x0f }, 0, TRACE_TSC_NONE, 0 },
		{ { 0x0f, 0x01, 0xd0 }, 3, TRACE_TSC_NONE, 0 },  /* xgetbv */
		{ { 0x0f, 0x05 }, 2, TRACE_TSC_NONE, 0 },        /* syscall */
		{ { 0x48, 0x0f, 0x31 }, 3, TRACE_TSC_NONE, 0 },  /* prefixed: not emulated */
		{ { 0x31, 0x0f }, 2, TRACE_TSC_NONE, 0 },
		{ { 0xff, 0xff, 0xff, 0xff }, 4, TRACE_TSC_NONE, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t len = 99;
		CHECK(trace_tsc_decode(cases[i].b, cases[i].n, &len) == cases[i].insn);
		CHECK(len == cases[i].len);
	}
}

/* queue SIGSEGV with code (SI_KERNEL: as a #GP), then run insn at once */
static uint64_t child_body(int code, int rdtscp, uint32_t *aux)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGSEGV;
	si.si_code = code;
	uint64_t ax = SYS_rt_sigqueueinfo, dx = (uintptr_t)&si, cx = 0;
	if (rdtscp == 2)
		__asm__ volatile("syscall\n\tnop"
				 : "+a"(ax), "+d"(dx)
				 : "D"((uint64_t)getpid()), "S"((uint64_t)SIGSEGV)
				 : "rcx", "r11", "memory");
	else if (rdtscp)
		__asm__ volatile("syscall\n\t.byte 0x0f, 0x01, 0xf9"
				 : "+a"(ax), "+d"(dx), "=c"(cx)
				 : "D"((uint64_t)getpid()), "S"((uint64_t)SIGSEGV)
				 : "r11", "memory");
	else
		__asm__ volatile("syscall\n\trdtsc"
				 : "+a"(ax), "+d"(dx)
				 : "D"((uint64_t)getpid()), "S"((uint64_t)SIGSEGV)
				 : "rcx", "r11", "memory");
	*aux = (uint32_t)cx;
	return (dx << 32) | (uint32_t)ax;
}

/* The child's signal-delivery stop: 1 if it was answered with tsc. */
static int run_child(int code, int rdtscp, uint64_t tsc, int *exit_code)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn the death into exit 1 */
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		uint32_t aux = 7;
		uint64_t v = child_body(code, rdtscp, &aux);
		_exit(v == 0x1122334455667788ull && (rdtscp != 1 || aux == TRACE_TSC_AUX) ? 0 : 3);
	}
	close(p[1]);
	close(p[0]);
	int st, handled = 0;
	waitpid(pid, &st, 0); /* the SIGSTOP */
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	waitpid(pid, &st, 0);
	if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGSEGV) {
		struct user_regs_struct r;
		size_t len;
		int insn = trace_tsc_fault(pid, &r, &len);
		if (insn > 0 && trace_tsc_answer(pid, &r, insn, len, tsc) == 0)
			handled = 1;
		ptrace(PTRACE_CONT, pid, NULL, handled ? 0 : (void *)(long)SIGSEGV);
		waitpid(pid, &st, 0);
	}
	*exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return handled;
}

int main(void)
{
	int code;
	decoder();
	/* rdtsc and rdtscp: the answer lands in edx:eax (and ecx), rip steps over */
	CHECK(run_child(SI_KERNEL, 0, 0x1122334455667788ull, &code) == 1 && code == 0);
	CHECK(run_child(SI_KERNEL, 1, 0x1122334455667788ull, &code) == 1 && code == 0);
	/* a SIGSEGV someone sent (SI_USER, SI_QUEUE) is delivered: the child dies of it */
	CHECK(run_child(SI_QUEUE, 0, 0x1122334455667788ull, &code) == 0 && code == 128 + SIGSEGV);
	/* a CPU fault at another instruction is delivered too */
	CHECK(run_child(SI_KERNEL, 2, 0x1122334455667788ull, &code) == 0 && code == 128 + SIGSEGV);
	/* the probe gives one answer per process */
	int probe = trace_tsc_probe();
	CHECK((probe == 0 || probe == 1) && trace_tsc_probe() == probe);
	return unit_finish("test_tsc");
}
