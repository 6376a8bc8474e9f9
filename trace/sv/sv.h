/* trace/sv: trace_run and the supervisor: one loop over every stop of the guest
 * tree, the ordered layers features plug into it, and the output relay. */
#ifndef SBX_TRACE_SV_H
#define SBX_TRACE_SV_H

#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "trace/box/box.h"

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
	int again;                      /* denied without a refusal: the thread issues the
					 * call once more, to a fresh stop (a layer holds it) */
	const char *rewrite[2];         /* new path strings when rewritten */
	int want_exit;                  /* set by on_entry: also stop at syscall exit */
	int arch_ok;                    /* 0: i386/x32 entry (always refused) */
	int record;                     /* an inspector rule asked for its result in the trace */
	int outside;                    /* a connect to a host socket named with --socket */
	const char *uncontrolled;       /* a source no layer answers, named at the event */
	int host_fd;                    /* >0: the file the supervisor opened for the call (notify.c) */
	int exists;                     /* 1/2: the supervisor's own lookup found the path / not (notify.c) */
	int answer_at_turn;             /* set by on_exit: the answer waits for the task's turn (on_turn) */
};

struct trace_guest;      /* the stopped thread inside a hook; opaque */
struct trace_supervisor; /* the running supervisor inside a hook; opaque */
struct user_regs_struct;

/* The layers features compose as, in the order the supervisor walks them at every
 * hook point: each layer sees what the ones before it decided. The order is this
 * enum and the walk in trace/sv/supervise.c, nowhere else. */
enum trace_layer_slot {
	/* the tool's own, first: its exec check precedes every feature, and its
	 * tick feeds the trace's bytes to the meter before the bounds are read */
	TRACE_LAYER_CONTROL,
	/* decides each call: policy, co-process, callback */
	TRACE_LAYER_INSPECT,
	/* meters the call the inspector let through and holds it to the bounds */
	TRACE_LAYER_METER,
	/* answers from virtual state what the inspector let through */
	TRACE_LAYER_DETERM,
	/* rebuilds a restored guest at its first exec, once determinism rewrote the auxv */
	TRACE_LAYER_RESTORE,
	/* records the final action and the emulated result */
	TRACE_LAYER_RECORD,
	/* the tool's own, last: what follows a recorded event (sbx_call's patch, a
	 * replay's stop at the disputed step) */
	TRACE_LAYER_AFTER,
	TRACE_LAYERS
};

/* One layer: all hooks optional, ctx passed back. At entry, call, exit, exec and
 * start a hook returning <0 ends the walk and stops the guest; tick, fd, spawn,
 * proc_exit and signal reach every layer; at a fault the first layer handling it
 * ends the walk. */
struct trace_layer {
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
	 * execve reaches only on_entry. <0: the layer stopped the guest (trace_sv_stop
	 * names why) and not one instruction of the program runs. */
	int (*on_exec)(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
		       const char *path);
	/* parent is the creator's thread group */
	void (*on_spawn)(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
			 unsigned long clone_flags);
	/* at PTRACE_EVENT_EXIT: /proc/pid still readable; the layer frees its slot here */
	void (*on_proc_exit)(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus);
	/* at least every 250 ms while the guest runs (and once at the end); nonzero stops
	 * the guest tree, with trace_sv_stop()'s reason if set, else "hook" */
	int (*on_tick)(void *ctx, struct trace_supervisor *sv);
	/* an fd registered with trace_sv_watch() is readable (a layer ignores fds not
	 * its own); <0 stops the guest */
	int (*on_fd)(void *ctx, struct trace_supervisor *sv, int fd);
	/* a thread of the guest's process (its main thread or another) is in a
	 * signal-delivery stop for sig, which is passed on afterwards (the hook
	 * may inject syscalls; it must not resume it) */
	void (*on_signal)(void *ctx, struct trace_supervisor *sv, pid_t tid, int sig);
	/* any thread's signal-delivery stop, before on_signal: 1 when the hook handled
	 * the signal (it is then not delivered), 0 to deliver it */
	int (*on_fault)(void *ctx, struct trace_guest *g, int sig);
	/* a task is forgotten with this layer's slot still set (its exit never came) */
	void (*slot_free)(void *ctx, void *slot);
	/* the schedule (trace_sv_scheduled) puts tid's events since its last call
	 * here, in the run's one order: it takes or ends a turn, or is gone */
	void (*on_order)(void *ctx, pid_t tid);
	/* the task stopped at the exit whose on_exit set st->answer_at_turn has its
	 * turn in the schedule (or is gone): the layer answers now, in the run's
	 * order; its events stay where they are (no on_order) */
	void (*on_turn)(void *ctx, struct trace_guest *g);
};
enum trace_priority {
	TRACE_PRIO_NORMAL,   /* SCHED_OTHER: the invoker may not raise it */
	TRACE_PRIO_REALTIME, /* raised to SCHED_FIFO within its duty */
	TRACE_PRIO_INVOKER,  /* the invoker's own policy or nice, kept */
};
/* The parallel schedule's counts (trace/sv/sched.c): stops that waited for
 * their turn and those that went on at once; turns taken; calls found to wait
 * (blocked until another task's event); tasks let loose; the µs ordered stops
 * spent ready but waiting for a lower key (the schedule's cost), and blocked
 * (waiting for another task, as they would without it), summed over tasks. */
