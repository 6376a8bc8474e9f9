/* sbx-run --chain N (SPEC §8.4): a run as a chain of at most N leases. A link
 * runs until a dimension a fresh lease renews nears its bound; then (trace/run)
 * its guest is snapshotted where it stands and its lease settled. The next link
 * is a lease requested naming it, funded, and the snapshot restored into it. */
#include <stdlib.h>
#include <string.h>
#include "lease/lease.h"
#include "snap/snap-internal.h"

/* The lease after ln->lease, requested and funded, and the snapshot that ended
 * ln prepared for it. */
static int link_next(struct trace_run_opts *o, const struct trace_chain_link *ln, const char *hex,
		     char **next, struct snap_restore_ctx *rc, char **image, struct common_err *e)
{
	struct lease_store *s;
	int ok;

	if (trace_chain_next(o, ln, next, e) < 0)
		return -1;
	if (lease_store_open(o->store, &s, e) < 0)
		return -1;
	rc->store = o->store;
	ok = snap_restore_prepare(s, hex, *next, rc, image, e);
	lease_store_close(s);
	return ok;
}

int snap_chain_run(struct trace_run_opts *o)
{
	struct trace_chain_link ln = { .links = json_array() };
	struct snap_restore_ctx rc;
	char *const *argv = o->argv; /* a link's plan may point it at its script's */
	char *next = NULL, *prev = NULL, *image = NULL;
	char hex[sizeof ln.snapshot]; /* the restore's, while the next link runs */
	int code;

	memset(&rc, 0, sizeof rc);
	for (ln.n = 1;; ln.n++) {
		ln.last = ln.n >= o->chain;
		ln.snapshot[0] = 0;
		o->link = &ln;
		o->argv = argv;
		code = trace_run_link(o);
		snap_restore_ctx_free(&rc);
		free(image);
		image = NULL;
		if (!ln.snapshot[0])
			break;
		struct common_err e;
		free(prev);
		prev = ln.lease ? common_xstrdup(ln.lease) : NULL;
		free(next);
		next = NULL;
		memcpy(hex, ln.snapshot, sizeof hex);
		if (!prev || link_next(o, &ln, hex, &next, &rc, &image, &e) < 0) {
			common_err_context(&e, "chain: link %u after lease %s (its snapshot %s is kept in "
					   "the store's snapshots: sbx-restore %s --lease ID goes on)",
					   ln.n + 1, prev ? prev : "?", ln.snapshot, ln.snapshot);
			common_report(&e);
			trace_chain_fail(o, ln.links, &e);
			code = SBX_EXIT_SBX;
			break;
		}
		ln.owned |= o->ephemeral;
		ln.prev = prev;
		o->ephemeral = 0;
		o->lease = next;
		o->restore_exec = snap_restore_at_exec;
		o->restore_ctx = &rc;
	}
	o->link = NULL;
	o->argv = argv;
	trace_run_opts_free(o);
	json_decref(ln.links);
	free(ln.lease);
	free(prev);
	free(next);
	free(image);
	return code;
}
