/* trace: the sandbox boundary, the ptrace supervisor, metering, inspection,
 * state transport and trace records (SPEC §5–§7, §9). */
#ifndef SBX_TRACE_H
#define SBX_TRACE_H

#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h"

/* ---- syscall table (trace/syscalls.def is the one place syscall facts live) ---- */
/* Classes, a bit set, used by the filter, the recorder and policy rules. */
enum trace_class {
	TRACE_CLASS_FILE = 1u << 0,    /* takes a path */
	TRACE_CLASS_READ = 1u << 1,    /* read family (metered storage_read) */
	TRACE_CLASS_WRITE = 1u << 2,   /* write family (metered storage_write) */
	TRACE_CLASS_PROCESS = 1u << 3, /* fork/clone/exec/exit/wait */
	TRACE_CLASS_NET = 1u << 4,
	TRACE_CLASS_SIGNAL = 1u << 5,
	TRACE_CLASS_MEMORY = 1u << 6,
	TRACE_CLASS_TIME = 1u << 7,    /* virtualized under --deterministic */
	TRACE_CLASS_DESC = 1u << 8,    /* creates/closes descriptors */
	TRACE_CLASS_REFUSED = 1u << 9, /* always refused by the boundary */
};
/* Argument kinds, per argument position. */
enum trace_arg {
	TRACE_ARG_NONE, TRACE_ARG_INT, TRACE_ARG_FD, TRACE_ARG_DIRFD, TRACE_ARG_PATH,
	TRACE_ARG_FLAGS, TRACE_ARG_PTR, TRACE_ARG_SIZE, TRACE_ARG_MODE,
};
struct trace_sysinfo {
	const char *name;
	int nr;                 /* x86-64 number */
	unsigned classes;       /* enum trace_class bits */
	unsigned char arg[6];   /* enum trace_arg per argument */
};
const struct trace_sysinfo *trace_sys_by_nr(long nr);  /* NULL if unknown */
const struct trace_sysinfo *trace_sys_by_name(const char *name);
size_t trace_sys_count(void);
const struct trace_sysinfo *trace_sys_at(size_t i);

/* ---- one supervised syscall, as the supervisor sees it at a stop ---- */
enum trace_action { TRACE_ALLOWED, TRACE_DENIED, TRACE_REWRITTEN };
struct trace_stop {
	pid_t pid, tid, ppid;           /* host-namespace ids */
	long nr;
	const struct trace_sysinfo *sys; /* NULL if not in the table */
	uint64_t args[6];
	const char *path[2];            /* decoded, absolute in the guest's view, or NULL */
	int has_result;
	int64_t result;                 /* return value, or -errno */
	enum trace_action action;
	int deny_errno;                 /* when denied */
	const char *rewrite[2];         /* new path strings when rewritten */
};

#endif
