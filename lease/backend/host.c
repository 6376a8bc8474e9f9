/* This host's part of a store, the same for both back ends: paths, namespace
 * directories, small JSON files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/backend/backend.h"

char *lease_path(const struct lease_store *s, const char *fmt, ...)
{
	char *rel, *full;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&rel, fmt, ap) < 0)
		abort();
	va_end(ap);
	full = common_xasprintf("%s/%s", s->dir, rel);
	free(rel);
	return full;
}

int lease_json_write(const char *path, const json_t *j, mode_t mode, struct common_err *e)
{
	char *c = common_json_canonical(j), *line;
	int r;

	line = common_xasprintf("%s\n", c);
	r = common_write_atomic(path, line, strlen(line), mode, e);
	free(line);
	free(c);
	return r;
}

char *lease_ns_dir(const struct lease_store *s, const char *id)
{
	return lease_path(s, "ns/%s", id);
}

int lease_ns_effect(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	const char *id = lease_jstr(rec, "id"), *st = lease_jstr(rec, "state");
	enum lease_state state;
	char *ns;
	int r = 0;

	if (!id || !st || lease_state_parse(st, &state) < 0)
		return common_errf(e, "lease record", "missing id or state");
	ns = lease_ns_dir(s, id);
	if (state == LEASE_DESTROYED) {
		if (access(ns, F_OK) == 0)
			r = common_rm_rf(ns, e);
	} else if (access(ns, F_OK) < 0) {
		if (mkdir(ns, 0700) < 0 && errno != EEXIST)
			r = common_errno(e, errno, "namespace %s", ns);
	}
	free(ns);
	return r;
}
