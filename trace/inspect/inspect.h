/* trace/inspect: the inspector (SPEC §6.3): policy rules, the co-process and the
 * C callback at every stop; state transport. */
#ifndef SBX_TRACE_INSPECT_H
#define SBX_TRACE_INSPECT_H

#include "trace/sv/sv.h"
#include "trace/trace.h"

/* State transport, host side (SPEC §6.4): a memfd at guest fd TRACE_STATE_FD. */
#define TRACE_STATE_MAX (1ull << 30) /* largest input or result image, bytes */
struct trace_state {
	int memfd;           /* -1: no transport; dup it to guest fd TRACE_STATE_FD */
	uint64_t result_off; /* kept by the host: 8 + input size, never read back */
	struct common_outfile out; /* the output's directory, opened before the guest starts */
};
/* Create the memfd holding [u64 LE 8+n][input n bytes]; in_path NULL: empty input. */
int trace_state_open(struct trace_state *st, const char *in_path, struct common_err *e);
/* Once every guest is gone: seal, check every length against the file size, copy
 * the result image to out_path (atomic, durable; NULL: check only). Missing, empty,
 * truncated, oversized or overlapping results are errors and write nothing. */
int trace_state_finish(struct trace_state *st, const char *out_path, struct common_err *e);
/* Open out_path's directory now (before the guest starts): finish writes beneath it. */
int trace_state_output(struct trace_state *st, const char *out_path, struct common_err *e);
void trace_state_close(struct trace_state *st);

/* What a policy rule or a co-process decided for one call. */
struct trace_decision {
	int deny_errno;    /* > 0: deny with this errno */
	int set_nr;
	long nr;
	unsigned set_args; /* bit i: args[i] replaced */
	uint64_t args[6];
	char *path[2];     /* replacement strings for the path arguments (malloc'd) or NULL */
	int record;        /* record this call and its result in the trace */
	char rule[64];     /* the policy rule that decided, "" if none */
};
void trace_decision_clear(struct trace_decision *d); /* frees the paths, zeroes */

/* --policy FILE: JSON rules, first match wins (see sbx-run(1)). */
struct trace_policy;
int trace_policy_load(const char *path, struct trace_policy **out, struct common_err *e);
int trace_policy_parse(const char *buf, size_t len, const char *name,
		       struct trace_policy **out, struct common_err *e);
void trace_policy_free(struct trace_policy *p);
/* 1 when some rule can match this syscall (so the filter must trap it). */
int trace_policy_traps(const struct trace_policy *p, const struct trace_sysinfo *sys);
/* Fill d for one stop; 1 when a rule matched, 0 when none did (allow). */
int trace_policy_decide(const struct trace_policy *p, const struct trace_stop *st,
			struct trace_decision *d);
/* Whether the policy decides on path strings (the inspector then keeps the string
 * it decided on out of the guest's reach). */
int trace_policy_has_paths(const struct trace_policy *p);

/* --inspect-exec PROG: a co-process answering one JSON decision per JSON event line
 * (see sbx-run(1)); run through /bin/sh -c outside the sandbox. */
#define TRACE_COPROC_TIMEOUT_MS 2000
struct trace_coproc;
int trace_coproc_start(const char *prog, int timeout_ms, struct trace_coproc **c,
		       struct common_err *e);
/* One round trip; real: each path argument resolved inside the guest's root, or
 * NULL (either may be NULL). -1 (e filled) for a malformed, late or missing reply. */
int trace_coproc_ask(struct trace_coproc *c, const struct trace_stop *st, const char *const real[2],
		     struct trace_decision *d, struct common_err *e);
void trace_coproc_stop(struct trace_coproc *c);
/* The codec alone (unit tests): an event line without newline (malloc'd), a reply. */
char *trace_coproc_event(uint64_t id, const struct trace_stop *st, const char *const real[2]);
int trace_coproc_parse_reply(const char *line, size_t len, uint64_t id,
			     struct trace_decision *d, struct common_err *e);

/* The inspector, a layer of the supervisor: --policy, --inspect-exec and the C
 * callback. */
struct trace_inspector_opts {
	const struct trace_policy *policy;
	const char *inspect_exec;       /* co-process command, NULL: none */
	unsigned inspect_classes;       /* classes the co-process sees, 0: TRACE_CLASS_FILE */
	int inspect_timeout_ms;         /* 0: TRACE_COPROC_TIMEOUT_MS */
	sbx_inspect_fn fn;              /* C callback, NULL: none */
	void *fn_arg;
	unsigned fn_classes;            /* classes the callback sees, 0: TRACE_CLASS_FILE */
};
struct trace_inspector;
int trace_inspector_new(const struct trace_inspector_opts *o, struct trace_inspector **in,
			struct common_err *e);
void trace_inspector_free(struct trace_inspector *in);
/* Classes the filter must trap for it (add to trace_config.trace_classes). */
unsigned trace_inspector_classes(const struct trace_inspector *in);
/* The inspector as the layer TRACE_LAYER_INSPECT (a zeroed layer for NULL). */
struct trace_layer trace_inspector_layer(struct trace_inspector *in);
/* An inspector failure (policy rewrite, co-process, callback), or NULL. */
const struct common_err *trace_inspector_failure(const struct trace_inspector *in);

#endif
