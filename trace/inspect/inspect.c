/* Inspection (SPEC §6.3) and bounded runs (SPEC §4.3), the layer TRACE_LAYER_INSPECT:
 * every trapped syscall meets the policy, the co-process and the C callback at its
 * seccomp stop; the meter follows the tree; usage goes to the lease at every tick.
 *
 * Temporary guest memory (the C API's views): an mmap(PROT_READ) injected into the
 * stopped thread, filled through /proc/PID/mem, unmapped by a munmap injected at the
 * syscall's exit stop; decided path strings go to sealed pages (pathpage.c). Host
 * views live in one arena that is PROT_NONE outside callbacks, so a stale view faults. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/inspect/inspect-internal.h"
#include "trace/tracee/tracee.h"

#define ARENA_SIZE (1u << 20)    /* host view bytes per callback */
#define MAPS_PER_CALL 8
#define OBSERVE_EVERY_MS 200     /* lease writes at most this often, except on crossing */
#define LOAD_RATE (16ull << 30)  /* bytes a CPU can read per second, at most (page cache) */
#define LOAD_SLACK_US 10000      /* a tick this late (a tracer starved of CPU) still holds */
#define FULL_EVERY_US 200000     /* the whole tree is sampled at least this often */
#define FUEL_HEADROOM_US 20000   /* SPEC §4.1: fuel's allowed overshoot */
#define FUEL_HEADROOM_MAX_US 250000 /* a dead run's bound passes its fuel by at most this */
#define ERESTART_MIN 512         /* the kernel's restart codes, ERESTARTSYS... */
#define ERESTARTNOINTR 513
#define ERESTART_MAX 516         /* ...to ERESTART_RESTARTBLOCK (include/linux/errno.h) */
#define FUEL_SLACK_US 1000       /* the quota's past half what is left: the tree does cross */

struct view { uint8_t *data; uint64_t gaddr; size_t len; };

struct call_priv {
	struct trace_inspector *in;
	struct trace_guest *g;
	const struct trace_stop *st;
	pid_t tid;
	int sealed; /* sealed pages hold its paths (pathpage.c) */
	struct view v[MAPS_PER_CALL];
	int nv;
	int dead; /* the thread died during an injection */
};

/* The scratch pages mapped into a thread for its call in progress, unmapped at
 * its exit: kept in the thread's slot (TRACE_LAYER_INSPECT). */
struct pages {
	size_t n;
	struct { uint64_t addr, len; } p[MAPS_PER_CALL];
};

static struct pages *pages_of(struct trace_guest *g)
{
	void **slot = trace_guest_slot(g, TRACE_LAYER_INSPECT);
	if (!*slot)
		*slot = common_xcalloc(1, sizeof(struct pages));
	return *slot;
}

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
	int stop;
	int efd;
	char closed[32];
	int failed;
	struct common_err err;
	const struct trace_prio *tracer; /* the tracer's scheduling: a bound is made durable on time */
};

struct trace_inspector {
	struct trace_inspector_opts o;
	struct trace_meter *meter;
	struct trace_coproc *coproc;
	struct inspect_pages *pages; /* decided paths' sealed pages */
	uint64_t limits[TRACE_DIMS];
	unsigned ncpu;                /* CPUs the tree may burn fuel on at once */
	int held;                     /* the lease is not Active yet: nothing is observed */
	uint64_t base[TRACE_DIMS];     /* the lease's usage before this run */
	char closed[32];
	int failed;
	struct common_err fail;
	uint8_t *arena;
	size_t arena_used;
	int arena_rw;
	uint64_t last_obs_ms;
	uint64_t full_due_us;         /* the next tick that samples everything */
	int fuel_near;                /* fuel may cross before full_due_us */
	const struct trace_cgroup *cg; /* the run's: with the cpu controller, the kernel holds fuel */
	int fuel_held;                /* its quota is set */
	struct obs_writer w;
	unsigned classes;
	char rewritten[2][4096]; /* the last call's new path strings, for the recorder */
	struct trace_vector *vec; /* the vectored call at its entry stop */
	uint64_t trace_bytes;     /* the trace's bytes the bound last saw */
	struct trace_supervisor *sv; /* the run's, from on_start: a crossing call stops it */
	uint64_t bound[TRACE_DIMS]; /* the run's bound last posted (bound_hold) */
	int bound_set;
	struct trace_maps *maps;    /* shared file mappings held, charged by the page */
};

/* At the seccomp stop of c's thread: run nr(a). A thread that died meanwhile
 * is marked, so that nothing more is injected into it. */
static int inject(struct call_priv *c, long nr, const uint64_t a[6], int64_t *ret)
{
	int rc = trace_inject_at_entry(c->tid, nr, a, ret);
	if (rc < 0 && rc != -EIO)
		c->dead = 1;
	return rc;
}

/* Views become writable at the first map of a callback and inaccessible when it
 * returns; callbacks that map nothing cost no mprotect. */
static void arena_open(struct trace_inspector *in, int on)
{
	if (on != in->arena_rw &&
	    mprotect(in->arena, ARENA_SIZE, on ? PROT_READ | PROT_WRITE : PROT_NONE) < 0)
		abort(); /* cannot happen on our own mapping */
	in->arena_rw = on;
	in->arena_used = 0;
}

