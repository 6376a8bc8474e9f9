/* A lease's limits and recorded usage, as the inspector bounds a run by them. */
#include "lease/lease.h"
#include "trace/inspect/inspect.h"

int trace_inspector_lease_bounds(struct lease_store *s, const char *id,
				 uint64_t limits[TRACE_DIMS], uint64_t base[TRACE_DIMS],
				 struct common_err *e)
{
	json_t *rec = NULL, *lim, *use;

	if (lease_load(s, id, &rec, e) < 0)
		return -1;
	lim = json_object_get(rec, "limits");
	use = json_object_get(rec, "usage");
	for (int d = 0; d < TRACE_DIMS; d++) {
		const char *n = lease_dim_name((enum lease_dim)d);
		json_t *l = json_object_get(lim, n), *u = json_object_get(use, n);
		limits[d] = json_is_integer(l) && json_integer_value(l) >= 0 ?
			    (uint64_t)json_integer_value(l) : lease_dim_ceiling((enum lease_dim)d);
		base[d] = json_is_integer(u) && json_integer_value(u) >= 0 ?
			  (uint64_t)json_integer_value(u) : 0;
	}
	json_decref(rec);
	return 0;
}
