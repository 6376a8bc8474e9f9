/* sbx-run's bounded, inspected runs: --policy, --inspect-exec, --inspect-timeout,
 * --state-in and --state-out, the lease's limits, the output relay, the memory
 * cgroup, metering and the inspector wired into one run (SPEC §4.3, §6.3, §6.4). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/run/run-internal.h"

struct trace_bound {
	const struct trace_run_opts *o;
	struct trace_policy *policy;
	struct trace_relay *relay;
	struct trace_inspector *ins;
	struct trace_metering *meter;
	struct trace_state state;
	struct trace_cgroup *cg;
	uint64_t limits[TRACE_DIMS], base[TRACE_DIMS];
};

static int env_is_1(const char *name)
{
	const char *v = getenv(name);
	return v && strcmp(v, "1") == 0;
}

/* Who holds memory: the run's cgroup, or where none can be made (an unprivileged
 * invoker on cgroup v1, a v2 cgroup not delegated) the meter's samples, where a
 * fast allocator may pass the bound between two samples. A first run must run:
 * sampled is the default there, said once; --memory-exact (SBX_MEMORY_EXACT=1)
 * refuses instead, --memory-sampled (SBX_MEMORY_SAMPLED=1) asks for it. */
static int memory_hold(const struct trace_run_opts *o, struct trace_bound *b, struct common_err *e)
{
	struct common_err ce;
	if (o->memory_exact && o->memory_sampled)
		return common_errf(e, "--memory-exact", "conflicts with --memory-sampled");
	int exact = o->memory_exact || (!o->memory_sampled && env_is_1("SBX_MEMORY_EXACT"));
	int asked = o->memory_sampled || env_is_1("SBX_MEMORY_SAMPLED");
	if ((b->cg = trace_cgroup_open(&ce)))
		return 0;
	if (exact)
		return common_errf(e, "--memory-exact", "%s: %s", ce.what, ce.why);
	if (!asked)
		common_warnf("memory: held by samples, not by a cgroup (memory_held_by: samples; "
			     "--memory-exact refuses instead): %s", ce.why);
	return 0;
}

int trace_bound_open(const struct trace_run_opts *o, struct trace_bound **out,
		     struct common_err *e)
{
	struct trace_bound *b = common_xcalloc(1, sizeof *b);

	*out = b;
	b->o = o;
	b->state.memfd = -1;
	/* everything that can be refused is refused before the lease or guest moves */
	if (o->policy && trace_policy_load(o->policy, &b->policy, e) < 0)
		return -1;
	if ((o->state_in || o->state_out) && trace_state_open(&b->state, o->state_in, e) < 0)
		return -1;
	/* the result is copied out at the end, beneath the directory opened now */
	if (o->state_out && trace_state_output(&b->state, o->state_out, e) < 0)
		return -1;
	return memory_hold(o, b, e);
}


/* RLIMIT_NOFILE above the bound by one, so exceeding it is observable; capped by
 * the kernel's nr_open. */
static uint64_t nofile_cap(uint64_t bound)
{
	char buf[32];
	uint64_t nr_open = 1048576;
	int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		if (n > 0) {
			buf[n] = 0;
			nr_open = strtoull(buf, NULL, 10);
		}
		close(fd);
	}
	return bound + 1 >= nr_open ? 0 : bound + 1;
}

int trace_bound_attach(struct trace_bound *b, struct lease_store *s, const char *id,
		       const char *ns, const int *run_claim, struct trace_config *cfg,
		       struct common_err *e)
{
	struct trace_inspector_opts io = {0};
	struct trace_metering_opts mo = {0};

