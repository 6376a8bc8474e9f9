/* Metering, the layer TRACE_LAYER_METER (SPEC §4.1-§4.3): the meter follows the
 * tree; every call that may store or read is held to its bound at its stop;
 * usage goes to the lease at every tick, and a crossing closes the run. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sysinfo.h>
#include <sys/user.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/meter/meter-internal.h"
#include "trace/tracee/tracee.h"

#define FULL_EVERY_US 200000     /* the whole tree is sampled at least this often */
#define ERESTART_MIN 512         /* the kernel's restart codes, ERESTARTSYS... */
#define ERESTARTNOINTR 513
#define ERESTART_MAX 516         /* ...to ERESTART_RESTARTBLOCK (include/linux/errno.h) */

int meter_fail(struct trace_metering *mt, const struct common_err *e)
{
	if (!mt->failed) {
		mt->failed = 1;
		mt->fail = *e;
	}
	return -1;
}

int meter_failf(struct trace_metering *mt, const char *what, const char *why)
{
	struct common_err e;

	common_errf(&e, what, "%s", why);
	return meter_fail(mt, &e);
}

struct trace_metering *trace_metering_new(const struct trace_metering_opts *o)
{
	struct trace_metering *mt = common_xcalloc(1, sizeof *mt);

	mt->o = *o;
	for (int d = 0; d < TRACE_DIMS; d++)
		mt->limits[d] = o->limits ? o->limits[d] : UINT64_MAX;
	if (o->base)
		memcpy(mt->base, o->base, sizeof mt->base);
	mt->ncpu = (unsigned)(get_nprocs_conf() > 0 ? get_nprocs_conf() : 1);
	mt->meter = trace_meter_new(o->ns_dir, mt->limits[LEASE_DIM_NAMESPACE_BYTES], o->relay);
	mt->vec = common_xcalloc(1, sizeof *mt->vec);
	mt->maps = trace_maps_new();
	return mt;
}

unsigned trace_metering_classes(const struct trace_metering *mt)
{
	(void)mt;
	/* storage_write is exact: every call that may store stops (trace/meter/store.c);
	 * a large read stops, and near its bound every read (load_tick) */
	return TRACE_CLASS_STORE | TRACE_CLASS_LOAD;
}

void trace_metering_free(struct trace_metering *mt)
{
	if (!mt)
		return;
	meter_writer_stop(&mt->w);
	trace_meter_free(mt->meter);
	free(mt->vec);
	trace_maps_free(mt->maps);
	free(mt);
}

void trace_metering_usage(const struct trace_metering *mt, uint64_t u[TRACE_DIMS])
{
	uint64_t run[TRACE_DIMS];

	trace_meter_usage(mt->meter, run);
	for (int d = 0; d < TRACE_DIMS; d++) {
		/* peaks and the namespace are states; the rest accumulate across runs */
		if (d == LEASE_DIM_MEMORY || d == LEASE_DIM_TABLE_ELEMENTS ||
		    d == LEASE_DIM_NAMESPACE_BYTES)
			u[d] = run[d] > mt->base[d] ? run[d] : mt->base[d];
		else
			u[d] = mt->base[d] + run[d];
	}
}