int sbx_call_map(struct sbx_call *call, uint64_t addr, size_t size, struct sbx_mem *m)
{
	struct call_priv *c = call ? call->priv : NULL;
	struct trace_inspector *in;
	uint64_t a[6] = {0}, len;
	int64_t got;
	int rc = 0;

	if (m)
		memset(m, 0, sizeof *m);
	if (!c || !m || c->dead)
		return -EINVAL;
	in = c->in;
	len = ((uint64_t)size + 4095) & ~(uint64_t)4095;
	if (size == 0 || c->nv == MAPS_PER_CALL || len > ARENA_SIZE - in->arena_used)
		return -E2BIG;
	if (!in->arena_rw) {
		size_t used = in->arena_used;
		arena_open(in, 1);
		in->arena_used = used;
	}
	a[1] = len;
	a[2] = PROT_READ; /* the guest never writes it; /proc/PID/mem can */
	a[3] = MAP_PRIVATE | MAP_ANONYMOUS;
	a[4] = (uint64_t)-1;
	if ((rc = inject(c, SYS_mmap, a, &got)) < 0)
		return rc;
	if (got < 0 && got > -4096)
		return (int)got;
	struct pages *pg = pages_of(c->g); /* as many as views: c->nv < MAPS_PER_CALL */
	pg->p[pg->n].addr = (uint64_t)got;
	pg->p[pg->n++].len = len;
	m->data = in->arena + in->arena_used;
	m->addr = (uint64_t)got;
	m->size = size;
	in->arena_used += len;
	c->v[c->nv++] = (struct view){m->data, m->addr, len};
	memset(m->data, 0, len);
	if (addr) {
		/* process_vm_readv honours the guest's protections: a copy stops where
		 * the guest itself could not read */
		size_t done = 0;
		while (done < size) {
			size_t chunk = 4096 - ((addr + done) & 4095);
			if (chunk > size - done)
				chunk = size - done;
			ssize_t n = trace_guest_read(c->g, addr + done, (uint8_t *)m->data + done, chunk);
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		if (done < size) {
			m->size = done;
			rc = -EFAULT;
		}
	}
	return rc;
}

/* Copy the views into their read-only guest pages (/proc/PID/mem writes through). */
static int flush_views(struct call_priv *c)
{
	struct trace_tracee t;
	int rc = 0;

	if (!c->nv)
		return 0;
	if (trace_tracee_open(&t, c->tid, NULL) < 0)
		return -errno;
	for (int i = 0; i < c->nv && rc == 0; i++)
		if (trace_tracee_write(&t, c->v[i].gaddr, c->v[i].data, c->v[i].len, NULL) < 0)
			rc = -EFAULT;
	trace_tracee_close(&t);
	return rc;
}

static int fail(struct trace_inspector *in, const struct common_err *e)
{
	if (!in->failed) {
		in->failed = 1;
		in->fail = *e;
	}
	return -1;
}

static int failf(struct trace_inspector *in, const char *what, const char *why)
{
	struct common_err e;

	common_errf(&e, what, "%s", why);
	return fail(in, &e);
}

/* With w->mu held: the newest bound posted, made durable in the run's claim first:
 * a guest may be waiting in a stop for it. */
static void writer_bound(struct trace_inspector *in, struct obs_writer *w)
{
	uint64_t gen = w->bound_posted, b[TRACE_DIMS];
	struct common_err e;
	int rc = 0;

	memcpy(b, w->bound, sizeof b);
	if (!w->failed) {
		pthread_mutex_unlock(&w->mu);
		rc = lease_run_bound_write(*in->o.run_claim, w->lease, gen, b, &e);
		pthread_mutex_lock(&w->mu);
		if (rc < 0 && !w->failed) {
			w->failed = 1;
			w->err = e;
			if (w->efd >= 0)
				(void)!write(w->efd, &(uint64_t){1}, sizeof(uint64_t));
		}
	}
	if (rc == 0)
		memcpy(w->bound_durable, b, sizeof b);
	w->bound_written = gen;
	pthread_cond_broadcast(&w->done_cv);
}

static void *writer_main(void *arg)
{
	struct trace_inspector *in = arg;
	struct obs_writer *w = &in->w;
	struct lease_store *s = NULL;
	struct common_err e;

	struct trace_prio pr;

	pthread_setname_np(pthread_self(), "sbx-observe");
	(void)trace_prio_join(&pr, w->tracer);
	int open_rc = lease_store_open(lease_store_name(in->o.store), &s, &e);

	pthread_mutex_lock(&w->mu);
	if (open_rc < 0) {
		w->failed = 1;
		w->err = e;
		common_err_context(&w->err, "recording usage");
	}
	for (;;) {
		while (!w->stop && w->written == w->posted && w->bound_written == w->bound_posted)
			pthread_cond_wait(&w->post_cv, &w->mu);
		trace_prio_duty(&pr, common_mono_us());
		if (w->bound_written != w->bound_posted) {
			writer_bound(in, w);
			continue;
		}
		if (w->written == w->posted)
			break;
		uint64_t gen = w->posted, u[TRACE_DIMS];
		char closed[32] = "";
		int rc = 0;
		memcpy(u, w->u, sizeof u);
		/* a closed lease takes no more observations; a failure is reported once */
		if (!w->failed && !w->closed[0]) {
			pthread_mutex_unlock(&w->mu);
			rc = inspect_obs_write(s, w->lease, u, closed, &e);
			pthread_mutex_lock(&w->mu);
			if (rc < 0 && !w->failed) {
				w->failed = 1;
				w->err = e;
			}
			if (closed[0])
				memcpy(w->closed, closed, sizeof closed);
			if ((rc < 0 || closed[0]) && w->efd >= 0)
				(void)!write(w->efd, &(uint64_t){1}, sizeof(uint64_t));
		}
		w->written = gen;
		pthread_cond_broadcast(&w->done_cv);
	}
	pthread_mutex_unlock(&w->mu);
	lease_store_close(s);
	return NULL;
}

/* Without the thread (it could not start) observations are written inline. */
static void writer_start(struct trace_inspector *in)
{
	struct obs_writer *w = &in->w;
	sigset_t all, old;

	w->lease = in->o.lease;
	w->efd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->post_cv, NULL);
	pthread_cond_init(&w->done_cv, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* signals are the tracer's */
	w->started = pthread_create(&w->thread, NULL, writer_main, in) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!w->started) {
		pthread_cond_destroy(&w->done_cv);
		pthread_cond_destroy(&w->post_cv);
		pthread_mutex_destroy(&w->mu);
	}
}

/* Writes what is still posted, then ends the thread. */
static void writer_stop(struct obs_writer *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->post_cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->done_cv);
	pthread_cond_destroy(&w->post_cv);
	pthread_mutex_destroy(&w->mu);
	if (w->efd >= 0)
		close(w->efd);
	w->efd = -1;
	w->started = 0;
}

/* The writer's verdict so far: -1 failed (*e), else 0 with closed[] set or empty. */
static int writer_result(struct obs_writer *w, char closed[32], struct common_err *e)
{
	int failed;

	if (w->started)
		pthread_mutex_lock(&w->mu);
	failed = w->failed;
	if (failed)
		*e = w->err;
	memcpy(closed, w->closed, sizeof w->closed);
	if (w->started)
		pthread_mutex_unlock(&w->mu);
	return failed ? -1 : 0;
}

