/* Shared by the hostile guests: each attempt prints "contained: WHAT (errno)"
 * or "ESCAPED: WHAT"; the guest exits 0 when everything was contained, 1 when
 * anything escaped, 2 when the test itself could not run. */
#ifndef ESCAPE_H
#define ESCAPE_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int escaped;

/* rc < 0 with errno set means the kernel/sandbox refused: contained */
static inline void expect_refused(const char *what, long rc)
{
	if (rc < 0)
		printf("contained: %s (%s)\n", what, strerror(errno));
	else {
		printf("ESCAPED: %s (returned %ld)\n", what, rc);
		escaped = 1;
	}
	fflush(stdout);
}

/* like expect_refused, but only these errnos count as contained */
static inline void expect_errno(const char *what, long rc, int e1, int e2)
{
	if (rc < 0 && (errno == e1 || errno == e2))
		printf("contained: %s (%s)\n", what, strerror(errno));
	else {
		printf("ESCAPED: %s (returned %ld, %s)\n", what, rc, rc < 0 ? strerror(errno) : "ok");
		escaped = 1;
	}
	fflush(stdout);
}

static inline int finish(void)
{
	printf(escaped ? "RESULT: escaped\n" : "RESULT: contained\n");
	return escaped;
}
#endif
