/* Temporary guest memory seen from inside: thread A opens the FIFO /tmp/f, which an
 * inspector redirects to /tmp/g through a temporary page; while A blocks there,
 * thread B finds the page, checks it is read-only, then releases A and checks the
 * page is gone and A's own buffer unchanged. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char path_a[64] = "/tmp/f";
static sigjmp_buf jb;
static int a_fd = -1;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static void *thread_a(void *arg)
{
	(void)arg;
	a_fd = open(path_a, O_RDONLY);
	return NULL;
}

/* an anonymous read-only page whose first bytes are "/tmp/g" */
static char *find_page(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	char *found = NULL;

	while (f && !found && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[8];
		int off = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s%n", &lo, &hi, perms, &off) < 3)
			continue;
		if (strcmp(perms, "r--p") != 0 || strchr(line + off, '/') || strchr(line + off, '['))
			continue;
		for (unsigned long a = lo; a < hi; a += 4096)
			if (memcmp((char *)a, "/tmp/g", 7) == 0)
				found = (char *)a;
	}
	if (f)
		fclose(f);
	return found;
}

int main(void)
{
	pthread_t a;
	unsigned char vec;
	char *page = NULL;

	if (mkfifo("/tmp/f", 0600) < 0 || mkfifo("/tmp/g", 0600) < 0)
		return perror("mkfifo"), 1;
	pthread_create(&a, NULL, thread_a, NULL);
	for (int i = 0; i < 500 && !page; i++) {
		usleep(10000);
		page = find_page();
	}
	if (!page)
		return printf("no temporary page seen\n"), 1;
	printf("temporary page holds %s\n", page);
	printf("mincore during the call: %s\n", mincore(page, 4096, &vec) == 0 ? "mapped" : "unmapped");
	signal(SIGSEGV, on_segv);
	if (sigsetjmp(jb, 1) == 0) {
		page[0] = 'X';
		printf("guest wrote the temporary page\n");
	} else {
		printf("guest write faulted\n");
	}
	int w = open("/tmp/g", O_WRONLY);
	pthread_join(a, NULL);
	printf("thread A opened: %s\n", a_fd >= 0 ? "yes" : strerror(errno));
	if (w >= 0)
		close(w);
	int r = mincore(page, 4096, &vec);
	printf("mincore after the call: %s\n", r == 0 ? "mapped" : strerrorname_np(errno));
	printf("buffer of A: %s\n", path_a);
	return 0;
}
