/* trace: what the tools, snap/ and programs linked with libsbx use of the sandbox
 * boundary, the supervisor and its features (SPEC §5–§7, §9, §10). Each room of
 * trace/ has its own header for the rest (tests/layers.txt orders them). */
#ifndef SBX_TRACE_H
#define SBX_TRACE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h"

/* Classes, a bit set, used by the filter, the recorder and policy rules. */
enum trace_class {
	TRACE_CLASS_FILE = 1u << 0,    /* takes a path */
	TRACE_CLASS_READ = 1u << 1,    /* read family */
	TRACE_CLASS_WRITE = 1u << 2,   /* write family */
	TRACE_CLASS_PROCESS = 1u << 3, /* fork/clone/exec/exit/wait */
	TRACE_CLASS_NET = 1u << 4,
	TRACE_CLASS_SIGNAL = 1u << 5,
	TRACE_CLASS_MEMORY = 1u << 6,
	TRACE_CLASS_TIME = 1u << 7,    /* virtualized under --deterministic */
	TRACE_CLASS_DESC = 1u << 8,    /* creates/closes descriptors */
	TRACE_CLASS_REFUSED = 1u << 9, /* always refused by the boundary */
	TRACE_CLASS_STORE = 1u << 10,  /* may store bytes or an inode on a file (storage_write) */
};

/* Usage dimensions of a run, in enum lease_dim order (lease/lease.h). */
#define TRACE_DIMS 8

struct trace_mount {
	enum { TRACE_MOUNT_BIND, TRACE_MOUNT_TMPFS, TRACE_MOUNT_PROC } type;
	const char *src, *dst, *opts; /* src: host path (bind); opts: "mode=…,size=…" (tmpfs) */
	int rw;
};

/* State transport (SPEC §6.4): the guest's fd holding its input and result images.
 * Guest side, for programs linked with libsbx: read the input image from fd 3
 * (malloc'd into *buf) and append the result image after it. 0 or -errno. */
#define TRACE_STATE_FD 3
int sbx_state_read_input(void **buf, size_t *len);
int sbx_state_write_result(const void *buf, size_t len);

/* Inspection (SPEC §6.3) through the C API. */
/* One trapped syscall at entry, before the kernel runs it; valid inside the callback only. */
struct sbx_call {
	const char *name;    /* NULL when the number is not in the table */
	long nr;             /* editable: a changed number runs instead */
	uint64_t args[6];    /* editable */
	const char *path[2]; /* decoded path arguments, absolute in the guest's view, or NULL */
	pid_t pid, tid;      /* host ids */
	void *priv;          /* the supervisor's */
};
/* A host view of temporary guest pages: edits to data reach the guest page. */
struct sbx_mem {
	void *data;
	uint64_t addr; /* the guest address to put into an argument */
	size_t size;
};
/* The callback returns 0 to run the (possibly edited) call, a positive errno to deny
 * it, or -1 for an inspector failure, which stops the guest and fails the run. */
typedef int (*sbx_inspect_fn)(struct sbx_call *call, void *arg);
/* Temporary guest pages (PROT_READ: the guest cannot write them), unmapped when the
 * syscall completes. addr 0: zeroed; else a copy of the guest bytes at addr (the
 * source stays unchanged). 0, or -EFAULT with m->size cut at the first unreadable
 * byte, or another -errno. A view touched after the callback returns faults. */
int sbx_call_map(struct sbx_call *call, uint64_t addr, size_t size, struct sbx_mem *m);

/* sbx_call: one callback in a guest running this executable. */
struct sbx_type;
/* Where and how the callback runs; every member is optional (zero: sbx-run's defaults). */
struct sbx_sandbox {
	const struct trace_mount *mounts; size_t nmounts;
	int replace_defaults;         /* mounts replace the defaults; mounts[0] supplies "/" */
	const char *const *envp;      /* exact guest environment; NULL: inherit */
	const char *ns_dir;           /* host dir mounted rw at /ns */
	uint64_t rlimit_as, rlimit_nofile;
	const uint64_t *limits;       /* TRACE_DIMS usage bounds, NULL: none */
	sbx_inspect_fn inspect;       /* C inspector at syscall entry, NULL: none */
	void *inspect_arg;
	unsigned inspect_classes;     /* classes it sees, 0: TRACE_CLASS_FILE */
	const char *policy;           /* JSON rules file as sbx-run --policy, NULL: none */
	const char *inspect_exec;     /* co-process as sbx-run --inspect-exec, NULL: none */
	const char *trace_path;       /* record a trace of the call (file level), NULL: none */
	const char *lease;            /* run under this Active lease (its image must be this
	                               * executable): bounds, metering, /ns; NULL: none */
	const char *store;            /* the lease's store, NULL: the default store */
	struct common_err *err;       /* filled when sbx_call fails, may be NULL */
};
/* Run fn(root) in a fresh guest running this same non-PIE executable, then write
 * the changed graph (described by type) back into the caller's objects. 0, or -1
 * with sb->err filled and nothing written back; fn never runs on the host. */
