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
 * Exit 0 with what it checked on stdout; 3: a call failed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	fprintf(stderr, "usage: meter_map sparse|dirty|read|protect|fork|remap|pages DIR\n");
	return 2;
}
