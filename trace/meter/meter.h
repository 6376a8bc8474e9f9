/* trace/meter: usage of the guest tree (SPEC §4.1), storage_write exactly. */
#ifndef SBX_TRACE_METER_H
#define SBX_TRACE_METER_H

#include <limits.h>
#include <sys/uio.h>
#include "trace/sv/sv.h"
#include "trace/trace.h"

struct trace_meter;
struct trace_store_call;
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
/* The guest's first exec: descriptors count from then on (before it, the child
 * still holds sbx's own, closed by that exec). */
void trace_meter_guest_exec(struct trace_meter *m);
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
/* A plain write's reservation (by_result) settled at its thread's next stop or its
 * end, by what the thread's wchar grew since now (at most the reservation), not at
 * the call's exit, which then need not stop: 1, or 0 when wchar cannot be read
 * (settle at the exit). Exact because every other call that grows wchar (the write
 * family, sendfile, splice, copy_file_range) stops at its entry under the meter,
 * where this settles first. */
int trace_meter_store_lazy(struct trace_meter *m, pid_t tid);
void trace_meter_store_stopped(struct trace_meter *m, pid_t tid);
void trace_meter_store_refused(struct trace_meter *m, uint64_t bytes);
/* namespace_bytes, held at the calls: what a storing call may add to the namespace
 * (charge: every byte into its file system, a longest key for a name), and its
 * reservation before the call runs: when the last whole walk plus what calls may
 * have added since would pass the bound, the namespace is walked whole again (the
 * calls that could grow it wait in their stops); -1 when even then the call does not
 * fit: it must not run, and namespace_bytes reads one past the bound. */
uint64_t trace_meter_ns_charge(const struct trace_meter *m, const struct trace_store_call *c);
int trace_meter_ns_reserve(struct trace_meter *m, pid_t tid, uint64_t bytes);
/* storage_read, held near its bound: a reading call of tid reserves what it may
 * read at its entry; its exit (or its task's end) drops the reservation, the
 * bytes being in the kernel's count by then. held: the tree's count now (every
 * task read afresh) and the reservations; refused: one byte past bound. */
void trace_meter_load_begin(struct trace_meter *m, pid_t tid, uint64_t bytes);
void trace_meter_load_end(struct trace_meter *m, pid_t tid);
int trace_meter_load_pending(struct trace_meter *m, pid_t tid);
uint64_t trace_meter_load_held(struct trace_meter *m);
void trace_meter_load_refused(struct trace_meter *m, uint64_t bound);
/* A followed task's thread group (0: not followed), and whether a group has a task left. */
pid_t trace_meter_task_tgid(struct trace_meter *m, pid_t tid);
int trace_meter_group_live(const struct trace_meter *m, pid_t tgid);
/* Tasks the meter follows now. */
size_t trace_meter_tasks(const struct trace_meter *m);
/* A vectored call (readv, writev, preadv2...) held to what it reserved: its iovec
 * array read once at its entry stop, then the call run as one plain read or write per
 * segment with those lengths (trace_vector_run), or rewritten into a plain read with
 * its length in a register (trace_vector_stream), so that another task rewriting the
 * array after it was read cannot make the kernel move more. */
struct trace_vector {
	struct iovec v[IOV_MAX];
	size_t n;
	uint64_t bytes;   /* Σ lengths, as one call moves at most (MAX_RW_COUNT) */
};
/* 1 read, 0 st is not vectored, -EINVAL or -EFAULT when the kernel refuses the array. */
int trace_vector_read(struct trace_guest *g, const struct trace_stop *st, struct trace_vector *v);
/* Whether st's descriptor takes a vectored call run per segment: a file, a block or
 * memory device, which a plain call never blocks on for long (not a pipe, socket or
 * terminal: a datagram is read whole, and the supervisor would wait on it). */
int trace_vector_runs(struct trace_guest *g, const struct trace_stop *st);
/* How a vectored call ends at its exit stop (the guest's own argument registers are
 * put back in every way: the syscall ABI changes only rax, rcx and r11). */
