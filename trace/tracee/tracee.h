/* trace/tracee: one thread of a guest held in a ptrace stop, as every part of
 * sbx touches it: its memory, its registers, syscalls injected into it,
 * waiting for its own stops, its /proc fields, paths as its root resolves them.
 * Nothing here keeps state between calls but a struct trace_tracee the caller owns. */
#ifndef SBX_TRACE_TRACEE_H
#define SBX_TRACE_TRACEE_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/user.h>
#include "libcommon/common.h"

/* Memory through process_vm_*: the guest's own page protections apply (what it
 * could not read or write itself fails). Bytes moved (short at the first bad
 * page) or -errno. */
ssize_t trace_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len);
ssize_t trace_mem_write(pid_t tid, uint64_t addr, const void *buf, size_t len);
/* NUL-terminated string of at most max-1 bytes: length, or -ENAMETOOLONG/-EFAULT. */
ssize_t trace_mem_read_str(pid_t tid, uint64_t addr, char *buf, size_t max);
/* One write through /proc/TID/mem, which ignores page protections (text,
 * read-only scratch pages the guest cannot touch): bytes written or -errno. */
ssize_t trace_mem_poke(pid_t tid, uint64_t addr, const void *buf, size_t len);

/* A thread held for many accesses: /proc/TID/mem open, and a syscall
 * instruction to inject from at any stop. */
struct trace_tracee {
	pid_t tid;
	int memfd;          /* /proc/TID/mem, O_RDWR */
	uint64_t insn;      /* address of a 0f 05; 0 until trace_tracee_find_syscall */
};
int trace_tracee_open(struct trace_tracee *t, pid_t tid, struct common_err *e);
void trace_tracee_close(struct trace_tracee *t);
/* All of len, through /proc/TID/mem where page protections stop
 * process_vm_readv (process_vm_writev); or -1 (e filled; may be NULL). */
int trace_tracee_read(struct trace_tracee *t, uint64_t addr, void *buf, size_t len,
		      struct common_err *e);
int trace_tracee_write(struct trace_tracee *t, uint64_t addr, const void *buf, size_t len,
		       struct common_err *e);

/* General registers: 0 or -errno. */
int trace_regs_get(pid_t tid, struct user_regs_struct *r);
int trace_regs_set(pid_t tid, const struct user_regs_struct *r);
/* The six syscall argument registers. */
void trace_regs_set_args(struct user_regs_struct *r, const uint64_t a[6]);
/* The XSAVE area (NT_X86_XSTATE): *len is buf's size in, the kernel's out. 0 or -errno. */
int trace_xstate_get(pid_t tid, void *buf, size_t *len);
int trace_xstate_set(pid_t tid, const void *buf, size_t len);
/* The blocked-signal mask (bit sig-1): 0 or -errno. */
int trace_sigmask_get(pid_t tid, uint64_t *mask);
int trace_sigmask_set(pid_t tid, uint64_t mask);

/* Wait for tid's next ptrace stop, consuming no other thread's event and not
 * tid's exit (both stay for the supervisor's loop): 0 with its wait status;
 * -ESRCH when tid exits (its PTRACE_EVENT_EXIT stop is resumed); or -errno. */
int trace_wait_stop(pid_t tid, int *status);

/* Injected syscalls: nr(a) runs in the stopped thread, *ret gets its rax; a
 * signal met meanwhile is sent again once it ran. 0, -EIO (registers), -ESRCH
 * (the thread exits) or -errno. At a seccomp stop: afterwards the thread is at
 * a fresh seccomp stop of its own pending syscall, with its own registers. */
int trace_inject_at_entry(pid_t tid, long nr, const uint64_t a[6], int64_t *ret);
/* A thread that was at the seccomp stop of the call registers at describe (and
 * ran injected calls since) stops there again, with those registers. */
int trace_seccomp_again(pid_t tid, const struct user_regs_struct *at);
/* At a syscall-exit stop: afterwards the completed syscall's registers are back. */
int trace_inject_at_exit(pid_t tid, long nr, const uint64_t a[6], int64_t *ret);
/* At any stop, from t->insn: registers are left as the syscall left them
 * (callers save and restore them). -1 with e filled on failure. */
int trace_tracee_inject(struct trace_tracee *t, long nr, const uint64_t a[6], int64_t *ret,
			struct common_err *e);
/* Find a syscall instruction for it: in [vdso] first, else any executable mapping. */
int trace_tracee_find_syscall(struct trace_tracee *t, struct common_err *e);
/* Stop a running tid at a step boundary (PTRACE_INTERRUPT): a syscall caught at
 * its seccomp stop on the way is rewound to run (and be supervised) again after;
 * signals met are delivered; with signals_left a stop other than the interrupt's
 * or a seccomp stop (a signal, its exit, a call's exit) is refused (try again)
 * and left for the supervisor's loop (a --deterministic run answers a rdtsc
 * fault, orders a signal's delivery and an exit). */
