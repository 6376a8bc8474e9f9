/* A lease's limits and recorded usage, as the inspector bounds a run by them,
 * and the observations that record what a run used. */
#include <stdio.h>
#include "lease/lease.h"
#include "trace/inspect/inspect-internal.h"

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

int inspect_obs_write(struct lease_store *s, const char *id, uint64_t u[TRACE_DIMS],
		      char closed[32], struct common_err *e)
{
	uint64_t lim[TRACE_DIMS], rec_u[TRACE_DIMS];
	const char *why = NULL;
	json_t *rec = NULL;
	int r = lease_observe_usage(s, id, u, &why, &rec, e);

	if (r < 0 && lease_store_unreachable(s)) {
		/* kept on this host until the store answers; the meter still bounds the guest */
		why = NULL;
		r = lease_observe_park(s, id, u, e);
	} else if (r < 0 && trace_inspector_lease_bounds(s, id, lim, rec_u, NULL) == 0) {
		/* someone else recorded more meanwhile (a concurrent run): never lower */
		for (int d = 0; d < TRACE_DIMS; d++)
			if (rec_u[d] > u[d])
				u[d] = rec_u[d];
		json_decref(rec);
		rec = NULL;
		r = lease_observe_usage(s, id, u, &why, &rec, e);
	}
	json_decref(rec);
	if (r < 0) {
		common_err_context(e, "recording usage");
		return -1;
	}
	snprintf(closed, 32, "%s", why ? why : "");
	return 0;
}
