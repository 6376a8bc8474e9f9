/* trace/sv private: the supervisor's records, shared by its loop (supervise.c),
 * its waker (waker.c), a guest's accessors (guest.c) and the ptrace it emulates
 * for a guest tracer (nest.c). Never included from another folder. */
#ifndef SBX_TRACE_SV_INTERNAL_H
#define SBX_TRACE_SV_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include "trace/sv/sv.h"

#define NBUCKET 256
#define MAX_WATCH 16

struct trace_nest_task;
struct trace_nest_tracer;
struct trace_lookup;

struct tstate {
	struct tstate *next;
	pid_t tid, tgid, ppid;
	int want_exit;
	ino_t conn_waits;         /* the socket its blocking connect waits on, run again */
	int sgid, sgid_fd;        /* a chmod g+s of a directory: the directory, O_PATH */
	unsigned sgid_mode;       /* the mode it asked for, given at the exit */
	struct trace_stop st;     /* the entry stop, kept for on_exit */
	char path[2][PATH_MAX];
	char raw[2][PATH_MAX];
	int announced, held;      /* parent's fork event seen; first stop held until it is */
	uint64_t held_us;         /* when the hold (or, dead, the wait for the event) began */
	int dead;                 /* reaped before its parent's fork event: kept for it */
	int seen;                 /* it stopped here at least once: a guest task */
	int exit_kept, wstatus;   /* its exit, told to the hooks after its spawn */
	int exit_told;            /* its exit event told to the hooks: no longer live */
	void *slot[TRACE_LAYERS]; /* each layer's state of this task */
	pid_t nspid;              /* its pid in the run's namespace, 0 until looked up */
	int sched_call;           /* resumed from the seccomp stop of an allowed call (sched.c) */
	int sched_exit;           /* resumed from its exit event */
	pid_t sched_vfork;        /* resumed from its vfork event: the child's tid */
	int sched_answer;         /* resumed from an exit whose answer waits for its turn */
	struct trace_nest_task *nest;     /* a guest tracer traces it (nest.c) */
	struct trace_nest_tracer *tracer; /* it traces tasks of the run (nest.c) */
	int notify_redo;          /* notify.c: 1 handed back, 2 its restart marked, 3+k: argument k
	                           * carries the mark until the call's exit */
};

struct trace_supervisor {
	struct trace_plan *p;
	const struct trace_layer *l; /* NULL, or TRACE_LAYERS walked in order */
	int has_entry, has_exit, has_call;
	struct trace_result *res;
	pid_t init, guest;
	int init_gone, guest_gone;
	struct tstate *bucket[NBUCKET];
	size_t ntids, nheld, ndead;
	int watch[MAX_WATCH];
	size_t nwatch;
	uint64_t tick_us;         /* the next tick comes this soon (a hook may shorten it) */
	int every_call;           /* every syscall entry and exit stops (trace_sv_every_call) */
	int stopping;
	char reason[64];
	int sfd;
	int setup_failed;
	char setup_what[512], setup_why[512];
	struct trace_prio *prio;  /* the tracer thread's scheduling, NULL if none */
	size_t ntracers;          /* guest tracers (nest.c): 0, no task stops for them */
	int diag;                 /* sock_diag in the run's network namespace, -1 until needed */
	struct trace_sched *sched; /* the serial schedule (sched.c), NULL when off */
	struct trace_notify *notify; /* the listener's server (notify.c), NULL when off */
	struct trace_waker *wk;
	struct trace_lookup *look; /* the stats answered at entry (trace_guest_stat), NULL until one */
	int look_off;             /* no lookup here is the guest's (lookup.c) */
	ino_t look_userns;        /* the user namespace the lookups' ids are the guest's in */
	pthread_mutex_t mu;       /* held by the loop but while it waits: the listener's turn */
};

struct trace_guest {
	struct trace_supervisor *sv;
	struct tstate *ts;
};

/* A new record for tid (adopt.c), and the layers told of its spawn. */
struct tstate *trace_sv_tstate_new(struct trace_supervisor *sv, pid_t tid);
void trace_sv_spawned(struct trace_supervisor *sv, pid_t parent, pid_t child,
		      unsigned long flags);