/* Hand u to the writer; with wait, return once it is in the lease (or refused). */
static void writer_post(struct obs_writer *w, const uint64_t u[TRACE_DIMS], int wait)
{
	uint64_t gen;

	pthread_mutex_lock(&w->mu);
	memcpy(w->u, u, sizeof w->u);
	gen = ++w->posted;
	pthread_cond_signal(&w->post_cv);
	while (wait && w->written < gen)
		pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

/* Hand the run's bound b to the writer; return once every dimension of most is
 * within the durable one (a guest may be past it only by what it is allowed). */
static void writer_post_bound(struct obs_writer *w, const uint64_t b[TRACE_DIMS],
			      const uint64_t most[TRACE_DIMS])
{
	pthread_mutex_lock(&w->mu);
	if (b) {
		memcpy(w->bound, b, sizeof w->bound);
		w->bound_posted++;
		pthread_cond_signal(&w->post_cv);
	}
	for (int d = 0; d < TRACE_DIMS; d++)
		while (!w->failed && most[d] > w->bound_durable[d] && w->bound_written < w->bound_posted)
			pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

int trace_inspector_new(const struct trace_inspector_opts *o, struct trace_inspector **out,
			struct common_err *e)
{
	struct trace_inspector *in = common_xcalloc(1, sizeof *in);

	*out = NULL;
	in->o = *o;
	for (int d = 0; d < TRACE_DIMS; d++)
		in->limits[d] = o->limits ? o->limits[d] : UINT64_MAX;
	if (o->base)
		memcpy(in->base, o->base, sizeof in->base);
	in->arena = mmap(NULL, ARENA_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (in->arena == MAP_FAILED) {
		free(in);
		return common_errno(e, errno, "inspector arena");
	}
	in->ncpu = (unsigned)(get_nprocs_conf() > 0 ? get_nprocs_conf() : 1);
	in->meter = trace_meter_new(o->ns_dir, in->limits[LEASE_DIM_NAMESPACE_BYTES], o->relay);
	in->vec = common_xcalloc(1, sizeof *in->vec);
	in->maps = trace_maps_new();
	in->pages = inspect_pages_new();
	/* storage_write is exact: every call that may store stops (trace/meter/store.c);
	 * a large read stops, and near its bound every read (load_tick) */
	in->classes = TRACE_CLASS_STORE | TRACE_CLASS_LOAD;
	if (o->fn)
		in->classes |= o->fn_classes ? o->fn_classes : TRACE_CLASS_FILE;
	if (o->inspect_exec)
		in->classes |= (o->inspect_classes ? o->inspect_classes : TRACE_CLASS_FILE) |
			       TRACE_FILTER_REMAP;
	if (o->policy) {
		size_t n = trace_sys_count();
		for (size_t i = 0; i < n; i++)
			if (trace_policy_traps(o->policy, trace_sys_at(i)))
				in->classes |= trace_sys_at(i)->classes & ~TRACE_CLASS_REFUSED;
		if (trace_policy_has_paths(o->policy))
			in->classes |= TRACE_FILTER_REMAP;
	}
	*out = in;
	return 0;
}

unsigned trace_inspector_classes(const struct trace_inspector *in)
{
	return in->classes;
}

void trace_inspector_free(struct trace_inspector *in)
{
	if (!in)
		return;
	writer_stop(&in->w);
	trace_coproc_stop(in->coproc);
	trace_meter_free(in->meter);
	free(in->vec);
	trace_maps_free(in->maps);
	inspect_pages_free(in->pages);
	munmap(in->arena, ARENA_SIZE);
	free(in);
}

void trace_inspector_usage(const struct trace_inspector *in, uint64_t u[TRACE_DIMS])
{
	uint64_t run[TRACE_DIMS];

	trace_meter_usage(in->meter, run);
	for (int d = 0; d < TRACE_DIMS; d++) {
		/* peaks and the namespace are states; the rest accumulate across runs */
		if (d == LEASE_DIM_MEMORY || d == LEASE_DIM_TABLE_ELEMENTS ||
		    d == LEASE_DIM_NAMESPACE_BYTES)
			u[d] = run[d] > in->base[d] ? run[d] : in->base[d];
		else
			u[d] = in->base[d] + run[d];
	}
}

static int writer_take(struct trace_inspector *in, struct trace_supervisor *sv);

/* What a run that dies is charged (SPEC §4.2) may pass what it used by this much:
 * 1 % of the limit, at least the overshoot a bound allows (fuel 20 ms, bytes 1 MiB,
 * counts 1), fuel at most a tick; less would renew the bound of a busy build every
 * few milliseconds. */
static uint64_t bound_headroom(const struct trace_inspector *in, int d)
{
	uint64_t h = in->limits[d] / 100;

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
static uint64_t relay_room(const struct trace_inspector *in, const uint64_t *b, int d)
{
	return b[d] >= in->limits[d] ? UINT64_MAX : b[d] > in->base[d] ? b[d] - in->base[d] : 0;
}

static void relay_allow(struct trace_inspector *in, int wait)
{
	uint64_t b[TRACE_DIMS];

	if (!in->o.relay || !in->o.run_claim || !in->w.started || in->held)
		return;
	if (wait)
		writer_post_bound(&in->w, NULL, in->bound);
	pthread_mutex_lock(&in->w.mu);
	memcpy(b, in->w.bound_durable, sizeof b);
	pthread_mutex_unlock(&in->w.mu);
	trace_relay_allow(in->o.relay, relay_room(in, b, LEASE_DIM_OUTPUT_BYTES),
			  relay_room(in, b, LEASE_DIM_OUTPUT_VALUES));
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
static int bound_hold(struct trace_inspector *in, struct trace_supervisor *sv, int tick)
{
	uint64_t run[TRACE_DIMS], most[TRACE_DIMS], b[TRACE_DIMS];
	int due = 0;

	if (!in->o.run_claim || !in->w.started || in->held || in->closed[0])
		return 0;
	trace_meter_most(in->meter, tick, run);
	for (int d = 0; d < TRACE_DIMS; d++) {
		int state = d == LEASE_DIM_MEMORY || d == LEASE_DIM_TABLE_ELEMENTS ||
			    d == LEASE_DIM_NAMESPACE_BYTES;
		uint64_t h = bound_headroom(in, d);
		most[d] = state ? (run[d] > in->base[d] ? run[d] : in->base[d]) : in->base[d] + run[d];
		if (most[d] > in->limits[d])
			most[d] = in->limits[d]; /* past it, the closure is the record */
		/* output the relay waits to count has moved; fuel moves from the first
		 * instruction, before any sample */
		int moved = most[d] > in->base[d] || d == LEASE_DIM_FUEL ||
			    ((d == LEASE_DIM_OUTPUT_BYTES || d == LEASE_DIM_OUTPUT_VALUES) &&
			     in->o.relay && trace_relay_waiting(in->o.relay));
		b[d] = bound_at_limit(d) ? in->limits[d] : !moved ? most[d] :
		       in->limits[d] - most[d] > h ? most[d] + h : in->limits[d];
		if (b[d] < in->bound[d])
			b[d] = in->bound[d];
		due |= most[d] > in->bound[d] ||
		       (moved && most[d] + h - h / 2 > in->bound[d] && b[d] > in->bound[d]);
	}
	due |= !in->bound_set; /* the first, before the guest runs */
	in->bound_set = 1;
	if (due)
		memcpy(in->bound, b, sizeof b);
	/* a tick does not wait: what passed the bound already did, and reads must go on */
	static const uint64_t none[TRACE_DIMS];
	writer_post_bound(&in->w, due ? b : NULL, tick ? none : most);
	relay_allow(in, 0);
	return writer_take(in, sv) < 0 ? -1 : 0;
}

/* The tree is gone: the bound becomes what it used (a crash before the claim is
 * dropped charges no headroom). */
static int bound_final(struct trace_inspector *in)
{
	uint64_t u[TRACE_DIMS];

	if (!in->o.run_claim || !in->w.started || in->held)
		return 0;
	trace_inspector_usage(in, u);
	for (int d = 0; d < TRACE_DIMS; d++)
		if (u[d] > in->limits[d])
			u[d] = in->limits[d];
	memcpy(in->bound, u, sizeof u);
	writer_post_bound(&in->w, u, u);
	return writer_take(in, NULL) < 0 ? -1 : 0;
}

const char *trace_inspector_closed(const struct trace_inspector *in)
{
	return in->closed[0] ? in->closed : NULL;
}

const struct common_err *trace_inspector_failure(const struct trace_inspector *in)
{
	return in->failed ? &in->fail : NULL;
}

static void fuel_tick(const struct trace_inspector *in, struct trace_supervisor *sv,
		      const uint64_t u[TRACE_DIMS]);
static void load_tick(const struct trace_inspector *in, struct trace_supervisor *sv,
		      const uint64_t u[TRACE_DIMS]);

static int inspector_start(void *ctx, struct trace_supervisor *sv)
{
	struct trace_inspector *in = ctx;
	struct common_err e;

	in->sv = sv;
	/* tasks are learnt at stops and ticks */
	if (in->o.relay && trace_relay_start(in->o.relay, &e) < 0)
		return fail(in, &e);
	if (in->o.inspect_exec &&
	    trace_coproc_start(in->o.inspect_exec, in->o.inspect_timeout_ms, &in->coproc, &e) < 0)
		return fail(in, &e);
	if (in->o.store && in->o.lease) { /* after the fork above: a thread is not forked */
		in->w.tracer = trace_sv_prio(sv);
		writer_start(in);
		int efd = in->w.started ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;
		if (efd >= 0 && trace_sv_watch(sv, efd) < 0) {
			close(efd);
		} else if (efd >= 0) {
			pthread_mutex_lock(&in->w.mu);
			in->w.efd = efd;
			pthread_mutex_unlock(&in->w.mu);
		}
	}
	/* a passed output bound is acted on at once, not at the next tick */
	if (in->o.relay && trace_sv_watch(sv, trace_relay_wake_fd(in->o.relay)) < 0)
		return failf(in, "relay", "cannot watch the output bound");
	if (bound_hold(in, sv, 1) < 0) /* durable before the guest runs */
		return -1;
	if (in->o.run_claim && in->w.started && !in->held)
		writer_post_bound(&in->w, NULL, in->bound);
	uint64_t u[TRACE_DIMS];
	trace_inspector_usage(in, u);
	fuel_tick(in, sv, u);
	load_tick(in, sv, u);
	return 0;
}

static void inspector_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
			    unsigned long flags)
{
	struct trace_inspector *in = ctx;

	(void)sv;
	/* parent is the creator's tgid: no /proc lookup for the child's */
	trace_meter_task_new(in->meter, (flags & CLONE_THREAD) ? parent : child, child);
	if (!(flags & CLONE_THREAD))
		trace_maps_spawn(in->maps, parent, child, !!(flags & CLONE_VM));
}

static int inspector_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			  const char *path)
{
	struct trace_inspector *in = ctx;

	(void)sv, (void)ppid, (void)path;
	trace_meter_guest_exec(in->meter);
	trace_maps_forget(in->maps, pid); /* a new address space */
	return 0;
}

static void inspector_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	struct trace_inspector *in = ctx;
	struct trace_map_call mc;
	pid_t tgid = trace_meter_task_tgid(in->meter, tid);

	(void)wstatus;
	trace_meter_task_exit(in->meter, 0, tid);
	trace_maps_take(in->maps, tid, &mc);
	if (tgid && !trace_meter_group_live(in->meter, tgid))
		trace_maps_forget(in->maps, tgid); /* its last thread: the process's space */
	inspect_pages_forget(in->pages, tid);
	/* a thread that leaves mid-syscall takes its temporary pages with it */
	void **slot = trace_sv_slot(sv, tid, TRACE_LAYER_INSPECT);
	if (slot) {
		free(*slot);
		*slot = NULL;
	}
}

static void inspector_slot_free(void *ctx, void *slot)
{
	(void)ctx;
	free(slot);
}

/* The lease closed (or a lease-less bound broke): stop the tree. */
static int close_run(struct trace_inspector *in, struct trace_supervisor *sv, const char *closed)
{
	snprintf(in->closed, sizeof in->closed, "%s", closed);
	if (sv) {
		char why[64];
		snprintf(why, sizeof why, "bound: %s", closed);
		trace_sv_kill_now(sv, why);
	}
	return 1;
}

/* The first dimension past its bound, or -1. */
static int crossed(const struct trace_inspector *in, const uint64_t u[TRACE_DIMS])
{
	for (int d = 0; d < TRACE_DIMS; d++)
		if (u[d] > in->limits[d])
			return d;
	return -1;
}

/* The tree burns at most one CPU second per second on each online CPU (it may
 * widen its affinity to all of them): the next tick comes before it can cross. */
static void fuel_tick(const struct trace_inspector *in, struct trace_supervisor *sv,
		      const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = in->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];
	/* the run's bound is renewed before the tree can burn past it */
	if (in->o.run_claim && in->w.started && !in->held && in->bound[LEASE_DIM_FUEL] < lim)
		lim = in->bound[LEASE_DIM_FUEL];
	/* half the time it needs: a late tick or a lagging sample still lands before */
	if (sv && used < lim)
		trace_sv_tick_within(sv, (lim - used) / in->ncpu / 2);
}

/* Reads are sampled while far from storage_read's bound: the next tick comes before
 * the tree, reading at LOAD_RATE on every CPU, can come within the margin, and within
 * it every read stops (trace_sv_every_call) and is held to the bound by load_entry.
 * The margin also takes the small reads each task may have in flight unseen. */
static void load_tick(const struct trace_inspector *in, struct trace_supervisor *sv,
		      const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = in->limits[LEASE_DIM_STORAGE_READ], used = u[LEASE_DIM_STORAGE_READ];
	uint64_t rate = LOAD_RATE * in->ncpu;
	uint64_t margin = rate / 1000000 * LOAD_SLACK_US +
			  (uint64_t)TRACE_LOAD_SMALL * (trace_meter_tasks(in->meter) + 1);

	if (!sv || trace_sv_every_call_on(sv))
		return;
	if (used >= lim || lim - used <= margin)
		trace_sv_every_call(sv);
	else /* before the margin can be reached; the margin absorbs a late tick */
		trace_sv_tick_within(sv, (lim - used - margin) / (rate / 1000000));
}

/* Take up what the writer met: -1 failed, 1 closed, 0 neither. */
static int writer_take(struct trace_inspector *in, struct trace_supervisor *sv)
{
	char closed[32];
	struct common_err e;
	uint64_t n;
	int r;

	if (in->closed[0])
		return 1;
	r = writer_result(&in->w, closed, &e);
	if ((r < 0 || closed[0]) && in->w.started && in->w.efd >= 0)
		(void)!read(in->w.efd, &n, sizeof n); /* taken: the fd stops polling readable */
	if (r < 0)
		return fail(in, &e);
	return closed[0] ? close_run(in, sv, closed) : 0;
}

/* Publish usage; stop the tree when the lease closed (or a lease-less bound broke).
 * A crossing (or force) waits for its observation to be durable, as a closure must
 * be decided now; other observations are left to the writer. */
static int observe(struct trace_inspector *in, struct trace_supervisor *sv, int force)
{
	uint64_t u[TRACE_DIMS], now = common_now_ms();
	char closed[32] = "";
	struct common_err e;
	int r;

	if (in->held)
		return 0;
	if ((r = writer_take(in, sv)) != 0 || (r = bound_hold(in, sv, 1)) != 0)
		return r;
	trace_inspector_usage(in, u);
	int d = crossed(in, u);
	fuel_tick(in, sv, u);
	load_tick(in, sv, u);
	if (in->o.store && in->o.lease) {
		int crossing = d >= 0;
		if (crossing && sv) { /* stopped first: its observation may wait for the disk */
			char why[64];
			snprintf(why, sizeof why, "bound: %s", lease_dim_name((enum lease_dim)d));
			trace_sv_kill_now(sv, why);
		}
		if (!force && !crossing && now - in->last_obs_ms < OBSERVE_EVERY_MS)
			return 0;
		in->last_obs_ms = now;
		if (in->w.started) {
			writer_post(&in->w, u, force || crossing);
			return force || crossing ? writer_take(in, sv) : 0;
		} else if (inspect_obs_write(in->o.store, in->o.lease, u, closed, &e) < 0) {
			return fail(in, &e);
		}
	} else if (d >= 0) {
		snprintf(closed, sizeof closed, "%s", lease_dim_name((enum lease_dim)d));
	}
	return closed[0] ? close_run(in, sv, closed) : 0;
}

void trace_inspector_hold(struct trace_inspector *in, int held)
{
	in->held = held;
}

/* Where the cgroup has the cpu controller, the kernel stops the tree once it has burnt
 * half of what the last sample left (and the slack, so that it does cross): the next
 * tick comes before a tree at full speed on every CPU can burn that much (fuel_tick),
 * so only a tracer that is late (a loaded host) finds it throttled, and a late tracer
 * no longer lets it run on past the bound. Set from a fresh sample only. */
static void fuel_hold(struct trace_inspector *in, const uint64_t u[TRACE_DIMS])
{
	uint64_t lim = in->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];
	uint64_t q = used < lim ? (lim - used) / 2 + FUEL_SLACK_US : FUEL_SLACK_US;

	if (!trace_cgroup_holds_fuel(in->cg))
		return;
	/* far from the bound the tree cannot burn the quota in a period: no quota yet */
	if (!in->fuel_held && q / in->ncpu >= TRACE_FUEL_PERIOD_US)
		return;
	/* refused only by a v1 parent with a smaller quota: that one holds the tree,
	 * and the samples hold the bound as without a cgroup */
	in->fuel_held = trace_cgroup_fuel(in->cg, q) == 0 || in->fuel_held;
}