#define TRACE_SCHED_NR 512 /* calls whose parked µs are told apart: x86-64 numbers below it */
struct trace_sched_stats {
	uint64_t ordered, free, turns, blocked, loose, parked_us, blocked_us;
	uint64_t answered; /* of the turns, answers a layer put off until then (on_turn) */
	/* parked_us by what waited: the call's number, an exit, an answer put
	 * off until the turn (a first sight), anything else (a thread's stop
	 * outside a call, a call numbered past the table) */
	uint64_t parked_call_us[TRACE_SCHED_NR], parked_exit_us, parked_answer_us, parked_other_us;
};
#define TRACE_STOPS_NR 512 /* call numbers the result counts stops of (above: uncounted) */
struct trace_result {
	int exited, status;           /* guest exit status when exited */
	int signal;                   /* killing signal, else 0 */
	int wstatus;                  /* raw wait status of the guest's main process */
	char stop_reason[64];         /* "" or why the supervisor stopped the guest */
	int host_signal;              /* SIGTERM/SIGINT/SIGHUP/SIGQUIT that ended the run, else 0 */
	int exec_failed;              /* the image could not be executed: errno */
	pid_t guest_pid;              /* host pid of the guest's main process */
	uint64_t stops;               /* seccomp stops handled */
	uint64_t exit_stops;          /* other syscall stops: a call's result asked for, a guest tracer's */
	/* both by call number, for calls of the syscall table (trace/sys) */
	uint32_t stops_by_nr[TRACE_STOPS_NR][2];
	uint64_t notified;            /* calls served by user notification (notify_files) */
	uint64_t refused;             /* syscalls the boundary refused */
	uint64_t unscheduled;         /* trace_sv_scheduled: waits outside the schedule (tasks let loose) */
	struct trace_sched_stats sched; /* trace_sv_scheduled: what the schedule did */
	uint64_t cpu_us;              /* user+sys of the whole tree (the sandbox init's rusage) */
	uint64_t maxrss;              /* bytes, largest process */
	enum trace_priority priority; /* the tracer's scheduling (trace/sv/prio.c) */
};
/* Run the guest to completion. 0 with *res filled (whatever the guest did), or -1
 * when the boundary could not be built (nothing ran). It waits for its own tasks
 * only, so runs in several threads at once are independent; the hooks are called
 * on the supervising thread (cfg->host_signals). */
int trace_run(const struct trace_config *cfg, struct trace_result *res, struct common_err *e);
/* The tracer thread's scheduling (trace/sv/prio.c). */
struct trace_prio {
	int raised, kept, rt, unhurried;
	int policy;                   /* the thread's before, put back at the end */
	struct sched_param param;
	int64_t credit_us;            /* real-time CPU it may still spend */
	uint64_t at_us, at_cpu_us;    /* when the budget was settled, the thread's CPU then */
};
/* The calling thread SCHED_FIFO, what it creates SCHED_OTHER; -EEXIST when the
 * invoker chose its own scheduling (kept), -errno when it may not raise it. */
