/* trace/sys: the syscall table (trace/sys/syscalls.def and facts.def are the one
 * place syscall facts live), the filter modifiers that select from it, and the
 * boundary's verdict and seccomp program walked over it. */
#ifndef SBX_TRACE_SYS_H
#define SBX_TRACE_SYS_H

#include <fcntl.h>
#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>
#include "sbx.h" /* enum trace_class, struct common_err */

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
	TRACE_ARG_PROT,   /* mmap/mprotect protection: a shared file mapping's PROT_WRITE is held */
	TRACE_ARG_MFLAGS, /* mmap flags: only a MAP_SHARED file mapping stores */
	TRACE_ARG_MAPADDR,/* an address in a mapping (mremap: a held one moves) */
	TRACE_ARG_MAPLEN, /* the length a new LEN replaces */
	TRACE_ARG_OFFSET, /* the file offset the call works at (preadv2/pwritev2: -1 is the position) */
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
/* The class bit a name ("file", "read", ...) stands for, or 0; TRACE_CLASS_NAMES
 * lists every name for messages. */
unsigned trace_class_by_name(const char *name);
#define TRACE_CLASS_NAMES "file, read, write, process, net, signal, memory, time, desc, refused, store, load"
size_t trace_sys_count(void);
const struct trace_sysinfo *trace_sys_at(size_t i);
/* The position of the first argument of this kind, or -1. */
int trace_sys_arg(const struct trace_sysinfo *s, enum trace_arg kind);
/* Facts of a call the filter and the verdict act on (trace/sys/facts.def). */
enum trace_fact {
	TRACE_FACT_NEVER_TRAPPED = 1u << 0, /* allowed whatever the plan */
	TRACE_FACT_EXEC = 1u << 1,          /* stops, as an exec (TRACE_FILTER_EXEC_EVENT: as its classes) */
	TRACE_FACT_AT_EXIT = 1u << 2,       /* always stops: the supervisor judges it */
	TRACE_FACT_UNSUPPORTED = 1u << 3,   /* ENOSYS, each attempt stopped (counted, recorded) */
	TRACE_FACT_DETERM = 1u << 4,        /* TRACE_FILTER_DETERM traps it beyond its classes */
	TRACE_FACT_LINK_READ = 1u << 5,     /* TRACE_FILTER_NO_READLINK lets it run */
	TRACE_FACT_ADDRESSED = 1u << 6,     /* stops when argument 4 (an address) is not NULL */
	TRACE_FACT_REMAP = 1u << 7,         /* TRACE_FILTER_REMAP traps it (mmap: with MAP_FIXED) */
	TRACE_FACT_NOFOLLOW = 1u << 8,      /* a symlink last in its paths is not followed */
	TRACE_FACT_CHMOD = 1u << 9,         /* changes an existing object's mode */
	TRACE_FACT_ORDERED = 1u << 10,      /* another task can observe it: --deterministic orders it */
	TRACE_FACT_FD_ORDERED = 1u << 11,   /* ordered when its fds (arguments 0, 1) are not regular files */
	TRACE_FACT_NOTIFY = 1u << 12,       /* a lookup TRACE_FILTER_NOTIFY_PROG serves (trace/sv/notify.c) */
};
unsigned trace_sys_facts(long nr);
/* Whether the call with args a follows a symlink that is the last component of
 * its k-th path argument, as the kernel decides (facts, open flags, AT_ flags). */
int trace_sys_follows_last(const struct trace_sysinfo *s, const uint64_t a[6], int k);
/* Argument rules, on an argument's low 32 bits (trace/sys/facts.def). */
enum trace_rule {
	TRACE_RULE_CLEAR,  /* none of value's bits */
	TRACE_RULE_NOT,    /* anything but value */
	TRACE_RULE_ONE_OF, /* value (and and_arg is and_value), or another ONE_OF row */
};
struct trace_argrule {
	int nr;
	unsigned char kind, arg;
	signed char and_arg;       /* -1: value alone */
	uint32_t value, and_value;
	int err;                   /* the verdict on a call that breaks the rule */
};
/* A call's rules, adjacent in the table: the first, and their count in *n. */
const struct trace_argrule *trace_sys_rules(long nr, size_t *n);
/* The errno a call's arguments earn by its rules, or 0. */
int trace_sys_rules_errno(long nr, const uint64_t a[6]);