int trace_tracee_interrupt(pid_t tid, int signals_left, struct common_err *e);
/* Let a stopped tid run on, no signal delivered: 0 or -errno (ESRCH: it is gone). */
int trace_tracee_resume(pid_t tid);
/* Let a stopped tid run to its end through the stops on the way, and reap it
 * (the caller is its tracer and set it to exit): 0 or -errno. */
int trace_tracee_reap(pid_t tid);
/* Resume tid (delivering sig) and wait for its next stop or its end, which is
 * reaped: for a task made to exit on purpose. 0 or -errno. */
int trace_tracee_cont_reap(pid_t tid, int sig, int *status);
/* Resume tid to its next syscall stop or event; -ESRCH once it ends (not reaped). */
int trace_tracee_syscall_step(pid_t tid, int *status);
/* The kind of syscall stop tid is in (PTRACE_SYSCALL_INFO_*): op or -errno. */
int trace_syscall_op(pid_t tid);
/* The off-th signal queued for tid (shared: for its process), its raw 128-byte
 * siginfo: 1, 0 past the last one, or -errno. */
int trace_sigqueue_peek(pid_t tid, int shared, uint64_t off, uint8_t info[128]);
/* tid's registered rseq area (len 0: none): 0 or -errno. */
int trace_rseq_get(pid_t tid, uint64_t *ptr, uint32_t *len, uint32_t *sig);
/* The siginfo of tid's signal-delivery stop: 0 or -errno. */
int trace_siginfo(pid_t tid, siginfo_t *si);

/* /proc/TID/status, read once and looked up by field ("Tgid", "PPid", "Umask",
 * "SigCgt"...): the value text after the colon and its blanks, up to the
 * newline, or NULL. */
/* tid's fd as /proc/TID/fdinfo says: its position and open flags (either may be
 * NULL); 0, or -errno (no such fd, or no such line). */
int trace_fdinfo(pid_t tid, int fd, int64_t *pos, unsigned *flags);
struct trace_status { char *text; };
int trace_status_read(pid_t tid, struct trace_status *s); /* 0 or -errno */
void trace_status_free(struct trace_status *s);
const char *trace_status_field(const struct trace_status *s, const char *key);
/* The field's first number in base; 0, or -1 when missing or not a number. */
int trace_status_num(const struct trace_status *s, const char *key, int base,
		     unsigned long long *v);
/* The innermost id of NSpid (its id in the run's PID namespace), 0 if missing. */
pid_t trace_status_nspid(const struct trace_status *s);

/* A root invoker's guest runs as host uid TRACE_HOST_ID_BASE + sbx's pid, the
 * owner of the run's user namespace (trace/box/view.c). */
#define TRACE_HOST_ID_BASE 0x70000000u
/* prlimit(2) of a guest task: 0 or -errno. Where root lacks CAP_SYS_RESOURCE,
 * this thread acts meanwhile with the guest's own host uid, the owner of the
 * run's user namespace (which the kernel lets act on it). */
int trace_prlimit(pid_t pid, int resource, const struct rlimit *set, struct rlimit *get);

/* One line of /proc/TID/maps. */
#define TRACE_MAP_PATH_MAX 4096u
struct trace_map {
	uint64_t start, end, offset;
	dev_t dev;                 /* the mapped file's device and inode (0: none) */
	uint64_t ino;
	char perms[5];
	char path[TRACE_MAP_PATH_MAX];
};
/* All mappings of tid (malloc'd array). */
int trace_proc_maps(pid_t tid, struct trace_map **out, size_t *n, struct common_err *e);
/* start_brk from /proc/TID/stat. */
int trace_proc_start_brk(pid_t tid, uint64_t *start_brk, struct common_err *e);

/* Paths as the kernel will resolve them in the guest's view (guestpath.c).
 * fold: "//", "/./" and ".." folded lexically (in absolute). real: every symlink
 * and /proc/self magic link (root, cwd, exe, fd/N) resolved inside tid's root,
 * the last component too when follow_last; 0, -ENOTDIR when a component before
 * the last is neither a directory nor a link (the kernel fails there), or -1
 * when a link cannot be read. */
void trace_path_fold(const char *in, char out[PATH_MAX]);
int trace_path_real(pid_t tid, const char *path, int follow_last, char out[PATH_MAX]);
/* The object an absolute guest path names (as trace_path_real resolves it), or
 * the one tid's descriptor fd (AT_FDCWD: its cwd) holds, as an O_PATH
 * descriptor of ours: its type and owner no longer move. fd or -errno. */
int trace_path_open(pid_t tid, const char *path, int follow_last);
int trace_fd_open(pid_t tid, int fd);

#endif
