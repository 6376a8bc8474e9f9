/* trace: the sandbox boundary, the ptrace supervisor, metering, inspection,
 * state transport and trace records (SPEC §5–§7, §9). */
#ifndef SBX_TRACE_H
#define SBX_TRACE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h"

/* ---- syscall table (trace/syscalls.def is the one place syscall facts live) ---- */
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
/* With TRACE_CLASS_LOAD alone, the largest read the filter lets run without a stop. */
#define TRACE_LOAD_SMALL (128u << 10)
/* Argument kinds, per argument position. */
enum trace_arg {
	TRACE_ARG_NONE, TRACE_ARG_INT, TRACE_ARG_FD, TRACE_ARG_DIRFD, TRACE_ARG_PATH,
	TRACE_ARG_FLAGS, TRACE_ARG_PTR, TRACE_ARG_SIZE, TRACE_ARG_MODE,
	TRACE_ARG_FMODE,  /* the mode a file gets: setuid/setgid bits are refused */
	TRACE_ARG_OFLAGS, /* open(2) flags: the FMODE applies with O_CREAT or O_TMPFILE only */
	TRACE_ARG_ID,     /* a uid or gid to take or give: only the guest's own, or -1 (keep) */
	TRACE_ARG_OUTFD,  /* the descriptor bytes are stored into (storage when it is a file) */
	TRACE_ARG_INFD,   /* the descriptor bytes are read from */
	TRACE_ARG_COUNT,  /* at most this many bytes move; the call returns how many did */
	TRACE_ARG_IOV,    /* an iovec array: its lengths are the count */
	TRACE_ARG_IOVCNT, /* the iovec array's length */
	TRACE_ARG_LEN,    /* this many bytes are stored when the call succeeds */
	TRACE_ARG_PROT,   /* mmap protection: without PROT_WRITE, a writable fd can still store */
	TRACE_ARG_MFLAGS, /* mmap flags: only a MAP_SHARED file mapping stores */
	TRACE_ARG_MAPADDR,/* an address in a mapping: growing a shared file mapping stores */
	TRACE_ARG_MAPLEN, /* the length a new LEN replaces: only growth stores */
};
struct trace_sysinfo {
	const char *name;
	int nr;                 /* x86-64 number */
	unsigned classes;       /* enum trace_class bits */
	unsigned char arg[6];   /* enum trace_arg per argument */
	int refuse_errno;       /* errno the boundary answers when TRACE_CLASS_REFUSED */
};
/* Architecture-neutral names for code that switches on a syscall: TRACE_SYS_openat… */
enum trace_sys {
#define SYSCALL(name, nr, cls, err, a0, a1, a2, a3, a4, a5) TRACE_SYS_##name = nr,
#include "trace/sys/syscalls.def"
#undef SYSCALL
};
const struct trace_sysinfo *trace_sys_by_nr(long nr);  /* NULL if unknown */
const struct trace_sysinfo *trace_sys_by_name(const char *name);
size_t trace_sys_count(void);
const struct trace_sysinfo *trace_sys_at(size_t i);
/* The position of the first argument of this kind, or -1. */
int trace_sys_arg(const struct trace_sysinfo *s, enum trace_arg kind);

/* ---- one supervised syscall, as the supervisor sees it at a stop ---- */
enum trace_action { TRACE_ALLOWED, TRACE_DENIED, TRACE_REWRITTEN };
struct trace_stop {
	pid_t pid, tid, ppid;           /* host-namespace ids */
	long nr;
	const struct trace_sysinfo *sys; /* NULL if not in the table */
	uint64_t args[6];
	const char *path[2];            /* decoded, absolute in the guest's view, or NULL */
	const char *raw[2];             /* the same strings exactly as the guest passed them */
	int has_result;
	int64_t result;                 /* return value, or -errno */
	enum trace_action action;
	int deny_errno;                 /* when denied */
	const char *rewrite[2];         /* new path strings when rewritten */
	int want_exit;                  /* set by on_entry: also stop at syscall exit */
	int arch_ok;                    /* 0: i386/x32 entry (always refused) */
	int record;                     /* an inspector rule asked for its result in the trace */
};

/* ---- state transport (SPEC §6.4; trace/state.c) ---- */
#define TRACE_STATE_FD 3
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
/* Guest side, for programs linked with libsbx: read the input image from fd 3
 * (malloc'd into *buf) and append the result image after it. 0 or -errno. */
int sbx_state_read_input(void **buf, size_t *len);
int sbx_state_write_result(const void *buf, size_t len);

/* ---- trace records: recorder, reader, build record, timeline (issue 5) ---- */
/* A trace is JSON lines: a header {"sbx_trace":1,...,"h":H0}, then events,
 * then {"ev":"end",...}. Every line ends in ,"h":"HEX"} where
 * H0 = SHA-256("sbx/trace/v1\0" || canonical(header without h)) and
 * H_i = SHA-256(H_{i-1} || canonical(event_i without h)). */
