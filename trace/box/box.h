/* trace/box: a run's boundary: its configuration, the plan built from it, the
 * cache of seccomp programs (built by trace/sys), the memory cgroup, the guest's
 * environment and the child's linear set-up from clone() to execveat(). */
#ifndef SBX_TRACE_BOX_H
#define SBX_TRACE_BOX_H

#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <sys/types.h>
#include "trace/sys/sys.h"

struct trace_layer;
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
	int notify_files;             /* the open/stat family is served by user notification
	                               * (TRACE_FILTER_NOTIFY_PROG, trace/sv/notify.c) */
	int stdout_fd, stderr_fd;     /* -1: inherit; else placed at guest fd 1 / 2 (output relay) */
	int host_signals;             /* the process is sbx's own (a tool): the calling thread
	                               * supervises, and SIGTERM/SIGINT/SIGHUP/SIGQUIT end the run;
	                               * 0 (a library caller): a private thread supervises, every
	                               * signal stays the host's */
	const struct trace_layer *layers; /* NULL, or TRACE_LAYERS of them (trace/sv/sv.h) */
};
#define TRACE_NPROC_DEFAULT 512   /* per-run process cap (RLIMIT_NPROC in the run's user ns) */
/* Check mount and environment arguments without side effects (run before anything starts). */
int trace_config_check(const struct trace_config *cfg, struct common_err *e);

/* The run's memory cgroup (trace/box/cgroup.c): the kernel holds the memory bound. */
struct trace_cgroup;
struct trace_cgroup_mem {
	uint64_t held;  /* anon + shmem pages the tree holds, mapped or not */
	uint64_t ooms;  /* times the bound refused a page */
};
/* A cgroup for the run, not yet limited; NULL with e (why, and the ways out) when
 * none can be made here. */
struct trace_cgroup *trace_cgroup_open(struct common_err *e);
int trace_cgroup_limit(struct trace_cgroup *cg, uint64_t bound, struct common_err *e);
int trace_cgroup_enter(const struct trace_cgroup *cg, pid_t pid, struct common_err *e);
/* 1 when the run's cgroup counts the tree's CPU time (v2: always; v1: a cpuacct
 * hierarchy): a fuse then holds fuel (trace/box/fuse.c). */
int trace_cgroup_holds_fuel(const struct trace_cgroup *cg);
/* The fuse kills the tree once it has burnt us more µs of CPU than now, however late
 * the supervisor; 0, or -errno. */
int trace_cgroup_fuel(const struct trace_cgroup *cg, uint64_t us);
void trace_cgroup_read(const struct trace_cgroup *cg, struct trace_cgroup_mem *m);
void trace_cgroup_free(struct trace_cgroup *cg);

/* The guest environment from --env-clear (1), --env-inherit (-1) or neither (0)
 * and the --env K=V list; NULL-terminated, freed with trace_env_free. */
char **trace_env_build(int env_clear, const char *const *env_set, size_t nenv_set);
void trace_env_free(char **env);

/* One mount of the plan, with paths already joined onto the build root. */
#define PLAN_MOUNT_DEV 16 /* the run's own /dev (a default, never a user's mount) */
#define PLAN_MOUNT_MASK 17 /* an empty read-only tmpfs over what the guest must not see */
#define PLAN_MOUNT_SYS 18 /* the run's own /sys (trace/box/view.c) */
#define TRACE_PTY_MAX 64
#define TRACE_OVERLAYS_MAX 16 /* read-only directories a run adds mount points to */  /* terminals one run's devpts holds */

struct trace_mnt {
	int type;          /* TRACE_MOUNT_* */
	char *src;         /* host path as seen from the old root ("/oldroot/…") */
	char *dst;         /* guest path */
	char *at;          /* "/newroot" + dst */
	char *opts;
	int rw;
	int tree_fd;       /* -1, or a detached idmapped tree made by the supervisor */
	pid_t idmap_helper; /* 0, or the helper whose user namespace maps tree_fd: it exits
			     * at once, reaped by trace_plan_reap (its exit off the start-up path) */
	int is_file;       /* bind of a non-directory */
	int expand;        /* a root bind: expanded one level onto a tmpfs */
	int lease_ns;      /* the lease namespace at /ns (--owner does not apply) */
	int sealed;        /* read-only once every mount point below it exists */
};

/* A run takes at most 1/TRACE_VIEW_SHARE of each per-user allowance the
 * invoker has (counted by the kernel across user namespaces). */
#define TRACE_VIEW_SHARE 4
#define TRACE_VIEW_COUNTERS 12
struct trace_view_allow {
	long long user_max[TRACE_VIEW_COUNTERS]; /* -1: none; else the run's max_* */
	long long rlimit[2];                     /* RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE; -1: as is */
};

struct trace_plan {
	const struct trace_config *cfg;
	struct trace_mnt *m;
	size_t nm;
	int image_fd;              /* O_PATH of the image, exec'd with execveat */
	int init_pidfd;            /* the sandbox's init (CLONE_PIDFD): the only process sbx signals */
	sigset_t ignored;          /* signals the caller ignored: ignored in the guest too */
	struct sock_fprog prog;    /* the seccomp program (the child's copy, read from sync_fd) */
	struct sock_fprog nprog;   /* the listener's program (notify_files), else length 0 */
	uid_t host_uid;            /* host ids the guest's uid/gid 1000 map to */
	gid_t host_gid;
	int privileged;            /* invoked as root: map to an unprivileged uid */
	struct trace_view_allow allow; /* the run's share of the invoker's allowances */
	int sync_fd[2];            /* supervisor -> child: "maps written, go", then the program */
	int err_fd[2];             /* child -> supervisor: set-up error text; EOF on exec */
	char *const *argv;
	char *const *envp;
};

int trace_plan_build(const struct trace_config *cfg, struct trace_plan *p, struct common_err *e);
void trace_plan_free(struct trace_plan *p);
/* Reap the id-map helpers (before the supervisor waits for any child: none is its). */
void trace_plan_reap(struct trace_plan *p);
/* clone() into the namespaces; the child waits on sync_fd. Returns pid or -1,
 * with p->init_pidfd set. */
pid_t trace_sandbox_spawn(struct trace_plan *p, struct common_err *e);
/* Write uid_map/gid_map of the child, let it go, build and pass it the program. */
int trace_sandbox_release(struct trace_plan *p, pid_t child, struct common_err *e);
/* The same, kept in (and taken from) cache_dir when it is not NULL. */
int trace_filter_get(const char *cache_dir, unsigned classes, struct sock_fprog *prog,
		     struct common_err *e);
/* SIGKILL to the sandbox's init: the PID namespace dies with it, every guest task too. */
void trace_sandbox_kill(struct trace_plan *p);

#endif
