/* Inspection (SPEC §6.3), the layer TRACE_LAYER_INSPECT: every trapped syscall
 * meets the policy, the co-process and the C callback at its seccomp stop, before
 * the meter (TRACE_LAYER_METER) holds the call that will run to the bounds.
 *
 * Temporary guest memory (the C API's views): an mmap(PROT_READ) injected into the
 * stopped thread, filled through /proc/PID/mem, unmapped by a munmap injected at the
 * syscall's exit stop; decided path strings go to sealed pages (pathpage.c). Host
 * views live in one arena that is PROT_NONE outside callbacks, so a stale view faults. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "trace/inspect/inspect-internal.h"
#include "trace/tracee/tracee.h"

#define ARENA_SIZE (1u << 20)    /* host view bytes per callback */
#define MAPS_PER_CALL 8

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

struct trace_inspector {
	struct trace_inspector_opts o;
	struct trace_coproc *coproc;
	struct inspect_pages *pages; /* decided paths' sealed pages */
	int failed;
	struct common_err fail;
	uint8_t *arena;
	size_t arena_used;
	int arena_rw;
	unsigned classes;
	char rewritten[2][4096]; /* the last call's new path strings, for the recorder */
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

int trace_inspector_new(const struct trace_inspector_opts *o, struct trace_inspector **out,
			struct common_err *e)
{
	struct trace_inspector *in = common_xcalloc(1, sizeof *in);

	*out = NULL;
	in->o = *o;
	in->arena = mmap(NULL, ARENA_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (in->arena == MAP_FAILED) {
		free(in);
		return common_errno(e, errno, "inspector arena");
	}
	in->pages = inspect_pages_new();
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
	trace_coproc_stop(in->coproc);
	inspect_pages_free(in->pages);
	munmap(in->arena, ARENA_SIZE);
	free(in);
}

const struct common_err *trace_inspector_failure(const struct trace_inspector *in)
{
	return in->failed ? &in->fail : NULL;
}

static int inspector_start(void *ctx, struct trace_supervisor *sv)
{
	struct trace_inspector *in = ctx;
	struct common_err e;

	(void)sv;
	if (in->o.inspect_exec &&
	    trace_coproc_start(in->o.inspect_exec, in->o.inspect_timeout_ms, &in->coproc, &e) < 0)
		return fail(in, &e);
	return 0;
}

static void inspector_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	struct trace_inspector *in = ctx;

