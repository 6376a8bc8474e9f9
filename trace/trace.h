/* trace: what the tools, snap/ and programs linked with libsbx use of the sandbox
 * boundary, the supervisor and its features (SPEC §5–§7, §9, §10). Each room of
 * trace/ has its own header for the rest (tests/layers.txt orders them). */
#ifndef SBX_TRACE_H
#define SBX_TRACE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h"
#include "sbx.h" /* the embedding API: sbx_call, the inspector, sbx_run */

/* Usage dimensions of a run, in enum lease_dim order (lease/lease.h). */
#define TRACE_DIMS 8

/* State transport (SPEC §6.4): the guest's fd holding its input and result images. */
#define TRACE_STATE_FD 3

/* sbx-trace subcommands (the main only parses options). */
/* What a trace records (--trace-level): file, the default, exec or all. */
enum trace_level { TRACE_LEVEL_FILE, TRACE_LEVEL_EXEC, TRACE_LEVEL_ALL };
int trace_level_parse(const char *s, enum trace_level *out, struct common_err *e);

/* HTML: sbx-trace timeline --format html, which writes what TEXT does */
enum trace_fmt { TRACE_FMT_JSON, TRACE_FMT_TEXT, TRACE_FMT_MAKE, TRACE_FMT_CHROME, TRACE_FMT_HTML };
int trace_cmd_verify(const char *path, int require_complete, const char *expect_head,
		     enum trace_fmt f, struct common_err *e); /* 0 ok, 1 bad, -1 error */
struct trace_filter {
	pid_t pid_tree;            /* 0: any */
	unsigned classes;          /* 0: any */
	const char *glob;          /* NULL: any */
	const char *name;          /* syscall or event name, NULL: any */
};
int trace_cmd_filter(const char *path, const struct trace_filter *f, struct common_err *e);
/* "file,process,...": class names of enum trace_class, comma-separated. */
int trace_class_parse(const char *list, unsigned *out, struct common_err *e);
int trace_cmd_stats(const char *path, enum trace_fmt f, struct common_err *e);
int trace_cmd_diff(const char *a, const char *b, enum trace_fmt f, struct common_err *e);
int trace_cmd_bisect(const char *a, const char *b, enum trace_fmt f, struct common_err *e);
int trace_cmd_files(const char *path, enum trace_fmt f, int hash_inputs, struct common_err *e);
/* HTML (TRACE_FMT_TEXT) or Chrome trace-event JSON (TRACE_FMT_CHROME) to out ("-": stdout). */
int trace_cmd_timeline(const char *path, const char *out, enum trace_fmt f, struct common_err *e);
/* sbx-trace provenance: the build record as a DSSE-signed in-toto statement
 * (trace/record/cmd/provenance.c); result: NULL or the run's result record; out "-": stdout. */
int trace_cmd_provenance(const char *trace, const char *result, const char *store,
			 const char *out, struct common_err *e);
/* sbx-trace verify-provenance: the envelope's signature by the store's key. */
int trace_cmd_verify_provenance(const char *file, const char *store, struct common_err *e);

/* sbx-trace adjudicate: re-execute the run two deterministic traces dispute
 * and say which one, if either, it reproduces. Returns TRACE_ADJ_* or -1. */
enum { TRACE_ADJ_BOTH = 0, TRACE_ADJ_A = 10, TRACE_ADJ_B = 11, TRACE_ADJ_NEITHER = 12 };
/* adjudicate's start from a snapshot (SPEC §8, §9): snap/, above this folder,
 * plugged in by sbx-trace. */
struct trace_adj_snap {
	/* The latest stored snapshot of lease that carries a determinism record and
	 * was taken after s < n events whose chain value heads[s] it names: digest
	 * and s out; 0 found, 1 none, -1 error. */
	int (*latest)(const char *store, const char *lease, const uint8_t (*heads)[32], size_t n,
		      char digest[65], uint64_t *step, struct common_err *e);
	/* A fresh lease requested like lease (principal, image, limits, escrow) and
	 * funded, to restore into; *id malloc'd. */
	int (*target)(const char *store, const char *lease, char **id, struct common_err *e);
};
struct trace_adj_opts {
	const struct trace_adj_snap *snap; /* NULL: always from the beginning */
	const char *store;             /* NULL: default store */
	const char *a, *b;             /* the two traces */
	int env_clear;                 /* environment as sbx-run builds it */
	const char **env_set; size_t nenv_set;
	const char *ns_dir;            /* initial /ns contents, NULL: the lease's */
	uint64_t timeout_ms;           /* 0: 60000 */
	enum trace_fmt fmt;
	int allow_rw;                  /* the header's read-write binds may be re-created */
};
int trace_adjudicate(const struct trace_adj_opts *o, struct common_err *e);