enum trace_vector_way {
	TRACE_VECTOR_RESULT = 1, /* its result was decided at its entry (run per segment, refused) */
	TRACE_VECTOR_TAKEN,      /* a datagram the supervisor received and scattered: its result */
	TRACE_VECTOR_PLAIN,      /* rewritten into one plain read: the kernel's result */
	TRACE_VECTOR_WAIT,       /* rewritten into a wait for a datagram: issued again once one is queued */
};
/* At st's entry stop: run it as up to cap bytes of plain calls; st's own count becomes
 * 0 (it moves nothing) and *result is what it returns, for its exit. 0, or -errno when
 * the thread cannot be driven. */
int trace_vector_run(struct trace_guest *g, struct trace_stop *st, const struct trace_vector *v,
		     uint64_t cap, int64_t *result);
/* At the entry stop of a vectored read on any other descriptor (a pipe, a socket, a
 * terminal...), which may block as long as it likes without holding the supervisor:
 * the call becomes one plain read of its first non-empty segment, at most cap bytes
 * (a short read, legal there); on a datagram or seqpacket socket with several
 * non-empty segments the supervisor receives the datagram itself (at most cap bytes,
 * cut as the kernel cuts it) and scatters it, or, with none queued on a blocking
 * socket, the call becomes a wait for one. The way it ends (*result for RESULT and
 * TAKEN), or -errno when the thread cannot be driven. */
int trace_vector_stream(struct trace_guest *g, struct trace_stop *st, const struct trace_vector *v,
			uint64_t cap, int64_t *result);
/* The way a vectored call ends and its result, kept from its entry to its exit; a
 * TAKEN datagram's bytes count as read (no task's rchar has them). take: the way, 0: none. */
void trace_meter_vector_set(struct trace_meter *m, pid_t tid, int way, int64_t result);
int trace_meter_vector_take(struct trace_meter *m, pid_t tid, int64_t *result);
/* What a trapped call may store on a host file (trace/meter/store.c): bytes, and whether its
 * result is the byte count; 0 when it stores nothing (not a file, not a storing form).
 * An inode or name a call may create counts TRACE_INODE_BYTES. */
#define TRACE_INODE_BYTES 4096
struct trace_store_call {
	uint64_t bytes;
	int by_result;
	int by_path;      /* a name (or an xattr) made by path, not bytes into a descriptor */
	int mapping;      /* a mapping call: held by trace_maps, nothing charged at it */
	int hold;         /* an mmap to hold: a shared mapping of a file open for writing */
	ino_t ino;        /* and the file's inode (dev below) */
	dev_t dev;        /* the descriptor's file system */
	int vector;       /* a vectored call: bytes are its iovec's (trace_vector_read) */
	int refuse;       /* an errno: the kernel would refuse the call (its iovec) */
};
int trace_store_entry(struct trace_guest *g, const struct trace_stop *st,
		      struct trace_store_call *c, struct trace_vector *v);
/* At its exit: the result as the meter reads it (an open that made no regular file
 * reads as a failure: it created nothing). */
int64_t trace_store_result(struct trace_guest *g, const struct trace_stop *st);
/* Shared file mappings charged by the page (trace/meter/mapping.c): a MAP_SHARED
 * mapping of a regular file open for writing is held without PROT_WRITE; a store
 * into it faults, and is charged the pages of its 64 KiB run not charged before
 * (once per mapping, forks and mremap keeping it), which is then made writable.
 * tgid is the address space's (a CLONE_VM child is its parent's, trace_maps_spawn). */
struct trace_maps;
struct trace_map_call {          /* a mapping call, from its entry to its exit */
	int kind;                /* TRACE_MAP_MMAP, _MOVE, _PROTECT */
	int prot;                /* what the guest asked for */
	dev_t dev;               /* the file (mmap) */
	ino_t ino;
	uint64_t addr, len;      /* its range (mremap: the old one) */
	uint64_t newlen;         /* mremap's new length */
	int keep;                /* mremap keeps the old range (MREMAP_DONTUNMAP) */
};
enum { TRACE_MAP_MMAP = 1, TRACE_MAP_MOVE, TRACE_MAP_PROTECT };
struct trace_map_piece {         /* [lo, hi) and the protection to give it */
	uint64_t lo, hi;
	int prot;
};
struct trace_maps *trace_maps_new(void);
void trace_maps_free(struct trace_maps *ms);
int trace_maps_any(const struct trace_maps *ms, pid_t tgid);
/* Where an mmap of len to hold is offered to go (a hint): in TRACE_MAP_WINDOW, where
 * every read stops; 0 when it does not fit. */
