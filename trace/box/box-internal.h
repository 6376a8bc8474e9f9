/* trace/box private: what sandbox.c asks of view.c (the guest's default view)
 * and of plan.c (the mount plan), and what cgroup.c asks of fuse.c. */
#ifndef SBX_TRACE_BOX_INTERNAL_H
#define SBX_TRACE_BOX_INTERNAL_H

#include "trace/box/box.h"
#include "trace/tracee/tracee.h"

/* 1 when the real path may be masked as a home: not "/", not inside nor above
 * a tree the view needs whole (/usr, /bin, /etc, /var/tmp, ...). */
int trace_view_maskable(const char *real);
/* The homes the default view masks, real paths, the outermost of nested ones:
 * the invoker's $HOME, passwd home and XDG directories, and every home in
 * /etc/passwd, each an existing directory trace_view_maskable allows, but
 * none a mount of cfg replaces. NULL-terminated; freed with trace_view_free. */
char **trace_view_homes(const struct trace_config *cfg);
void trace_view_free(char **v);
/* In the child: a sysfs of the run's network namespace mounted at scratch, and
 * at "at" a read-only tmpfs holding only the parts of it a build reads (where
 * the kernel refuses a new sysfs, those of host_sys but its network ones).
 * 0, or -errno with *what naming the step. */
int trace_view_sys(const char *scratch, const char *host_sys, const char *at, const char **what);

/* Read in the supervisor, before the run's user namespace exists. */
void trace_view_allowances(struct trace_view_allow *a);
/* In the child, while it holds CAP_SYS_RESOURCE in the run's user namespace:
 * its max_* counters; then the two rlimits every guest task inherits.
 * 0, or -errno with *what naming the counter. */
int trace_view_bound_userns(const struct trace_view_allow *a, const char **what);
int trace_view_bound_rlimits(const struct trace_view_allow *a, const char **what);

/* A root invoker's guest's host uid and gid, TRACE_HOST_ID_BASE + sbx's pid
 * (above systemd's container range); its user namespace is made with that
 * euid: the kernel charges the namespace's owner, not root, for what the guest
 * takes of per-user allowances. */
uid_t trace_view_guest_id(void);
/* clone(flags, pidfd) with this thread's euid set to owner meanwhile (a root
 * caller): as clone, 0 in the child, the child's pid or -1 with errno. */
pid_t trace_view_clone(uid_t owner, long flags, int *pidfd);

/* Where the child builds the guest's tree, and where the host's tree stays
 * reachable meanwhile (the plan's sources and targets are beneath them). */
#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"
/* s written to the file at path (a /proc map, say); 0 or -1 with e. */
int trace_box_write(const char *path, const char *s, struct common_err *e);
/* Closes *fd when open, and marks it closed. */
void trace_box_close(int *fd);

/* The run's fuel fuse (trace/box/fuse.c): a process outside the tree that kills
 * it once the cgroup's CPU count passes the ceiling last armed. */
struct trace_fuse_shared;
struct trace_fuse {
	struct trace_fuse_shared *sh; /* the ceiling, shared with the fuse */
	int wake_rd, wake_wr;         /* a byte wakes the fuse; EOF ends it */
	int count_fd, v2;             /* the cgroup's CPU count: cpu.stat (v2) or cpuacct.usage */
	pid_t init;                   /* the run's init: never killed, its CPU not counted */
	int init_fd;                  /* its schedstat, once started; else -1 */
	uint64_t init_base_ns;        /* what it had burnt just after it entered the cgroup
				       * (mid set-up: the µs between count as the guest's) */
	unsigned ncpu;                /* the CPUs the tree may burn on at once */
};
/* The shared page; -1 when none can be mapped. */
int trace_fuse_open(struct trace_fuse *f);
/* The fuse process, for the tree whose init is init, listed in procs_path; 0 or -1. */
int trace_fuse_start(struct trace_fuse *f, const char *procs_path, pid_t init);
/* The tree is killed once the count passes ceiling_us (armable before the start). */
void trace_fuse_arm(struct trace_fuse *f, uint64_t ceiling_us);
/* The guest's count, µs, or -1. */
int64_t trace_fuse_count_us(const struct trace_fuse *f);
void trace_fuse_close(struct trace_fuse *f);

#endif
