/* Snapshot guest: a shell pipeline, sh -c 'SELF produce | SELF consume', whose
 * pipe holds bytes most of the time: the producer writes 600 numbered lines
 * at once and exits, the consumer takes one every 5 ms and prints a running
 * digest every 100 lines. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "produce")) {
		for (int s = 0; s < 600; s++)
			printf("line %04d %08x padding-padding-padding-padding\n", s, (unsigned)(s * 2654435761u));
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "consume")) {
		char line[256];
		uint64_t h = 1469598103934665603ull;
		for (int n = 1; fgets(line, sizeof line, stdin); n++) {
			for (char *c = line; *c; c++)
				h = (h ^ (unsigned char)*c) * 1099511628211ull;
			if (n % 100 == 0) {
				printf("%d lines %016llx\n", n, (unsigned long long)h);
				fflush(stdout);
			}
			nanosleep(&(struct timespec){ 0, 5 * 1000 * 1000 }, NULL);
		}
		return 0;
	}
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "%s produce | %s consume", argv[0], argv[0]);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	return 127;
}