int trace_prio_raise(struct trace_prio *pr);
/* Another thread of the tracer (its waker, the observation writer): raised as the
 * tracer was, on a budget of its own (trace_prio_duty); -errno if not. */
int trace_prio_join(struct trace_prio *pr, const struct trace_prio *tracer);
/* In the tracer's loop: SCHED_OTHER once its real-time budget is spent, SCHED_FIFO
 * again once it has some. */
void trace_prio_duty(struct trace_prio *pr, uint64_t now_us);
/* Long host-side work (a snapshot) runs SCHED_OTHER: the budget is not looked at
 * until it is done. */
void trace_prio_unhurried(struct trace_prio *pr, int on);
void trace_prio_restore(struct trace_prio *pr);
/* Exit status for sbx-run (SPEC §6.6) from a result. */
int trace_result_exit_code(const struct trace_result *res);

/* Inside hooks: the stopped thread. Memory reads/writes are bounded, -errno on failure. */
pid_t trace_guest_tid(const struct trace_guest *g);
pid_t trace_guest_pid(const struct trace_guest *g);
ssize_t trace_guest_read(struct trace_guest *g, uint64_t addr, void *buf, size_t len);
ssize_t trace_guest_write(struct trace_guest *g, uint64_t addr, const void *buf, size_t len);
int trace_guest_get_regs(struct trace_guest *g, struct user_regs_struct *r);
int trace_guest_set_regs(struct trace_guest *g, const struct user_regs_struct *r);
/* At an entry stop: run nr with args instead (re-checked by the filter). */
int trace_guest_set_syscall(struct trace_guest *g, long nr, const uint64_t args[6]);
/* Per-task state: one pointer per layer in the supervisor's record of each task,
 * NULL until the layer sets it. The stopped thread's; any task's of this run (NULL
 * when tid is none). */
void **trace_guest_slot(struct trace_guest *g, enum trace_layer_slot l);
/* At the seccomp stop of stat, lstat, newfstatat or statx: the answer the
 * guest's kernel would give, from the supervisor's own lookup of the path in
 * the guest's view with its ids (trace/sv/lookup.c): 0 with *result (0 or
 * -errno) and, when 0, the struct stat or statx (256 bytes) in out; -1 when it
 * cannot tell exactly (/proc and kin, a ".." above a relative path's
 * directory, a magic link, an error other than a name verified absent): the
 * call must run. */
int trace_guest_stat(struct trace_guest *g, const struct trace_stop *st, void *out,
		     int64_t *result);
/* At a seccomp stop under the parallel schedule: whether an answer put off for
 * the task's turn would be given at once, every other task standing still
 * until then (trace/sv/sched.c). 0 without a schedule. */
int trace_guest_alone(struct trace_guest *g);
void **trace_sv_slot(struct trace_supervisor *sv, pid_t tid, enum trace_layer_slot l);
/* The supervisor inside hooks. */
int trace_sv_watch(struct trace_supervisor *sv, int fd);    /* poll fd; on_fd when readable */
void trace_sv_stop(struct trace_supervisor *sv, const char *reason); /* kill the guest tree */
/* kill the guest tree before returning: a crossed bound stops it before any write */
void trace_sv_kill_now(struct trace_supervisor *sv, const char *reason);
/* the next tick comes within us (at least 1 ms), not the usual 250 ms */
void trace_sv_tick_within(struct trace_supervisor *sv, uint64_t us);
size_t trace_sv_pids(const struct trace_supervisor *sv, pid_t *out, size_t max); /* live tids */
pid_t trace_sv_guest_pid(const struct trace_supervisor *sv);
uint64_t trace_sv_peak_rss(const struct trace_supervisor *sv); /* bytes, largest reaped task */
/* From on_start: the guest tree's tasks run at once, and the events through
 * which one can observe another happen in an order decided by what they did,
 * not by timing (trace/sv/sched.c); layers hear it through on_order. classes:
 * the calls every such run stops at (with TRACE_FACT_DETERM ones), which alone
 * count on the tasks' clocks. */
