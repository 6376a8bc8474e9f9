/* Snapshot guest: mprotect'ed and PROT_NONE pages, a growing brk, signal
 * handlers on an altstack, and a blocked mask, all checked at the end. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile int usr1;
static volatile int on_alt;
static char altstack[65536];
static sigjmp_buf jb;

static void h_usr1(int sig)
{
	char here;
	usr1 += sig;
	on_alt = &here >= altstack && &here < altstack + sizeof altstack;
}

static void h_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static int faults(volatile char *p, int write)
{
	if (sigsetjmp(jb, 1))
		return 1;
	if (write)
		*p = 1;
	else
		(void)*p;
	return 0;
}

int main(void)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack };
	sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h_usr1;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = h_segv;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR2);
	sigprocmask(SIG_BLOCK, &m, NULL);

	char *r = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (int i = 0; i < 16 * 4096; i++)
		r[i] = (char)(i * 3);
	mprotect(r + 4 * 4096, 4 * 4096, PROT_READ);
	mprotect(r + 10 * 4096, 4096, PROT_NONE);

	uint64_t bsum = 0;
	for (int i = 0; i < 64; i++) {
		char *b = sbrk(8192); /* each growth is a step */
		memset(b, i + 1, 8192);
	}
	char *base = (char *)sbrk(0) - 64 * 8192;
	for (int i = 0; i < 64 * 8192; i++)
		bsum += (unsigned char)base[i];

	raise(SIGUSR1);
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	int ro_ok = faults(r + 5 * 4096, 1) && !faults(r + 5 * 4096, 0);
	int none_ok = faults(r + 10 * 4096, 0);
	int rw_ok = !faults(r + 1 * 4096, 1);
	int data_ok = 1;
	for (int i = 0; i < 16 * 4096; i++)
		if (i / 4096 != 10 && i != 1 * 4096 && r[i] != (char)(i * 3))
			data_ok = 0;
	struct sigaction q;
	sigaction(SIGUSR1, NULL, &q);
	printf("misc: usr1 %d altstack %d usr2-blocked %d mask-has-hup %d ro %d none %d rw %d "
	       "data %d brk-sum %llu\n", usr1, on_alt, sigismember(&cur, SIGUSR2),
	       sigismember(&q.sa_mask, SIGHUP), ro_ok, none_ok, rw_ok, data_ok,
	       (unsigned long long)bsum);
	return 0;
}
