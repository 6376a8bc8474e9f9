/* snaptree guest: a shell pipeline, sh -c 'SELF produce | SELF consume': the
 * producer writes 60 numbered lines 40 ms apart, the consumer folds them into
 * a digest it prints every tenth line. */
#include <string.h>
#include "guest.h"

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "produce")) {
		for (int s = 0; s < 60; s++) {
			printf("line %d %d\n", s, s * s);
			fflush(stdout);
			nap(40);
		}
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "consume")) {
		char line[128];
		uint64_t h = 1;
		for (int n = 1; fgets(line, sizeof line, stdin); n++) {
			for (char *c = line; *c; c++)
				h = mix(h, (unsigned char)*c);
			if (n % 10 == 0)
				say("%d lines %016llx\n", n, (unsigned long long)h);
		}
		return 0;
	}
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "%s produce | %s consume", argv[0], argv[0]);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	return 127;
}