uint64_t trace_maps_place(struct trace_maps *ms, uint64_t len);
/* mmap made [addr, addr+len) of c's file, held. */
void trace_maps_add(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len,
		    const struct trace_map_call *c);
/* mprotect(addr, len, prot) as pieces in address order: held ones without PROT_WRITE
 * (writable run by run at their stores), the rest as asked; -1 past max pieces. */
int trace_maps_pieces(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len, int prot,
		      struct trace_map_piece *out, size_t max);
/* The held ranges in [addr, addr+len) asked for prot now. */
void trace_maps_protect(struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len, int prot);
/* Whether [addr, addr+len) meets a held range, and the protection asked for it. */
int trace_maps_held_prot(const struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t len,
			 int *prot);
/* The first address from addr on, below end, in a held range; end when none. */
uint64_t trace_maps_next(const struct trace_maps *ms, pid_t tgid, uint64_t addr, uint64_t end);
/* mremap moved [old, old+oldlen) to [to, to+newlen) (keep: MREMAP_DONTUNMAP). */
void trace_maps_move(struct trace_maps *ms, pid_t tgid, uint64_t old, uint64_t oldlen, uint64_t to,
		     uint64_t newlen, int keep);
/* A new process: its parent's held ranges, or (shares_vm) its parent's space itself. */
void trace_maps_spawn(struct trace_maps *ms, pid_t parent, pid_t child, int shares_vm);
/* A process's space is gone (exec; exit: trace_maps_gone, its filters too). */
void trace_maps_forget(struct trace_maps *ms, pid_t tgid);
void trace_maps_gone(struct trace_maps *ms, pid_t tgid);
/* Whether tgid carries the held-mapping filter (trace_filter_held), which its
 * children inherit and an exec keeps; and that it does now. */
int trace_maps_filtered(const struct trace_maps *ms, pid_t tgid);
void trace_maps_filter_set(struct trace_maps *ms, pid_t tgid);
/* A mapping call of tid between its entry and its exit. */
void trace_maps_pending(struct trace_maps *ms, pid_t tid, const struct trace_map_call *c);
int trace_maps_take(struct trace_maps *ms, pid_t tid, struct trace_map_call *c);
/* A store of tid at addr met a held page (a write fault, or a call about to store
 * there): 1 with the piece to make writable and the bytes of its pages not charged
 * before (charged from now on: the caller charges them or closes the lease); 0 when
 * addr is in no held range the guest asked to write, or the kernel's mapping there
 * is no longer that file's. */
int trace_maps_store(struct trace_maps *ms, pid_t tid, pid_t tgid, uint64_t addr,
		     struct trace_map_piece *open, uint64_t *charge);
/* A store charged outside a call (a mapping's pages): at once, like a settled call. */
void trace_meter_store_charge(struct trace_meter *m, uint64_t bytes);

/* memory also from the run's cgroup; a page it refused is a crossing of bound */
void trace_meter_cgroup(struct trace_meter *m, const struct trace_cgroup *cg, uint64_t bound);
void trace_meter_usage(const struct trace_meter *m, uint64_t usage[TRACE_DIMS]);
/* The most the tree may have used once its calls in progress end: the usage (with
 * fuel read afresh if fuel), the reservations of storing and reading calls, and
 * the last whole walk of the namespace plus what calls may have added since. */
void trace_meter_most(struct trace_meter *m, int fuel, uint64_t most[TRACE_DIMS]);
/* The name of the first dimension above limits, or NULL. */
const char *trace_meter_over(const struct trace_meter *m, const uint64_t limits[TRACE_DIMS]);
/* A namespace's bytes (lease_ns_digest's walk); -1 when it cannot be measured completely. */
int trace_meter_ns_bytes(const char *dir, uint64_t *bytes);

/* Metering, a layer of the supervisor (trace/meter/layer.c): the meter follows
 * the tree, every storing or reading call is held to its bound at its stop, usage
 * goes to the lease (observations, the run's durable bound) and a crossing
 * closes the run. */
