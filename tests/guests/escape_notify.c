/* Lookups a supervisor may serve itself (seccomp user notification) must
 * answer what the guest's own kernel would, and the trace must name the file
 * really opened.
 *   swap A B N    a thread flips an openat path buffer between A and B while the
 *                 main thread opens it N times; each open's content must be A's
 *                 or B's whole (the trace pairs each path with its hash)
 *   procfd DIR    /proc/self/fd, /dev/fd, /proc/self/root, a symlink in DIR to
 *                 /proc/self/fd/N and /proc/thread-self: each names the guest's
 *                 own objects, never the supervisor's
 *   dying N       N rounds of children spamming stats and opens from threads,
 *                 each killed in the middle: the run goes on and ends */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "escape.h"

static char path[256];
static const char *pa, *pb;
static atomic_int stop;

static void *flipper(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		strcpy(path, pa);
		strcpy(path, pb);
	}
	return NULL;
}

static int slurp(int fd, char *buf, size_t max)
{
	ssize_t n = pread(fd, buf, max - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	return n < 0 ? -1 : 0;
}

static int swap(const char *a, const char *b, long n)
{
	char ca[256], cb[256], got[256];
	pa = a;
	pb = b;
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	if (fa < 0 || fb < 0 || slurp(fa, ca, sizeof ca) || slurp(fb, cb, sizeof cb))
		return 2;
	close(fa);
	close(fb);
	strcpy(path, a);
	pthread_t th;
	pthread_create(&th, NULL, flipper, NULL);
	long na = 0, nb = 0, other = 0;
	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0) {
			other++;
			continue;
		}
		slurp(fd, got, sizeof got);
		close(fd);
		if (!strcmp(got, ca))
			na++;
		else if (!strcmp(got, cb))
			nb++;
		else
			other++;
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("opens: %ld of A, %ld of B, %ld other\n", na, nb, other);
	if (other) {
		printf("ESCAPED: %ld opens neither A nor B\n", other);
		escaped = 1;
	}
	return finish();
}

/* the file behind p holds want, read whole */
static void same(const char *what, const char *p, const char *want)
{
	char got[256];
	int fd = open(p, O_RDONLY);
	if (fd < 0 || slurp(fd, got, sizeof got) || strcmp(got, want)) {
		printf("ESCAPED: %s: %s is not the guest's own (%s)\n", what, p,
		       fd < 0 ? strerror(errno) : got);
		escaped = 1;
	} else {
		printf("contained: %s\n", what);
	}
	if (fd >= 0)
		close(fd);
	fflush(stdout);
}

static int procfd(const char *dir)
{
	char f[256], p[512], l[512];
	snprintf(f, sizeof f, "%s/own.txt", dir);
	int fd = open(f, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "the guest's own\n", 16) != 16)
		return 2;
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	same("/proc/self/fd/N", p, "the guest's own\n");
	snprintf(p, sizeof p, "/dev/fd/%d", fd);
	same("/dev/fd/N", p, "the guest's own\n");
	snprintf(p, sizeof p, "/proc/thread-self/fd/%d", fd);
	same("/proc/thread-self/fd/N", p, "the guest's own\n");
	snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)getpid(), fd);
	same("/proc/PID/fd/N", p, "the guest's own\n");
	snprintf(p, sizeof p, "/proc/self/root%s", f);
	same("/proc/self/root/PATH", p, "the guest's own\n");
	snprintf(l, sizeof l, "%s/link", dir);
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	unlink(l);
	if (symlink(p, l) < 0)
		return 2;
	same("a symlink to /proc/self/fd/N", l, "the guest's own\n");
	snprintf(p, sizeof p, "%s/dirlink", dir);
	unlink(p);
	if (symlink("/proc/self", p) < 0)
		return 2;
	snprintf(l, sizeof l, "%s/dirlink/fd/%d", dir, fd);
	same("a symlink to /proc/self, then fd/N", l, "the guest's own\n");
	/* the stat through the magic link is the descriptor's, as fstat says */
	struct stat a, b;
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	if (fstat(fd, &a) < 0 || stat(p, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
		printf("ESCAPED: stat of /proc/self/fd/N is not the descriptor's\n");
		escaped = 1;
	} else {
		printf("contained: stat /proc/self/fd/N\n");
	}
	/* an O_PATH descriptor is one (F_GETFD works on it) */
	int pfd = open(f, O_PATH);
	if (pfd < 0 || fcntl(pfd, F_GETFD) < 0 || fstat(pfd, &b) < 0 || b.st_ino != a.st_ino) {
		printf("ESCAPED: O_PATH open of %s (%s)\n", f, strerror(errno));
		escaped = 1;
	} else {
		printf("contained: O_PATH\n");
	}
	if (pfd >= 0)
		close(pfd);
	/* a lookup relative to a directory descriptor is the directory's, not its
	 * old name's: moved away and another made in its place */
	snprintf(p, sizeof p, "%s/sub", dir);
	snprintf(l, sizeof l, "%s/sub-moved", dir);
	mkdir(p, 0700);
	int dfd = open(p, O_RDONLY | O_DIRECTORY);
	if (dfd < 0 || rename(p, l) < 0 || mkdir(p, 0700) < 0)
		return 2;
	int xf = openat(dfd, "x", O_WRONLY | O_CREAT, 0600);
	if (xf >= 0)
		close(xf);
	struct stat sx;
	int rel = fstatat(dfd, "x", &sx, AT_SYMLINK_NOFOLLOW), relo = openat(dfd, "x", O_RDONLY);
	if (rel < 0 || relo < 0) {
		printf("ESCAPED: a lookup through a moved directory's descriptor (%s)\n", strerror(errno));
		escaped = 1;
	} else {
		printf("contained: a moved directory's descriptor\n");
	}
	if (relo >= 0)
		close(relo);
	close(dfd);
	/* the guest's /proc/self is its own pid in its namespace */
	char buf[64];
	ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	if (n <= 0 || atoi(buf) != getpid()) {
		printf("ESCAPED: /proc/self is %s, not %d\n", buf, (int)getpid());
		escaped = 1;
	}
	close(fd);
	return finish();
}

static void *spam(void *a)
{
	struct stat sb;
	(void)a;
	for (;;) {
		stat("/etc/passwd", &sb);
		int fd = open("/etc/hostname", O_RDONLY);
		if (fd >= 0)
			close(fd);
		access("/nonexistent/x", F_OK);
	}
	return NULL;
}

static int dying(long rounds)
{
	for (long r = 0; r < rounds; r++) {
		pid_t c = fork();
		if (c == 0) {
			pthread_t th[3];
			for (int i = 0; i < 3; i++)
				pthread_create(&th[i], NULL, spam, NULL);
			spam(NULL);
		}
		struct timespec ts = { 0, 2000000 + (r % 5) * 1000000 };
		nanosleep(&ts, NULL);
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
	}
	printf("rounds: %ld\n", rounds);
	return finish();
}

int main(int argc, char **argv)
{
	if (argc > 4 && !strcmp(argv[1], "swap"))
		return swap(argv[2], argv[3], atol(argv[4]));
	if (argc > 2 && !strcmp(argv[1], "procfd"))
		return procfd(argv[2]);
	if (argc > 2 && !strcmp(argv[1], "dying"))
		return dying(atol(argv[2]));
	fprintf(stderr, "usage: escape_notify swap A B N | procfd DIR | dying N\n");
	return 2;
}