int sbx_call(const struct sbx_sandbox *sb, void (*fn)(void *), const struct sbx_type *type,
	     void *root);
/* Typed state for a guest run by sbx-run --state-in/--state-out (the same image
 * format, SPEC §10): decode the input image on fd 3 as type into fresh objects
 * (*g owns them), and later append the graph, same object IDs, as the result.
 * Function pointers must be function symbols of this executable. 0 or -1 (e). */
struct codec_graph;
int sbx_state_load(const struct sbx_type *type, void **root, struct codec_graph **g,
		   struct common_err *e);
int sbx_state_store(struct codec_graph *g, struct common_err *e);

/* sbx-trace subcommands (the main only parses options). */
enum trace_fmt { TRACE_FMT_JSON, TRACE_FMT_TEXT, TRACE_FMT_MAKE, TRACE_FMT_CHROME };
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
 * (trace/record/provenance.c); result: NULL or the run's result record; out "-": stdout. */
int trace_cmd_provenance(const char *trace, const char *result, const char *store,
			 const char *out, struct common_err *e);
/* sbx-trace verify-provenance: the envelope's signature by the store's key. */
int trace_cmd_verify_provenance(const char *file, const char *store, struct common_err *e);

/* sbx-trace adjudicate: re-execute the run two deterministic traces dispute
 * and say which one, if either, it reproduces. Returns TRACE_ADJ_* or -1. */
enum { TRACE_ADJ_BOTH = 0, TRACE_ADJ_A = 10, TRACE_ADJ_B = 11, TRACE_ADJ_NEITHER = 12 };
struct trace_adj_opts {
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

/* sbx-run's orchestration: options as parsed by bin/sbx-run.c. */
/* Snapshots live in snap/, above this folder: a run reaches them only through
 * these operations, which the program plugs in (sbx-run, sbx-restore). */
struct lease_store;
struct trace_snap_request {
	pid_t guest;                  /* host pid of the single-process guest */
	int stop;                     /* leave the guest stopped: the caller ends the run */
	int at_stop;                  /* the guest is in a ptrace stop: take it as it stands */
	uint8_t trace_head[32];       /* the recorder's chain head (zeros: no trace) */
	uint64_t trace_seq;           /* events the recorder wrote so far */
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
};

struct trace_run_opts {
	const char *store;            /* NULL: default */
	const char *lease;            /* --lease ID, or NULL with ephemeral */
	int ephemeral;
	const char *request_image;    /* ephemeral: image path (default: the resolved program) */
	const char *limits, *fees, *principal, *host_program;
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
	const char *policy, *inspect_exec, *trace_path, *trace_level, *state_in, *state_out;
	int deterministic;
	int inspect_timeout_ms;       /* --inspect-timeout MS, 0: TRACE_COPROC_TIMEOUT_MS */
	uint64_t max_procs;           /* --max-procs: per-run process cap, 0 = TRACE_NPROC_DEFAULT */
	/* sbx-restore: at the guest's exec stop, before its first instruction, rebuild
	 * it from a snapshot; <0 stops the guest ("restore failed") */
	int (*restore_exec)(void *ctx, pid_t pid, struct common_err *e);
	void *restore_ctx;
	uint64_t snapshot_every;      /* --snapshot-every-batches N, 0 = never */
	int snapshot_on_exit_signal;  /* snapshot before a fatal signal is delivered */
	const struct trace_snap_ops *snap; /* NULL: this program takes no snapshots */
};
/* Parse one sbx-run option (name without "--", value or NULL) into o. 1 handled,
 * 0 unknown, -1 error. */
int trace_run_opt(struct trace_run_opts *o, const char *name, const char *value,
		  struct common_err *e);
/* Run it; returns the process exit status (SPEC §6.6). Frees what
 * trace_run_opt allocated in o. */
int trace_run_main(struct trace_run_opts *o);

#endif