	if (trace_metering_lease_bounds(s, id, b->limits, b->base, e) < 0)
		return -1;
	if (trace_relay_open(&b->relay, 1, 2, b->limits[LEASE_DIM_OUTPUT_BYTES],
			     b->limits[LEASE_DIM_OUTPUT_VALUES], e) < 0)
		return -1;
	mo.store = s;
	mo.lease = id;
	mo.limits = b->limits;
	mo.base = b->base;
	mo.ns_dir = ns;
	mo.relay = b->relay;
	mo.run_claim = *run_claim >= 0 ? run_claim : NULL;
	/* a one-shot lease closes right after: its last observation joins that commit
	 * (state output and chains decide on the closure before it) */
	mo.final_in_close = b->o->ephemeral && !b->o->state_out && !b->o->link;
	b->meter = trace_metering_new(&mo);
	io.policy = b->policy;
	io.inspect_exec = b->o->inspect_exec;
	io.inspect_timeout_ms = b->o->inspect_timeout_ms;
	io.inspect_classes = b->o->inspect_classes;
	if (trace_inspector_new(&io, &b->ins, e) < 0)
		return -1;
	/* the kernel holds memory in the run's cgroup (none: --memory-sampled) */
	if (b->cg) {
		if (trace_cgroup_limit(b->cg, b->limits[LEASE_DIM_MEMORY], e) < 0)
			return -1;
		trace_metering_cgroup(b->meter, b->cg);
		cfg->cgroup = b->cg;
	}
	trace_relay_child_fds(b->relay, &cfg->stdout_fd, &cfg->stderr_fd);
	cfg->state_fd = b->state.memfd;
	/* memory is held on the pages really used (the meter), never on address space:
	 * JVMs, sanitizers, Go and V8 reserve far more than they touch; a tmpfs of the
	 * run holds at most the bound (its pages count as memory too) */
	if (b->limits[LEASE_DIM_MEMORY] < (1ull << 40))
		cfg->tmpfs_bytes = b->limits[LEASE_DIM_MEMORY] ? b->limits[LEASE_DIM_MEMORY] : 4096;
	cfg->rlimit_nofile = nofile_cap(b->limits[LEASE_DIM_TABLE_ELEMENTS]);
	return 0;
}

struct trace_inspector *trace_bound_inspector(const struct trace_bound *b)
{
	return b ? b->ins : NULL;
}

struct trace_metering *trace_bound_metering(const struct trace_bound *b)
{
	return b ? b->meter : NULL;
}

void trace_bound_std_fds(const struct trace_bound *b, int fds[3])
{
	for (int k = 0; k < 3; k++)
		fds[k] = k;
	if (b && b->relay)
		trace_relay_read_fds(b->relay, &fds[1], &fds[2]);
}

int trace_bound_finish(struct trace_bound *b, const struct trace_result *res,
		       const char **closed, struct common_err *e)
{
	const struct common_err *f;

	*closed = NULL;
	if (!b->meter)
		return 0;
	if (trace_metering_finish(b->meter, e) < 0) {
		if ((f = trace_inspector_failure(b->ins)))
			*e = *f; /* the inspector's failed the run first */
		return -1;
	}
	*closed = trace_metering_closed(b->meter);
	if ((f = trace_inspector_failure(b->ins)) || (f = trace_metering_failure(b->meter))) {
		*e = *f;
		return -1;
	}
	/* state goes back only from a guest that finished on its own with status 0 */
	if (b->o->state_out && !*closed && res->exited && res->status == 0 &&
	    trace_state_finish(&b->state, b->o->state_out, e) < 0)
		return -1;
	return 0;
}

void trace_bound_result(const struct trace_bound *b, json_t *result)
{
	json_t *u = json_object_get(result, "usage");
	uint64_t v[TRACE_DIMS];

	if (!b || !b->meter || !json_is_object(u))
		return;
	trace_metering_usage(b->meter, v);
	for (int d = 0; d < TRACE_DIMS; d++)
		json_object_set_new(u, lease_dim_name((enum lease_dim)d), json_integer((json_int_t)v[d]));
	json_object_set_new(result, "memory_held_by", json_string(b->cg ? "cgroup" : "samples"));
	json_object_set_new(result, "fuel_held_by",
			    json_string(trace_cgroup_holds_fuel(b->cg) ? "cgroup" : "samples"));
}

void trace_bound_free(struct trace_bound *b)
{
	if (!b)
		return;
	trace_inspector_free(b->ins);
	trace_metering_free(b->meter);
	trace_cgroup_free(b->cg);
	trace_relay_free(b->relay);
	trace_policy_free(b->policy);
	trace_state_close(&b->state);
	free(b);
}
