/* The bounds of a metered run (SPEC §4.2, §4.3): the run's bound kept durable
 * above what the guest may have used, observations of usage, closure at a
 * crossing, and the ticks that come before fuel or storage_read can cross. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/meter/meter-internal.h"

#define OBSERVE_EVERY_MS 200     /* lease writes at most this often, except on crossing */
#define LOAD_RATE (16ull << 30)  /* bytes a CPU can read per second, at most (page cache) */
#define LOAD_SLACK_US 10000      /* a tick this late (a tracer starved of CPU) still holds */
#define FUEL_HEADROOM_US 20000   /* SPEC §4.1: fuel's allowed overshoot */
#define FUEL_HEADROOM_MAX_US 250000 /* a dead run's bound passes its fuel by at most this */
#define FUEL_SLACK_US 1000       /* the fuse's ceiling is past the bound: the tree does cross */

/* What a run that dies is charged (SPEC §4.2) may pass what it used by this much:
 * 1 % of the limit, at least the overshoot a bound allows (fuel 20 ms, bytes 1 MiB,
 * counts 1), fuel at most a tick; less would renew the bound of a busy build every
 * few milliseconds. */
static uint64_t bound_headroom(const struct trace_metering *mt, int d)
{
	uint64_t h = mt->limits[d] / 100;

	if (d == LEASE_DIM_FUEL)
		return h < FUEL_HEADROOM_US ? FUEL_HEADROOM_US : h > FUEL_HEADROOM_MAX_US ?
		       FUEL_HEADROOM_MAX_US : h;
	if (d == LEASE_DIM_OUTPUT_VALUES || d == LEASE_DIM_TABLE_ELEMENTS)
		return h ? h : 1;
	return h > (1u << 20) ? h : 1u << 20;
}

/* What the relay may count in all (run-relative): up to the durable bound, any
 * amount once that is the limit (a crossing is the closure's); with wait, once the
 * bound posted is durable. */
static uint64_t relay_room(const struct trace_metering *mt, const uint64_t *b, int d)
{
	return b[d] >= mt->limits[d] ? UINT64_MAX : b[d] > mt->base[d] ? b[d] - mt->base[d] : 0;
}

void meter_relay_allow(struct trace_metering *mt, int wait)
{
	uint64_t b[TRACE_DIMS];

	if (!mt->o.relay || !mt->o.run_claim || !mt->w.started || mt->held)
		return;
	if (wait)
		meter_writer_post_bound(&mt->w, NULL, mt->bound, 0);
	pthread_mutex_lock(&mt->w.mu);
	memcpy(b, mt->w.bound_durable, sizeof b);
	pthread_mutex_unlock(&mt->w.mu);
	trace_relay_allow(mt->o.relay, relay_room(mt, b, LEASE_DIM_OUTPUT_BYTES),
			  relay_room(mt, b, LEASE_DIM_OUTPUT_VALUES));
}

/* Memory, descriptors and small reads move between samples without a stop that
 * could wait for the disk (page faults; reads of up to TRACE_LOAD_SMALL far from
 * the bound), at a speed no sample keeps up with: their bound is the limit, which
 * the cgroup, RLIMIT_NOFILE and load_entry hold (SPEC §4.2). */
static int bound_at_limit(int d)
{
	return d == LEASE_DIM_MEMORY || d == LEASE_DIM_TABLE_ELEMENTS || d == LEASE_DIM_STORAGE_READ;
}

/* The run's bound (lease_run_bound_write) stays above what the guest may have used:
 * a dimension past its bound, or one that moved this run and came within half its
 * headroom of the bound, gets a new one (usage plus headroom once it moved, at most
 * the limit: an untouched one is charged nothing more); a stop waits until what the
 * guest may have used is durable: a call that may move bytes waits before it runs.
 * Fuel is read afresh at ticks only (a call's stop moves bytes, not fuel), and a
 * tick waits for nothing: the tracer must keep its other deadlines. */
