/* Benchmark guest: N × openat of a missing file (each one inspected). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;

	for (long i = 0; i < n; i++) {
		int fd = openat(AT_FDCWD, "/nonexistent", O_RDONLY);
		if (fd >= 0)
			close(fd);
	}
	return 0;
}