#define TRACE_FORMAT 1
#define TRACE_LINE_MAX (256u << 10)      /* longest accepted line */
#define TRACE_EVENTS_MAX (8u << 20)      /* most events a reader accepts */
enum trace_level { TRACE_LEVEL_EXEC, TRACE_LEVEL_FILE, TRACE_LEVEL_ALL };
int trace_level_parse(const char *s, enum trace_level *out, struct common_err *e);
const char *trace_level_name(enum trace_level l);
/* Classes the seccomp filter must trap for a level (exec: none; execs, forks
 * and exits come from ptrace events). */
unsigned trace_classes(enum trace_level l);
/* Filter modifier, not a class: with it, readlink/readlinkat do not stop even
 * though they are TRACE_CLASS_FILE. sbx-run sets it at level file when no
 * inspector asked for file calls: readlink is ~70% of a compiler's path calls
 * and changes nothing in a build record (level all still records it). */
#define TRACE_FILTER_NO_READLINK (1u << 30)

/* Recorder. Writes incrementally; a killed run leaves a valid prefix. */
struct trace_rec;
struct trace_rec_info {
	const char *lease;          /* may be NULL */
	const char *image_path, *image_sha256;
	char *const *argv;          /* NULL-terminated */
	char *const *envp;          /* only its digest is recorded */
	json_t *mounts;             /* array or NULL; borrowed */
	uint64_t start_batch;
	enum trace_level level;
	int deterministic;          /* no wall-clock fields; namespace pids */
	json_t *determinism;        /* header "determinism" object or NULL; borrowed */
	const char *hash_cache;     /* file of exec hashes kept across runs (a cache:
				     * identity + boot id checked, damage ignored), or NULL */
};
/* path "-" writes to stdout; fd >= 0 (path NULL) writes to that fd. */
struct trace_rec *trace_rec_open(const char *path, int fd, const struct trace_rec_info *info,
				 struct common_err *e);
/* At a seccomp stop: 1 if the recorder wants the syscall-exit stop. */
int trace_rec_want_exit(struct trace_rec *r, const struct trace_stop *s);
/* At entry (has_result 0) or exit (has_result 1) of a syscall. When an exit
 * was wanted, the entry call stores the stop and the exit call emits one
 * completion event; otherwise the entry call emits the event. */
int trace_rec_syscall(struct trace_rec *r, const struct trace_stop *s);
/* PTRACE_EVENT_EXEC: the binary's path (NULL: /proc/PID/exe), its SHA-256
 * (hashed once per file identity), argv (NULL: /proc/PID/cmdline). */
int trace_rec_exec(struct trace_rec *r, pid_t pid, pid_t ppid, const char *path,
		   char *const *argv);
/* kind: "fork", "vfork", "clone" or "thread". */
int trace_rec_spawn(struct trace_rec *r, pid_t parent, pid_t child, const char *kind);
int trace_rec_exit(struct trace_rec *r, pid_t tid, pid_t pid, int wstatus);
/* The recorder as struct trace_hooks members (ctx = the struct trace_rec *).
 * Call them after the inspector's, so the recorded action is the final one;
 * entry sets st->want_exit when the level records this call's result. */
struct trace_guest;
int trace_rec_on_entry(void *ctx, struct trace_guest *g, struct trace_stop *st);
int trace_rec_on_exit(void *ctx, struct trace_guest *g, struct trace_stop *st);
void trace_rec_on_exec(void *ctx, pid_t pid, pid_t ppid, const char *path, char *const *argv);
void trace_rec_on_spawn(void *ctx, pid_t parent, pid_t child, unsigned long clone_flags);
void trace_rec_on_proc_exit(void *ctx, pid_t tid, int wstatus);
/* The first write error, if any (the run goes on; sbx-run reports it). */
const struct common_err *trace_rec_error(const struct trace_rec *r);
int trace_rec_flush(struct trace_rec *r); /* also done by size and time */
/* Writes the end event with the guest's wait status, closes, frees; head
 * (may be NULL) receives the last chain hash. r is freed even on error. */
int trace_rec_close(struct trace_rec *r, int wstatus, uint8_t head[32], struct common_err *e);
/* Frees without an end event (the trace stays a truncated prefix). */
void trace_rec_abort(struct trace_rec *r);