int meter_bound_hold(struct trace_metering *mt, struct trace_supervisor *sv, int tick)
{
	uint64_t run[TRACE_DIMS], most[TRACE_DIMS], b[TRACE_DIMS];
	int due = 0;

	if (!mt->o.run_claim || !mt->w.started || mt->held || mt->closed[0])
		return 0;
	trace_meter_most(mt->meter, tick, run);
	for (int d = 0; d < TRACE_DIMS; d++) {
		int state = d == LEASE_DIM_MEMORY || d == LEASE_DIM_TABLE_ELEMENTS ||
			    d == LEASE_DIM_NAMESPACE_BYTES;
		uint64_t h = bound_headroom(mt, d);
		most[d] = state ? (run[d] > mt->base[d] ? run[d] : mt->base[d]) : mt->base[d] + run[d];
		if (most[d] > mt->limits[d])
			most[d] = mt->limits[d]; /* past it, the closure is the record */
		/* output the relay waits to count has moved; fuel moves from the first
		 * instruction, before any sample */
		int moved = most[d] > mt->base[d] || d == LEASE_DIM_FUEL ||
			    ((d == LEASE_DIM_OUTPUT_BYTES || d == LEASE_DIM_OUTPUT_VALUES) &&
			     mt->o.relay && trace_relay_waiting(mt->o.relay));
		b[d] = bound_at_limit(d) ? mt->limits[d] : !moved ? most[d] :
		       mt->limits[d] - most[d] > h ? most[d] + h : mt->limits[d];
		if (b[d] < mt->bound[d])
			b[d] = mt->bound[d];
		due |= most[d] > mt->bound[d] ||
		       (moved && most[d] + h - h / 2 > mt->bound[d] && b[d] > mt->bound[d]);
	}
	due |= !mt->bound_set; /* the first, before the guest runs */
	mt->bound_set = 1;
	if (due)
		memcpy(mt->bound, b, sizeof b);
	/* a tick does not wait: what passed the bound already did, and reads must go on */
	static const uint64_t none[TRACE_DIMS];
	meter_writer_post_bound(&mt->w, due ? b : NULL, tick ? none : most, 0);
	meter_relay_allow(mt, 0);
	return meter_writer_take(mt, sv) < 0 ? -1 : 0;
}

/* The tree is gone: the bound becomes what it used (a crash before the claim is
 * dropped charges no headroom). */
int meter_bound_final(struct trace_metering *mt)
{
	uint64_t u[TRACE_DIMS];

	if (!mt->o.run_claim || !mt->w.started || mt->held)
		return 0;
	trace_metering_usage(mt, u);
	for (int d = 0; d < TRACE_DIMS; d++)
		if (u[d] > mt->limits[d])
			u[d] = mt->limits[d];
	memcpy(mt->bound, u, sizeof u);
	/* the final observation just made this usage durable in the journal */
	meter_writer_post_bound(&mt->w, u, u, 1);
	return meter_writer_take(mt, NULL) < 0 ? -1 : 0;
}

const char *trace_metering_closed(const struct trace_metering *mt)
{
	return mt->closed[0] ? mt->closed : NULL;
}

const struct common_err *trace_metering_failure(const struct trace_metering *mt)
{
	return mt->failed ? &mt->fail : NULL;
}

/* The lease closed (or a lease-less bound broke): stop the tree. */
static int close_run(struct trace_metering *mt, struct trace_supervisor *sv, const char *closed)
{
	snprintf(mt->closed, sizeof mt->closed, "%s", closed);
	if (sv) {
		char why[64];
		snprintf(why, sizeof why, "bound: %s", closed);
		trace_sv_kill_now(sv, why);
	}
	return 1;
}

int meter_crossed(const struct trace_metering *mt, const uint64_t u[TRACE_DIMS])
{
	for (int d = 0; d < TRACE_DIMS; d++)
		if (u[d] > mt->limits[d])
			return d;
	return -1;
}

/* The tree burns at most one CPU second per second on each online CPU (it may
 * widen its affinity to all of them): the next tick comes before it can cross. */
