/* The directory back end keeps no snapshot records: its snapshots directory is the
 * record (see lease_backend). */
#include "lease/file/file-internal.h"

int lease_file_snap_get(struct lease_store *s, const char *hex, json_t **rec, struct common_err *e)
{
	(void)s, (void)hex, (void)e;
	*rec = NULL;
	return 0;
}

int lease_file_snap_put(struct lease_store *s, const char *hex, const json_t *rec,
			struct common_err *e)
{
	(void)s, (void)hex, (void)rec, (void)e;
	return 1;
}

int lease_file_snap_del(struct lease_store *s, const char *hex, struct common_err *e)
{
	(void)s, (void)hex, (void)e;
	return 0;
}

int lease_file_snap_all(struct lease_store *s, json_t **recs, struct common_err *e)
{
	(void)s, (void)e;
	*recs = json_array();
	return 0;
}
