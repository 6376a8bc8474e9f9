/* Error records and the one message grammar: "PROG: error: WHAT: WHY". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"

static const char *progname = "sbx";

void common_set_progname(const char *name)
{
	const char *slash = strrchr(name, '/');
	progname = slash ? slash + 1 : name;
}

const char *common_progname(void)
{
	return progname;
}

int common_errf(struct common_err *e, const char *what, const char *whyfmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	snprintf(e->what, sizeof e->what, "%s", what);
	va_start(ap, whyfmt);
	vsnprintf(e->why, sizeof e->why, whyfmt, ap);
	va_end(ap);
	return -1;
}

int common_errno(struct common_err *e, int errnum, const char *whatfmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, whatfmt);
	vsnprintf(e->what, sizeof e->what, whatfmt, ap);
	va_end(ap);
	snprintf(e->why, sizeof e->why, "%s", strerror(errnum));
	return -1;
}

void common_err_context(struct common_err *e, const char *ctxfmt, ...)
{
	char ctx[256], old[sizeof e->what];
	va_list ap;

	if (!e)
		return;
	va_start(ap, ctxfmt);
	vsnprintf(ctx, sizeof ctx, ctxfmt, ap);
	va_end(ap);
	memcpy(old, e->what, sizeof old);
	if (old[0])
		snprintf(e->what, sizeof e->what, "%s: %s", ctx, old);
	else
		snprintf(e->what, sizeof e->what, "%s", ctx);
}

void common_report(const struct common_err *e)
{
	if (e->why[0])
		fprintf(stderr, "%s: error: %s: %s\n", progname, e->what, e->why);
	else
		fprintf(stderr, "%s: error: %s\n", progname, e->what);
	fflush(stderr);
}

void common_warnf(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: warning: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void common_die(int code, const struct common_err *e)
{
	common_report(e);
	exit(code);
}

void common_dief(int code, const char *what, const char *whyfmt, ...)
{
	struct common_err e;
	va_list ap;

	snprintf(e.what, sizeof e.what, "%s", what);
	va_start(ap, whyfmt);
	vsnprintf(e.why, sizeof e.why, whyfmt, ap);
	va_end(ap);
	common_die(code, &e);
}