void trace_sv_scheduled(struct trace_supervisor *sv, unsigned classes);
/* The schedule in a snapshot's determinism record (trace/sv/sched_state.c). The
 * save, at an entry stop of a hook: each task's key by its namespace id (ns
 * maps a host tid, <= 0: none) into b, and into again[] (at most max) the
 * tasks parked at the seccomp stop of a call they issue again once restored;
 * -1 and *why (static), nothing written, while a task stands where no snapshot
 * holds it (the turn held, starting, at its exit, inside a call the supervisor
 * completes, in flight inside a call whose exit is awaited). The load checks
 * every field (NULL, r failed); the resume, once the restored tree is adopted,
 * gives each task (map: the host id of each namespace id) its key back. */
struct codec_buf;
struct codec_rd;
struct trace_sched_saved;
struct trace_sv_again { pid_t tid; long nr; };
struct trace_sv_idmap { pid_t host, ns; };
int trace_sv_sched_save(struct trace_supervisor *sv, pid_t (*ns)(pid_t), struct codec_buf *b,
			struct trace_sv_again *again, size_t max, size_t *nagain, const char **why);
struct trace_sched_saved *trace_sched_saved_load(struct codec_rd *r);
void trace_sched_saved_free(struct trace_sched_saved *s);
int trace_sv_sched_resume(struct trace_supervisor *sv, const struct trace_sched_saved *s,
			  const struct trace_sv_idmap *map, size_t nmap, struct common_err *e);
/* The entry stop a task stopped at last (its arguments, the layers' verdict). */
const struct trace_stop *trace_sv_entry_stop(struct trace_supervisor *sv, pid_t tid);
/* What the schedule reads of a task (trace/sv/ready.c): 1 unless the call
 * nr (arguments a) of the stopped tid would wait for another task (a blocking
 * descriptor with nothing to read, a wait with no reapable child, select/poll
 * with nothing ready, pause/sigsuspend; a pending caught signal ends any);
 * its state letter from /proc/TID/stat ('X' if gone); 1 when its parent is
 * alive (neither a zombie nor gone). */
int trace_sv_call_ready(pid_t tid, long nr, const uint64_t a[6]);
char trace_sv_task_state(pid_t tid);
int trace_sv_parent_alive(pid_t tid);
/* 1 unless a futex call of tid (arguments a) would wait: FUTEX_WAIT whose word
 * still holds the value. */
int trace_sv_futex_ready(pid_t tid, const uint64_t a[6]);
/* 1 when fd of tid is a regular file, a directory or a device no other task
 * can tell apart (null, zero, full, random, urandom): its bytes are the task's
 * own business. */
int trace_sv_fd_private(pid_t tid, int fd);
/* From now on every syscall of the tree stops at its entry and exit (on_call). */
void trace_sv_every_call(struct trace_supervisor *sv);
int trace_sv_every_call_on(const struct trace_supervisor *sv);
/* A task resumed outside the loop (by a snapshot) stops once more, so the loop
 * resumes it in every-call mode. */
void trace_sv_every_call_rearm(struct trace_supervisor *sv, pid_t tid);
/* Threads of pid made outside the loop (a restore's injected clones), each in
 * a ptrace stop the loop never saw: known from now on and resumed. */
void trace_sv_adopt_threads(struct trace_supervisor *sv, pid_t pid);
/* The same for every process below pid (a restored tree) and its threads;
 * zombies are left to their parents. */
void trace_sv_adopt_tree(struct trace_supervisor *sv, pid_t pid);
/* Long host-side work in a hook (a snapshot) runs at the invoker's priority: on, then
 * off once done. */
void trace_sv_unhurried(struct trace_supervisor *sv, int on);
/* The tracer thread's scheduling, for its helper threads (trace_prio_join). */
const struct trace_prio *trace_sv_prio(const struct trace_supervisor *sv);

/* The run's socket rule (trace/sv/sock.c): every connect(2) is made by the
 * supervisor on the guest's socket object, a Unix one to the socket file it
 * resolved in the guest's view and found to be the run's (or named with
 * --socket); IP stays in the run's own network namespace. */
