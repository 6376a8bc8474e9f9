/* sbx-run --chain (SPEC §8.4): where a link hands its guest over to the next.
 * storage_write is handed over at the call: a storing call of any process of the
 * tree that would take it past the bound never runs in this link; the tree is
 * snapshotted with that thread standing at the call's entry (the call rewound, to
 * run again), and the next link runs it, charged to its own lease. So no link
 * ends above its bound, whatever the tree's other writers do meanwhile. The other
 * dimensions a fresh lease renews (fuel, storage_read, output) and the lifetime,
 * which grow between stops, hand over once past 7/8 of their bound, at the next
 * reading or storing call's stop or at a tick. */
#include <errno.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/run/run-internal.h"

#define CHAIN_NUM 7u
#define CHAIN_DEN 8u
#define CHAIN_TRIES 50u      /* refused snapshots (a task starting a program): tried again */
#define CHAIN_RETRY_US 20000
#define CHAIN_HELD_US 1000   /* a held call comes back to its stop at most this often */

int trace_handover_open(struct trace_handover *h, struct lease_store *s, const char *lease,
			struct common_err *e)
{
	json_t *rec = NULL;

	h->store = s;
	h->lease = lease;
	if (lease_load(s, lease, &rec, e) < 0)
		return -1;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	h->requested = (uint64_t)common_jint(l, "requested", 0);
	h->lifetime = (uint64_t)common_jint(l, "lifetime", 0);
	json_decref(rec);
	return 0;
}

static int may(const struct trace_handover *h)
{
	return h->link && !h->link->last && !h->link->snapshot[0] && !h->off && h->meter && h->sv;
}

/* 1: the link ended (snapshot taken, guest killed); 0: it runs on (refused: tried
 * again after CHAIN_RETRY_US, up to CHAIN_TRIES times; then the link runs on to its
 * bound) */
static int end_link(struct trace_handover *h, pid_t held, const char *dim)
{
	struct trace_snap_taken t;
	struct common_err e;
	uint64_t now = common_mono_us();

	if (now < h->next_try_us)
		return 0;
	if (h->snapshot(h->ctx, held, &t, &e) < 0) {
		h->next_try_us = now + CHAIN_RETRY_US;
		if (++h->refused < CHAIN_TRIES) {
			trace_sv_tick_within(h->sv, CHAIN_RETRY_US);
			return 0;
		}
		common_warnf("chain: lease %s near its %s bound: no snapshot after %u tries (%s: %s): "
			     "the link runs on to its bound", h->lease, dim, h->refused, e.what, e.why);
		h->off = 1;
		return 0;
	}
	snprintf(h->link->snapshot, sizeof h->link->snapshot, "%s", t.digest);
	h->link->dim = dim;
	json_decref(t.receipt);
	trace_sv_kill_now(h->sv, "chain: the link ended near a bound");
	return 1;
}

int trace_handover_entry(struct trace_handover *h, struct trace_guest *g, struct trace_stop *st)
{
	if (!may(h) || !st->sys || !(st->sys->classes & (TRACE_CLASS_STORE | TRACE_CLASS_LOAD)) ||
	    st->action == TRACE_DENIED)
		return 0;
	int at_call = trace_metering_store_due(h->meter, g, st);
	int d = at_call ? LEASE_DIM_STORAGE_WRITE : trace_metering_renew_due(h->meter, st, CHAIN_NUM,
									     CHAIN_DEN);
	if (d < 0)
		return 0;
	if (end_link(h, trace_guest_tid(g), lease_dim_name((enum lease_dim)d))) {
		st->action = TRACE_DENIED; /* it never runs here: the next link runs it */
		st->deny_errno = EINTR;
		return -1;
	}
	if (!at_call || h->off)
		return 0; /* given up: the call meets the bound, as without a chain */
	/* held at its entry until a snapshot comes: issued again, a little later */
	uint64_t now = common_mono_us();
	if (h->next_try_us > now)
		usleep(h->next_try_us - now < CHAIN_HELD_US ? (useconds_t)(h->next_try_us - now)
							     : CHAIN_HELD_US);
	st->action = TRACE_DENIED;
	st->again = 1;
	return 0;
}

int trace_handover_tick(struct trace_handover *h)
{
	uint64_t b = 0;
	int d;

	if (!may(h))
		return 0;
	if ((d = trace_metering_renew_due(h->meter, NULL, CHAIN_NUM, CHAIN_DEN)) >= 0)
		return end_link(h, 0, lease_dim_name((enum lease_dim)d));
	if (h->lifetime && lease_store_batch(h->store, &b, NULL) == 0 &&
	    b - h->requested >= h->lifetime * CHAIN_NUM / CHAIN_DEN)
		return end_link(h, 0, "lifetime");
	return 0;
}
