/* trace/determ's own: the per-task virtual state and the run's, shared by the
 * layer (determ.c) and the snapshot record that carries them (state.c). */
#ifndef SBX_TRACE_DETERM_INTERNAL_H
#define SBX_TRACE_DETERM_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>
#include "codec/codec.h"
#include "trace/determ/determ.h"

enum pend_kind { P_NONE, P_RANDDEV, P_UUID, P_BOOTID, P_CPULIST, P_UPTIME, P_LOADAVG,
		 P_MEMINFO, P_DEVICE, P_DENTS, P_CPUDIR, P_STAT, P_STATX };

struct pend {
	enum pend_kind kind;
	uint64_t buf;   /* guest address of the result buffer */
	int fd;
	int in_ns;      /* a stat of an object under /ns */
	size_t n;       /* the result, for an answer put off until the task's turn */
};

/* Each process has its own clock and PRNG stream, so what one process sees
 * does not depend on how the host schedules the others: a child starts at
 * its parent's clock with a stream keyed by its namespace pid, and a parent
 * that outlives it continues from the later of the two clocks. It lives in the
 * process's slot of the supervisor (TRACE_LAYER_DETERM); a thread has its own,
 * from its creator's clock, as a child process has. */
struct proc {
	pid_t parent;           /* host id */
	pid_t nspid;
	uint64_t ns;            /* virtual nanoseconds since the run began */
	uint64_t tsc_reads;     /* rdtsc/rdtscp answered */
	uint64_t ctr;           /* PRNG block counter */
	uint8_t blk[32];
	size_t blk_used;
	struct pend pend;       /* a call whose result is served at its exit */
};

struct saved;
struct trace_determ {
	char *seed;
	int64_t epoch;          /* virtual wall clock at the start, seconds */
	int tsc;                /* rdtsc faults: trapped and answered */
	uint64_t emulated;      /* calls answered from virtual state */
	struct trace_determ_files *files;
	json_t *named;          /* sources the run's options bring, named at the start */
	json_t *fell_back;      /* sources met during the run, each named once */
	uint32_t last_pid;      /* the highest namespace id any task of the run had */
	uint64_t stdio[3][2];   /* a restored run's: the run's objects behind fds 0-2 */
	struct saved *saved;    /* a restored run's tasks, until they are resumed (state.c) */
	size_t nsaved;
	struct trace_sched_saved *sched; /* a restored run's schedule, until then (version 2) */
	uint8_t *queued;        /* a restored run's recorder section (version 2) */
	size_t nqueued;
};

/* determ.c's own, for stat.c: the process's state (made at its first use); a
 * guest buffer written (-EFAULT); the call skipped, returning v; its answer
 * wanted at its exit (k, the result buffer, the descriptor read). */
struct proc *trace_determ_proc(struct trace_guest *g);
int trace_determ_put(struct trace_guest *g, uint64_t addr, const void *buf, size_t len);
int trace_determ_skip(struct trace_guest *g, long long v);
void trace_determ_want(struct trace_guest *g, struct trace_stop *st, enum pend_kind k,
		       uint64_t buf, int fd);
/* At the seccomp stop of fstat, stat, lstat, newfstatat or statx (stat.c):
 * answered now, or its answer wanted at its exit. */
void trace_determ_stat_entry(struct trace_determ *d, struct trace_guest *g, struct trace_stop *st);

/* The files table as a snapshot's determinism record holds it (files.c). */
void trace_determ_files_save(const struct trace_determ_files *f, struct codec_buf *b);
/* Hostile input: every count and key checked; NULL (r failed) when malformed. */
struct trace_determ_files *trace_determ_files_load(struct codec_rd *r);
/* What the table holds of the object (dev, ino) now stands for (ndev, nino):
 * a restored guest's standard descriptors are the new run's. */
void trace_determ_files_rekey(struct trace_determ_files *f, uint64_t dev, uint64_t ino,
			      uint64_t ndev, uint64_t nino);
/* A restored run's table starts now: what was written before it is input. */
void trace_determ_files_restart(struct trace_determ_files *f);

#endif