static int metering_start(void *ctx, struct trace_supervisor *sv)
{
	struct trace_metering *mt = ctx;
	struct common_err e;

	mt->sv = sv;
	/* a one-shot run's close observes what a short run used: no observation before
	 * the usual interval (its bound is durable before the guest runs) */
	if (mt->o.final_in_close)
		mt->last_obs_ms = common_now_ms();
	/* tasks are learnt at stops and ticks */
	if (mt->o.relay && trace_relay_start(mt->o.relay, &e) < 0)
		return meter_fail(mt, &e);
	if (mt->o.store && mt->o.lease) { /* after the inspector's fork: a thread is not forked */
		mt->w.tracer = trace_sv_prio(sv);
		meter_writer_start(mt);
		int efd = mt->w.started ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;
		if (efd >= 0 && trace_sv_watch(sv, efd) < 0) {
			close(efd);
		} else if (efd >= 0) {
			pthread_mutex_lock(&mt->w.mu);
			mt->w.efd = efd;
			pthread_mutex_unlock(&mt->w.mu);
		}
	}
	/* a passed output bound is acted on at once, not at the next tick */
	if (mt->o.relay && trace_sv_watch(sv, trace_relay_wake_fd(mt->o.relay)) < 0)
		return meter_failf(mt, "relay", "cannot watch the output bound");
	if (meter_bound_hold(mt, sv, 1) < 0) /* durable before the guest runs */
		return -1;
	if (mt->o.run_claim && mt->w.started && !mt->held)
		meter_writer_post_bound(&mt->w, NULL, mt->bound, 0);
	uint64_t u[TRACE_DIMS];
	trace_metering_usage(mt, u);
	meter_fuel_tick(mt, sv, u);
	meter_load_tick(mt, sv, u);
	return 0;
}

static void metering_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
			   unsigned long flags)
{
	struct trace_metering *mt = ctx;

	(void)sv;
	/* parent is the creator's tgid: no /proc lookup for the child's */
	trace_meter_task_new(mt->meter, (flags & CLONE_THREAD) ? parent : child, child);
	if (!(flags & CLONE_THREAD))
		trace_maps_spawn(mt->maps, parent, child, !!(flags & CLONE_VM));
}

static int metering_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
			 const char *path)
{
	struct trace_metering *mt = ctx;

	(void)sv, (void)ppid, (void)path;
	trace_meter_guest_exec(mt->meter);
	trace_maps_forget(mt->maps, pid); /* a new address space */
	return 0;
}

static void metering_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	struct trace_metering *mt = ctx;
	struct trace_map_call mc;
	pid_t tgid = trace_meter_task_tgid(mt->meter, tid);

	(void)sv, (void)wstatus;
	trace_meter_task_exit(mt->meter, 0, tid);
	trace_maps_take(mt->maps, tid, &mc);
	if (tgid && !trace_meter_group_live(mt->meter, tgid))
		trace_maps_gone(mt->maps, tgid); /* its last thread: the process */
}

void trace_metering_host_write(struct trace_metering *mt, uint64_t bytes)
{
	trace_meter_host_write(mt->meter, bytes);
}

int trace_metering_trace_grew(struct trace_metering *mt, uint64_t bytes)
{
	uint64_t u[TRACE_DIMS];

	if (bytes == mt->trace_bytes) /* most events only fill the recorder's buffer */
		return 0;
	mt->trace_bytes = bytes;
	trace_meter_host_write(mt->meter, bytes);
	trace_metering_usage(mt, u);
	if (!mt->sv || u[LEASE_DIM_STORAGE_WRITE] <= mt->limits[LEASE_DIM_STORAGE_WRITE])
		return 0;
	return meter_observe(mt, mt->sv, 1) < 0 ? -1 : 0;
}

static int metering_tick(void *ctx, struct trace_supervisor *sv)
{
	struct trace_metering *mt = ctx;
	pid_t tids[4096];
	size_t n;

	if (mt->failed)
		return 1;
	uint64_t now = common_mono_us(), u[TRACE_DIMS];
	n = trace_sv_pids(sv, tids, sizeof tids / sizeof tids[0]);
	/* a tick for storage_read alone reads its counts only; the last tick (the tree
	 * gone) and one every FULL_EVERY_US sample everything */
	if (n > 0 && now < mt->full_due_us && !mt->fuel_near) {
		trace_meter_load_held(mt->meter);
		if (meter_bound_hold(mt, sv, 1) < 0)
			return 1;
		trace_metering_usage(mt, u);
		meter_fuel_tick(mt, sv, u);
		meter_load_tick(mt, sv, u);
		return meter_crossed(mt, u) >= 0 ? meter_observe(mt, sv, 0) != 0 : 0;
	}
	trace_metering_usage(mt, u);
	uint64_t lim = mt->limits[LEASE_DIM_FUEL], used = u[LEASE_DIM_FUEL];
	uint64_t fuel_us = used < lim ? (lim - used) / mt->ncpu / 2 : 0;
	mt->full_due_us = now + FULL_EVERY_US;
	mt->fuel_near = fuel_us < FULL_EVERY_US; /* then every tick is fuel's, and full */
	for (size_t i = 0; i < n && i < sizeof tids / sizeof tids[0]; i++)
		trace_meter_task_new(mt->meter, 0, tids[i]);
	trace_meter_peak_rss(mt->meter, trace_sv_peak_rss(sv));
	trace_meter_tick(mt->meter);
	trace_metering_usage(mt, u);
	meter_fuel_hold(mt, u);
	/* the tree gone: a one-shot run's close observes the last usage in its append */
	if (n == 0 && mt->o.final_in_close && meter_crossed(mt, u) < 0)
		return 0;
	return meter_observe(mt, sv, 0) != 0;
}