/* The supervisor's record of a tid of this run, or NULL. */
struct tstate *trace_sv_find(struct trace_supervisor *sv, pid_t tid);
/* Resume a stopped tracee with req (PTRACE_CONT becomes PTRACE_SYSCALL for a task
 * whose syscalls stop: every-call mode, a guest tracer). */
void trace_sv_resume(struct trace_supervisor *sv, pid_t tid, int req, int sig);
pid_t trace_sv_tgid(struct tstate *t);

/* The parallel schedule (sched.c): the loop's resumes of guest tasks go through
 * trace_sched_resume (1: parked or resumed by it, 0: resume it as asked); a fork
 * event names the child (and its process) before either resumes; exec and
 * reaped tasks are told; a tick lets loose a task asleep in flight for after_us. */
struct trace_sched;
struct trace_sched *trace_sched_new(struct trace_supervisor *sv, unsigned classes);
void trace_sched_free(struct trace_sched *s);
int trace_sched_resume(struct trace_sched *s, struct tstate *t, int req, int sig);
void trace_sched_spawn(struct trace_sched *s, pid_t parent, pid_t child, pid_t child_tgid);
void trace_sched_exec(struct trace_sched *s, pid_t tid, pid_t former);
void trace_sched_gone(struct trace_sched *s, pid_t tid);
void trace_sched_tick(struct trace_sched *s, uint64_t now_us, uint64_t after_us);
void trace_sched_release(struct trace_sched *s);
/* Whether an answer of tid's put off for its turn would be given at once (nr:
 * the call at whose seccomp stop it is): no turn held, every other task
 * standing still until then. */
int trace_sched_alone(struct trace_sched *s, pid_t tid, long nr);
/* The run is ending (or ended): parked tasks go, the count goes to the result. */
void trace_sched_off(struct trace_supervisor *sv);
/* A task of the schedule as a snapshot holds it (sched_state.c): its key, and
 * whether it is parked at the seccomp stop of call nr, which it issues again
 * once restored (its clock then the one before that stop). */
struct trace_sched_task {
	pid_t tid, tgid;
	uint64_t order, clock;
	int again;
	long nr;
};
int trace_sched_export(const struct trace_sched *s, struct trace_sched_task *v, size_t max,
		       size_t *n, uint64_t *next_order, const char **why);
void trace_sched_import(struct trace_sched *s, const struct trace_sched_task *v, size_t n,
			uint64_t next_order);

/* Every layer's on_order for tid (layers.c). */
void trace_sv_layers_order(struct trace_supervisor *sv, pid_t tid);
/* Every layer's on_turn for tid, stopped at an exit that set answer_at_turn. */
void trace_sv_layers_turn(struct trace_supervisor *sv, pid_t tid);

/* ptrace emulated for guest tracers (nest.c). At the seccomp stop of ptrace or
 * process_vm_readv: -1 when not served (the boundary decides), else the errno
 * the boundary answers for what the call would reach (0: it is served). */
int trace_nest_verdict(struct trace_supervisor *sv, struct tstate *t, const struct trace_stop *st);
/* Once the inspector let it through: the call served, its result set (the caller
 * is resumed as any call). */
void trace_nest_call(struct trace_supervisor *sv, struct tstate *t, const struct trace_stop *st);
/* At the seccomp stop of a clone with CLONE_UNTRACED: the flag is dropped (its
 * child is traced as every other); 1 when the arguments changed. */
int trace_nest_untraced(struct trace_supervisor *sv, struct tstate *t, struct trace_stop *st);
/* A syscall stop of a guest tracer (its syscalls stop while it traces): 1 when
 * served (resumed or held for its wait), 0 to go on. */
int trace_nest_tracer_stop(struct trace_supervisor *sv, struct tstate *t);
/* A stop of a task a guest tracer traces (event is the ptrace event or 0, sig
 * the stop signal, SIGTRAP|0x80 at a syscall stop): 1 when it is held for its
 * tracer. */
