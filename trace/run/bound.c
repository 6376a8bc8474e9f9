/* sbx-run's bounded, inspected runs: --policy, --inspect-exec, --inspect-timeout,
 * --state-in and --state-out, the lease's limits, the output relay, the memory
 * cgroup and the inspector wired into one run (SPEC §4.3, §6.3, §6.4). */
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
	struct trace_state state;
	struct trace_cgroup *cg;
	uint64_t limits[TRACE_DIMS], base[TRACE_DIMS];
};

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
	/* without a cgroup a fast allocator passes the bound between two samples: only
	 * an invoker who says so runs that way */
	const char *env = getenv("SBX_MEMORY_SAMPLED");
	int sampled = o->memory_sampled || (env && strcmp(env, "1") == 0);
	struct common_err ce;
	if (!(b->cg = trace_cgroup_open(&ce)) && !sampled) {
		*e = ce;
		return -1;
	}
	return 0;
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

	if (trace_inspector_lease_bounds(s, id, b->limits, b->base, e) < 0)
		return -1;
	if (trace_relay_open(&b->relay, 1, 2, b->limits[LEASE_DIM_OUTPUT_BYTES],
			     b->limits[LEASE_DIM_OUTPUT_VALUES], e) < 0)
		return -1;
	io.store = s;
	io.lease = id;
	io.limits = b->limits;
	io.base = b->base;
	io.ns_dir = ns;
	io.policy = b->policy;
	io.inspect_exec = b->o->inspect_exec;
	io.inspect_timeout_ms = b->o->inspect_timeout_ms;
	io.inspect_classes = b->o->inspect_classes;
	io.relay = b->relay;
	io.run_claim = *run_claim >= 0 ? run_claim : NULL;
	if (trace_inspector_new(&io, &b->ins, e) < 0)
		return -1;
	/* the kernel holds memory in the run's cgroup (none: --memory-sampled) */
	if (b->cg) {
		if (trace_cgroup_limit(b->cg, b->limits[LEASE_DIM_MEMORY], e) < 0)
			return -1;
		trace_inspector_cgroup(b->ins, b->cg);
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

int trace_bound_finish(struct trace_bound *b, const struct trace_result *res,
		       const char **closed, struct common_err *e)
{
	const struct common_err *f;

	*closed = NULL;
	if (!b->ins)
		return 0;
	if (trace_inspector_finish(b->ins, e) < 0)
		return -1;
	*closed = trace_inspector_closed(b->ins);
	if ((f = trace_inspector_failure(b->ins))) {
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

	if (!b || !b->ins || !json_is_object(u))
		return;
	trace_inspector_usage(b->ins, v);
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
	trace_cgroup_free(b->cg);
	trace_relay_free(b->relay);
	trace_policy_free(b->policy);
	trace_state_close(&b->state);
	free(b);
}
