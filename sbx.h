/* sbx: the embedding API of libsbx. sbx_call runs one callback in a sandboxed
 * copy of this program and writes its changes back (sbx_call(3)); an inspector
 * sees and edits its system calls (sbx_inspect(3)); sbx_run runs a program as
 * sbx-run does (sbx_run(3)). Link with -lsbx (pkg-config sbx). */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h" /* struct common_err, the exit statuses SBX_EXIT_* */
#include "codec/codec.h"      /* struct sbx_type and the type descriptors */

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
	TRACE_CLASS_LOAD = 1u << 11,   /* returns bytes it read (the kernel's rchar: storage_read) */
};

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

/* A mount in the guest's view, as sbx-run --ro, --rw and --mount give it. */
struct trace_mount {
	enum { TRACE_MOUNT_BIND, TRACE_MOUNT_TMPFS, TRACE_MOUNT_PROC } type;
	const char *src, *dst, *opts; /* src: host path (bind); opts: "mode=…,size=…" (tmpfs) */
	int rw;
};

/* sbx_call: one callback in a guest running this executable */
struct sbx_type;
/* Where and how the callback runs; every member is optional (zero: sbx-run's defaults). */
struct sbx_sandbox {
	const struct trace_mount *mounts; size_t nmounts;
	int replace_defaults;         /* mounts replace the defaults; mounts[0] supplies "/" */
	const char *const *envp;      /* exact guest environment; NULL: inherit */
	const char *ns_dir;           /* host dir mounted rw at /ns */
	uint64_t rlimit_as, rlimit_nofile;
	const uint64_t *limits;       /* a bound per lease dimension (8, SPEC order), NULL: none */
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
	int warm_isolated;            /* warm sandbox: each call in a fresh fork of the warm
	                               * guest, seeing no memory the calls before it wrote;
	                               * 0: every call in the one warm guest process */
};
/* Run fn(root) in a fresh guest running this same non-PIE executable, then write
 * the changed graph (described by type) back into the caller's objects. 0, or -1
 * with sb->err filled and nothing written back; fn never runs on the host. */
int sbx_call(const struct sbx_sandbox *sb, void (*fn)(void *), const struct sbx_type *type,
	     void *root);
/* A warm sandbox: one guest kept for many calls (sbx_call(3)). Open starts it
 * with sb (which, and all it points to, must outlive the sandbox) and returns a
 * handle >= 0, or -1 with sb->err filled. A call runs fn(root) as sbx_call does;
 * calls on one sandbox run one at a time. After close (which waits for a call
 * in progress and ends the guest: 0, or -1 when it ended badly) the handle is
 * refused. Call and close return 0, or -1 with err (may be NULL) filled. */
int sbx_sandbox_open(const struct sbx_sandbox *sb);
int sbx_sandbox_call(int sandbox, void (*fn)(void *), const struct sbx_type *type, void *root,
		     struct common_err *err);
int sbx_sandbox_close(int sandbox, struct common_err *err);

/* Typed state for a guest run by sbx-run --state-in/--state-out (the same image
 * format, SPEC §10): decode the input image on fd 3 as type into fresh objects
 * (*g owns them), and later append the graph, same object IDs, as the result.
 * Function pointers must be function symbols of this executable. 0 or -1 (e). */
struct codec_graph;
int sbx_state_load(const struct sbx_type *type, void **root, struct codec_graph **g,
		   struct common_err *e);
int sbx_state_store(struct codec_graph *g, struct common_err *e);

/* Guest side, for programs linked with libsbx: read the input image from fd 3
 * (malloc'd into *buf) and append the result image after it. 0 or -errno. */
int sbx_state_read_input(void **buf, size_t *len);
int sbx_state_write_result(const void *buf, size_t len);

/* sbx-run's command line as a call: argv[0] names nothing, argv[1..] are
 * sbx-run's options, then PROGRAM ARG... (sbx-run(1)). Runs the guest to its
 * end with snapshots, messages on stderr, and returns the status sbx-run
 * exits with (SPEC §6.6): the guest's, 124 a bound closed the lease, 125 sbx
 * failed or the command line is bad, 126, 127 the program cannot run. */
int sbx_run(int argc, char **argv);

#endif
