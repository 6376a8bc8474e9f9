/* storage_write exactly, where plain writes settle at the writer's next stop and
 * not at their exits: full, failed (EFAULT), short (RLIMIT_FSIZE) and refused
 * (EFBIG) writes, an overwrite, pipe writes between file writes, threads writing
 * at once, and writers that end (or compute) right after their last write.
 * usage: meter_exact DIR
 * Stores 5,840 bytes in 6 new files of DIR; exit 0 with "stored" on stdout, 3: a
 * call did not do what it does natively. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[4096];
static const char *dir;
static int pipefd[2];

static int fail(const char *what)
{
	fprintf(stderr, "meter_exact: %s: %s\n", what, strerror(errno));
	return 3;
}

static int open_in(const char *name)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
}

/* 100 writes of 10 bytes into a file of its own, each followed by one into the pipe. */
static void *writer(void *name)
{
	int fd = open_in(name);

	for (int i = 0; fd >= 0 && i < 100; i++)
		if (write(fd, buf, 10) != 10 || write(pipefd[1], buf, 1) != 1)
			return (void *)1;
	return fd < 0 ? (void *)1 : NULL;
}

/* Some time on the CPU without a system call. */
static void spin(void)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 300000000L);
}

int main(int argc, char **argv)
{
	struct rlimit old, small = { 1500, RLIM_INFINITY };
	pthread_t t[4];
	char *names[4] = { "t0", "t1", "t2", "t3" };
	void *rc;
	int fd, st;
	pid_t pid;

	if (argc != 2)
		return 2;
	dir = argv[1];
	if (pipe(pipefd) < 0 || (fd = open_in("a")) < 0)
		return fail("open");
	if (write(fd, buf, 1000) != 1000)
		return fail("write");
	if (syscall(SYS_write, fd, 8, 1000) != -1 || errno != EFAULT)
		return fail("a write from an unmapped buffer");
	signal(SIGXFSZ, SIG_IGN);
	if (getrlimit(RLIMIT_FSIZE, &old) < 0 || (small.rlim_max = old.rlim_max, setrlimit(RLIMIT_FSIZE, &small)) < 0)
		return fail("RLIMIT_FSIZE");
	if (write(fd, buf, 1000) != 500)
		return fail("a write cut short at RLIMIT_FSIZE");
	if (write(fd, buf, 10) != -1 || errno != EFBIG)
		return fail("a write past RLIMIT_FSIZE");
	if (setrlimit(RLIMIT_FSIZE, &old) < 0 || pwrite(fd, buf, 300, 0) != 300)
		return fail("pwrite");
	if (write(pipefd[1], buf, 4000) != 4000)
		return fail("pipe");
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, writer, names[i]))
			return fail("thread");
	for (int i = 0; i < 4; i++)
		if (pthread_join(t[i], &rc) || rc)
			return fail("a thread's writes");
	if ((pid = fork()) == 0) {
		int c = open_in("c");
		if (c < 0 || write(c, buf, 7) != 7)
			_exit(3);
		spin(); /* its last write settles at its end */
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
		return fail("child");
	printf("stored\n");
	fflush(stdout);
	if (write(fd, buf, 33) != 33)
		return fail("last write");
	_exit(0);
}
