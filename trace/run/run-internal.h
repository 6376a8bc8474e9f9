/* trace/run private: what run.c asks of program.c and bound.c. */
#ifndef SBX_TRACE_RUN_INTERNAL_H
#define SBX_TRACE_RUN_INTERNAL_H

#include "trace/inspect/inspect.h"
#include "trace/meter/meter.h"

/* sbx-run's program (trace/run/program.c). */
struct stat;
/* PROGRAM as the host resolves it: a path, or a name searched in $PATH; NULL with
 * e and *exit_code (SBX_EXIT_NOTFOUND, SBX_EXIT_NOEXEC) when there is none. */
char *trace_program_resolve(const char *prog, int *exit_code, struct common_err *e);
/* The image, opened once, above 0-2 (a closed stdin keeps them for what they are). */
int trace_image_open(const char *path);
/* A #! script named as the program (what the kernel would do on its exec). */
struct trace_script {
	char *path;                  /* its host path, NULL when the program is an ELF */
	char sha[COMMON_SHA256_HEX];
	char **argv;                 /* interpreter, its argument, the script, the arguments */
};
/* When *image_fd is a script: hash it, and make its interpreter the image
 * (*image, *image_fd, *st) and argv the interpreter's; 0 (also for an ELF), or
 * -1 with e set. */
int trace_script_open(struct trace_script *sc, char **image, int *image_fd, struct stat *st,
		      char *const *argv, struct common_err *e);
void trace_script_free(struct trace_script *sc);
/* Where the guest starts: --chdir, else the invoker's directory where a bind
 * shows it, else /ns (NULL). Malloc'd. */
char *trace_run_start_dir(const struct trace_run_opts *o);

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
/* What the guest was handed as its fds 0-2, as this process holds it: our own
 * stdin, the output relay's read ends (our stdout and stderr without one). */
void trace_bound_std_fds(const struct trace_bound *b, int fds[3]);
/* After trace_run: final observation; *closed names the dimension that closed the
 * lease; -1 on an inspector or metering failure or a bad state result (nothing written back). */
int trace_bound_finish(struct trace_bound *b, const struct trace_result *res,
		       const char **closed, struct common_err *e);
void trace_bound_result(const struct trace_bound *b, json_t *result); /* usage totals */
void trace_bound_free(struct trace_bound *b);

/* --deterministic across snapshots (trace/run/determ.c). */
struct trace_determ;
struct trace_rec;
/* The run's determinism: from the lease, or a restore's record (o->determ_resume). */
struct trace_determ *trace_run_determ_open(struct lease_store *s, const char *id, const json_t *rec,
					   const json_t *receipts, const struct trace_run_opts *o,
					   struct common_err *e);
/* 1 from --snapshot-at-step's step on (at an entry stop, before the features
 * see it): the snapshot is taken at the first where the record can be saved. */
int trace_run_det_point(const struct trace_run_opts *o, const struct trace_rec *rec);
/* sbx-restore: the record's state given to the restored tree (run/determ.c). */
int trace_run_determ_resume(struct trace_determ *d, struct trace_supervisor *sv,
			    struct trace_rec *rec, struct common_err *e);
/* The options these need, checked before anything moves. */
int trace_run_determ_check(const struct trace_run_opts *o, struct common_err *e);

/* The run's leases (trace/run/link.c). */
struct lease_store;
struct common_outfile;
/* The result record (SPEC §6.6) of a run that reached its guest, or failed. */
json_t *trace_run_result_json(const char *lease, const char *image, const char *sha,
			      char *const *argv, const struct trace_result *r, int code,
			      const char *closed, json_t *receipts);
/* --result FILE (opened before the guest started) and --result-fd: j, one line. */
int trace_run_write_result(const struct trace_run_opts *o, struct common_outfile *out,
			   const json_t *j, struct common_err *e);
/* --ephemeral: request, fund, activate in one locked commit, one receipt each. */
int trace_run_ephemeral_open(struct lease_store *s, const struct trace_run_opts *o,
			     const char *image, const char *sha, const struct trace_script *sc,
			     char **id, json_t **head, json_t *receipts, struct common_err *e);
/* observe final (the run's last usage, NULL: none), settle (unless a bound already
 * did), expire, destroy: one locked commit, one journal append; receipts becomes the
 * lease's whole log, closed the bound that observation closed the lease by ("": none). */
int trace_run_ephemeral_close(struct lease_store *s, const char *id, const uint64_t *final,
			      json_t *receipts, char closed[32], struct common_err *e);
/* --lease: the receipts this run added (observations, a closure), else the head. */
void trace_run_lease_receipts(struct lease_store *s, const char *id, json_int_t start_seq,
			      json_t *receipts);

/* sbx-run --chain: where a link hands its guest over to the next (trace/run/handover.c). */
struct trace_snap_taken;
struct trace_handover {
	struct trace_chain_link *link;   /* this link */
	struct trace_metering *meter;
	struct trace_supervisor *sv;     /* once the guest runs */
	struct lease_store *store;
	const char *lease;
	uint64_t requested, lifetime;    /* the lease's request batch and lifetime */
	int off;                         /* no snapshot came: the link runs on to its bound */
	unsigned refused;                /* snapshots refused so far (a task starting...) */
	uint64_t next_try_us;            /* not before then, once refused */
	/* the guest snapshotted and left stopped (held: a thread in the loop's stop, or 0) */
	int (*snapshot)(void *ctx, pid_t held, struct trace_snap_taken *t, struct common_err *e);
	void *ctx;
};
/* The link's lease's request batch and lifetime, from its record. */
int trace_handover_open(struct trace_handover *h, struct lease_store *s, const char *lease,
			struct common_err *e);
/* At a storing or reading call's entry stop (the control layer's, before metering):
 * <0 once the link ended there (the guest stopped); 0 to go on, the call perhaps held
 * at its entry (denied "again") while a snapshot is refused. */
int trace_handover_entry(struct trace_handover *h, struct trace_guest *g, struct trace_stop *st);
/* At a tick: nonzero once the link ended. */
int trace_handover_tick(struct trace_handover *h);

#endif