/* Filter modifier, not a class: with it, the TRACE_FACT_LINK_READ calls
 * (readlink, readlinkat) do not stop though they are TRACE_CLASS_FILE. sbx-run sets it at level file when no
 * inspector asked for file calls: readlink is ~70% of a compiler's path calls
 * and changes nothing in a build record (level all still records it). */
#define TRACE_FILTER_NO_READLINK (1u << 30)
/* With TRACE_CLASS_LOAD alone, the largest read the filter lets run without a stop. */
#define TRACE_LOAD_SMALL (128u << 10)
/* Where held shared file mappings are placed (trace/meter/mapping.c): a read into
 * this window stops whatever its size, so the held pages it stores into are opened
 * first (the kernel's store would fail with EFAULT). No ASLR region lies here. */
#define TRACE_MAP_WINDOW_LO 0x200000000000ull
#define TRACE_MAP_WINDOW_HI 0x300000000000ull
#define TRACE_FILTER_DETERM (1u << 29)  /* filter modifier: also trap TRACE_FACT_DETERM calls */
/* Filter modifier: calls that can unmap or replace a mapping stop (the inspector
 * keeps the pages holding decided paths in place). */
#define TRACE_FILTER_REMAP (1u << 28)
/* Not a class: given alone, trace_filter_build makes the second program, which hands the
 * TRACE_FACT_NOTIFY calls (read-only opens, stats, access checks) to a user
 * notification listener and allows everything else to the first program. */
#define TRACE_FILTER_NOTIFY_PROG (1u << 27)
/* Filter modifier: execve and execveat run without a stop unless a class the
 * plan traps holds them; PTRACE_EVENT_EXEC alone tells of an exec that succeeded
 * (a failed one, a compiler driver's PATH probe, changes nothing). */
#define TRACE_FILTER_EXEC_EVENT (1u << 26)
/* Set in the high half of a notified call's int argument (the kernel reads 32 bits),
 * the call goes past the listener to the ptrace stop (a call it handed back). */
#define TRACE_NOTIFY_MARK (1ull << 40)
/* The argument the mark goes in: the open flags, the flags, the mode, or the first
 * argument the call does not have. */
int trace_sys_notify_arg(const struct trace_sysinfo *s);

#define TRACE_GUEST_UID 1000      /* uid/gid inside: the only ids a guest may take or give */
/* open(2) flags that create an inode */
#define TRACE_CREATE_FLAGS (O_CREAT | (O_TMPFILE & ~O_DIRECTORY))
/* SECCOMP_RET_DATA tags: hints only; the supervisor decides from the syscall
 * itself, because a guest-installed filter can return TRACE with any data. */
enum {
	TRACE_TAG_UNKNOWN = 1, /* number not in the table */
	TRACE_TAG_EXEC = 2,    /* execve/execveat */
	TRACE_TAG_REFUSED = 3, /* always refused, or refused by an argument check */
	TRACE_TAG_CLASS = 4,   /* a class the caller asked to trace */
	TRACE_TAG_BADARCH = 5, /* i386 (int 0x80) or x32 */
};
/* The boundary's own verdict on a trapped syscall (trace/sys/filter.c): 0 allow,
 * else the errno. */
int trace_boundary_errno(int arch_ok, long nr, const uint64_t args[6]);
/* A refusal the object may lift: S_ISGID without S_ISUID asked of an existing
 * object (TRACE_FACT_CHMOD), which a directory may carry (its new entries take
 * its group; binds are nosuid). The mode's argument index, or -1. */
int trace_boundary_dir_mode(long nr, const uint64_t args[6]);
/* The seccomp program for classes into *prog (malloc'd filter). */
int trace_filter_build(unsigned classes, struct sock_fprog *prog, struct common_err *e);
/* The filter the storage meter adds to a process that holds a shared file mapping
 * (trace/meter/hold.c): every protection change (mprotect, pkey_mprotect) stops,
 * not only one asking for PROT_WRITE, so the held ranges keep the protection the
 * guest asked for; the base filter decides every other call. Its length in f (at
 * most max instructions), 0 when it does not fit. */
size_t trace_filter_held(struct sock_filter *f, size_t max);
/* The same written to fd (tests and sbx-run --print-filter). */
int trace_filter_export(unsigned classes, int fd, struct common_err *e);

#endif