/* Reader: bytes -> lines -> checked events, verifying the chain. */
struct trace_reader;
struct trace_event {           /* one checked line; valid until the next call */
	uint64_t line;
	json_t *ev;                /* the parsed event (header for line 1) */
	uint8_t h[32];
	const char *kind;          /* "header", "sys", "exec", "spawn", "exit", "end" */
	const char *canon;         /* the hashed bytes: canonical event without h */
	size_t canon_len;
};
struct trace_reader *trace_reader_open(const char *path, struct common_err *e);
/* 1 event read, 0 end of input, -1 error (chain, type, length...). */
int trace_reader_next(struct trace_reader *t, struct trace_event *out, struct common_err *e);
const json_t *trace_reader_header(const struct trace_reader *t);
int trace_reader_complete(const struct trace_reader *t); /* saw the end event */
int trace_reader_partial_line(const struct trace_reader *t); /* unterminated tail */
void trace_reader_close(struct trace_reader *t);

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
/* The build record of a trace as JSON (new reference), or NULL. */
json_t *trace_buildrec(const char *path, int hash_inputs, struct common_err *e);
/* sbx-trace provenance: the build record as a DSSE-signed in-toto statement
 * (trace/provenance.c); result: NULL or the run's result record; out "-": stdout. */
int trace_cmd_provenance(const char *trace, const char *result, const char *store,
			 const char *out, struct common_err *e);
/* sbx-trace verify-provenance: the envelope's signature by the store's key. */
int trace_cmd_verify_provenance(const char *file, const char *store, struct common_err *e);

/* ---- inspection (SPEC §6.3; trace/inspect.c, trace/policy.c, trace/coproc.c) ---- */
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

/* Paths as the kernel will resolve them in the guest's view (trace/guestpath.c).
 * fold: "//", "/./" and ".." folded lexically (in absolute). real: every symlink
 * and /proc/self magic link (root, cwd, exe, fd/N) resolved inside tid's root,
 * the last component too when follow_last; 0, or -1 when a link cannot be read. */
void trace_path_fold(const char *in, char out[PATH_MAX]);
int trace_path_real(pid_t tid, const char *path, int follow_last, char out[PATH_MAX]);
/* Whether the policy decides on path strings (the inspector then keeps the string
 * it decided on out of the guest's reach). */
int trace_policy_has_paths(const struct trace_policy *p);

/* --inspect-exec PROG: a co-process answering one JSON decision per JSON event line
 * (see sbx-run(1)); run through /bin/sh -c outside the sandbox. */
#define TRACE_COPROC_TIMEOUT_MS 2000
struct trace_coproc;
int trace_coproc_start(const char *prog, int timeout_ms, struct trace_coproc **c,
		       struct common_err *e);
/* One round trip. -1 (e filled) for a malformed, late or missing reply. */
int trace_coproc_ask(struct trace_coproc *c, const struct trace_stop *st,
		     struct trace_decision *d, struct common_err *e);
void trace_coproc_stop(struct trace_coproc *c);
/* The codec alone (unit tests): an event line without newline (malloc'd), a reply. */
char *trace_coproc_event(uint64_t id, const struct trace_stop *st);
int trace_coproc_parse_reply(const char *line, size_t len, uint64_t id,
			     struct trace_decision *d, struct common_err *e);

/* ---- run: the boundary, the supervisor, trace_run (issue 3; trace/sandbox.c,
 * trace/supervise.c, trace/run.c) ---- */
struct trace_guest;      /* the stopped thread inside a hook; opaque */
struct trace_supervisor; /* the running supervisor inside a hook; opaque */
struct user_regs_struct;