void trace_inspector_cgroup(struct trace_inspector *in, const struct trace_cgroup *cg)
{
	uint64_t u[TRACE_DIMS];

	trace_meter_cgroup(in->meter, cg, in->limits[LEASE_DIM_MEMORY]);
	in->cg = cg;
	trace_inspector_usage(in, u); /* the lease's usage before the run: exact */
	fuel_hold(in, u);
}

void trace_inspector_host_write(struct trace_inspector *in, uint64_t bytes)
{
	trace_meter_host_write(in->meter, bytes);
}

int trace_inspector_trace_grew(struct trace_inspector *in, uint64_t bytes)
{
	uint64_t u[TRACE_DIMS];

	if (bytes == in->trace_bytes) /* most events only fill the recorder's buffer */
		return 0;
	in->trace_bytes = bytes;
	trace_meter_host_write(in->meter, bytes);
	trace_inspector_usage(in, u);
	if (!in->sv || u[LEASE_DIM_STORAGE_WRITE] <= in->limits[LEASE_DIM_STORAGE_WRITE])
		return 0;
	return observe(in, in->sv, 1) < 0 ? -1 : 0;
}

static int inspector_tick(void *ctx, struct trace_supervisor *sv)
{
	struct trace_inspector *in = ctx;
	pid_t tids[4096];
	size_t n;

	if (in->failed)
		return 1;
	uint64_t now = common_mono_us(), u[TRACE_DIMS];
	n = trace_sv_pids(sv, tids, sizeof tids / sizeof tids[0]);
	/* a tick for storage_read alone reads its counts only; the last tick (the tree
	 * gone) and one every FULL_EVERY_US sample everything */
	if (n > 0 && now < in->full_due_us && !in->fuel_near) {
		trace_meter_load_held(in->meter);
		if (bound_hold(in, sv, 1) < 0)
			return 1;
		trace_inspector_usage(in, u);
		fuel_tick(in, sv, u);
		load_tick(in, sv, u);
		return crossed(in, u) >= 0 ? observe(in, sv, 0) != 0 : 0;
	}
	trace_inspector_usage(in, u);
	uint64_t lim = in->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];
	uint64_t fuel_us = used < lim ? (lim - used) / in->ncpu / 2 : 0;
	in->full_due_us = now + FULL_EVERY_US;
	in->fuel_near = fuel_us < FULL_EVERY_US; /* then every tick is fuel's, and full */
	for (size_t i = 0; i < n && i < sizeof tids / sizeof tids[0]; i++)
		trace_meter_task_new(in->meter, 0, tids[i]);
	trace_meter_peak_rss(in->meter, trace_sv_peak_rss(sv));
	trace_meter_tick(in->meter);
	trace_inspector_usage(in, u);
	fuel_hold(in, u);
	return observe(in, sv, 0) != 0;
}

