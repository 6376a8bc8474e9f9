/* A job that writes more than one lease allows (sbx-run --chain): argv[1] MiB in
 * all, in 1 MiB writes into four files it creates, overwrites (truncating), and
 * deletes in turn, in its working directory; argv[2] threads (default 1) write at
 * once, at full speed, each its own files. Prints a checksum of each file as it
 * is finished, and of what is left at the end, so that a run cut into links must
 * print what an uninterrupted one prints. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1u << 20)
#define FILE_MIB 8 /* a file is written whole, 8 MiB, then the next */

static unsigned total_mib, nthreads;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The file read back: what the kernel stored, not what was meant. */
static uint64_t file_sum(const char *name, unsigned char *buf)
{
	uint64_t h = 0xcbf29ce484222325ull;
	int fd = open(name, O_RDONLY);
	ssize_t n;
	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, MIB)) > 0)
		h = fnv(h, buf, (size_t)n);
	close(fd);
	return h;
}

static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, share = total_mib / nthreads;
	unsigned char *buf = malloc(MIB);
	uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
	char name[64];
	int fd = -1;

	for (unsigned m = 0; m < share; m++) {
		unsigned file = m / FILE_MIB;
		snprintf(name, sizeof name, "chain-%u-%u", t, file % 4);
		if (m % FILE_MIB == 0) {
			if (file % 4 == 3 && file >= 4) { /* deleted, then made again */
				unlink(name);
			}
			fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0) {
				perror("open");
				exit(2);
			}
		}
		for (size_t i = 0; i < MIB; i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		if (write(fd, buf, MIB) != (ssize_t)MIB) {
			perror("write");
			exit(3);
		}
		if (m % FILE_MIB == FILE_MIB - 1 || m == share - 1) {
			close(fd);
			uint64_t h = file_sum(name, buf);
			pthread_mutex_lock(&out_mu);
			printf("thread %u file %u %s %016llx\n", t, file, name, (unsigned long long)h);
			pthread_mutex_unlock(&out_mu);
		}
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[16];
	unsigned char *buf = malloc(MIB);
	char name[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	total_mib = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
	nthreads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
	if (nthreads < 1 || nthreads > 16)
		nthreads = 1;
	if (nthreads == 1) {
		writer((void *)0);
	} else {
		for (unsigned t = 0; t < nthreads; t++)
			pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t);
		for (unsigned t = 0; t < nthreads; t++)
			pthread_join(th[t], NULL);
	}
	for (unsigned t = 0; t < nthreads; t++)
		for (unsigned f = 0; f < 4; f++) {
			snprintf(name, sizeof name, "chain-%u-%u", t, f);
			printf("left %s %016llx\n", name, (unsigned long long)file_sum(name, buf));
		}
	printf("done %u MiB\n", total_mib);
	return 7;
}