struct trace_mount {
	enum { TRACE_MOUNT_BIND, TRACE_MOUNT_TMPFS, TRACE_MOUNT_PROC } type;
	const char *src, *dst, *opts; /* src: host path (bind); opts: "mode=…,size=…" (tmpfs) */
	int rw;
};
struct trace_hooks {           /* all optional; ctx passed back */
	void *ctx;
	/* once, after the guest tree exists and before its first instruction */
	int (*on_start)(void *ctx, struct trace_supervisor *sv);
	/* seccomp stop at syscall entry, before the kernel runs it: may set st->action
	 * (deny with st->deny_errno, rewrite args via trace_guest_* helpers) and
	 * st->want_exit. Return <0 to stop the guest (inspector failure). */
	int (*on_entry)(void *ctx, struct trace_guest *g, struct trace_stop *st);
	/* every call's syscall-entry stop once trace_sv_every_call() was asked, before
	 * the seccomp filter and on_entry: may rewrite args and set st->want_exit */
	int (*on_call)(void *ctx, struct trace_guest *g, struct trace_stop *st);
	/* the same syscall after it completed (only when on_entry or on_call set
	 * st->want_exit) */
	int (*on_exit)(void *ctx, struct trace_guest *g, struct trace_stop *st);
	/* PTRACE_EVENT_EXEC, before the new program's first instruction: path is what the
	 * thread really executes (/proc/PID/exe), its argv is /proc/PID/cmdline; a failed
	 * execve reaches only on_entry */
	void (*on_exec)(void *ctx, pid_t pid, pid_t ppid, const char *path);
	void (*on_spawn)(void *ctx, pid_t parent, pid_t child, unsigned long clone_flags);
	void (*on_proc_exit)(void *ctx, pid_t pid, int wstatus); /* at PTRACE_EVENT_EXIT: /proc/pid still readable */
	/* at least every 250 ms while the guest runs (and once at the end); nonzero stops
	 * the guest tree, with trace_sv_stop()'s reason if set, else "hook" */
	int (*on_tick)(void *ctx, struct trace_supervisor *sv);
	/* an fd registered with trace_sv_watch() is readable; <0 stops the guest */
	int (*on_fd)(void *ctx, struct trace_supervisor *sv, int fd);
	/* issue 7: the guest's main thread is in a signal-delivery stop for sig, which is
	 * passed on afterwards (the hook may inject syscalls; it must not resume it) */
	void (*on_signal)(void *ctx, struct trace_supervisor *sv, pid_t tid, int sig);
	/* any thread's signal-delivery stop, before on_signal: 1 when the hook handled
	 * the signal (it is then not delivered), 0 to deliver it */
	int (*on_fault)(void *ctx, struct trace_guest *g, int sig);
};
struct trace_config {
	const char *const *argv;      /* argv[0] is what the guest sees */
	const char *const *envp;      /* exact guest environment */
	const char *image;            /* program to exec, a host path (hash-checked by the caller) */
	int image_fd;                 /* 0, or the image the caller opened and hashed (> 2): exec'd */
	const struct trace_mount *mounts; size_t nmounts;
	int replace_defaults;         /* mounts replace the defaults; mounts[0] supplies "/" */
	const char *ns_dir;           /* host dir mounted rw at /ns */
	const char *cwd;              /* the guest's working directory (NULL: /ns) */
	uint64_t tmpfs_bytes;         /* 0, or the size of each tmpfs of the run (its memory bound) */
	const struct trace_cgroup *cgroup; /* NULL, or the memory cgroup the sandbox enters */
	const char *store_dir;        /* real path of the store: never visible to the guest */
	const char *const *sockets; size_t nsockets; /* --socket: host sockets the guest may use */
	int owner_set;                /* root invoker: files written through rw binds belong to */
	uid_t owner_uid; gid_t owner_gid; /* these host ids, else to the bound directory's owner */
	uint64_t rlimit_nofile, rlimit_as, rlimit_nproc; /* 0 = default (nproc: TRACE_NPROC_DEFAULT) */
	unsigned trace_classes;       /* syscall classes that must stop (beyond the always-trapped set) */
	const char *filter_cache;     /* NULL, or a directory keeping built seccomp programs */
	int state_fd;                 /* -1 or a memfd to place at guest fd 3 */
	int no_aslr;                  /* ADDR_NO_RANDOMIZE (snapshots, sbx_call, determinism) */
	int tsc_sigsegv;              /* PR_SET_TSC PR_TSC_SIGSEGV: rdtsc faults (determinism) */
	int stdout_fd, stderr_fd;     /* -1: inherit; else placed at guest fd 1 / 2 (output relay) */
	int host_signals;             /* the process is sbx's own (a tool): the calling thread
	                               * supervises, and SIGTERM/SIGINT/SIGHUP/SIGQUIT end the run;
	                               * 0 (a library caller): a private thread supervises, every
	                               * signal stays the host's */
	const struct trace_hooks *hooks;
};
#define TRACE_NPROC_DEFAULT 512   /* per-run process cap (RLIMIT_NPROC in the run's user ns) */
#define TRACE_GUEST_UID 1000      /* uid/gid inside */
struct trace_result {
	int exited, status;           /* guest exit status when exited */
	int signal;                   /* killing signal, else 0 */
	int wstatus;                  /* raw wait status of the guest's main process */
	char stop_reason[64];         /* "" or why the supervisor stopped the guest */
	int host_signal;              /* SIGTERM/SIGINT/SIGHUP/SIGQUIT that ended the run, else 0 */
	int exec_failed;              /* the image could not be executed: errno */
	pid_t guest_pid;              /* host pid of the guest's main process */
	uint64_t stops;               /* seccomp stops handled */
	uint64_t refused;             /* syscalls the boundary refused */
	uint64_t cpu_us;              /* user+sys of the whole tree (the sandbox init's rusage) */
	uint64_t maxrss;              /* bytes, largest process */
};
/* Run the guest to completion. 0 with *res filled (whatever the guest did), or -1
 * when the boundary could not be built (nothing ran). It waits for its own tasks
 * only, so runs in several threads at once are independent; the hooks are called
 * on the supervising thread (cfg->host_signals). */
