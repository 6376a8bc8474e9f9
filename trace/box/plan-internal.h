/* trace/ private: the sandbox plan shared by sandbox.c, supervise.c and run.c. */
#ifndef TRACE_RUN_INTERNAL_H
#define TRACE_RUN_INTERNAL_H

#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <sys/types.h>
#include "trace/trace.h"

/* SECCOMP_RET_DATA tags: hints only; the supervisor decides from the syscall
 * itself, because a guest-installed filter can return TRACE with any data. */
enum {
	TRACE_TAG_UNKNOWN = 1, /* number not in the table */
	TRACE_TAG_EXEC = 2,    /* execve/execveat */
	TRACE_TAG_REFUSED = 3, /* always refused, or refused by an argument check */
	TRACE_TAG_CLASS = 4,   /* a class the caller asked to trace */
	TRACE_TAG_BADARCH = 5, /* i386 (int 0x80) or x32 */
};

/* open(2) flags that create an inode */
#define TRACE_CREATE_FLAGS (O_CREAT | (O_TMPFILE & ~O_DIRECTORY))

/* One mount of the plan, with paths already joined onto the build root. */
#define PLAN_MOUNT_DEV 16 /* the run's own /dev (a default, never a user's mount) */
#define PLAN_MOUNT_MASK 17 /* an empty read-only tmpfs over what the guest must not see */
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
	int is_file;       /* bind of a non-directory */
	int expand;        /* a root bind: expanded one level onto a tmpfs */
	int lease_ns;      /* the lease namespace at /ns (--owner does not apply) */
	int sealed;        /* read-only once every mount point below it exists */
};

struct trace_plan {
	const struct trace_config *cfg;
	struct trace_mnt *m;
	size_t nm;
	int image_fd;              /* O_PATH of the image, exec'd with execveat */
	int init_pidfd;            /* the sandbox's init (CLONE_PIDFD): the only process sbx signals */
	sigset_t ignored;          /* signals the caller ignored: ignored in the guest too */
	struct sock_fprog prog;    /* the seccomp program (the child's copy, read from sync_fd) */
	uid_t host_uid;            /* host ids the guest's uid/gid 1000 map to */
	gid_t host_gid;
	int privileged;            /* invoked as root: map to an unprivileged uid */
	int sync_fd[2];            /* supervisor -> child: "maps written, go", then the program */
	int err_fd[2];             /* child -> supervisor: set-up error text; EOF on exec */
	char *const *argv;
	char *const *envp;
};

int trace_plan_build(const struct trace_config *cfg, struct trace_plan *p, struct common_err *e);
void trace_plan_free(struct trace_plan *p);
/* clone() into the namespaces; the child waits on sync_fd. Returns pid or -1,
 * with p->init_pidfd set. */
pid_t trace_sandbox_spawn(struct trace_plan *p, struct common_err *e);
/* Write uid_map/gid_map of the child, let it go, build and pass it the program. */
int trace_sandbox_release(struct trace_plan *p, pid_t child, struct common_err *e);
/* The boundary's own verdict on a trapped syscall: 0 allow, else the errno. */
int trace_boundary_errno(int arch_ok, long nr, const uint64_t args[6]);
/* Build the BPF program for classes into *prog (malloc'd filter). */
int trace_filter_build(unsigned classes, struct sock_fprog *prog, struct common_err *e);
/* The same, kept in (and taken from) cache_dir when it is not NULL. */
int trace_filter_get(const char *cache_dir, unsigned classes, struct sock_fprog *prog,
		     struct common_err *e);
/* SIGKILL to the sandbox's init: the PID namespace dies with it, every guest task too. */
void trace_sandbox_kill(struct trace_plan *p);

/* The supervisor loop: runs until every tracee is gone. */
int trace_supervise(struct trace_plan *p, pid_t init_pid, struct trace_result *res,
		  struct common_err *e);

#endif
