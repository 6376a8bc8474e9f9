/* Determinism guest for rdtsc/rdtscp. "probe": does prctl(PR_SET_TSC,
 * PR_TSC_SIGSEGV) make rdtsc fault on this host (run outside any sandbox)?
 * Default: print rdtsc- and rdtscp-derived values, then try to lift the TSC
 * mode and read once more. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static uint64_t rdtscp(uint32_t *aux)
{
	uint32_t lo, hi;
	__asm__ volatile(".byte 0x0f, 0x01, 0xf9" : "=a"(lo), "=d"(hi), "=c"(*aux));
	return (uint64_t)hi << 32 | lo;
}

static int probe(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
		rdtsc();
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	puts(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? "rdtsc faults" : "rdtsc runs");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "probe"))
		return probe();
	uint32_t aux = 99;
	uint64_t a = rdtsc(), b = rdtsc(), c = rdtscp(&aux);
	printf("rdtsc %llu %llu rdtscp %llu aux %u\n", (unsigned long long)a,
	       (unsigned long long)b, (unsigned long long)c, aux);
	printf("increasing %s\n", a < b && b < c ? "yes" : "no");
	int mode = -1;
	prctl(PR_GET_TSC, &mode, 0, 0, 0);
	errno = 0;
	int rc = prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	printf("tsc mode %d, enable %d %s\n", mode, rc, rc ? strerror(errno) : "");
	printf("rdtsc after %llu\n", (unsigned long long)rdtsc());
	return 0;
}
