/* trace/determ: sbx-run --deterministic (SPEC §9): the virtual clock, the PRNG,
 * rdtsc answered at its fault, namespace pids. */
#ifndef SBX_TRACE_DETERM_H
#define SBX_TRACE_DETERM_H

#include "trace/sv/sv.h"

#define TRACE_DETERM_STEP_NS 1000000    /* the virtual clock advances 1 ms per time query */
struct trace_determ;
/* Virtual clock and PRNG for one run; seed: the lease id; epoch: the virtual
 * wall clock at the start (trace_determ_epoch), in seconds; tsc: rdtsc faults
 * here (trace_tsc_probe), so the run traps and answers it. */
struct trace_determ *trace_determ_new(const char *seed, int64_t epoch, int tsc);
/* The epoch of a lease: the end of the store-clock batch its request receipt
 * names (clock: the store's {"epoch_ms", "batch_ms"}), rounded up to a second,
 * so that files written before the request lie in the virtual past. */
int64_t trace_determ_epoch(const json_t *clock, int64_t requested_batch);
void trace_determ_free(struct trace_determ *d);
/* Classes (with TRACE_FILTER_DETERM) the filter must trap. */
unsigned trace_determ_classes(void);
/* Determinism as the layer TRACE_LAYER_DETERM (a zeroed layer for NULL): calls
 * answered from each process's clock and PRNG (kept in its slot; a child inherits
 * its parent's clock), at each exec AT_SYSINFO_EHDR -> AT_IGNORE and AT_RANDOM from
 * the PRNG, rdtsc/rdtscp answered at their fault and not delivered. */
struct trace_layer trace_determ_layer(struct trace_determ *d);
uint64_t trace_determ_emulated(const struct trace_determ *d); /* calls answered */
/* A source the run's options bring that nothing answers (a socket named with
 * --socket): named in the header's "uncontrolled"; call before the header. */
void trace_determ_uncontrolled(struct trace_determ *d, const char *source);
/* The sources met during the run that nothing answered (a device read, a
 * connect to a peer outside the run), each once: a new array. */
json_t *trace_determ_fell_back(const struct trace_determ *d);
/* The trace header's "determinism" object: epoch, step, uncontrolled and
 * refused sources, and the digest of ns_dir (NULL: none) at the start. */
json_t *trace_determ_header(const struct trace_determ *d, const char *ns_dir,
			    struct common_err *e);
/* A snapshot's determinism record (trace/determ/state.c): the run's seed, epoch,
 * file table, every task's clock and PRNG position, the schedule's keys and
 * what queued (the recorder's, called above this layer; NULL: nothing) writes
 * of the events waiting for their task's turn; *out is malloc'd. -1 and e,
 * nothing changed, while a task stands where no record holds it (the
 * schedule's turn held, a task starting or exiting, inside an answered call,
 * in flight inside a recorded call): a later stop may do. */
typedef int (*trace_determ_queued_fn)(void *ctx, struct trace_supervisor *sv, pid_t (*ns)(pid_t),
				      const struct trace_sv_again *again, size_t n,
				      struct codec_buf *b, const char **why);
/* The recorder section's check: NULL, or why it is refused (static). */
typedef const char *(*trace_determ_check_fn)(const uint8_t *p, size_t n);
int trace_determ_save(const struct trace_determ *d, struct trace_supervisor *sv,
		      trace_determ_queued_fn queued, void *ctx, uint8_t **out, size_t *len,
		      struct common_err *e);
/* Hostile input: a record checked whole (check: the recorder's section, NULL:
 * taken as it is); NULL, or why it is refused (static). */
const char *trace_determ_record_why(const uint8_t *p, size_t n, trace_determ_check_fn check);
/* A restored run's determinism from a record (its seed and epoch, not the
 * target lease's); its tasks' states wait for trace_determ_resume_tasks. */
struct trace_determ *trace_determ_resumed(const uint8_t *p, size_t n, int tsc,
					  trace_determ_check_fn check, const char *name,
					  struct common_err *e);