/* The writer met a closure or a failure: act on it now, not at the next tick. */
static int inspector_fd(void *ctx, struct trace_supervisor *sv, int fd)
{
	struct trace_inspector *in = ctx;

	if (in->o.relay && fd == trace_relay_wake_fd(in->o.relay)) {
		uint64_t n;
		(void)!read(fd, &n, sizeof n);
		trace_meter_tick(in->meter);
		if (observe(in, sv, 0) < 0)
			return -1;
		/* the relay used up what it may count: a bound past it, durable, first */
		if (trace_relay_waiting(in->o.relay))
			relay_allow(in, 1);
		return 0;
	}
	if (!in->w.started || fd != in->w.efd)
		return 0;
	if (writer_take(in, sv) < 0)
		trace_sv_stop(sv, NULL);
	return 0;
}

/* The k-th path argument of call pointed at s in a sealed page of the guest. */
static int rewrite_path(struct sbx_call *call, int k, const char *s)
{
	struct call_priv *c = call->priv;
	int r = inspect_path_arg(c->in->pages, c->st, call->nr, k, s, call->args);

	c->dead |= r == -ESRCH;
	c->sealed |= r == 0;
	return r;
}

static int apply(struct trace_inspector *in, struct sbx_call *call,
		 const struct trace_decision *d)
{
	int r;

	if (d->set_nr)
		call->nr = d->nr;
	for (int i = 0; i < 6; i++)
		if (d->set_args & (1u << i))
			call->args[i] = d->args[i];
	for (int k = 0; k < 2; k++) {
		if (!d->path[k])
			continue;
		if ((r = rewrite_path(call, k, d->path[k])) < 0)
			return r;
		snprintf(in->rewritten[k], sizeof in->rewritten[k], "%s", d->path[k]);
	}
	return 0;
}

static void unmap_now(struct trace_inspector *in, struct trace_guest *g, int at_exit,
		      struct call_priv *c)
{
	struct pages *pg = *trace_guest_slot(g, TRACE_LAYER_INSPECT);
	inspect_pages_drop(in->pages, trace_guest_tid(g), at_exit);
	for (size_t i = 0; pg && i < pg->n; i++) {
		uint64_t a[6] = {pg->p[i].addr, pg->p[i].len};
		int64_t ret;
		if (at_exit)
			trace_inject_at_exit(trace_guest_tid(g), SYS_munmap, a, &ret);
		else
			inject(c, SYS_munmap, a, &ret);
	}
	if (pg)
		pg->n = 0;
}

/* A path policy or a co-process decided on this call's path strings. */
static unsigned coproc_classes(const struct trace_inspector *in)
{
	return in->o.inspect_classes ? in->o.inspect_classes : TRACE_CLASS_FILE;
}

static int decides_on_paths(const struct trace_inspector *in, const struct trace_stop *st,
			    unsigned cls)
{
	/* only calls some path rule selects: a trace level's other stops pay nothing */
	return (in->o.policy && st->sys && trace_policy_has_paths(in->o.policy) &&
		trace_policy_traps(in->o.policy, st->sys)) ||
	       (in->coproc && (cls & coproc_classes(in)));
}

/* The co-process's decision, applied: a verdict (0 allow, errno, -1 failed: *e). */
static int coproc_entry(struct trace_inspector *in, struct sbx_call *call, struct trace_stop *st,
			const char real[2][PATH_MAX], struct common_err *e)
{
	const char *rp[2] = {real[0][0] ? real[0] : NULL, real[1][0] ? real[1] : NULL};
	struct trace_decision d;
	int verdict = 0, r;

	if (trace_coproc_ask(in->coproc, st, rp, &d, e) < 0) {
		common_err_context(e, "inspector %s", in->o.inspect_exec);
		return -1;
	}
	if (d.deny_errno) {
		verdict = d.deny_errno;
	} else {
		if (d.record)
			st->want_exit = st->record = 1;
		if ((r = apply(in, call, &d)) < 0)
			verdict = -1, common_errno(e, -r, "inspector %s: rewriting", in->o.inspect_exec);
	}
	trace_decision_clear(&d);
	return verdict;
}

static int inspect_entry(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st)
{
	struct call_priv c = {.in = in, .g = g, .st = st, .tid = st->tid};
	struct sbx_call call = {
		.name = st->sys ? st->sys->name : NULL, .nr = st->nr,
		.path = {st->path[0], st->path[1]}, .pid = st->pid, .tid = st->tid, .priv = &c,
	};
	struct trace_decision d;
	struct common_err e;
	int verdict = 0, r, inspected = 0;
	unsigned cls = st->sys ? st->sys->classes : 0;
	char real[2][PATH_MAX] = {"", ""}; /* what the paths name: decided on, then run */

	if (in->failed)
		return -1;
	/* where the kernel would stop at a file, so does the call: the resolved form
	 * would go on past it */
	if (decides_on_paths(in, st, cls))
		inspected = verdict = inspect_real_paths(st, real);
	trace_meter_task_new(in->meter, st->pid, st->tid);
	memcpy(call.args, st->args, sizeof call.args);
	memset(&d, 0, sizeof d);
	/* A pending page of this thread belongs to a call that never came back. */
	if (*trace_guest_slot(g, TRACE_LAYER_INSPECT))
		pages_of(g)->n = 0;
	inspect_pages_forget(in->pages, st->tid);
	in->rewritten[0][0] = in->rewritten[1][0] = 0;
	in->arena_used = 0;
	if (verdict == 0 && in->o.policy && trace_policy_decide(in->o.policy, st, &d) == 1) {
		inspected = 1;
		if (d.record)
			st->want_exit = st->record = 1;
		if (d.deny_errno)
			verdict = d.deny_errno;
		else if ((r = apply(in, &call, &d)) < 0)
			verdict = -1, common_errno(&e, -r, "policy rule %s: rewriting %s", d.rule,
						   call.name ? call.name : "syscall");
	}
	trace_decision_clear(&d);
	if (verdict == 0 && in->coproc && (cls & coproc_classes(in))) {
		inspected = 1;
		verdict = coproc_entry(in, &call, st, real, &e);
	}
	if (verdict == 0 && in->o.fn && (cls & (in->o.fn_classes ? in->o.fn_classes :
						TRACE_CLASS_FILE))) {
		inspected = 1;
		verdict = in->o.fn(&call, in->o.fn_arg);
		if (verdict < 0)
			common_errf(&e, "inspector", "the callback failed on %s",
				    call.name ? call.name : "a syscall");
		if (verdict > 4095)
			verdict = EINVAL;
	}
	int ruled = call.nr != st->nr || memcmp(call.args, st->args, sizeof call.args) != 0;
	/* what was decided on stays so: the strings go to read-only guest memory,
	 * where a racing thread cannot change them before the kernel reads them */
	if (verdict == 0 && !c.dead && decides_on_paths(in, st, cls)) {
		inspected = 1;
		for (int k = 0; k < 2 && verdict == 0; k++)
			if (!in->rewritten[k][0] && st->raw[k] &&
			    (r = rewrite_path(&call, k, inspect_page_form(st, k, real))) < 0)
				/* a guest out of descriptors or memory gets that errno for the call */
				verdict = r == -EMFILE || r == -ENFILE || r == -ENOMEM ? -r : -1,
				common_errno(&e, -r, "keeping the path of %s out of the guest's reach",
					     call.name ? call.name : "a syscall");
	}
	if (c.dead) {
		/* killed meanwhile (exit_group of a sibling, a signal): nothing left to decide */
		arena_open(in, 0);
		return 0;
	}
	r = verdict >= 0 ? flush_views(&c) : 0;
	arena_open(in, 0); /* from here on a kept view faults */
	if (!inspected)
		return 0;
	if (verdict < 0) {
		unmap_now(in, g, 0, &c);
		/* the call must not run: the guest is stopped, nothing is written back */
		st->action = TRACE_DENIED;
		st->deny_errno = EPERM;
		return fail(in, &e);
	}
	if (r < 0) {
		common_errno(&e, -r, "writing temporary guest memory");
		return fail(in, &e);
	}
	if (verdict > 0) {
		unmap_now(in, g, 0, &c);
		st->action = TRACE_DENIED;
		st->deny_errno = verdict;
		return 0;
	}
	if (call.nr != st->nr || memcmp(call.args, st->args, sizeof call.args) != 0) {
		if (trace_guest_set_syscall(g, call.nr, call.args) < 0)
			return failf(in, "inspector", "could not change the syscall");
	}
	if (ruled) {
		st->action = TRACE_REWRITTEN;
		for (int k = 0; k < 2; k++)
			st->rewrite[k] = in->rewritten[k][0] ? in->rewritten[k] : NULL;
		st->nr = call.nr;
		memcpy(st->args, call.args, sizeof st->args);
	}
	if (c.nv || c.sealed)
		st->want_exit = 1;
	return 0;
}