void meter_fuel_tick(const struct trace_metering *mt, struct trace_supervisor *sv,
		     const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = mt->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];
	/* the run's bound is renewed before the tree can burn past it */
	if (mt->o.run_claim && mt->w.started && !mt->held && mt->bound[LEASE_DIM_FUEL] < lim)
		lim = mt->bound[LEASE_DIM_FUEL];
	/* half the time it needs: a late tick or a lagging sample still lands before */
	if (sv && used < lim)
		trace_sv_tick_within(sv, (lim - used) / mt->ncpu / 2);
}

/* Reads are sampled while far from storage_read's bound: the next tick comes before
 * the tree, reading at LOAD_RATE on every CPU, can come within the margin, and within
 * it every read stops (trace_sv_every_call) and is held to the bound by load_entry.
 * The margin also takes the small reads each task may have in flight unseen. */
void meter_load_tick(const struct trace_metering *mt, struct trace_supervisor *sv,
		     const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = mt->limits[LEASE_DIM_STORAGE_READ], used = u[LEASE_DIM_STORAGE_READ];
	uint64_t rate = LOAD_RATE * mt->ncpu;
	uint64_t margin = rate / 1000000 * LOAD_SLACK_US +
			  (uint64_t)TRACE_LOAD_SMALL * (trace_meter_tasks(mt->meter) + 1);

	if (!sv || trace_sv_every_call_on(sv))
		return;
	if (used >= lim || lim - used <= margin)
		trace_sv_every_call(sv);
	else /* before the margin can be reached; the margin absorbs a late tick */
		trace_sv_tick_within(sv, (lim - used - margin) / (rate / 1000000));
}

int meter_writer_take(struct trace_metering *mt, struct trace_supervisor *sv)
{
	char closed[32];
	struct common_err e;
	uint64_t n;
	int r;

	if (mt->closed[0])
		return 1;
	r = meter_writer_result(&mt->w, closed, &e);
	if ((r < 0 || closed[0]) && mt->w.started && mt->w.efd >= 0)
		(void)!read(mt->w.efd, &n, sizeof n); /* taken: the fd stops polling readable */
	if (r < 0)
		return meter_fail(mt, &e);
	return closed[0] ? close_run(mt, sv, closed) : 0;
}

/* Publish usage; stop the tree when the lease closed (or a lease-less bound broke).
 * A crossing (or force) waits for its observation to be durable, as a closure must
 * be decided now; other observations are left to the writer. */
int meter_observe(struct trace_metering *mt, struct trace_supervisor *sv, int force)
{
	uint64_t u[TRACE_DIMS], now = common_now_ms();
	char closed[32] = "";
	struct common_err e;
	int r;

	if (mt->held)
		return 0;
	if ((r = meter_writer_take(mt, sv)) != 0 || (r = meter_bound_hold(mt, sv, 1)) != 0)
		return r;
	trace_metering_usage(mt, u);
	int d = meter_crossed(mt, u);
	meter_fuel_tick(mt, sv, u);
	meter_load_tick(mt, sv, u);
	if (mt->o.store && mt->o.lease) {
		int crossing = d >= 0;
		if (crossing && sv) { /* stopped first: its observation may wait for the disk */
			char why[64];
			snprintf(why, sizeof why, "bound: %s", lease_dim_name((enum lease_dim)d));
			trace_sv_kill_now(sv, why);
		}
		if (!force && !crossing && now - mt->last_obs_ms < OBSERVE_EVERY_MS)
			return 0;
		mt->last_obs_ms = now;
		if (mt->w.started) {
			meter_writer_post(&mt->w, u, force || crossing);
			return force || crossing ? meter_writer_take(mt, sv) : 0;
		} else if (meter_obs_write(mt->o.store, mt->o.lease, u, closed, &e) < 0) {
			return meter_fail(mt, &e);
		}
	} else if (d >= 0) {
		snprintf(closed, sizeof closed, "%s", lease_dim_name((enum lease_dim)d));
	}
	return closed[0] ? close_run(mt, sv, closed) : 0;
}

void trace_metering_hold(struct trace_metering *mt, int held)
{
	mt->held = held;
}