/* The writer met a closure or a failure: act on it now, not at the next tick. */
static int metering_fd(void *ctx, struct trace_supervisor *sv, int fd)
{
	struct trace_metering *mt = ctx;

	if (mt->o.relay && fd == trace_relay_wake_fd(mt->o.relay)) {
		uint64_t n;
		(void)!read(fd, &n, sizeof n);
		trace_meter_tick(mt->meter);
		if (meter_observe(mt, sv, 0) < 0)
			return -1;
		/* the relay used up what it may count: a bound past it, durable, first */
		if (trace_relay_waiting(mt->o.relay))
			meter_relay_allow(mt, 1);
		return 0;
	}
	if (!mt->w.started || fd != mt->w.efd)
		return 0;
	if (meter_writer_take(mt, sv) < 0)
		trace_sv_stop(sv, NULL);
	return 0;
}

/* Nothing is left of storage_read: the read reads nothing (its count arg cnt 0) and
 * the lease closes one byte past the bound. */
static int load_refuse(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st, int cnt)
{
	const uint64_t bound = mt->limits[LEASE_DIM_STORAGE_READ], base = mt->base[LEASE_DIM_STORAGE_READ];

	st->args[cnt] = 0;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return meter_failf(mt, "storage_read", "could not hold a read to the bound");
	trace_meter_load_refused(mt->meter, bound > base ? bound - base : 0);
	return meter_observe(mt, mt->sv, 1) < 0 ? -1 : 0;
}

/* A vectored call on a file or memory device, reserved: run per segment with the
 * lengths read at its stop (cap bytes), its result kept for its exit. */
static int vector_run(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		      uint64_t cap)
{
	int64_t r;

	if (trace_vector_run(g, st, mt->vec, cap, &r) < 0)
		return meter_failf(mt, "inspector", "could not run a vectored call per segment");
	trace_meter_vector_set(mt->meter, st->tid, TRACE_VECTOR_RESULT, r);
	st->want_exit = 1;
	return 0;
}

/* A vectored read on a file or memory device runs per segment; on any other
 * descriptor it is rewritten (trace_vector_stream), cap bytes at most. */
static int vector_hold(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		       int runs, uint64_t cap)
{
	int64_t r = 0;
	int way;

	if (runs)
		return vector_run(mt, g, st, cap);
	if ((way = trace_vector_stream(g, st, mt->vec, cap, &r)) < 0)
		return meter_failf(mt, "storage_read", "could not hold a vectored read to its reservation");
	trace_meter_vector_set(mt->meter, st->tid, way, r);
	st->want_exit = 1;
	return 0;
}

/* A vectored read, at its seccomp stop (where its iovec is read once, whatever the
 * every-call stop before it saw): held to what is left of storage_read's bound. */
