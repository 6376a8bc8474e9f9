/* trace/meter: what the metering layer's files share (layer.c, bound.c,
 * observe.c, hold.c). */
#ifndef SBX_TRACE_METER_INTERNAL_H
#define SBX_TRACE_METER_INTERNAL_H

#include <pthread.h>
#include "trace/meter/meter.h"

/* The durable observation (a signed lease transition with fsync) is written by this
 * thread, so guests never wait at their stops for the disk. It always writes the
 * newest snapshot posted (coalescing) through its own store handle (the lease's
 * flock orders it against everyone else); a closure or failure it meets wakes the
 * tracer through efd (a watched fd), else the next tick takes it up. */
struct obs_writer {
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t post_cv, done_cv;
	struct lease_store *s;
	const char *lease;
	uint64_t u[TRACE_DIMS];
	uint64_t posted, written;      /* snapshot generations */
	uint64_t bound[TRACE_DIMS];    /* the run's bound posted, and the last durable one */
	uint64_t bound_durable[TRACE_DIMS];
	uint64_t bound_posted, bound_written;
	int bound_journaled;           /* the bound posted is usage the journal holds */
	int stop;
	int efd;
	char closed[32];
	int failed;
	struct common_err err;
	const struct trace_prio *tracer; /* the tracer's scheduling: a bound is made durable on time */
};

struct trace_metering {
	struct trace_metering_opts o;
	struct trace_meter *meter;
	uint64_t limits[TRACE_DIMS];
	unsigned ncpu;                /* CPUs the tree may burn fuel on at once */
	int held;                     /* the lease is not Active yet: nothing is observed */
	uint64_t base[TRACE_DIMS];     /* the lease's usage before this run */
	char closed[32];
	int failed;
	struct common_err fail;
	uint64_t last_obs_ms;
	uint64_t full_due_us;         /* the next tick that samples everything */
	int fuel_near;                /* fuel may cross before full_due_us */
	const struct trace_cgroup *cg; /* the run's: where it counts CPU, its fuse holds fuel */
	struct obs_writer w;
	struct trace_vector *vec; /* the vectored call at its entry stop */
	uint64_t trace_bytes;     /* the trace's bytes the bound last saw */
	struct trace_supervisor *sv; /* the run's, from on_start: a crossing call stops it */
	uint64_t bound[TRACE_DIMS]; /* the run's bound last posted (bound_hold) */
	int bound_set;
	struct trace_maps *maps;    /* shared file mappings held, charged by the page */
	int final_due;              /* finished: the close observes the last usage */
};

/* The metering's failure, kept once: -1. */
int meter_fail(struct trace_metering *mt, const struct common_err *e);
int meter_failf(struct trace_metering *mt, const char *what, const char *why);

/* The observation writer (observe.c). Without the thread (it could not start)
 * observations are written inline. */
void meter_writer_start(struct trace_metering *mt);
/* Writes what is still posted, then ends the thread. */
void meter_writer_stop(struct obs_writer *w);
/* The writer's verdict so far: -1 failed (*e), else 0 with closed[] set or empty. */
int meter_writer_result(struct obs_writer *w, char closed[32], struct common_err *e);
/* Hand u to the writer; with wait, return once it is in the lease (or refused). */
void meter_writer_post(struct obs_writer *w, const uint64_t u[TRACE_DIMS], int wait);
/* Hand the run's bound b to the writer; return once every dimension of most is
 * within the durable one (a guest may be past it only by what it is allowed).
 * journaled: b is usage the journal holds already, written without an fdatasync. */
void meter_writer_post_bound(struct obs_writer *w, const uint64_t b[TRACE_DIMS],
			     const uint64_t most[TRACE_DIMS], int journaled);
/* One durable observation of usage u in lease id: raised first to what a
 * concurrent run recorded when the lease refuses it as lower; closed gets the
 * dimension that closed the lease ("" if none). 0, or -1 with e filled. */
int meter_obs_write(struct lease_store *s, const char *id, uint64_t u[TRACE_DIMS],
		    char closed[32], struct common_err *e);

/* The bounds (bound.c). */
/* The run's bound kept above what the guest may have used (tick: fuel read afresh,
 * nothing waited for); -1 failed. */
int meter_bound_hold(struct trace_metering *mt, struct trace_supervisor *sv, int tick);
/* The tree is gone: the bound becomes what it used. */
int meter_bound_final(struct trace_metering *mt);
/* What the relay may count, from the durable bound (with wait, once it is durable). */
void meter_relay_allow(struct trace_metering *mt, int wait);
/* Publish usage; stop the tree when the lease closed: -1 failed, 1 closed, 0 neither. */
int meter_observe(struct trace_metering *mt, struct trace_supervisor *sv, int force);
/* Take up what the writer met: -1 failed, 1 closed, 0 neither. */
int meter_writer_take(struct trace_metering *mt, struct trace_supervisor *sv);
/* The first dimension past its bound, or -1. */
int meter_crossed(const struct trace_metering *mt, const uint64_t u[TRACE_DIMS]);
/* The next tick before fuel, or storage_read, can cross (else every read stops). */
void meter_fuel_tick(const struct trace_metering *mt, struct trace_supervisor *sv,
		     const uint64_t u[TRACE_DIMS]);
void meter_load_tick(const struct trace_metering *mt, struct trace_supervisor *sv,
		     const uint64_t u[TRACE_DIMS]);
/* The fuse's ceiling from a fresh sample. */
void meter_fuel_hold(struct trace_metering *mt, const uint64_t u[TRACE_DIMS]);

/* The held shared mappings (hold.c). */
/* A store into a held page faults: charged, opened, made again (the layer's on_fault). */
int meter_map_fault(void *ctx, struct trace_guest *g, int sig);
/* A call about to store into [addr, addr+len): each held run charged and opened first. */
int meter_map_store_range(struct trace_metering *mt, struct trace_guest *g, uint64_t addr,
			  uint64_t len);
/* A plain read's buffer at its seccomp stop: its held runs opened. */
int meter_map_read(struct trace_metering *mt, struct trace_guest *g, const struct trace_stop *st);
/* The mapping calls at their seccomp stop, and at their exit. */
int meter_map_entry(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		    const struct trace_store_call *c);
void meter_map_exit(struct trace_metering *mt, const struct trace_stop *st);

#endif
