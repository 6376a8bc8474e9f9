/* rdtsc and rdtscp under sbx-run --deterministic (SPEC §9): with
 * prctl(PR_SET_TSC, PR_TSC_SIGSEGV) the CPU faults on both instructions, the
 * supervisor sees the SIGSEGV at its signal-delivery stop, answers from the
 * virtual clock and steps over. Some hosts (a PVM guest) ignore CR4.TSD, so
 * whether it works is probed once per process. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/determ/determ.h"
#include "trace/tracee/tracee.h"

#define PROBE_FAULTED 42 /* the probe child's exit code when rdtsc faulted */

int trace_tsc_decode(const uint8_t *b, size_t n, size_t *len)
{
	if (n >= 2 && b[0] == 0x0f && b[1] == 0x31) {
		*len = 2;
		return TRACE_TSC_RDTSC;
	}
	if (n >= 3 && b[0] == 0x0f && b[1] == 0x01 && b[2] == 0xf9) {
		*len = 3;
		return TRACE_TSC_RDTSCP;
	}
	*len = 0;
	return TRACE_TSC_NONE;
}

static void probe_segv(int sig)
{
	(void)sig;
	_exit(PROBE_FAULTED);
}

static int probe_once(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = probe_segv; /* a handler, not a core dump */
		sigaction(SIGSEGV, &sa, NULL);
		if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) < 0)
			_exit(1);
		uint32_t lo, hi;
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, __WNOTHREAD) < 0)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == PROBE_FAULTED;
}

static int tsc_faults;
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

static void probe(void)
{
	tsc_faults = probe_once();
}

int trace_tsc_probe(void)
{
	pthread_once(&tsc_once, probe);
	return tsc_faults;
}

int trace_tsc_fault(pid_t tid, struct user_regs_struct *r, size_t *len)
{
	siginfo_t si;
	uint8_t b[3];
	int rc;
	*len = 0;
	/* only the CPU's fault: SI_KERNEL, as a #GP is reported */
	if ((rc = trace_siginfo(tid, &si)) < 0)
		return rc;
	if (si.si_signo != SIGSEGV || si.si_code != SI_KERNEL)
		return TRACE_TSC_NONE;
	if ((rc = trace_regs_get(tid, r)) < 0)
		return rc;
	ssize_t n = trace_mem_read(tid, r->rip, b, sizeof b);
	if (n < 2) /* rdtsc may end the last readable page */
		n = trace_mem_read(tid, r->rip, b, 2);
	if (n < 2)
		return TRACE_TSC_NONE;
	return trace_tsc_decode(b, (size_t)n, len);
}

int trace_tsc_answer(pid_t tid, struct user_regs_struct *r, int insn, size_t len, uint64_t tsc)
{
	r->rax = (uint32_t)tsc;
	r->rdx = (uint32_t)(tsc >> 32);
	if (insn == TRACE_TSC_RDTSCP)
		r->rcx = TRACE_TSC_AUX;
	r->rip += len;
	return trace_regs_set(tid, r);
}