/* Where the cgroup counts the tree's CPU, its fuse (trace/box/fuse.c) kills the tree
 * once the count passes what this sample left plus the slack. The count is read after
 * the sample, so what the tree burns meanwhile is in both, and the ceiling holds
 * without the supervisor: one late by any amount (a loaded host, a stop) finds the
 * tree ended past the bound by at most the slack, what it burnt during the sample and
 * a fuse step per CPU. Set from a fresh sample only. */
void meter_fuel_hold(struct trace_metering *mt, const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = mt->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];

	if (trace_cgroup_holds_fuel(mt->cg))
		(void)trace_cgroup_fuel(mt->cg, (used < lim ? lim - used : 0) + FUEL_SLACK_US);
}

void trace_metering_cgroup(struct trace_metering *mt, const struct trace_cgroup *cg)
{
	uint64_t u[TRACE_DIMS];

	trace_meter_cgroup(mt->meter, cg, mt->limits[LEASE_DIM_MEMORY]);
	mt->cg = cg;
	trace_metering_usage(mt, u); /* the lease's usage before the run: exact */
	meter_fuel_hold(mt, u);
}

/* sbx-run --chain: storage_write is handed over at the call, not near it. */
int trace_metering_store_due(struct trace_metering *mt, struct trace_guest *g,
			     const struct trace_stop *st)
{
	const uint64_t bound = mt->limits[LEASE_DIM_STORAGE_WRITE];
	struct trace_store_call c;

	if (mt->held || mt->closed[0] || mt->failed || !st->arch_ok || !st->sys ||
	    !(st->sys->classes & TRACE_CLASS_STORE) || st->action == TRACE_DENIED ||
	    !trace_store_entry(g, st, &c, mt->vec) || c.refuse)
		return 0;
	/* what store_entry settles first: the thread's last plain write is over */
	trace_meter_store_stopped(mt->meter, st->tid);
	uint64_t held = mt->base[LEASE_DIM_STORAGE_WRITE] + trace_meter_store_held(mt->meter);
	/* a copy is cut to what is left (store_cut): due once nothing is */
	if (trace_sys_arg(st->sys, TRACE_ARG_COUNT) >= 0 && trace_sys_arg(st->sys, TRACE_ARG_INFD) >= 0)
		return c.bytes > 0 && bound > 0 && held >= bound;
	return c.bytes <= bound && (held > bound || c.bytes > bound - held);
}

/* sbx-run --chain: a dimension a fresh lease renews (fuel, storage_read, output)
 * whose usage, with what the stopped call may read (st NULL: at a tick), passes
 * num/den of its bound; -1 for none. Only once this lease used 1/den of it:
 * every link gets that far, and a call larger than what a fresh lease allows ends
 * on the bound, as a run without a chain does. */
int trace_metering_renew_due(struct trace_metering *mt, const struct trace_stop *st, unsigned num,
			     unsigned den)
{
	static const int renewed[] = { LEASE_DIM_FUEL, LEASE_DIM_STORAGE_READ,
				       LEASE_DIM_OUTPUT_BYTES, LEASE_DIM_OUTPUT_VALUES };
	uint64_t run[TRACE_DIMS], call[TRACE_DIMS] = { 0 };

	if (!mt || mt->held || mt->closed[0] || mt->failed)
		return -1;
	if (st && !st->arch_ok)
		return -1;
	int count = st && st->sys ? trace_sys_arg(st->sys, TRACE_ARG_COUNT) : -1;
	if (count >= 0 && (st->sys->classes & TRACE_CLASS_LOAD))
		call[LEASE_DIM_STORAGE_READ] = st->args[count];
	trace_meter_most(mt->meter, st == NULL, run);
	for (size_t i = 0; i < sizeof renewed / sizeof renewed[0]; i++) {
		int d = renewed[i];
		uint64_t used = mt->base[d] + run[d], lim = mt->limits[d] / den * num;
		if (used >= mt->limits[d] / den && used + call[d] > lim && lim > 0)
			return d;
	}
	return -1;
}