static int load_vector(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		       uint64_t left)
{
	int runs = trace_vector_runs(g, st), rc = trace_vector_read(g, st, mt->vec);
	uint64_t ask = mt->vec->bytes;

	if (rc < 0) { /* the kernel would refuse it: so it is, before a rewrite */
		st->action = TRACE_DENIED;
		st->deny_errno = -rc;
		return 0;
	}
	if (ask > 0 && left == 0)
		return load_refuse(mt, g, st, trace_sys_arg(st->sys, TRACE_ARG_IOVCNT));
	if (ask > left)
		ask = left;
	for (size_t i = 0, done = 0; i < mt->vec->n && done < ask; done += mt->vec->v[i++].iov_len)
		if (meter_map_store_range(mt, g, (uint64_t)(uintptr_t)mt->vec->v[i].iov_base,
				    mt->vec->v[i].iov_len < ask - done ? mt->vec->v[i].iov_len : ask - done) < 0)
			return -1;
	trace_meter_load_begin(mt->meter, st->tid, ask);
	if (meter_bound_hold(mt, mt->sv, 0) < 0)
		return -1;
	return vector_hold(mt, g, st, runs, ask);
}

/* A read the load filter lets run unstopped: at most TRACE_LOAD_SMALL, not into
 * the held mappings' window, while far from the bound (every call stops within
 * it). Another class may stop it (--deterministic stops every read): it runs
 * unheld all the same, counted by rchar, without an exit stop. */
static int small_read(const struct trace_metering *mt, const struct trace_stop *st, uint64_t ask)
{
	int buf = trace_sys_arg(st->sys, TRACE_ARG_PTR);
	int windowed = buf >= 0 && trace_sys_arg(st->sys, TRACE_ARG_OUTFD) < 0 &&
		       st->args[buf] >= TRACE_MAP_WINDOW_LO && st->args[buf] < TRACE_MAP_WINDOW_HI;
	return trace_sys_arg(st->sys, TRACE_ARG_IOV) < 0 && ask <= TRACE_LOAD_SMALL && !windowed &&
	       mt->sv && !trace_sv_every_call_on(mt->sv);
}

/* A read that stops (a large one; near the bound, all): held to storage_read's
 * bound before it runs. What it may read is reserved; one that would cross is cut
 * to what is left, and with nothing left it reads nothing and the lease closes one
 * byte past the bound. A vectored read is cut and held at its seccomp stop. */
static int load_entry(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		      int seccomp)
{
	const struct trace_sysinfo *s = st->sys;
	int count = trace_sys_arg(s, TRACE_ARG_COUNT), iov = trace_sys_arg(s, TRACE_ARG_IOV);
	int cnt = count >= 0 ? count : trace_sys_arg(s, TRACE_ARG_IOVCNT);
	const uint64_t bound = mt->limits[LEASE_DIM_STORAGE_READ], base = mt->base[LEASE_DIM_STORAGE_READ];
	uint64_t ask, held, left;

	if (!s || !(s->classes & TRACE_CLASS_LOAD) || st->action == TRACE_DENIED || cnt < 0)
		return 0;
	if (trace_meter_load_pending(mt->meter, st->tid)) { /* reserved at its entry stop */
		st->want_exit = 1;
		return seccomp ? meter_map_read(mt, g, st) : 0;
	}
	if (iov >= 0 && !seccomp)
		return 0;
	ask = count >= 0 ? st->args[count] : 0;
	if (ask == 0 && iov < 0)
		return 0;
	if (seccomp && small_read(mt, st, ask))
		return 0;
	held = base + trace_meter_load_held(mt->meter);
	left = held < bound ? bound - held : 0;
	if (iov >= 0)
		return load_vector(mt, g, st, left);
	if (ask > left && left == 0)
		return load_refuse(mt, g, st, cnt);
	if (ask > left) {
		st->args[cnt] = left;
		if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
			return meter_failf(mt, "storage_read", "could not hold a read to the bound");
		ask = left;
	}
	if (seccomp && meter_map_read(mt, g, st) < 0)
		return -1;
	trace_meter_load_begin(mt->meter, st->tid, ask);
	if (meter_bound_hold(mt, mt->sv, 0) < 0)
		return -1;
	st->want_exit = 1;
	return 0;
}

static int metering_call(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_metering *mt = ctx;

	if (mt->failed)
		return -1;
	trace_meter_task_new(mt->meter, st->pid, st->tid);
	return load_entry(mt, g, st, 0);
}

