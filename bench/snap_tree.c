/* bench guest: a pipeline of N processes (the root, stage 0, and N-1
 * children), each with MIB MiB of touched heap; stage i holds a line for
 * stage i+1 in the pipe between them. Once all are ready the root prints
 * "ready" and every stage waits while /tmp/snap_tree.mark, which the root
 * made, exists as it made it (its ctime): a snapshot holds the run's /tmp and
 * the mark in it, made again by the restore (times are not held), and a native
 * run goes on once the bench removes the mark. No descriptor stays open while
 * it waits: a snapshot holds every one.
 * Each stage then reads its line and checks its memory; the root prints
 * "resumed NS" (CLOCK_REALTIME when it went on), waits for the children and
 * prints "ok". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MARK "/tmp/snap_tree.mark"
#define MAX_PROCS 64

static struct timespec made; /* the mark's ctime */

/* Wait while the mark is the one the root made. */
static void hold(void)
{
	struct stat sb;
	while (stat(MARK, &sb) == 0 && sb.st_ctim.tv_sec == made.tv_sec &&
	       sb.st_ctim.tv_nsec == made.tv_nsec)
		usleep(1000);
}

static uint64_t *touch(size_t mib, unsigned stage)
{
	size_t n = mib << 17; /* u64 words */
	uint64_t *p = malloc(n * sizeof *p + 8);
	for (size_t i = 0; p && i < n; i++)
		p[i] = (i + stage) * 0x9e3779b97f4a7c15ull + 1;
	return p;
}

static int check(const uint64_t *p, size_t mib, unsigned stage)
{
	for (size_t i = 0; i < mib << 17; i += 512)
		if (p[i] != (i + stage) * 0x9e3779b97f4a7c15ull + 1)
			return 1;
	return 0;
}

/* A child stage: its line from stage i-1 (in), a line for stage i+1 (out, or -1). */
static int stage(unsigned i, size_t mib, int in, int out, int ready)
{
	uint64_t *p = touch(mib, i);
	char line[64], got[64] = "";
	int n = snprintf(line, sizeof line, "stage %u\n", i);
	if (!p || (out >= 0 && write(out, line, (size_t)n) != n) || write(ready, "r", 1) != 1)
		return 3;
	hold();
	snprintf(line, sizeof line, "stage %u\n", i - 1);
	if (read(in, got, sizeof got - 1) <= 0 || strcmp(got, line))
		return 4;
	return check(p, mib, i) ? 5 : 0;
}

int main(int argc, char **argv)
{
	unsigned procs = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 3;
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 4;
	int fd[MAX_PROCS][2], ready[2];
	FILE *m = fopen(MARK, "w");
	struct stat sb;
	if (!m || fclose(m) || stat(MARK, &sb) < 0 || pipe(ready) < 0 || procs < 1 ||
	    procs > MAX_PROCS)
		return 2;
	made = sb.st_ctim;
	/* pipe k: stage k writes, stage k+1 reads */
	for (unsigned k = 0; k + 1 < procs; k++)
		if (pipe(fd[k]) < 0)
			return 2;
	for (unsigned i = 1; i < procs; i++) {
		pid_t c = fork();
		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		for (unsigned k = 0; k + 1 < procs; k++) {
			if (k + 1 != i)
				close(fd[k][0]);
			if (k != i)
				close(fd[k][1]);
		}
		close(ready[0]);
		_exit(stage(i, mib, fd[i - 1][0], i + 1 < procs ? fd[i][1] : -1, ready[1]));
	}
	for (unsigned k = 0; k + 1 < procs; k++) {
		close(fd[k][0]);
		if (k)
			close(fd[k][1]);
	}
	close(ready[1]);
	uint64_t *p = touch(mib, 0);
	if (!p || (procs > 1 && write(fd[0][1], "stage 0\n", 8) != 8))
		return 2;
	char r;
	for (unsigned i = 1; i < procs; i++)
		if (read(ready[0], &r, 1) != 1)
			return 2;
	puts("ready");
	fflush(stdout);
	hold();
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	printf("resumed %lld\n", (long long)t.tv_sec * 1000000000ll + t.tv_nsec);
	int bad = check(p, mib, 0), st;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	puts(bad ? "fail" : "ok");
	return bad;
}
