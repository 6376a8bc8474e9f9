/* Snapshot guest for whole runs: 60 steps of heap work, each ending with a
 * short sleep and a line appended to /ns/steps.log; the last line of stdout
 * is a digest of everything, the same whether or not it was interrupted.
 * A third argument holds something while it steps: "shared-ro" (its own image
 * mapped shared read-only, folded into the digest), "shared-rw", "shared-anon",
 * "deleted" (a mapping of a removed file), "pipe", "fifo" (a named FIFO
 * held open for reading and writing, then removed), "pipe-rdwr" (a pipe reopened for reading and writing), "orphan"
 * (a grandchild left to the run's init, alive 3 s); or "limits" prints the
 * bounds it ran under. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* what the mode holds; the shared read-only image, or NULL */
static const uint8_t *hold(const char *mode, const char *self)
{
	int fd, p[2];
	void *m = MAP_FAILED;
	if (!strcmp(mode, "shared-ro") && (fd = open(self, O_RDONLY)) >= 0)
		m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	else if (!strcmp(mode, "shared-rw") && (fd = open("shared.dat", O_CREAT | O_RDWR, 0644)) >= 0 &&
		 ftruncate(fd, 4096) == 0)
		m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	else if (!strcmp(mode, "shared-anon"))
		m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	else if (!strcmp(mode, "deleted") && (fd = open("gone.dat", O_CREAT | O_RDWR, 0644)) >= 0 &&
		 ftruncate(fd, 4096) == 0 && unlink("gone.dat") == 0)
		m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	else if (!strcmp(mode, "pipe") && pipe(p) == 0)
		return NULL;
	else if (!strcmp(mode, "fifo") && mkfifo("fifo", 0600) == 0 && open("fifo", O_RDWR) >= 0 &&
		 unlink("fifo") == 0)
		return NULL;
	else if (!strcmp(mode, "pipe-rdwr") && pipe(p) == 0) {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
		if (open(path, O_RDWR) >= 0)
			return NULL;
	} else if (!strcmp(mode, "orphan")) {
		pid_t kid = fork();
		if (kid == 0) {
			if (fork() == 0) {
				sleep(3);
				_exit(0);
			}
			_exit(0);
		}
		if (kid > 0 && waitpid(kid, NULL, 0) == kid)
			return NULL;
	}
	else if (!strcmp(mode, "limits"))
		return NULL;
	if (m == MAP_FAILED) {
		perror(mode);
		exit(3);
	}
	return !strcmp(mode, "shared-ro") ? m : NULL;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 60;
	int die_at = argc > 2 ? atoi(argv[2]) : -1; /* raise SIGTERM there (once) */
	const uint8_t *image = argc > 3 ? hold(argv[3], argv[0]) : NULL;
	size_t n = 1 << 16;
	uint64_t *v = malloc(n * sizeof *v), h = 1469598103934665603ull;
	int log = open("steps.log", O_CREAT | O_WRONLY | O_APPEND, 0644);
	for (size_t i = 0; i < n; i++)
		v[i] = i * 0x9e3779b97f4a7c15ull;
	for (int s = 0; s < steps; s++) {
		for (size_t i = 0; i < n; i++) {
			v[i] ^= v[(i * 7 + (size_t)s) % n] + (uint64_t)s;
			h = (h ^ v[i]) * 1099511628211ull;
		}
		for (size_t i = 0; image && i < 4096; i++)
			h = (h ^ image[i]) * 1099511628211ull;
		char line[64];
		int len = snprintf(line, sizeof line, "step %d %016llx\n", s, (unsigned long long)h);
		if (write(log, line, (size_t)len) != len)
			return 2;
		if (s == die_at && access("died", F_OK) != 0) {
			close(open("died", O_CREAT | O_WRONLY, 0644));
			raise(SIGTERM);
		}
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	close(log);
	printf("done %d steps: %016llx\n", steps, (unsigned long long)h);
	if (argc > 3 && !strcmp(argv[3], "limits")) { /* the bounds it runs under now */
		struct rlimit as, nofile;
		getrlimit(RLIMIT_AS, &as);
		getrlimit(RLIMIT_NOFILE, &nofile);
		printf("as %llu nofile %llu\n", (unsigned long long)as.rlim_cur,
		       (unsigned long long)nofile.rlim_cur);
	}
	return 0;
}
