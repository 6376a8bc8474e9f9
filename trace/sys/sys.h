/* trace/sys: the syscall table (trace/sys/syscalls.def is the one place syscall
 * facts live) and the filter modifiers that select from it. */
#ifndef SBX_TRACE_SYS_H
#define SBX_TRACE_SYS_H

#include <stddef.h>
#include "trace/trace.h"

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

/* Filter modifier, not a class: with it, readlink/readlinkat do not stop even
 * though they are TRACE_CLASS_FILE. sbx-run sets it at level file when no
 * inspector asked for file calls: readlink is ~70% of a compiler's path calls
 * and changes nothing in a build record (level all still records it). */
#define TRACE_FILTER_NO_READLINK (1u << 30)
/* With TRACE_CLASS_LOAD alone, the largest read the filter lets run without a stop. */
#define TRACE_LOAD_SMALL (128u << 10)
#define TRACE_FILTER_DETERM (1u << 29)  /* filter modifier: also trap trace_determ_traps() */
/* The extra syscalls TRACE_FILTER_DETERM traps (fstat, getdents64, sched_getaffinity, ...). */
int trace_determ_traps(long nr);

#endif