int trace_nest_task_stop(struct trace_supervisor *sv, struct tstate *t, int event, int sig);
/* A fork, vfork or clone event of a task a guest tracer traces, c its child:
 * 1 when both are held for the tracer (it asked for the event; the child is
 * traced too), 0 to go on. */
int trace_nest_spawn(struct trace_supervisor *sv, struct tstate *t, struct tstate *c, int event);
/* Its exec or exit event (msg: the exit status): 1 when held for the tracer. */
int trace_nest_event(struct trace_supervisor *sv, struct tstate *t, int event, unsigned long msg);
/* Whether t's syscalls stop: it traces, or its guest tracer resumed it with
 * PTRACE_SYSCALL. */
int trace_nest_syscalls(const struct tstate *t);
/* A task is freed: its tracer hears of it, its tracees are let go. */
void trace_nest_forget(struct trace_supervisor *sv, struct tstate *t, int wstatus);

/* supervise.c for notify.c: paths decoded as at a stop; the layers' entry and
 * exit hooks walked. */
void trace_sv_decode_paths(struct trace_guest *g, struct trace_stop *st);
int trace_sv_layers_entry(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st);
int trace_sv_layers_exit(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st);

/* The walk over the layers in their order (enum trace_layer_slot). */
#define EACH_LAYER(sv, L) \
	for (const struct trace_layer *L = (sv)->l; L && L < (sv)->l + TRACE_LAYERS; L++)
/* Each hook over every layer (layers.c): a stop's walk ends at the first layer
 * that fails; a tick stops the guest when any layer asks. */
int trace_sv_layers_call(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st);
int trace_sv_layers_start(struct trace_supervisor *sv);
int trace_sv_layers_exec(struct trace_supervisor *sv, pid_t pid, pid_t ppid, const char *path);
void trace_sv_layers_spawn(struct trace_supervisor *sv, pid_t parent, pid_t child,
			   unsigned long flags);
void trace_sv_layers_proc_exit(struct trace_supervisor *sv, pid_t tid, int wstatus);
int trace_sv_layers_tick(struct trace_supervisor *sv);
int trace_sv_layers_fd(struct trace_supervisor *sv, int fd);
void trace_sv_layers_signal(struct trace_supervisor *sv, pid_t tid, int sig);
int trace_sv_layers_fault(struct trace_supervisor *sv, struct trace_guest *g, int sig);

/* Lookups the supervisor makes in the guest's view with its ids (lookup.c), for
 * user notification and the stats determinism answers at their entry. */
struct trace_lookup {
	int rootfd;                 /* the guest's root, O_PATH */
	uid_t uid, overflow_uid;    /* the guest's host ids; what it sees for the rest */
	gid_t gid, overflow_gid;
	int fsids;                  /* the lookups take the guest's fs ids (root invoker) */
};
/* A stat family call served: its result (0 or -errno), the stat or statx, and
 * whether the trace's lookup of the path string found it (1), not (2), or was
 * not made (0). */
struct trace_lookup_stat {
	int64_t result;
	struct stat sb;
	struct statx sx;
	int exists;
};
#define TRACE_LOOKUP_BACK INT_MIN /* not a descriptor, not an errno: the guest's call decides */
int trace_lookup_open(struct trace_lookup *lk, const struct trace_supervisor *sv, pid_t guest);
void trace_lookup_close(struct trace_lookup *lk);
/* /proc/TID/cwd, or /proc/TID/fd/DIRFD */
void trace_lookup_fd_path(pid_t tid, int64_t dirfd, char *out, size_t n);
/* The object the call's path names, O_PATH: the descriptor, -errno as the
 * guest's kernel would answer, or TRACE_LOOKUP_BACK. */
int trace_lookup_resolve(const struct trace_lookup *lk, const struct trace_stop *st, int follow,
			 uint64_t flags);
/* An owner as the guest sees it: its own host id is TRACE_GUEST_UID, the rest unmapped. */
void trace_lookup_ids(const struct trace_lookup *lk, uid_t *u, gid_t *g);
/* stat, lstat, newfstatat and statx: 0 with *o filled, or TRACE_LOOKUP_BACK. */
int trace_lookup_stat(const struct trace_lookup *lk, const struct trace_stop *st,
		      struct trace_lookup_stat *o);