int trace_run(const struct trace_config *cfg, struct trace_result *res, struct common_err *e);
/* Exit status for sbx-run (SPEC §6.6) from a result. */
int trace_result_exit_code(const struct trace_result *res);
/* 1 when the Unix socket fd is connected to a socket bound at a path named in cfg->sockets. */
int trace_socket_named(const struct trace_config *cfg, int fd);
/* Check mount and environment arguments without side effects (run before anything starts). */
int trace_config_check(const struct trace_config *cfg, struct common_err *e);
/* Build the seccomp program for cfg (exported for tests and sbx-run --print-filter). */
int trace_filter_export(unsigned trace_classes, int fd, struct common_err *e);

/* Inside hooks: the stopped thread. Memory reads/writes are bounded, -errno on failure. */
pid_t trace_guest_tid(const struct trace_guest *g);
pid_t trace_guest_pid(const struct trace_guest *g);
ssize_t trace_guest_read(struct trace_guest *g, uint64_t addr, void *buf, size_t len);
ssize_t trace_guest_write(struct trace_guest *g, uint64_t addr, const void *buf, size_t len);
/* NUL-terminated string of at most max-1 bytes: length, or -ENAMETOOLONG/-EFAULT. */
ssize_t trace_guest_read_str(struct trace_guest *g, uint64_t addr, char *buf, size_t max);
int trace_guest_get_regs(struct trace_guest *g, struct user_regs_struct *r);
int trace_guest_set_regs(struct trace_guest *g, const struct user_regs_struct *r);
/* At an entry stop: run nr with args instead (re-checked by the filter). */
int trace_guest_set_syscall(struct trace_guest *g, long nr, const uint64_t args[6]);
/* The supervisor inside hooks. */
int trace_sv_watch(struct trace_supervisor *sv, int fd);    /* poll fd; on_fd when readable */
void trace_sv_unwatch(struct trace_supervisor *sv, int fd);
/* The run's memory cgroup (trace/cgroup.c): the kernel holds the memory bound. */
struct trace_cgroup;
struct trace_cgroup_mem {
	uint64_t held;  /* anon + shmem pages the tree holds, mapped or not */
	uint64_t ooms;  /* times the bound refused a page */
};
struct trace_cgroup *trace_cgroup_open(uint64_t bound); /* NULL: none can be made here */
int trace_cgroup_enter(const struct trace_cgroup *cg, pid_t pid, struct common_err *e);
void trace_cgroup_read(const struct trace_cgroup *cg, struct trace_cgroup_mem *m);
const char *trace_cgroup_dir(const struct trace_cgroup *cg);
void trace_cgroup_free(struct trace_cgroup *cg);

void trace_sv_stop(struct trace_supervisor *sv, const char *reason); /* kill the guest tree */
/* kill the guest tree before returning: a crossed bound stops it before any write */
void trace_sv_kill_now(struct trace_supervisor *sv, const char *reason);
/* the next tick comes within us (at least 1 ms), not the usual 250 ms */
void trace_sv_tick_within(struct trace_supervisor *sv, uint64_t us);
size_t trace_sv_pids(const struct trace_supervisor *sv, pid_t *out, size_t max); /* live tids */
pid_t trace_sv_guest_pid(const struct trace_supervisor *sv);
uint64_t trace_sv_peak_rss(const struct trace_supervisor *sv); /* bytes, largest reaped task */
/* From now on every syscall of the tree stops at its entry and exit (on_call). */
void trace_sv_every_call(struct trace_supervisor *sv);
int trace_sv_every_call_on(const struct trace_supervisor *sv);

/* sbx-run's orchestration (trace/run.c): options as parsed by bin/sbx-run.c. */
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
	/* issue 4/5 options (policy, inspect-exec, trace, state, deterministic) go below */
	const char *policy, *inspect_exec, *trace_path, *trace_level, *state_in, *state_out;
	int deterministic;
	int inspect_timeout_ms;       /* --inspect-timeout MS, 0: TRACE_COPROC_TIMEOUT_MS */
	uint64_t max_procs;           /* --max-procs: per-run process cap, 0 = TRACE_NPROC_DEFAULT */
	/* issue 7 (sbx-restore): at the guest's exec stop, before its first instruction,
	 * rebuild it from a snapshot; <0 stops the guest ("restore failed") */
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
/* The guest environment from --env-clear (1), --env-inherit (-1) or neither (0)
 * and the --env K=V list; NULL-terminated, freed with trace_env_free. */
char **trace_env_build(int env_clear, const char *const *env_set, size_t nenv_set);
void trace_env_free(char **env);

/* ---- metering (SPEC §4.1; trace/meter.c, trace/relay.c) ---- */
/* Output relay: the guest's stdout/stderr are pipes copied to out_fd/err_fd by a
 * supervisor thread, in order, counting bytes (both) and newline records (stdout).
 * Output past max_bytes/max_lines is drained, never delivered, and sets "over". */
struct trace_relay;
int trace_relay_open(struct trace_relay **r, int out_fd, int err_fd, uint64_t max_bytes,
		     uint64_t max_lines, struct common_err *e);