	(void)wstatus;
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

/* The policy's decision, applied: a verdict (0 allow, errno, -1 failed: *e); *inspected
 * set when a rule matched. */
static int policy_entry(struct trace_inspector *in, struct sbx_call *call, struct trace_stop *st,
			int *inspected, struct common_err *e)
{
	struct trace_decision d;
	int verdict = 0, r;

	memset(&d, 0, sizeof d);
	if (trace_policy_decide(in->o.policy, st, &d) == 1) {
		*inspected = 1;
		if (d.record)
			st->want_exit = st->record = 1;
		if (d.deny_errno)
			verdict = d.deny_errno;
		else if ((r = apply(in, call, &d)) < 0)
			verdict = -1, common_errno(e, -r, "policy rule %s: rewriting %s", d.rule,
						   call->name ? call->name : "syscall");
	}
	trace_decision_clear(&d);
	return verdict;
}

/* The C callback's verdict (0 allow, errno, -1 failed: *e). */
static int callback_entry(struct trace_inspector *in, struct sbx_call *call, struct common_err *e)
{
	int verdict = in->o.fn(call, in->o.fn_arg);

	if (verdict < 0)
		common_errf(e, "inspector", "the callback failed on %s",
			    call->name ? call->name : "a syscall");
	return verdict > 4095 ? EINVAL : verdict;
}

/* The policy, the co-process and the callback in turn, while each allows: the
 * verdict; *inspected set when one of them saw the call. */
static int inspect_decide(struct trace_inspector *in, struct sbx_call *call, struct trace_stop *st,
			  const char real[2][PATH_MAX], int *inspected, struct common_err *e)
{
	unsigned cls = st->sys ? st->sys->classes : 0;
	int verdict = 0;

	if (in->o.policy)
		verdict = policy_entry(in, call, st, inspected, e);
	if (verdict == 0 && in->coproc && (cls & coproc_classes(in))) {
		*inspected = 1;
		verdict = coproc_entry(in, call, st, real, e);
	}
	if (verdict == 0 && in->o.fn && (cls & (in->o.fn_classes ? in->o.fn_classes :
						TRACE_CLASS_FILE))) {
		*inspected = 1;
		verdict = callback_entry(in, call, e);
	}
	return verdict;
}

/* The verdict carried out at st, c's stop: denied (-1: the inspector failed, *e), or
 * the call as decided (ruled: a rule changed it; flushed: the views' copy, -errno). */
static int inspect_settle(struct call_priv *c, struct trace_stop *st, const struct sbx_call *call,
			  int verdict, int flushed, int ruled, struct common_err *e)
{
	struct trace_inspector *in = c->in;

	if (verdict < 0) {
		unmap_now(in, c->g, 0, c);
		/* the call must not run: the guest is stopped, nothing is written back */
		st->action = TRACE_DENIED;
		st->deny_errno = EPERM;
		return fail(in, e);
	}
	if (flushed < 0) {
		common_errno(e, -flushed, "writing temporary guest memory");
		return fail(in, e);
	}
	if (verdict > 0) {
		unmap_now(in, c->g, 0, c);
		st->action = TRACE_DENIED;
		st->deny_errno = verdict;
		return 0;
	}
	if (call->nr != st->nr || memcmp(call->args, st->args, sizeof call->args) != 0) {
		if (trace_guest_set_syscall(c->g, call->nr, call->args) < 0)
			return failf(in, "inspector", "could not change the syscall");
	}
	if (ruled) {
		st->action = TRACE_REWRITTEN;
		for (int k = 0; k < 2; k++)
			st->rewrite[k] = in->rewritten[k][0] ? in->rewritten[k] : NULL;
		st->nr = call->nr;
		memcpy(st->args, call->args, sizeof st->args);
	}
	if (c->nv || c->sealed)
		st->want_exit = 1;
	return 0;
}

static int inspect_entry(struct trace_inspector *in, struct trace_guest *g, struct trace_stop *st)
{
	struct call_priv c = {.in = in, .g = g, .st = st, .tid = st->tid};
	struct sbx_call call = {
		.name = st->sys ? st->sys->name : NULL, .nr = st->nr,
		.path = {st->path[0], st->path[1]}, .pid = st->pid, .tid = st->tid, .priv = &c,
	};
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
	memcpy(call.args, st->args, sizeof call.args);
	/* A pending page of this thread belongs to a call that never came back. */
	if (*trace_guest_slot(g, TRACE_LAYER_INSPECT))
		pages_of(g)->n = 0;
	inspect_pages_forget(in->pages, st->tid);
	in->rewritten[0][0] = in->rewritten[1][0] = 0;
	in->arena_used = 0;
	if (verdict == 0)
		verdict = inspect_decide(in, &call, st, real, &inspected, &e);
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
	return inspect_settle(&c, st, &call, verdict, r, ruled, &e);
}

static int inspector_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_inspector *in = ctx;

	if (inspect_entry(in, g, st) < 0)
		return -1;
	int flight = 0, err = inspect_pages_remap_errno(in->pages, st, &flight);
	if (err) { /* it would take a decided path's page away */
		st->action = TRACE_DENIED;
		st->deny_errno = err;
		return 0;
	}
	st->want_exit |= flight; /* in flight until its exit */
	return 0;
}

static int inspector_exit(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_inspector *in = ctx;

	unmap_now(in, g, 1, NULL);
	inspect_pages_call_done(in->pages, st->tid);
	return 0;
}

struct trace_layer trace_inspector_layer(struct trace_inspector *in)
{
	if (!in)
		return (struct trace_layer){ 0 };
	return (struct trace_layer){
		.ctx = in, .on_start = inspector_start, .on_entry = inspector_entry,
		.on_exit = inspector_exit, .on_proc_exit = inspector_proc_exit,
		.slot_free = inspector_slot_free,
	};
}