/* A call that moves bytes from one descriptor into a file (sendfile, splice,
 * copy_file_range) asks for at most its count, and cp asks ~2^63 and lets the kernel
 * stop at the end of the file: past what is left of storage_write it is cut to what
 * is left (a short copy, which the kernel allows), its read reservation with it. */
static int store_cut(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		     struct trace_store_call *c, uint64_t left)
{
	int count = trace_sys_arg(st->sys, TRACE_ARG_COUNT);

	if (!left || c->bytes <= left || count < 0 || trace_sys_arg(st->sys, TRACE_ARG_INFD) < 0)
		return 0;
	st->args[count] = c->bytes = left;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return meter_failf(mt, "storage_write", "could not hold a copy to the bound");
	if (trace_meter_load_pending(mt->meter, st->tid))
		trace_meter_load_begin(mt->meter, st->tid, left);
	return 0;
}

/* write or pwrite64: its count in a register, bytes from memory only (not another
 * descriptor's, whose read the exit settles). */
static int plain_write(const struct trace_stop *st)
{
	return trace_sys_arg(st->sys, TRACE_ARG_COUNT) >= 0 && trace_sys_arg(st->sys, TRACE_ARG_INFD) < 0 &&
	       trace_sys_arg(st->sys, TRACE_ARG_IOV) < 0 && trace_sys_arg(st->sys, TRACE_ARG_OUTFD) >= 0;
}

/* A call that may store on a file: reserved before it runs, or, when it would take
 * storage_write past its bound, refused and charged whole (the lease closes on it);
 * likewise one that could take namespace_bytes past its bound. */
static int store_entry(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st)
{
	const uint64_t bound = mt->limits[LEASE_DIM_STORAGE_WRITE];
	uint64_t held = mt->base[LEASE_DIM_STORAGE_WRITE] + trace_meter_store_held(mt->meter);
	struct trace_store_call c;

	if (st->action == TRACE_DENIED)
		return 0;
	if (!trace_store_entry(g, st, &c, mt->vec))
		return c.mapping ? meter_map_entry(mt, g, st, &c) : 0;
	if (c.refuse) { /* the kernel would refuse it: so it is, before a rewrite */
		st->action = TRACE_DENIED;
		st->deny_errno = c.refuse;
		return 0;
	}
	if (store_cut(mt, g, st, &c, held < bound ? bound - held : 0) < 0)
		return -1;
	if (held > bound || c.bytes > bound - held) {
		trace_meter_store_refused(mt->meter, c.bytes);
	} else {
		trace_meter_store_begin(mt->meter, st->tid, c.bytes, c.by_result);
		if (trace_meter_ns_reserve(mt->meter, st->tid, trace_meter_ns_charge(mt->meter, &c)) == 0) {
			if (meter_bound_hold(mt, mt->sv, 0) < 0)
				return -1;
			if (c.vector)
				return vector_run(mt, g, st, c.bytes);
			/* a plain write settles at its thread's next stop, without an exit stop */
			st->want_exit = !(plain_write(st) && trace_meter_store_lazy(mt->meter, st->tid));
			return 0;
		}
		trace_meter_store_end(mt->meter, st->tid, -EDQUOT); /* it stores nothing */
	}
	/* storage_write or namespace_bytes would cross its bound: the lease closes */
	st->action = TRACE_DENIED;
	st->deny_errno = EDQUOT;
	return meter_observe(mt, mt->sv, 1) < 0 ? -1 : 0;
}

static int metering_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_metering *mt = ctx;
	struct trace_stop now;
	int64_t stale;

	/* a vectored call's way whose exit stop another took (a snapshot's interrupt) is void */
	trace_meter_vector_take(mt->meter, st->tid, &stale);
	if (mt->failed)
		return -1;
	trace_meter_task_new(mt->meter, st->pid, st->tid);
	trace_meter_store_stopped(mt->meter, st->tid); /* its last write is over */
	if (st->action == TRACE_DENIED) /* the inspector refused it: it moves nothing */
		return 0;
	/* metered as the call that runs: the inspector may have changed it, and the
	 * kernel does not stop it again */
	now = *st;
	now.sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	if (!now.sys || !(now.sys->classes & (TRACE_CLASS_STORE | TRACE_CLASS_LOAD)))
		return 0;
	int rc = load_entry(mt, g, &now, 1);
	if (rc == 0 && (now.sys->classes & TRACE_CLASS_STORE))
		rc = store_entry(mt, g, &now);
	st->action = now.action;
	st->deny_errno = now.deny_errno;
	st->want_exit |= now.want_exit;
	return rc;
}