/* The write ends to dup2 onto the guest's fds 1 and 2 (close-on-exec set). */
void trace_relay_child_fds(const struct trace_relay *r, int *out_w, int *err_w);
/* After the guest is forked: closes our write ends, starts the thread. */
int trace_relay_start(struct trace_relay *r, struct common_err *e);
void trace_relay_counts(const struct trace_relay *r, uint64_t *bytes, uint64_t *lines);
int trace_relay_over(const struct trace_relay *r);
/* readable (an eventfd) once the guest has passed an output bound */
int trace_relay_wake_fd(const struct trace_relay *r);
/* Once every guest is gone: drain what is buffered, join the thread. */
void trace_relay_finish(struct trace_relay *r);
void trace_relay_free(struct trace_relay *r);

/* Usage of the whole guest tree, in enum lease_dim order (lease/lease.h). */
#define TRACE_DIMS 8
struct trace_meter;
struct lease_store;
/* ns_dir (may be NULL) is metered as namespace_bytes, and counts as ns_bound + 1 (full)
 * while it cannot be measured completely (UINT64_MAX: no bound, left as measured);
 * relay (may be NULL) as output. */
struct trace_meter *trace_meter_new(const char *ns_dir, uint64_t ns_bound,
				    const struct trace_relay *relay);
void trace_meter_free(struct trace_meter *m);
/* Task lifecycle: every traced task (tgid 0: look it up; known tids are ignored),
 * and its PTRACE_EVENT_EXIT stop (final figures). */
void trace_meter_task_new(struct trace_meter *m, pid_t tgid, pid_t tid);
void trace_meter_task_exit(struct trace_meter *m, pid_t tgid, pid_t tid);
/* The largest resident set a reaped task reached (trace_sv_peak_rss). */
void trace_meter_peak_rss(struct trace_meter *m, uint64_t bytes);
/* Sample the live tree (fuel, memory, fds, namespace, output). */
void trace_meter_sample(struct trace_meter *m);
/* The same for the supervisor's tick: bounded work, the namespace walked a
 * step at a time (its bytes rise when a pass completes). */
void trace_meter_tick(struct trace_meter *m);
/* What sbx itself wrote for the guest so far (its trace): part of storage_write. */
void trace_meter_host_write(struct trace_meter *m, uint64_t bytes);
/* storage_write, exactly: a storing call of tid reserves what it may store at its
 * entry and settles at its exit with its result (-errno: nothing; a byte count; else
 * all reserved); a task that dies in the call is charged all. held: stored, reserved
 * and the trace's bytes; refused: a call that would cross the bound, charged whole
 * without running, so the usage reads as the excess. */
void trace_meter_store_begin(struct trace_meter *m, pid_t tid, uint64_t bytes, int by_result);
void trace_meter_store_end(struct trace_meter *m, pid_t tid, int64_t result);
uint64_t trace_meter_store_held(const struct trace_meter *m);
void trace_meter_store_refused(struct trace_meter *m, uint64_t bytes);
/* storage_read, held near its bound: a reading call of tid reserves what it may
 * read at its entry; its exit (or its task's end) drops the reservation, the
 * bytes being in the kernel's count by then. held: the tree's count now (every
 * task read afresh) and the reservations; refused: one byte past bound. */
void trace_meter_load_begin(struct trace_meter *m, pid_t tid, uint64_t bytes);
void trace_meter_load_end(struct trace_meter *m, pid_t tid);
int trace_meter_load_pending(struct trace_meter *m, pid_t tid);
uint64_t trace_meter_load_held(struct trace_meter *m);
void trace_meter_load_refused(struct trace_meter *m, uint64_t bound);
/* Tasks the meter follows now. */
size_t trace_meter_tasks(const struct trace_meter *m);
/* Σ iov_len of a guest's iovec array (0 for one the kernel refuses). */
uint64_t trace_store_iov_bytes(struct trace_guest *g, uint64_t addr, uint64_t cnt);
/* What a trapped call may store on a host file (trace/store.c): bytes, and whether its
 * result is the byte count; 0 when it stores nothing (not a file, not a storing form).
 * An inode or name a call may create counts TRACE_INODE_BYTES. */
#define TRACE_INODE_BYTES 4096
struct trace_store_call {
	uint64_t bytes;
	int by_result;
};
int trace_store_entry(struct trace_guest *g, const struct trace_stop *st,
		      struct trace_store_call *c);
/* At its exit: the result as the meter reads it (an open that made no regular file
 * reads as a failure: it created nothing). */