/* The highest namespace id a task of the record's run had (0: malformed). */
uint32_t trace_determ_record_last_pid(const uint8_t *p, size_t n);
/* Once the restore rebuilt the tree: each live task takes its record's state
 * and its place in the schedule. */
int trace_determ_resume_tasks(struct trace_determ *d, struct trace_supervisor *sv,
			      struct common_err *e);
/* A resumed record's recorder section (version 2; NULL and 0 for version 1). */
const uint8_t *trace_determ_queued(const struct trace_determ *d, size_t *n);
/* rdtsc/rdtscp (trace/determ/tsc.c): the instruction at b (n bytes) and its length;
 * the probe: 1 if prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes rdtsc fault on this
 * host (a forked child tries, once per process); at a SIGSEGV stop of tid, the
 * faulting instruction (r: its registers); its answer, stepped over. */
enum { TRACE_TSC_NONE = 0, TRACE_TSC_RDTSC = 1, TRACE_TSC_RDTSCP = 2 };
#define TRACE_TSC_AUX 0 /* what rdtscp reports as IA32_TSC_AUX (the CPU number) */
int trace_tsc_decode(const uint8_t *b, size_t n, size_t *len);
int trace_tsc_probe(void);
int trace_tsc_fault(pid_t tid, struct user_regs_struct *r, size_t *len);
int trace_tsc_answer(pid_t tid, struct user_regs_struct *r, int insn, size_t len, uint64_t tsc);
/* A host pid's id inside the run's PID namespace (0 if unknown): deterministic
 * traces record these instead of host ids (trace/determ/nspid.c). Kept once
 * looked up, until _forget: a new task of that host id was made. */
pid_t trace_determ_nspid(pid_t host);
void trace_determ_nspid_forget(pid_t host);

/* What stat and getdents64 report of files (trace/determ/files.c): device and
 * inode numbers in the order the run first sees them, the times the run wrote
 * as logical times of its clock. One table per run, bounded: once full, later
 * identities keep the host's values and trace_determ_files_full says so. */
struct trace_determ_files;
struct trace_determ_view {
	int64_t epoch;          /* the virtual wall clock's start, seconds */
	uint64_t *clock;        /* the reading process's clock (ns since the start); raised */
	int in_ns;              /* the object is under /ns: every time is the epoch */
};
struct trace_determ_files *trace_determ_files_new(void);
void trace_determ_files_free(struct trace_determ_files *f);
int trace_determ_files_full(const struct trace_determ_files *f);
void trace_determ_files_stat(struct trace_determ_files *f, const struct trace_determ_view *v,
			     uint8_t st[144]);
void trace_determ_files_statx(struct trace_determ_files *f, const struct trace_determ_view *v,
			      uint8_t sx[256]);
/* tid drops its descriptor fd (a close, a dup2 onto it): a regular file it
 * has open for writing gets the times it wrote numbered now, from its own
 * clock (v->clock, raised a step first), unless the run numbered them
 * already. The writer numbers them, not its first reader: no turn needed. */
void trace_determ_files_written(struct trace_determ_files *f, const struct trace_determ_view *v,
				pid_t tid, int fd);
/* Between these two the calls above answer from what the table holds and
 * change nothing (nor the guest's memory): _end is 1 when an answer needed an
 * identity or time the table does not hold yet (a first sight, which numbers
 * it: it must come in the schedule's order). */
void trace_determ_files_probe(struct trace_determ_files *f);
int trace_determ_files_probe_end(struct trace_determ_files *f);
/* A getdents64 result of directory fd (n bytes at addr in the guest): sorted by
 * name (each slot keeps the kernel's d_off), d_ino the run's; with one_cpu the
 * entries cpu1, cpu2, ... dropped. Returns its new length (n when untouched). */
size_t trace_determ_files_getdents(struct trace_determ_files *f, struct trace_guest *g,
				   uint64_t addr, size_t n, int one_cpu, int fd);

#endif