struct trace_conn {
	int sock;                 /* the guest's socket object, or -1 */
	int target;               /* O_PATH of the checked socket file (a pathname), or -1 */
	union {
		struct sockaddr_un un;
		struct sockaddr_storage any;
	} addr;                   /* the guest's address, read once */
	socklen_t len;
	ino_t ino;                /* the socket object's inode */
	int outside;              /* the peer is a host socket named with --socket */
};
/* At connect's entry stop of tid (arguments a): 0 to go on (trace_sock_connect),
 * or the errno to answer, *refused set when the rule refused it. *diag: the run's
 * sock_diag socket, made at first use. */
int trace_sock_decide(int *diag, const struct trace_config *cfg, pid_t tid, const uint64_t a[6],
		      struct trace_conn *c, int *refused);
/* The connection made, as the guest's host ids (uid, gid): 0 or -errno for the
 * guest; *wait when its blocking call must wait longer (a full backlog, a
 * handshake not done within a few ms) and is to be run again, then with again. */
long trace_sock_connect(struct trace_conn *c, uid_t uid, gid_t gid, int again, int *wait);
void trace_sock_close(struct trace_conn *c);
/* At the entry stop of sendto, sendmsg or sendmmsg (nr) on a Unix datagram
 * socket: 0, or the errno to answer, *refused set when an address names a socket
 * not the run's. The kernel reads the addresses again (see sbx-run(1)). */
int trace_sock_send_decide(int *diag, const struct trace_config *cfg, pid_t tid, long nr,
			   const uint64_t a[6], int *refused);
/* A sock_diag socket in tid's network namespace: fd or -errno. */
int trace_sock_diag_open(pid_t tid);
/* 1 when a socket of diag's network namespace of type's kind is bound at the file
 * (dev, ino): a listener for stream and seqpacket, a datagram socket; 0; -errno. */
int trace_sock_bound_in_run(int diag, int type, dev_t dev, ino_t ino);

/* The supervisor loop: runs until every tracee is gone; pr is the calling thread's
 * scheduling (trace_prio_raise), NULL if none. */
int trace_supervise(struct trace_plan *p, pid_t init_pid, struct trace_result *res,
		    struct trace_prio *pr, struct common_err *e);

/* Output relay: the guest's stdout/stderr are pipes copied to out_fd/err_fd by a
 * supervisor thread, in order, counting bytes (both) and newline records (stdout).
 * Output past max_bytes/max_lines is drained, never delivered, and sets "over". */
struct trace_relay;
int trace_relay_open(struct trace_relay **r, int out_fd, int err_fd, uint64_t max_bytes,
		     uint64_t max_lines, struct common_err *e);
/* The write ends to dup2 onto the guest's fds 1 and 2 (close-on-exec set). */
void trace_relay_child_fds(const struct trace_relay *r, int *out_w, int *err_w);
/* Our read ends of those pipes (-1 once the reader went away): a snapshot
 * tells the guest's standard output from a pipe of its own by them. */
void trace_relay_read_fds(const struct trace_relay *r, int *out_r, int *err_r);
/* After the guest is forked: closes our write ends, starts the thread. */
int trace_relay_start(struct trace_relay *r, struct common_err *e);
void trace_relay_counts(const struct trace_relay *r, uint64_t *bytes, uint64_t *lines);
int trace_relay_over(const struct trace_relay *r);
/* readable (an eventfd) once the guest has passed an output bound, or used up
 * what it may output (trace_relay_waiting) */
int trace_relay_wake_fd(const struct trace_relay *r);
/* Bytes and records the relay may count in all before it waits (UINT64_MAX, the
 * default: no wait): the supervisor's durable bound of them. */
void trace_relay_allow(struct trace_relay *r, uint64_t bytes, uint64_t lines);
int trace_relay_waiting(struct trace_relay *r);
/* Once every guest is gone: drain what is buffered, join the thread. */
void trace_relay_finish(struct trace_relay *r);
void trace_relay_free(struct trace_relay *r);

#endif