/* sbx-trace's command line, parsed (trace/record/cmd/cli.c). */
#define TRACE_CLI_ENV_MAX 256
struct trace_cli {
	const struct common_verb *verb;
	enum trace_fmt fmt;
	int hash_inputs, complete;
	const char *head, *out, *result;
	struct trace_filter flt;
	struct trace_adj_opts adj;
	const char *envs[TRACE_CLI_ENV_MAX];
	char **args; /* the operands after the verb */
	int nargs;
	struct common_err e;
};
/* argv (verb first, then options and operands in any order) into c, no output:
 * 0, 1 for --help, or -1 with e. */
int trace_cli_parse(int argc, char **argv, struct trace_cli *c, struct common_err *e);
/* sbx-trace: the whole command line, returning the exit status. */
int trace_cli_main(int argc, char **argv, const struct trace_adj_snap *snap);

/* sbx-run's orchestration: options as trace_run_parse gives them. */
/* Snapshots live in snap/, above this folder: a run reaches them only through
 * these operations, which the program plugs in (sbx-run, sbx-restore). */
struct lease_store;
struct trace_run_opts;
struct trace_snap_request {
	pid_t guest;                  /* host pid of the guest (its root process) */
	int stop;                     /* leave the guest stopped: the caller ends the run */
	int at_stop;                  /* held (0: guest) is in the loop's ptrace stop: taken
				       * as it stands, left there */
	pid_t held;                   /* at_stop: a thread of any process of guest's tree */
	uint8_t trace_head[32];       /* the recorder's chain head (zeros: no trace) */
	uint64_t trace_seq;           /* events the recorder wrote so far */
	/* --snapshot-at-step: the determinism record (trace_determ_save), else NULL */
	const uint8_t *determ;
	size_t determ_len;
	const char *renter, *renter_sig; /* a peer renter's signature (sbx-snap take), or NULL */
	/* the meter's held shared mappings (trace_metering_held_prot), or NULL */
	int (*held_prot)(void *ctx, pid_t tgid, uint64_t addr, uint64_t len, int *prot);
	void *held_ctx;
	/* the run's standard streams as the supervisor holds them (trace_bound_std_fds) */
	int std_fds[3];
};
struct trace_snap_taken {
	char digest[65];
	uint64_t bytes, chunks, persisted_bytes;
	json_t *receipt;              /* the lease's snapshot receipt; the caller's reference */
};
struct trace_snap_ops {
	/* stop at a step boundary (unless at_stop), capture, persist, record the
	 * receipt; nothing is written on failure */
	int (*take)(struct lease_store *s, const char *lease, const struct trace_snap_request *rq,
		    struct trace_snap_taken *out, struct common_err *e);
	/* 1 when sig, about to be delivered to pid, ends it */
	int (*signal_fatal)(pid_t pid, int sig);
	/* sbx-run --chain N: the run as links (trace_run_link), each restored from the
	 * snapshot that ended the one before; the exit status */
	int (*chain)(struct trace_run_opts *o);
};

/* One link of sbx-run --chain N, between the chain (snap/) and the run. */
struct trace_chain_link {
	unsigned n;                   /* this link's number, from 1 */
	int last;                     /* the N-th: it ends on its bounds as a run does */
	int owned;                    /* the chain began --ephemeral: close the lease as one */
	const char *prev;             /* the link before's lease, or NULL */
	json_t *links;                /* every link that ended so far: the result lists them */
	char snapshot[65];            /* out: the snapshot that ended it near a bound, or "" */
	const char *dim;              /* out: the dimension near its bound then */
	char *lease;                  /* out: its lease (malloc'd) */
};

