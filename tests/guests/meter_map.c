/* Stores through a MAP_SHARED mapping of a file in DIR, which storage_write
 * charges by the page (64 KiB runs at their first store).
 * usage: meter_map HOW DIR
 *   sparse    map a 2 GiB sparse file, store two bytes (one at each end)
 *   dirty     map a 1 GiB sparse file and store into every page
 *   read      read(2) 3 bytes, then 256 KiB, then readv(2) 2 x 2 bytes into the mapping
 *   protect   map it read-only, mprotect it writable, store; mprotect it read-only:
 *             a store then dies of SIGSEGV as natively
 *   fork      a child and the parent store into the same page; threads too
 *   remap     grow the mapping with mremap, store past the old end; map it again
 *             elsewhere (old_size 0) and store there
 *   pages     remap_file_pages over a run made writable (it would map other
 *             pages of the file there, writable): refused
 *   noheld    2000 protection changes without PROT_WRITE of an anonymous page,
 *             in a process that holds no shared mapping (none need stop)
 *   inherit   a held mapping stored, then made read-only by a forked child and
 *             by a thread started after the hold: their stores die of SIGSEGV
 *             as natively; prints the main thread's seccomp filter count
 *   ownfilter a thread with a seccomp filter of its own (the supervisor cannot
 *             add one to every thread), then a mapping made writable by mprotect
 *             and stored into three runs; prints the main thread's filter count
 * Exit 0 with what it checked on stdout; 3: a call failed. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;

static int fail(const char *what)
{
	fprintf(stderr, "meter_map: %s: %s\n", what, strerror(errno));
	return 3;
}

static char *map_file(const char *name, size_t len, int prot)
{
	char path[4096];
	int fd;
	char *p;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0 || ftruncate(fd, (off_t)len) < 0)
		return NULL;
	p = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static int sparse(void)
{
	size_t len = (size_t)2 << 30;
	char *p = map_file("sparse", len, PROT_READ | PROT_WRITE);

	if (!p)
		return fail("map");
	p[0] = 'a';
	p[len - 1] = 'b';
	if (msync(p, len, MS_SYNC) < 0)
		return fail("msync");
	printf("%c%c\n", p[0], p[len - 1]);
	return 0;
}

static int dirty(void)
{
	size_t len = (size_t)1 << 30;
	char *p = map_file("dirty", len, PROT_READ | PROT_WRITE);

	if (!p)
		return fail("map");
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	printf("dirtied\n");
	return 0;
}

static int readinto(void)
{
	size_t len = 1 << 20, big = 256 << 10;
	char *p = map_file("into", len, PROT_READ | PROT_WRITE), path[4096];
	static char src[256 << 10];
	int fd;

	if (!p)
		return fail("map");
	memset(src, 'r', sizeof src);
	snprintf(path, sizeof path, "%s/src", dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0 || write(fd, src, big) != (ssize_t)big)
		return fail("src");
	if (pread(fd, p + 100, 3, 0) != 3)
		return fail("read 3 bytes into the mapping");
	if (pread(fd, p + 8192, big, 0) != (ssize_t)big)
		return fail("read 256 KiB into the mapping");
	struct iovec v[2] = { { p + 300000, 2 }, { p + 600000, 2 } };
	if (preadv(fd, v, 2, 0) != 4)
		return fail("readv into the mapping");
	printf("%.3s %c %c\n", p + 100, p[8192 + big - 1], p[600001]);
	return 0;
}

static sigjmp_buf jb;
static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static int protect(void)
{
	size_t len = 1 << 20;
	char *p = map_file("prot", len, PROT_READ);

	if (!p)
		return fail("map");
	if (mprotect(p, len, PROT_READ | PROT_WRITE) < 0)
		return fail("mprotect rw");
	p[5] = 'w';
	if (mprotect(p, len, PROT_READ) < 0)
		return fail("mprotect r");
	signal(SIGSEGV, on_segv);
	if (sigsetjmp(jb, 1) == 0) {
		p[70000] = 'x';
		printf("stored into a read-only mapping\n");
		return 1;
	}
	printf("%c segv\n", p[5]);
	return 0;
}

static char *shared_page;
static void *thread_store(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++)
		shared_page[i * 4096 % (1 << 20)] = 't';
	return NULL;
}

static int forked(void)
{
	pthread_t t[4];
	int st;
	pid_t pid;

	if (!(shared_page = map_file("fork", 1 << 20, PROT_READ | PROT_WRITE)))
		return fail("map");
	if ((pid = fork()) == 0) {
		shared_page[4096] = 'c';
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
		return fail("child");
	shared_page[4097] = 'p';
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread_store, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("%c%c%c\n", shared_page[4096], shared_page[4097], shared_page[0]);
	return 0;
}

static int remap(void)
{
	char path[4096];
	int fd;
	char *p, *q;

	snprintf(path, sizeof path, "%s/remap", dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0 || ftruncate(fd, 8 << 20) < 0)
		return fail("open");
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap");
	p[0] = 'a';
	q = mremap(p, 1 << 20, 8 << 20, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return fail("mremap");
	q[(8 << 20) - 1] = 'z';
	q[1] = 'b';
	/* old_size 0: the same pages mapped again elsewhere, held as well */
	char *r = mremap(q, 0, 1 << 20, MREMAP_MAYMOVE);
	if (r == MAP_FAILED)
		return fail("mremap 0");
	r[2] = 'c';
	printf("%c%c%c%c\n", q[0], q[1], q[2], q[(8 << 20) - 1]);
	return 0;
}