int64_t trace_store_result(struct trace_guest *g, const struct trace_stop *st);
/* memory also from the run's cgroup; a page it refused is a crossing of bound */
void trace_meter_cgroup(struct trace_meter *m, const struct trace_cgroup *cg, uint64_t bound);
void trace_meter_usage(const struct trace_meter *m, uint64_t usage[TRACE_DIMS]);
/* The name of the first dimension above limits, or NULL. */
const char *trace_meter_over(const struct trace_meter *m, const uint64_t limits[TRACE_DIMS]);
/* A namespace's bytes (lease_ns_digest's walk); -1 when it cannot be measured completely. */
int trace_meter_ns_bytes(const char *dir, uint64_t *bytes);

/* The issue-4 layer as trace_hooks bodies (ctx = the inspector): metering, usage
 * observations and automatic closure, --policy, --inspect-exec and the C callback. */
struct trace_inspector_opts {
	struct lease_store *store;      /* with lease: observe usage there (closure) */
	const char *lease;
	const uint64_t *limits;         /* TRACE_DIMS bounds, NULL: none */
	const uint64_t *base;           /* TRACE_DIMS usage already recorded, NULL: zero */
	const char *ns_dir;             /* metered as namespace_bytes, NULL: none */
	const struct trace_policy *policy;
	const char *inspect_exec;       /* co-process command, NULL: none */
	int inspect_timeout_ms;         /* 0: TRACE_COPROC_TIMEOUT_MS */
	sbx_inspect_fn fn;              /* C callback, NULL: none */
	void *fn_arg;
	unsigned fn_classes;            /* classes the callback sees, 0: TRACE_CLASS_FILE */
	struct trace_relay *relay;      /* output relay (started by on_start), NULL: none */
};
struct trace_inspector;
int trace_inspector_new(const struct trace_inspector_opts *o, struct trace_inspector **in,
			struct common_err *e);
void trace_inspector_free(struct trace_inspector *in);
/* Classes the filter must trap for it (add to trace_config.trace_classes). */
unsigned trace_inspector_classes(const struct trace_inspector *in);
/* Limits and recorded usage of a lease, for trace_inspector_opts. */
int trace_inspector_lease_bounds(struct lease_store *s, const char *id,
				 uint64_t limits[TRACE_DIMS], uint64_t base[TRACE_DIMS],
				 struct common_err *e);
int trace_inspector_on_start(void *ctx, struct trace_supervisor *sv);
int trace_inspector_on_entry(void *ctx, struct trace_guest *g, struct trace_stop *st);
int trace_inspector_on_exit(void *ctx, struct trace_guest *g, struct trace_stop *st);
int trace_inspector_on_call(void *ctx, struct trace_guest *g, struct trace_stop *st);
void trace_inspector_on_spawn(void *ctx, pid_t parent, pid_t child, unsigned long flags);
void trace_inspector_on_proc_exit(void *ctx, pid_t tid, int wstatus);
int trace_inspector_on_tick(void *ctx, struct trace_supervisor *sv);
/* The run's trace bytes so far, metered as storage_write from the next sample. */
void trace_inspector_cgroup(struct trace_inspector *in, const struct trace_cgroup *cg);
/* held: the lease is not Active yet (a restore): usage is not observed */
void trace_inspector_hold(struct trace_inspector *in, int held);
void trace_inspector_host_write(struct trace_inspector *in, uint64_t bytes);
/* A watched fd of the inspector's (its observation writer's wake-up) is readable. */
int trace_inspector_on_fd(void *ctx, struct trace_supervisor *sv, int fd);
/* After the guest tree is gone: drain the relay, final sample and observation. */
int trace_inspector_finish(struct trace_inspector *in, struct common_err *e);
/* The dimension that closed the lease ("fuel", ..., "lifetime", "escrow"), or NULL. */
const char *trace_inspector_closed(const struct trace_inspector *in);
/* An inspector failure (policy rewrite, co-process, callback), or NULL. */
const struct common_err *trace_inspector_failure(const struct trace_inspector *in);
/* Usage totals of the lease including this run (monotonic). */
void trace_inspector_usage(const struct trace_inspector *in, uint64_t usage[TRACE_DIMS]);

/* sbx-run glue for the issue-4 options (trace/run.c): --policy, --inspect-exec,
 * --inspect-timeout, --state-in, --state-out, metering and closure of the lease. */
struct trace_bound;
struct trace_config;
struct trace_result;
int trace_bound_opt(struct trace_run_opts *o, const char *name, const char *v,
		    struct common_err *e);            /* 1 handled, 0 not ours, -1 error */
/* Before any lease change: load the policy, check --state-in. *b is set even on error. */
int trace_bound_open(const struct trace_run_opts *o, struct trace_bound **b,
		     struct common_err *e);
/* With the lease known: limits, relay, inspector, state fd and rlimits into cfg. */
int trace_bound_attach(struct trace_bound *b, struct lease_store *s, const char *id,
		       const char *ns, struct trace_config *cfg, struct common_err *e);
