/* Benchmark guest: N clock_gettime calls, N/16 getrandom calls of 16 bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	struct timespec ts = { 0, 0 };
	unsigned char b[16];
	unsigned sum = 0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (i % 16 == 0 && getrandom(b, sizeof b, 0) == (ssize_t)sizeof b)
			sum += b[0];
	}
	printf("%ld calls, last %lld.%09ld, sum %u\n", n, (long long)ts.tv_sec, ts.tv_nsec, sum);
	return 0;
}
