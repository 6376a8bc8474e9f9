/* Copies SRC to DST as cp does: each call asks for far more than the file holds
 * and lets the kernel stop at its end: copy_file_range ~2^63 bytes (as cp), sendfile
 * 1 GiB and splice 1 GiB into a pipe and ~2^63 out of it into DST (sendfile and a
 * splice from a file refuse a length that would take the offset past 2^63).
 * usage: meter_copy copy|sendfile|splice SRC DST
 * Exit 0: copied; 3: a call failed (message on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define ASK ((size_t)SSIZE_MAX)
#define GIB ((size_t)1 << 30)

static int fail(const char *what)
{
	fprintf(stderr, "meter_copy: %s: %s\n", what, strerror(errno));
	return 3;
}

/* One step of the copy: bytes moved, 0 at the end of SRC, -1 on failure. */
static ssize_t step(const char *how, int in, int out, const int p[2])
{
	ssize_t n, m;

	if (strcmp(how, "copy") == 0)
		return copy_file_range(in, NULL, out, NULL, ASK, 0);
	if (strcmp(how, "sendfile") == 0)
		return sendfile(out, in, NULL, GIB);
	if ((n = splice(in, NULL, p[1], NULL, GIB, 0)) <= 0)
		return n;
	for (ssize_t left = n; left > 0; left -= m)
		if ((m = splice(p[0], NULL, out, NULL, ASK, 0)) <= 0)
			return -1;
	return n;
}

int main(int argc, char **argv)
{
	int in, out, p[2] = { -1, -1 };
	ssize_t n;

	if (argc != 4 || (strcmp(argv[1], "copy") && strcmp(argv[1], "sendfile") &&
			  strcmp(argv[1], "splice"))) {
		fprintf(stderr, "usage: meter_copy copy|sendfile|splice SRC DST\n");
		return 2;
	}
	if ((in = open(argv[2], O_RDONLY)) < 0)
		return fail(argv[2]);
	if ((out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		return fail(argv[3]);
	if (argv[1][1] == 'p' && pipe(p) < 0)
		return fail("pipe");
	while ((n = step(argv[1], in, out, p)) > 0)
		;
	return n < 0 ? fail(argv[1]) : 0;
}