/* A vectored call held at its entry, at its exit: the guest's own registers back
 * (only rax, rcx and r11 change in a syscall) and the way's result. A restart the
 * kernel is about to make (-ERESTART*: a signal came) restarts the guest's own call;
 * a wait that saw a datagram queued issues the call again, to a fresh stop. */
static int vector_exit(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st)
{
	struct user_regs_struct r;
	int64_t res;
	int way = trace_meter_vector_take(mt->meter, st->tid, &res);

	if (!way)
		return 0;
	if (trace_guest_get_regs(g, &r) < 0)
		return meter_failf(mt, "inspector", "could not read the registers at a call's exit");
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
		return meter_failf(mt, "inspector", "could not restore a vectored call's registers");
	st->result = res;
	return 0;
}

static int metering_exit(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_metering *mt = ctx;
	struct trace_stop now;
	uint64_t u[TRACE_DIMS];

	if (vector_exit(mt, g, st) < 0)
		return -1;
	now = *st; /* with the result the vectored call returns */
	now.sys = st->arch_ok ? trace_sys_by_nr(st->nr) : NULL;
	trace_meter_store_end(mt->meter, st->tid, trace_store_result(g, &now));
	trace_meter_load_end(mt->meter, st->tid);
	meter_map_exit(mt, &now);
	/* a guest that raced its own iovec past its reservation closes now */
	trace_metering_usage(mt, u);
	if (u[LEASE_DIM_STORAGE_WRITE] > mt->limits[LEASE_DIM_STORAGE_WRITE] ||
	    u[LEASE_DIM_STORAGE_READ] > mt->limits[LEASE_DIM_STORAGE_READ])
		return meter_observe(mt, mt->sv, 1) < 0 ? -1 : 0;
	return 0;
}

int trace_metering_finish(struct trace_metering *mt, struct common_err *e)
{
	if (mt->o.relay)
		trace_relay_finish(mt->o.relay);
	trace_meter_sample(mt->meter);
	int rc = 0;
	if (mt->o.final_in_close && mt->o.store && mt->o.lease && !mt->held) {
		/* what was posted is written; the last usage goes in the close's append,
		 * and until it the run's bound stands for it */
		meter_writer_stop(&mt->w);
		rc = meter_writer_take(mt, NULL) < 0 ? -1 : 0;
		mt->final_due = rc == 0 && !mt->closed[0];
	} else {
		rc = !mt->closed[0] ? meter_observe(mt, NULL, 1) : 0;
		if (rc == 0 && !mt->closed[0])
			rc = meter_bound_final(mt);
		meter_writer_stop(&mt->w);
	}
	if (rc < 0) {
		*e = mt->fail;
		return -1;
	}
	return 0;
}

int trace_metering_final(const struct trace_metering *mt, uint64_t usage[TRACE_DIMS])
{
	if (!mt || !mt->final_due)
		return 0;
	trace_metering_usage(mt, usage);
	return 1;
}

struct trace_layer trace_meter_layer(struct trace_metering *mt)
{
	if (!mt)
		return (struct trace_layer){ 0 };
	return (struct trace_layer){
		.ctx = mt, .on_start = metering_start, .on_entry = metering_entry,
		.on_call = metering_call, .on_exit = metering_exit, .on_exec = metering_exec,
		.on_spawn = metering_spawn,
		.on_proc_exit = metering_proc_exit, .on_tick = metering_tick, .on_fd = metering_fd,
		.on_fault = meter_map_fault,
	};
}
