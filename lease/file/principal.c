/* The directory back end's principal keys: principals/NAME.pub, one hex line each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

int lease_file_principal_get(struct lease_store *s, const char *name, char **key, char **where,
			     struct common_err *e)
{
	char *p = lease_path(s, "principals/%s.pub", name), *buf = NULL;
	const char *known;
	size_t len = 0;
	int r;

	*key = NULL;
	*where = p;
	/* written once, at the principal's first use, and never changed: read once */
	if (lease_name_valid(name) && (known = lease_file_cache_principal(s, name))) {
		*key = common_xstrdup(known);
		return 1;
	}
	r = access(p, F_OK) < 0 && errno == ENOENT ? 0
		: common_read_file(p, LEASE_PKEY_FILE_MAX, &buf, &len, e);
	if (r < 0 || !buf)
		return r;
	if (len == 65 && buf[64] == '\n')
		buf[64] = 0; /* the directory store's line */
	if (lease_name_valid(name) && lease_hex_valid(buf, 64))
		lease_file_cache_principal_put(s, name, buf);
	*key = buf;
	return 1;
}

int lease_file_principal_put(struct lease_store *s, const char *name, const char *hex,
			     struct common_err *e)
{
	char *p, line[66];
	int r;

	p = lease_path(s, "principals");
	r = common_mkdir_p(p, 0700, e);
	free(p);
	if (r < 0)
		return -1;
	snprintf(line, sizeof line, "%s\n", hex);
	p = lease_path(s, "principals/%s.pub", name);
	r = common_write_atomic(p, line, strlen(line), 0644, e);
	free(p);
	return r;
}