#define MAP_PIECES 64 /* an mprotect over more held and free stretches is refused (ENOMEM) */

static long nr_of(const char *name)
{
	const struct trace_sysinfo *s = trace_sys_by_name(name);

	return s ? s->nr : -1;
}

/* mprotect(p) in tid at its seccomp stop (at_entry) or at a signal-delivery stop:
 * 0 with *ret the call's result, -1 when the thread cannot be driven. */
static int map_protect_now(pid_t tid, int at_entry, const struct trace_map_piece *p, int64_t *ret)
{
	uint64_t a[6] = { p->lo, p->hi - p->lo, (uint64_t)(unsigned)p->prot, 0, 0, 0 };
	struct user_regs_struct saved;
	struct trace_tracee t;
	int rc = -1;

	if (at_entry)
		return trace_inject_at_entry(tid, nr_of("mprotect"), a, ret) < 0 ? -1 : 0;
	if (trace_regs_get(tid, &saved) < 0 || trace_tracee_open(&t, tid, NULL) < 0)
		return -1;
	if (trace_tracee_find_syscall(&t, NULL) == 0)
		rc = trace_tracee_inject(&t, nr_of("mprotect"), a, ret, NULL);
	trace_tracee_close(&t);
	return trace_regs_set(tid, &saved) < 0 ? -1 : rc;
}

/* Pages of a held mapping about to be stored, charged before the store: -1 when
 * they would take storage_write past its bound (the lease closes). */
static int map_charge(struct trace_inspector *in, uint64_t bytes)
{
	const uint64_t bound = in->limits[LEASE_DIM_STORAGE_WRITE];
	uint64_t held = in->base[LEASE_DIM_STORAGE_WRITE] + trace_meter_store_held(in->meter);

	if (held > bound || bytes > bound - held) {
		trace_meter_store_refused(in->meter, bytes);
		observe(in, in->sv, 1);
		return -1;
	}
	trace_meter_store_charge(in->meter, bytes);
	return bound_hold(in, in->sv, 0);
}

/* A store of g's at addr into a held mapping: its run charged and made writable
 * (*next: the run's end, 0 when none). 1 when done (the store can be made again),
 * 0 when addr is not held or the bound refuses it, -1 when the thread cannot be driven. */
static int map_store(struct trace_inspector *in, struct trace_guest *g, uint64_t addr, int at_entry,
		     uint64_t *next)
{
	struct trace_map_piece p;
	uint64_t charge;
	int64_t r = 0;

	*next = 0;
	if (!trace_maps_store(in->maps, trace_guest_tid(g), trace_guest_pid(g), addr, &p, &charge))
		return 0;
	*next = p.hi;
	if (charge && map_charge(in, charge) < 0)
		return 0;
	if (map_protect_now(trace_guest_tid(g), at_entry, &p, &r) < 0)
		return -1;
	return r == 0;
}

/* A store into a held page faults (SEGV_ACCERR): charged, opened, made again. */
static int inspector_fault(void *ctx, struct trace_guest *g, int sig)
{
	struct trace_inspector *in = ctx;
	siginfo_t si;
	uint64_t next;

	if (sig != SIGSEGV || in->failed || !trace_maps_any(in->maps, trace_guest_pid(g)) ||
	    trace_siginfo(trace_guest_tid(g), &si) < 0 || si.si_code != SEGV_ACCERR)
		return 0;
	return map_store(in, g, (uint64_t)(uintptr_t)si.si_addr, 0, &next) > 0;
}

/* A call about to store into [addr, addr+len) (a read into a mapping): each held
 * run of it charged and opened first, as the kernel's store would fail (EFAULT)
 * where the guest's own would fault. */
static int map_store_range(struct trace_inspector *in, struct trace_guest *g, uint64_t addr,
			   uint64_t len)
{
	uint64_t end = addr + len, at = addr & ~4095ull, next;

	if (!len || end < addr)
		return 0;
	while ((at = trace_maps_next(in->maps, trace_guest_pid(g), at, end)) < end) {
		if (map_store(in, g, at, 1, &next) < 0)
			return failf(in, "storage_write", "could not open a shared mapping for a call");
		at = next > at ? next : at + 4096;
	}
	return 0;
}

/* A plain read's buffer, at its seccomp stop (an injection needs one): its held runs
 * opened. In every-call mode a read into the window stops there too. */
static int map_read(struct trace_inspector *in, struct trace_guest *g, const struct trace_stop *st)
{
	int buf = trace_sys_arg(st->sys, TRACE_ARG_PTR), count = trace_sys_arg(st->sys, TRACE_ARG_COUNT);

	if (buf < 0 || count < 0 || trace_sys_arg(st->sys, TRACE_ARG_OUTFD) >= 0 ||
	    !trace_maps_any(in->maps, st->pid))
		return 0;
	return map_store_range(in, g, st->args[buf], st->args[count]);
}

/* mmap of a shared file mapping that can store: mapped without PROT_WRITE, held at its exit. */
static int map_hold(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		    const struct trace_store_call *c)
{
	int prot = trace_sys_arg(st->sys, TRACE_ARG_PROT), len = trace_sys_arg(st->sys, TRACE_ARG_LEN);
	struct trace_map_call mc = { TRACE_MAP_MMAP, (int)st->args[prot], c->dev, c->ino, 0,
				     st->args[len], 0, 0 };

	int fl = trace_sys_arg(st->sys, TRACE_ARG_MFLAGS), at = trace_sys_arg(st->sys, TRACE_ARG_PTR);
	uint64_t place = trace_maps_place(in->maps, st->args[len]);

	/* in the window where reads stop, unless the guest chose its address */
	if (at >= 0 && place && !(st->args[fl] & (MAP_FIXED | MAP_FIXED_NOREPLACE)))
		st->args[at] = place;
	st->args[prot] &= ~(uint64_t)PROT_WRITE;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return failf(in, "storage_write", "could not hold a shared mapping");
	trace_maps_pending(in->maps, st->tid, &mc);
	st->want_exit = 1;
	return 0;
}

/* mremap of a held mapping: what it grows or copies takes the protection of the
 * mapping at old, so that is made unwritable first; the range moves at its exit. */
static int map_remap(struct trace_inspector *in, struct trace_stop *st)
{
	const struct trace_sysinfo *s = st->sys;
	uint64_t old = st->args[trace_sys_arg(s, TRACE_ARG_MAPADDR)];
	uint64_t oldlen = st->args[trace_sys_arg(s, TRACE_ARG_MAPLEN)];
	uint64_t newlen = st->args[trace_sys_arg(s, TRACE_ARG_LEN)];
	int fl = trace_sys_arg(s, TRACE_ARG_FLAGS), prot;
	struct trace_map_call mc = { TRACE_MAP_MOVE, 0, 0, 0, old, oldlen, newlen,
				     fl >= 0 && (st->args[fl] & MREMAP_DONTUNMAP) };
	int64_t r;

	if (!trace_maps_held_prot(in->maps, st->pid, old, oldlen ? oldlen : 1, &prot))
		return 0;
	if (newlen > oldlen) {
		struct trace_map_piece p = { old & ~4095ull, (old & ~4095ull) + (oldlen ? oldlen : 4096),
					     prot & ~PROT_WRITE };
		if (map_protect_now(st->tid, 1, &p, &r) < 0)
			return failf(in, "storage_write", "could not hold a shared mapping's growth");
	}
	mc.prot = prot;
	trace_maps_pending(in->maps, st->tid, &mc);
	st->want_exit = 1;
	return 0;
}