struct trace_inspector *trace_bound_inspector(const struct trace_bound *b);
/* After trace_run: final observation; *closed names the dimension that closed the
 * lease; -1 on an inspector failure or a bad state result (nothing written back). */
int trace_bound_finish(struct trace_bound *b, const struct trace_result *res,
		       const char **closed, struct common_err *e);
void trace_bound_result(const struct trace_bound *b, json_t *result); /* usage totals */
void trace_bound_free(struct trace_bound *b);

/* ---- sbx_call: one callback in a guest running this executable (issue 6; trace/call.c) ---- */
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

/* ---- determinism: sbx-run --deterministic, sbx-trace adjudicate (SPEC §9, §7;
 * trace/determ.c, trace/adjudicate.c) ---- */
#define TRACE_FILTER_DETERM (1u << 29)  /* filter modifier: also trap trace_determ_traps() */
#define TRACE_DETERM_STEP_NS 1000000    /* the virtual clock advances 1 ms per time query */
struct trace_determ;
/* Virtual clock and PRNG for one run; seed: the lease id; epoch: the virtual
 * wall clock at the start (trace_determ_epoch), in seconds; tsc: rdtsc faults
 * here (trace_tsc_probe), so the run traps and answers it. */
struct trace_determ *trace_determ_new(const char *seed, int64_t epoch, int tsc);
/* The epoch of a lease: the end of the store-clock batch its request receipt
 * names (clock: the store's {"epoch_ms", "batch_ms"}), rounded up to a second,
 * so that files written before the request lie in the virtual past. */
int64_t trace_determ_epoch(const json_t *clock, int64_t requested_batch);
void trace_determ_free(struct trace_determ *d);
/* Classes (with TRACE_FILTER_DETERM) the filter must trap; 1 for the extra
 * syscalls TRACE_FILTER_DETERM traps (fstat, getdents64, sched_getaffinity, ...). */
unsigned trace_determ_classes(void);
int trace_determ_traps(long nr);
/* Hook bodies (ctx = the struct trace_determ *): call after the inspector and
 * before the recorder, so the recorder sees the emulated result. */
int trace_determ_on_entry(void *ctx, struct trace_guest *g, struct trace_stop *st);
int trace_determ_on_exit(void *ctx, struct trace_guest *g, struct trace_stop *st);
/* At PTRACE_EVENT_EXEC: AT_SYSINFO_EHDR -> AT_IGNORE, AT_RANDOM bytes from the PRNG. */
int trace_determ_on_exec(struct trace_determ *d, pid_t pid);
uint64_t trace_determ_emulated(const struct trace_determ *d); /* calls answered */
/* Process lifecycle (hook bodies): a child inherits its parent's clock. */
void trace_determ_on_spawn(struct trace_determ *d, pid_t parent, pid_t child, unsigned long flags);
void trace_determ_on_proc_exit(struct trace_determ *d, pid_t tid);
/* The trace header's "determinism" object: epoch, step, uncontrolled and
 * refused sources, and the digest of ns_dir (NULL: none) at the start. */
json_t *trace_determ_header(const struct trace_determ *d, const char *ns_dir,
			    struct common_err *e);
/* A signal-delivery stop (hook body): an rdtsc/rdtscp fault is answered from
 * the process's clock and not delivered (1); anything else is left alone (0). */
int trace_determ_on_fault(void *ctx, struct trace_guest *g, int sig);
/* rdtsc/rdtscp (trace/tsc.c): the instruction at b (n bytes) and its length;
 * the probe: 1 if prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes rdtsc fault on this
 * host (a forked child tries, once per process); at a SIGSEGV stop of tid, the
 * faulting instruction (r: its registers); its answer, stepped over. */
enum { TRACE_TSC_NONE = 0, TRACE_TSC_RDTSC = 1, TRACE_TSC_RDTSCP = 2 };
#define TRACE_TSC_AUX 0 /* what rdtscp reports as IA32_TSC_AUX (the CPU number) */
int trace_tsc_decode(const uint8_t *b, size_t n, size_t *len);
int trace_tsc_probe(void);
int trace_tsc_fault(pid_t tid, struct user_regs_struct *r, size_t *len);
int trace_tsc_answer(pid_t tid, struct user_regs_struct *r, int insn, size_t len, uint64_t tsc);
/* A host pid's id inside the run's PID namespace (0 if unknown): deterministic
 * traces record these instead of host ids. */
pid_t trace_determ_nspid(pid_t host);
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
/* Events a recorder has written after its header (trace/record.c). */
uint64_t trace_rec_events(const struct trace_rec *r);
/* Bytes of trace written so far (the lease meters them as storage_write). */
uint64_t trace_rec_bytes(const struct trace_rec *r);
/* The chain hash of the last line it wrote (issue 7: snapshots record it). */
void trace_rec_head(const struct trace_rec *r, uint8_t head[32]);

#endif
