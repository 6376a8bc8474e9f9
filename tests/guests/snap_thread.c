/* Snapshot guest with threads: main and two workers take turns (one mutex,
 * one condition variable) for N turns in all; each turn folds the turn number
 * into a shared digest, the thread's own thread-local and floating-point
 * state, then sleeps a little and appends a line to /ns/steps.log. main joins
 * the workers (the kernel's clear_child_tid wake-up) and prints the digest,
 * the same whether or not the run was snapshotted and restored. Nothing
 * printed depends on a tid. A second argument adds: "spin", a worker that
 * spins (never makes a syscall) while the others take turns; "gap", a thread
 * that has come and gone before the others start (its tid is not reused);
 * "pipe", a pipe held open; "child", a child process forked by a worker
 * thread, waited for by it (both refused); "term", the first worker sends
 * itself SIGTERM (uncaught) at turn 10 unless /ns/died exists, which it
 * makes first. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 3

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, steps;
static uint64_t digest = 1469598103934665603ull;
static __thread uint64_t mine;
static volatile int spinning = 1;
static int term;
static double fpsum[NTHREADS];

static void nap(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void step(int self, double *acc)
{
	mine = mine * 31 + (uint64_t)turn;
	*acc = *acc * 1.0000001 + (double)turn / 7.0;
	digest = (digest ^ (uint64_t)turn ^ ((uint64_t)self << 40) ^ mine) * 1099511628211ull;
	FILE *f = fopen("steps.log", "a");
	if (f) {
		fprintf(f, "turn %d by %d\n", turn, self);
		fclose(f);
	}
	nap();
}

static void *take_turns(void *arg)
{
	int self = (int)(intptr_t)arg;
	double acc = self;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (turn < steps && turn % NTHREADS != self)
			pthread_cond_wait(&cv, &mu);
		if (turn >= steps)
			break;
		step(self, &acc);
		if (term && self == 1 && turn == 10 && access("died", F_OK) != 0) {
			close(open("died", O_CREAT | O_WRONLY, 0644));
			raise(SIGTERM);
		}
		turn++;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	fpsum[self] = acc;
	return (void *)(uintptr_t)mine;
}

static void *fork_child(void *arg)
{
	(void)arg;
	pid_t c = fork();
	if (c == 0) {
		struct timespec ts = { 2, 0 };
		nanosleep(&ts, NULL);
		_exit(0);
	}
	if (c > 0)
		waitpid(c, NULL, 0);
	return NULL;
}

static void *spin(void *arg)
{
	volatile uint64_t *n = arg;
	while (spinning)
		(*n)++;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[NTHREADS], sp;
	static uint64_t spun;
	steps = argc > 1 ? atoi(argv[1]) : 30;
	const char *mode = argc > 2 ? argv[2] : "";
	int with_spin = !strcmp(mode, "spin"), p[2];
	term = !strcmp(mode, "term");
	if (!strcmp(mode, "gap")) {
		pthread_create(&sp, NULL, spin, &spun);
		spinning = 0;
		pthread_join(sp, NULL);
		spinning = 1;
	}
	if (!strcmp(mode, "pipe") && pipe(p) < 0)
		return 3;
	pthread_t forker;
	if (!strcmp(mode, "child"))
		pthread_create(&forker, NULL, fork_child, NULL);
	if (with_spin)
		pthread_create(&sp, NULL, spin, &spun);
	for (int i = 1; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, take_turns, (void *)(intptr_t)i);
	void *own = take_turns((void *)0);
	uint64_t sum = (uint64_t)(uintptr_t)own;
	for (int i = 1; i < NTHREADS; i++) {
		void *r;
		pthread_join(t[i], &r);
		sum = sum * 131 + (uint64_t)(uintptr_t)r;
	}
	if (!strcmp(mode, "child"))
		pthread_join(forker, NULL);
	if (with_spin) {
		spinning = 0;
		pthread_join(sp, NULL);
	}
	printf("threads %d turns %d digest %016llx sum %016llx fp %.6f %.6f %.6f\n", NTHREADS,
	       turn, (unsigned long long)digest, (unsigned long long)sum, fpsum[0], fpsum[1],
	       fpsum[2]);
	return 0;
}