/* mprotect over held ranges: with PROT_WRITE it runs here piece by piece, the held
 * ones without it (writable run by run at their stores), and the call itself
 * changes nothing; without, it runs and the ranges take prot at its exit. */
static int map_protect(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st, int protk)
{
	struct trace_map_piece p[MAP_PIECES];
	uint64_t addr = st->args[0], len = (st->args[1] + 4095) & ~4095ull;
	int prot = (int)st->args[protk], n, held;
	int64_t r = 0, one;

	if ((addr & 4095) || !len || addr + len < addr || !trace_maps_held_prot(in->maps, st->pid, addr, len, &held))
		return 0;
	if (!(prot & PROT_WRITE)) {
		struct trace_map_call mc = { TRACE_MAP_PROTECT, prot, 0, 0, addr, len, 0, 0 };
		trace_maps_pending(in->maps, st->tid, &mc);
		st->want_exit = 1;
		return 0;
	}
	if ((n = trace_maps_pieces(in->maps, st->pid, addr, len, prot, p, MAP_PIECES)) < 0) {
		st->action = TRACE_DENIED;
		st->deny_errno = ENOMEM;
		return 0;
	}
	for (int i = 0; i < n; i++) {
		if (map_protect_now(st->tid, 1, &p[i], &one) < 0)
			return failf(in, "storage_write", "could not hold an mprotect of a shared mapping");
		if (one < 0 && r == 0)
			r = one;
	}
	trace_maps_protect(in->maps, st->pid, addr, len, prot);
	st->args[1] = 0; /* done: the call itself is mprotect(addr, 0), then its result */
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return failf(in, "storage_write", "could not hold an mprotect of a shared mapping");
	trace_meter_vector_set(in->meter, st->tid, TRACE_VECTOR_RESULT, r);
	st->want_exit = 1;
	return 0;
}

/* The mapping calls, at their seccomp stop (trace/meter/mapping.c). */
static int map_entry(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		     const struct trace_store_call *c)
{
	const struct trace_sysinfo *s = st->sys;
	int prot = trace_sys_arg(s, TRACE_ARG_PROT);

	if (c->hold)
		return map_hold(in, g, st, c);
	if (trace_sys_arg(s, TRACE_ARG_MAPLEN) >= 0)
		return map_remap(in, st);
	if (prot >= 0 && trace_sys_arg(s, TRACE_ARG_MFLAGS) < 0 && trace_maps_any(in->maps, st->pid))
		return map_protect(in, g, st, prot);
	return 0;
}

/* A mapping call's exit: what it did, in the table. */
static void map_exit(struct trace_inspector *in, const struct trace_stop *st)
{
	struct trace_map_call mc;

	if (!trace_maps_take(in->maps, st->tid, &mc) || (st->result < 0 && st->result > -4096))
		return;
	if (mc.kind == TRACE_MAP_MMAP)
		trace_maps_add(in->maps, st->pid, (uint64_t)st->result, mc.len, &mc);
	else if (mc.kind == TRACE_MAP_MOVE)
		trace_maps_move(in->maps, st->pid, mc.addr, mc.len, (uint64_t)st->result, mc.newlen, mc.keep);
	else if (mc.kind == TRACE_MAP_PROTECT)
		trace_maps_protect(in->maps, st->pid, mc.addr, mc.len, mc.prot);
}


/* Nothing is left of storage_read: the read reads nothing (its count arg cnt 0) and
 * the lease closes one byte past the bound. */
static int load_refuse(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st, int cnt)
{
	const uint64_t bound = in->limits[LEASE_DIM_STORAGE_READ], base = in->base[LEASE_DIM_STORAGE_READ];

	st->args[cnt] = 0;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return failf(in, "storage_read", "could not hold a read to the bound");
	trace_meter_load_refused(in->meter, bound > base ? bound - base : 0);
	return observe(in, in->sv, 1) < 0 ? -1 : 0;
}

/* A vectored call on a file or memory device, reserved: run per segment with the
 * lengths read at its stop (cap bytes), its result kept for its exit. */
static int vector_run(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		      uint64_t cap)
{
	int64_t r;

	if (trace_vector_run(g, st, in->vec, cap, &r) < 0)
		return failf(in, "inspector", "could not run a vectored call per segment");
	trace_meter_vector_set(in->meter, st->tid, TRACE_VECTOR_RESULT, r);
	st->want_exit = 1;
	return 0;
}

/* A vectored read on a file or memory device runs per segment; on any other
 * descriptor it is rewritten (trace_vector_stream), cap bytes at most. */
static int vector_hold(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		       int runs, uint64_t cap)
{
	int64_t r = 0;
	int way;

	if (runs)
		return vector_run(in, g, st, cap);
	if ((way = trace_vector_stream(g, st, in->vec, cap, &r)) < 0)
		return failf(in, "storage_read", "could not hold a vectored read to its reservation");
	trace_meter_vector_set(in->meter, st->tid, way, r);
	st->want_exit = 1;
	return 0;
}

/* A vectored read, at its seccomp stop (where its iovec is read once, whatever the
 * every-call stop before it saw): held to what is left of storage_read's bound. */
static int load_vector(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		       uint64_t left)
{
	int runs = trace_vector_runs(g, st), rc = trace_vector_read(g, st, in->vec);
	uint64_t ask = in->vec->bytes;

	if (rc < 0) { /* the kernel would refuse it: so it is, before a rewrite */
		st->action = TRACE_DENIED;
		st->deny_errno = -rc;
		return 0;
	}
	if (ask > 0 && left == 0)
		return load_refuse(in, g, st, trace_sys_arg(st->sys, TRACE_ARG_IOVCNT));
	if (ask > left)
		ask = left;
	for (size_t i = 0, done = 0; i < in->vec->n && done < ask; done += in->vec->v[i++].iov_len)
		if (map_store_range(in, g, (uint64_t)(uintptr_t)in->vec->v[i].iov_base,
				    in->vec->v[i].iov_len < ask - done ? in->vec->v[i].iov_len : ask - done) < 0)
			return -1;
	trace_meter_load_begin(in->meter, st->tid, ask);
	if (bound_hold(in, in->sv, 0) < 0)
		return -1;
	return vector_hold(in, g, st, runs, ask);
}

/* A read that stops (a large one; near the bound, all): held to storage_read's
 * bound before it runs. What it may read is reserved; one that would cross is cut
 * to what is left, and with nothing left it reads nothing and the lease closes one
 * byte past the bound. A vectored read is cut and held at its seccomp stop. */
static int load_entry(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		      int seccomp)
{
	const struct trace_sysinfo *s = st->sys;
	int count = trace_sys_arg(s, TRACE_ARG_COUNT), iov = trace_sys_arg(s, TRACE_ARG_IOV);
	int cnt = count >= 0 ? count : trace_sys_arg(s, TRACE_ARG_IOVCNT);
	const uint64_t bound = in->limits[LEASE_DIM_STORAGE_READ], base = in->base[LEASE_DIM_STORAGE_READ];
	uint64_t ask, held, left;

	if (!s || !(s->classes & TRACE_CLASS_LOAD) || st->action == TRACE_DENIED || cnt < 0)
		return 0;
	if (trace_meter_load_pending(in->meter, st->tid)) { /* reserved at its entry stop */
		st->want_exit = 1;
		return seccomp ? map_read(in, g, st) : 0;
	}
	if (iov >= 0 && !seccomp)
		return 0;
	ask = count >= 0 ? st->args[count] : 0;
	if (ask == 0 && iov < 0)
		return 0;
	held = base + trace_meter_load_held(in->meter);
	left = held < bound ? bound - held : 0;
	if (iov >= 0)
		return load_vector(in, g, st, left);
	if (ask > left && left == 0)
		return load_refuse(in, g, st, cnt);
	if (ask > left) {
		st->args[cnt] = left;
		if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
			return failf(in, "storage_read", "could not hold a read to the bound");
		ask = left;
	}
	if (seccomp && map_read(in, g, st) < 0)
		return -1;
	trace_meter_load_begin(in->meter, st->tid, ask);
	if (bound_hold(in, in->sv, 0) < 0)
		return -1;
	st->want_exit = 1;
	return 0;
}

