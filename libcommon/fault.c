/* Crash-test hook: SBX_FAULT=NAME[:N] kills the process at the Nth pass of NAME;
 * SBX_FAULT=NAME:fail makes that point fail instead. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"

void common_fault_point(const char *name)
{
	static long passes;
	const char *spec = getenv("SBX_FAULT");
	size_t n;
	long want = 1;

	if (!spec || !*spec)
		return;
	n = strlen(name);
	if (strncmp(spec, name, n) != 0 || (spec[n] != '\0' && spec[n] != ':') ||
	    strcmp(spec + n, ":fail") == 0)
		return;
	if (spec[n] == ':')
		want = strtol(spec + n + 1, NULL, 10);
	if (++passes >= want)
		raise(SIGKILL);
}

int common_fault_fails(const char *name)
{
	const char *spec = getenv("SBX_FAULT");
	size_t n = strlen(name);

	return spec && strncmp(spec, name, n) == 0 && strcmp(spec + n, ":fail") == 0;
}
