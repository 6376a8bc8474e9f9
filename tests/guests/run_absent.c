/* `run_absent N`: opens N absolute and N relative names that are not there and
 * prints how many of the opens failed with ENOENT. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	char p[64];
	int n = argc == 2 ? atoi(argv[1]) : 0, enoent = 0;
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof p, "/nonexistent-sbx/d%d", i);
		enoent += open(p, O_RDONLY) < 0 && errno == ENOENT;
		snprintf(p, sizeof p, "absent-%d", i);
		enoent += openat(AT_FDCWD, p, O_RDONLY | O_CLOEXEC) < 0 && errno == ENOENT;
	}
	printf("enoent %d\n", enoent);
	return 0;
}