static int inspector_call(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_inspector *in = ctx;

	if (in->failed)
		return -1;
	trace_meter_task_new(in->meter, st->pid, st->tid);
	return load_entry(in, g, st, 0);
}


/* A call that moves bytes from one descriptor into a file (sendfile, splice,
 * copy_file_range) asks for at most its count, and cp asks ~2^63 and lets the kernel
 * stop at the end of the file: past what is left of storage_write it is cut to what
 * is left (a short copy, which the kernel allows), its read reservation with it. */
static int store_cut(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st,
		     struct trace_store_call *c, uint64_t left)
{
	int count = trace_sys_arg(st->sys, TRACE_ARG_COUNT);

	if (!left || c->bytes <= left || count < 0 || trace_sys_arg(st->sys, TRACE_ARG_INFD) < 0)
		return 0;
	st->args[count] = c->bytes = left;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return failf(in, "storage_write", "could not hold a copy to the bound");
	if (trace_meter_load_pending(in->meter, st->tid))
		trace_meter_load_begin(in->meter, st->tid, left);
	return 0;
}

/* A call that may store on a file: reserved before it runs, or, when it would take
 * storage_write past its bound, refused and charged whole (the lease closes on it);
 * likewise one that could take namespace_bytes past its bound. */
static int store_entry(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st)
{
	const uint64_t bound = in->limits[LEASE_DIM_STORAGE_WRITE];
	uint64_t held = in->base[LEASE_DIM_STORAGE_WRITE] + trace_meter_store_held(in->meter);
	struct trace_store_call c;

	if (st->action == TRACE_DENIED)
		return 0;
	if (!trace_store_entry(g, st, &c, in->vec))
		return c.mapping ? map_entry(in, g, st, &c) : 0;
	if (c.refuse) { /* the kernel would refuse it: so it is, before a rewrite */
		st->action = TRACE_DENIED;
		st->deny_errno = c.refuse;
		return 0;
	}
	if (store_cut(in, g, st, &c, held < bound ? bound - held : 0) < 0)
		return -1;
	if (held > bound || c.bytes > bound - held) {
		trace_meter_store_refused(in->meter, c.bytes);
	} else {
		trace_meter_store_begin(in->meter, st->tid, c.bytes, c.by_result);
		if (trace_meter_ns_reserve(in->meter, st->tid, trace_meter_ns_charge(in->meter, &c)) == 0) {
			if (bound_hold(in, in->sv, 0) < 0)
				return -1;
			if (c.vector)
				return vector_run(in, g, st, c.bytes);
			st->want_exit = 1;
			return 0;
		}
		trace_meter_store_end(in->meter, st->tid, -EDQUOT); /* it stores nothing */
	}
	/* storage_write or namespace_bytes would cross its bound: the lease closes */
	st->action = TRACE_DENIED;
	st->deny_errno = EDQUOT;
	return observe(in, in->sv, 1) < 0 ? -1 : 0;
}

static int inspector_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_inspector *in = ctx;
	struct trace_stop now;
	int64_t stale;

	/* a vectored call's way whose exit stop another took (a snapshot's interrupt) is void */
	trace_meter_vector_take(in->meter, st->tid, &stale);
	if (inspect_entry(in, g, st) < 0)
		return -1;
	int flight = 0, err = inspect_pages_remap_errno(in->pages, st, &flight);
	if (err) { /* it would take a decided path's page away */
		st->action = TRACE_DENIED;
		st->deny_errno = err;
		return 0;
	}
	st->want_exit |= flight; /* in flight until its exit */
	/* metered as the call that runs: a rule may have changed it, and the kernel
	 * does not stop it again */
	now = *st;
	now.sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	if (!now.sys || !(now.sys->classes & (TRACE_CLASS_STORE | TRACE_CLASS_LOAD)))
		return 0;
	int rc = load_entry(in, g, &now, 1);
	if (rc == 0 && (now.sys->classes & TRACE_CLASS_STORE))
		rc = store_entry(in, g, &now);
	st->action = now.action;
	st->deny_errno = now.deny_errno;
	st->want_exit |= now.want_exit;
	return rc;
}

/* A vectored call held at its entry, at its exit: the guest's own registers back
 * (only rax, rcx and r11 change in a syscall) and the way's result. A restart the
 * kernel is about to make (-ERESTART*: a signal came) restarts the guest's own call;
 * a wait that saw a datagram queued issues the call again, to a fresh stop. */
static int vector_exit(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st)
{
	struct user_regs_struct r;
	int64_t res;
	int way = trace_meter_vector_take(in->meter, st->tid, &res);

	if (!way)
		return 0;
	if (trace_guest_get_regs(g, &r) < 0)
		return failf(in, "inspector", "could not read the registers at a call's exit");
	trace_regs_set_args(&r, st->args);
	if (way == TRACE_VECTOR_RESULT || way == TRACE_VECTOR_TAKEN) {
		r.rax = (uint64_t)res;
	} else if ((res = (int64_t)r.rax) >= -ERESTART_MAX && res <= -ERESTART_MIN) {
		r.orig_rax = (uint64_t)st->nr;
	} else if (way == TRACE_VECTOR_WAIT && res >= 0) {
		r.rip -= 2; /* back over the syscall instruction */
		r.rax = r.orig_rax = (uint64_t)st->nr;
		res = -ERESTARTNOINTR; /* for the trace: the call is made again */
	}
	if (trace_guest_set_regs(g, &r) < 0)
		return failf(in, "inspector", "could not restore a vectored call's registers");
	st->result = res;
	return 0;
}

static int inspector_exit(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_inspector *in = ctx;
	struct trace_stop now;
	uint64_t u[TRACE_DIMS];

	unmap_now(in, g, 1, NULL);
	inspect_pages_call_done(in->pages, st->tid);
	if (vector_exit(in, g, st) < 0)
		return -1;
	now = *st; /* with the result the vectored call returns */
	now.sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	trace_meter_store_end(in->meter, st->tid, trace_store_result(g, &now));
	trace_meter_load_end(in->meter, st->tid);
	map_exit(in, &now);
	/* a guest that raced its own iovec past its reservation closes now */
	trace_inspector_usage(in, u);
	if (u[LEASE_DIM_STORAGE_WRITE] > in->limits[LEASE_DIM_STORAGE_WRITE] ||
	    u[LEASE_DIM_STORAGE_READ] > in->limits[LEASE_DIM_STORAGE_READ])
		return observe(in, in->sv, 1) < 0 ? -1 : 0;
	return 0;
}

int trace_inspector_finish(struct trace_inspector *in, struct common_err *e)
{
	if (in->o.relay)
		trace_relay_finish(in->o.relay);
	trace_meter_sample(in->meter);
	int rc = !in->closed[0] ? observe(in, NULL, 1) : 0;
	if (rc == 0 && !in->closed[0])
		rc = bound_final(in);
	writer_stop(&in->w);
	if (rc < 0) {
		*e = in->fail;
		return -1;
	}
	return 0;
}

struct trace_layer trace_inspector_layer(struct trace_inspector *in)
{
	if (!in)
		return (struct trace_layer){ 0 };
	return (struct trace_layer){
		.ctx = in, .on_start = inspector_start, .on_entry = inspector_entry,
		.on_call = inspector_call, .on_exit = inspector_exit, .on_exec = inspector_exec,
		.on_spawn = inspector_spawn,
		.on_proc_exit = inspector_proc_exit, .on_tick = inspector_tick, .on_fd = inspector_fd,
		.on_fault = inspector_fault,
		.slot_free = inspector_slot_free,
	};
}