static int pages(void)
{
	char *p = map_file("pages", 1 << 20, PROT_READ | PROT_WRITE);

	if (!p)
		return fail("map");
	p[0] = 'a';
	if (remap_file_pages(p, 65536, 0, 128, 0) == 0)
		printf("remap_file_pages ran\n");
	else
		printf("remap_file_pages: %s\n", strerror(errno));
	return 0;
}

static int noheld(void)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return fail("mmap");
	for (int i = 0; i < 2000; i++)
		if (mprotect(p, 4096, i % 2 ? PROT_READ : PROT_NONE) < 0)
			return fail("mprotect");
	printf("protected\n");
	return 0;
}

/* The calling thread's "Seccomp_filters:" count, -1 when it cannot be read. */
static int filters(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/thread-self/status", "r");

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Seccomp_filters: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static void *thread_protect(void *p)
{
	return (void *)(intptr_t)mprotect(p, 1 << 20, PROT_READ);
}

static int inherit(void)
{
	size_t len = 1 << 20;
	char *p = map_file("inherit", len, PROT_READ | PROT_WRITE);
	pthread_t t;
	void *rc;
	pid_t pid;
	int st;

	if (!p)
		return fail("map");
	p[5] = 'w';
	if ((pid = fork()) == 0) {
		if (mprotect(p, len, PROT_READ) < 0)
			_exit(3);
		signal(SIGSEGV, on_segv);
		if (sigsetjmp(jb, 1) == 0) {
			p[70000] = 'x';
			_exit(1); /* stored into a read-only mapping */
		}
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
		return fail("the child stored into a read-only mapping");
	if (pthread_create(&t, NULL, thread_protect, p) || pthread_join(t, &rc) || rc)
		return fail("thread");
	signal(SIGSEGV, on_segv);
	if (sigsetjmp(jb, 1) == 0) {
		p[140000] = 'x';
		printf("stored into a read-only mapping\n");
		return 1;
	}
	printf("%c segv segv %d\n", p[5], filters());
	return 0;
}

static pthread_barrier_t own;
static void *thread_filter(void *arg)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { 1, &allow };

	(void)arg;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return (void *)1;
	pthread_barrier_wait(&own);
	pthread_barrier_wait(&own); /* alive while the mapping is made */
	return NULL;
}

static int ownfilter(void)
{
	size_t len = 1 << 20;
	pthread_t t;
	char *p;

	pthread_barrier_init(&own, NULL, 2);
	if (pthread_create(&t, NULL, thread_filter, NULL))
		return fail("thread");
	pthread_barrier_wait(&own);
	if (!(p = map_file("own", len, PROT_READ)))
		return fail("map");
	if (mprotect(p, len, PROT_READ | PROT_WRITE) < 0)
		return fail("mprotect rw");
	p[0] = 'a', p[65536] = 'b', p[131072] = 'c';
	pthread_barrier_wait(&own);
	pthread_join(t, NULL);
	printf("%c%c%c %d\n", p[0], p[65536], p[131072], filters());
	return 0;
}

int main(int argc, char **argv)
{
	const char *how = argc > 2 ? argv[1] : "";

	dir = argv[2];
	if (!strcmp(how, "sparse"))
		return sparse();
	if (!strcmp(how, "dirty"))
		return dirty();
	if (!strcmp(how, "read"))
		return readinto();
	if (!strcmp(how, "protect"))
		return protect();
	if (!strcmp(how, "fork"))
		return forked();
	if (!strcmp(how, "remap"))
		return remap();
	if (!strcmp(how, "pages"))
		return pages();
	if (!strcmp(how, "noheld"))
		return noheld();
	if (!strcmp(how, "inherit"))
		return inherit();
	if (!strcmp(how, "ownfilter"))
		return ownfilter();
	fprintf(stderr, "usage: meter_map sparse|dirty|read|protect|fork|remap|pages|noheld|inherit|ownfilter DIR\n");
	return 2;
}