struct trace_metering_opts {
	struct lease_store *store;      /* with lease: observe usage there (closure) */
	const char *lease;
	const uint64_t *limits;         /* TRACE_DIMS bounds, NULL: none */
	const uint64_t *base;           /* TRACE_DIMS usage already recorded, NULL: zero */
	const char *ns_dir;             /* metered as namespace_bytes, NULL: none */
	struct trace_relay *relay;      /* output relay (started by on_start), NULL: none */
	const int *run_claim;           /* the run's claim (lease_run_claim): the bound of
					 * what its guest may have used is kept there, NULL: none */
	int final_in_close;             /* the run's close commits the last observation with
					 * its own receipts (trace_metering_final): one append */
};
struct trace_metering;
struct trace_metering *trace_metering_new(const struct trace_metering_opts *o);
void trace_metering_free(struct trace_metering *mt);
/* Classes the filter must trap for it (add to trace_config.trace_classes). */
unsigned trace_metering_classes(const struct trace_metering *mt);
/* Limits and recorded usage of a lease, for trace_metering_opts. */
int trace_metering_lease_bounds(struct lease_store *s, const char *id,
				uint64_t limits[TRACE_DIMS], uint64_t base[TRACE_DIMS],
				struct common_err *e);
/* Metering as the layer TRACE_LAYER_METER (a zeroed layer for NULL). */
struct trace_layer trace_meter_layer(struct trace_metering *mt);
/* memory also from the run's cgroup */
void trace_metering_cgroup(struct trace_metering *mt, const struct trace_cgroup *cg);
/* held: the lease is not Active yet (a restore): usage is not observed */
void trace_metering_hold(struct trace_metering *mt, int held);
/* The run's trace bytes so far, metered as storage_write from the next sample. */
void trace_metering_host_write(struct trace_metering *mt, uint64_t bytes);
/* The same while the guest runs, after each recorded event: a trace that takes
 * storage_write past its bound stops the guest there (<0: metering failed). */
int trace_metering_trace_grew(struct trace_metering *mt, uint64_t bytes);
/* After the guest tree is gone: drain the relay, final sample and observation. */
int trace_metering_finish(struct trace_metering *mt, struct common_err *e);
/* The dimension that closed the lease ("fuel", ..., "lifetime", "escrow"), or NULL. */
const char *trace_metering_closed(const struct trace_metering *mt);
/* A metering failure (the lease, a call it could not hold), or NULL. */
const struct common_err *trace_metering_failure(const struct trace_metering *mt);
/* sbx-run --chain: a dimension a fresh lease renews (fuel, storage_read, output)
 * whose usage, with what the call stopped at st may read (NULL: a tick), passes
 * num/den of its bound, once this lease used 1/den of it; -1 for none. */
int trace_metering_renew_due(struct trace_metering *mt, const struct trace_stop *st, unsigned num,
			     unsigned den);
/* sbx-run --chain: 1 when the storing call stopped at st (its entry) would be refused
 * here, taking storage_write past its bound with what every call before it reserved,
 * but a fresh lease's bound holds it (a copy, cut to what is left: once nothing is);
 * then it must not run in this lease. Exact: every call that may store reserves all
 * it may store at its entry stop, before it runs (the plain writes settled by wchar
 * later too), and shared mappings cannot be snapshotted. */
int trace_metering_store_due(struct trace_metering *mt, struct trace_guest *g,
			     const struct trace_stop *st);
/* The protection the guest asked for of the shared file mapping the meter holds
 * at [addr, addr + len) in tgid: 1 with *prot, 0 when none is held (mt may be
 * NULL). A snapshot records it rather than the held one. */
int trace_metering_held_prot(void *mt, pid_t tgid, uint64_t addr, uint64_t len, int *prot);
/* A restored tree (sbx-restore, a chain's next link), every task in a ptrace
 * stop: each writable shared mapping of a regular file in root's processes held
 * as the meter holds one it sees made (the protection restored is the one the
 * guest asked for), so its stores are charged in this lease too. */
int trace_metering_hold_restored(struct trace_metering *mt, pid_t root, struct common_err *e);
/* Usage totals of the lease including this run (monotonic). */
void trace_metering_usage(const struct trace_metering *mt, uint64_t usage[TRACE_DIMS]);
/* With o.final_in_close, once finished: 1 with the usage the run's close must
 * observe (trace_metering_finish recorded none), 0 when nothing is left to observe. */
int trace_metering_final(const struct trace_metering *mt, uint64_t usage[TRACE_DIMS]);

#endif
