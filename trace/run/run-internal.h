/* trace/run private: what run.c asks of bound.c. */
#ifndef SBX_TRACE_RUN_INTERNAL_H
#define SBX_TRACE_RUN_INTERNAL_H

#include "trace/inspect/inspect.h"
#include "trace/meter/meter.h"

/* sbx-run's bound, inspected runs (trace/run/bound.c): --policy, --inspect-exec,
 * --inspect-timeout, --state-in, --state-out, metering and closure of the lease. */
struct trace_bound;
struct trace_config;
struct trace_result;
/* Before any lease change: load the policy, check --state-in. *b is set even on error. */
int trace_bound_open(const struct trace_run_opts *o, struct trace_bound **b,
		     struct common_err *e);
/* With the lease known: limits, relay, metering, inspector, state fd and rlimits into cfg;
 * run_claim (lease_run_claim's, or -1) keeps the bound of what the guest used. */
int trace_bound_attach(struct trace_bound *b, struct lease_store *s, const char *id,
		       const char *ns, const int *run_claim, struct trace_config *cfg,
		       struct common_err *e);
struct trace_inspector *trace_bound_inspector(const struct trace_bound *b);
struct trace_metering *trace_bound_metering(const struct trace_bound *b);
/* After trace_run: final observation; *closed names the dimension that closed the
 * lease; -1 on an inspector or metering failure or a bad state result (nothing written back). */
int trace_bound_finish(struct trace_bound *b, const struct trace_result *res,
		       const char **closed, struct common_err *e);
void trace_bound_result(const struct trace_bound *b, json_t *result); /* usage totals */
void trace_bound_free(struct trace_bound *b);

#endif
