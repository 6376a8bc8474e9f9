/* Allocation that never returns NULL: running out of memory is not an input error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"

static void *checked(void *p)
{
	if (!p) {
		fprintf(stderr, "%s: error: allocation: out of memory\n", common_progname());
		abort();
	}
	return p;
}

void *common_xmalloc(size_t n)
{
	return checked(malloc(n ? n : 1));
}

void *common_xcalloc(size_t n, size_t m)
{
	return checked(calloc(n ? n : 1, m ? m : 1));
}

void *common_xrealloc(void *p, size_t n)
{
	return checked(realloc(p, n ? n : 1));
}

char *common_xstrdup(const char *s)
{
	return checked(strdup(s));
}

char *common_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return checked(r < 0 ? NULL : s);
}