struct trace_run_opts {
	const char *store;            /* NULL: default */
	const char *lease;            /* --lease ID, or NULL with ephemeral */
	int ephemeral;
	const char *limits, *fees, *principal, *host_program;
	const char *principal_key;    /* --principal-key FILE: the renter's key */
	uint64_t lifetime, escrow;
	struct trace_mount *mounts; size_t nmounts; int replace_defaults;
	int owner_set; uid_t owner_uid; gid_t owner_gid; /* --owner UID:GID */
	const char **sockets; size_t nsockets; /* --socket PATH... */
	const char *chdir;            /* --chdir DIR, or NULL: the invoker's directory if bound */
	int env_clear;                /* start from an empty environment */
	const char **env_set; size_t nenv_set;
	const char *result_path;      /* --result FILE */
	int result_fd;                /* --result-fd N, -1 none */
	char *const *argv;            /* PROGRAM ARG… */
	const char *policy, *inspect_exec, *trace_path, *state_in, *state_out;
	enum trace_level trace_level; /* --trace-level */
	int deterministic;
	int memory_sampled;           /* --memory-sampled: run without a memory cgroup, unremarked */
	int memory_exact;             /* --memory-exact: refused where no memory cgroup can be made */
	int inspect_timeout_ms;       /* --inspect-timeout MS, 0: TRACE_COPROC_TIMEOUT_MS */
	unsigned inspect_classes;     /* --inspect-classes LIST, 0: file */
	uint64_t max_procs;           /* --max-procs: per-run process cap, 0 = TRACE_NPROC_DEFAULT */
	/* sbx-restore: at the guest's exec stop, before its first instruction, rebuild
	 * it from a snapshot; <0 stops the guest ("restore failed") */
	int (*restore_exec)(void *ctx, pid_t pid, struct common_err *e);
	void *restore_ctx;
	uint64_t snapshot_every;      /* --snapshot-every-batches N, 0 = never */
	/* --snapshot-at-step K (--deterministic): one snapshot, with the determinism
	 * record, at the first quiet entry stop once the trace holds K events */
	uint64_t snapshot_at_step;
	/* sbx-restore of such a snapshot: its record and trace position, and
	 * --trace-from FILE, the trace its run wrote (the new one begins with it) */
	const uint8_t *determ_resume;
	size_t determ_resume_len;
	uint64_t resume_seq;
	const uint8_t *resume_head;
	const char *trace_from;
	uint64_t stop_after_events;   /* --stop-after-events N: the guest stopped once the
				       * trace holds N events (adjudicate's replay) */
	int snapshot_on_exit_signal;  /* snapshot before a fatal signal is delivered */
	const struct trace_snap_ops *snap; /* NULL: this program takes no snapshots */
	uint64_t chain;               /* --chain N: at most N leases, 0: none */
	struct trace_chain_link *link; /* the chain's link this run is, or NULL */
};
/* What trace_run_parse allocated in o (the mount list, the --env and --socket entries). */
void trace_run_opts_free(struct trace_run_opts *o);
#define TRACE_RUN_RESTORE 1u /* sbx-restore: its subset of options, one operand before "--" */
/* sbx-run's command line (sbx-restore's with TRACE_RUN_RESTORE) into o: the options,
 * then PROGRAM ARG... (after "--" or the first word that is not an option) in
 * o->argv; restore: DIGEST in *operand, and o->argv NULL without "--". No output.
 * 0, 1 for --help, -1 with e ("--NAME: unknown option", "--NAME: needs a value"). */
int trace_run_parse(int argc, char **argv, unsigned flags, struct trace_run_opts *o,
		    const char **operand, struct common_err *e);
/* Run it; returns the process exit status (SPEC §6.6). Frees what
 * trace_run_parse allocated in o. */
int trace_run_main(struct trace_run_opts *o);
/* The same as one link of a chain (o->link set), o left as it was. */
int trace_run_link(struct trace_run_opts *o);
/* The chain's next link after the lease ln->lease that ended near a bound: a lease
 * requested (its request naming ln->lease as prev: the same principal, host program,
 * image, limits, fees, lifetime and escrow) and funded; its id in *next (malloc'd). */
int trace_chain_next(const struct trace_run_opts *o, const struct trace_chain_link *ln,
		     char **next, struct common_err *e);
/* A lease requested like lease's record and funded, in store s: a chain's next
 * link when prev (its request naming prev), else a lasting lease of its own;
 * its id in *id (malloc'd). */
struct lease_store;
int trace_lease_fund_like(struct lease_store *s, const char *lease, const char *prev,
			  char **id, struct common_err *e);
/* A request like lease record l's (the same principal, host program, image and
 * script, limits, fees, lifetime and escrow), borrowing l's strings. */
struct lease_request;
int trace_lease_request_of(const json_t *l, struct lease_request *req, struct common_err *e);
/* Links refused (a chain that cannot go on): the result record with the links
 * so far and the error, where --result or --result-fd ask. */
void trace_chain_fail(const struct trace_run_opts *o, json_t *links, const struct common_err *err);
/* sbx-run: parse, then run with snap's snapshot operations (NULL: none); errors
 * and usage to stderr; the exit status (SPEC §6.6; 125 for a bad command line). */
int trace_run_cli(int argc, char **argv, const struct trace_snap_ops *snap);

#endif