/* The calling thread's file system ids: the guest's (on), or back to root's. */
void trace_lookup_as_guest(const struct trace_lookup *lk, int on);

/* User notification (notify.c): the open/stat family served by a thread of its
 * own under sv->mu, the supervisor opening or looking up the object itself in the
 * guest's view and handing over the result. At the guest's first stop (its
 * exec) the listener is taken; a call it cannot serve exactly goes back to the
 * guest, interrupted (trace_notify_interrupts, from the loop), its restart marked
 * at the interrupt's stop (trace_notify_mark) and unmarked at its seccomp stop
 * (trace_notify_unmark). */
struct trace_notify;
int trace_notify_attach(struct trace_supervisor *sv, pid_t guest);
void trace_notify_interrupts(struct trace_supervisor *sv);
void trace_notify_mark(struct trace_supervisor *sv, struct tstate *t);
void trace_notify_unmark(struct trace_supervisor *sv, struct tstate *t, long nr, uint64_t args[6]);
void trace_notify_end(struct trace_supervisor *sv);
/* The run is over: trace_guest_stat's root is closed (lookup.c). */
void trace_sv_lookup_end(struct trace_supervisor *sv);

/* The waker (trace/sv/waker.c). */
#define WAKE_MS 50             /* fds and ticks are looked at least this often */
/* The tracer thread blocks in waitpid itself, so a stop costs one waitpid and the
 * ptrace calls, nothing else (no poll, no signalfd reads, no extra waitpid). Every
 * WAKE_MS a helper thread interrupts that waitpid with a signal whose handler has no
 * SA_RESTART, and the loop then looks at its fds, signals and tick. The signal is
 * only sent while the tracer sits in (or is about to enter) that waitpid, so no other
 * call of the tracer thread ever sees EINTR from it; one sent just before the
 * waitpid is taken at the next round, WAKE_MS later. */
struct trace_waker {
	pthread_t thread;
	pid_t tracer;            /* the tracer thread's tid */
	int sig;
	_Atomic int in_wait;
	uint64_t due_us;         /* the next tick, monotonic µs: waited for if sooner */
	const struct trace_prio *prio; /* the tracer's: the waker is on its wake-up path */
	int stop, started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};
/* per thread: a signal interrupts only the tracer it was sent to */
extern __thread volatile sig_atomic_t trace_sv_woken;
/* 0, or -errno when no waker runs (the loop's poll then paces it). */
int trace_sv_waker_start(struct trace_waker *w);
/* The tracer's next tick: the waker interrupts its wait then if that is sooner. */
void trace_sv_waker_due(struct trace_waker *w, uint64_t due_us);
void trace_sv_waker_stop(struct trace_waker *w);

/* supervise.c: at a seccomp stop, skip the call with result rax, or (again) have
 * the thread issue it once more. */
void trace_sv_answer(pid_t tid, long rax, int again);
/* decide.c: a connect and a datagram's address, judged before the layers (the
 * refusal's errno, 0 to go on; *answer_errno: what the call then returns); the
 * connect made for the guest on the objects judged. */
int trace_sv_connect_decide(struct trace_supervisor *sv, struct tstate *t, struct trace_conn *c,
			    const uint64_t a[6], int *answer_errno);
void trace_sv_connect_run(struct trace_supervisor *sv, struct tstate *t, struct trace_conn *c,
			  int err);
int trace_sv_is_send(long nr);
int trace_sv_send_decide(struct trace_supervisor *sv, struct tstate *t, const uint64_t a[6],
			 int *answer_errno);
/* decide.c: chmod g+s of a directory, decided on the object: opened at entry (0 for
 * a directory), the call run without S_ISGID, the mode given at its exit. */
void trace_sv_sgid_drop(struct tstate *t);
int trace_sv_sgid_entry(struct tstate *t, const struct trace_stop *st);
int trace_sv_sgid_strip(struct tstate *t, const struct trace_stop *st, int mode_arg);
void trace_sv_sgid_exit(struct tstate *t, int64_t rval);

#endif
