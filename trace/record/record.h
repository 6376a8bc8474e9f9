/* trace/record: the recorder, which writes a trace (SPEC §7), and the trace
 * format it shares with the reader (trace/record/reader/reader.h). */
#ifndef SBX_TRACE_RECORD_H
#define SBX_TRACE_RECORD_H

#include "trace/sv/sv.h"
#include "trace/trace.h"

/* A trace is JSON lines: a header {"sbx_trace":1,...,"h":H0}, then events,
 * then {"ev":"end",...}. Every line ends in ,"h":"HEX"} where
 * H0 = SHA-256("sbx/trace/v1\0" || canonical(header without h)) and
 * H_i = SHA-256(H_{i-1} || canonical(event_i without h)). */
#define TRACE_FORMAT 1
#define TRACE_DOMAIN "sbx/trace/v1" /* hashed with its NUL */
#define TRACE_LINE_MAX (256u << 10)      /* longest accepted line */
#define TRACE_EVENTS_MAX (8u << 20)      /* most events a reader accepts */
/* Classes the seccomp filter must trap for a level (exec: none; execs, forks
 * and exits come from ptrace events). */
unsigned trace_classes(enum trace_level l);

/* Recorder. Writes incrementally; a killed run leaves a valid prefix. */
struct trace_rec;
struct trace_rec_info {
	const char *lease;          /* may be NULL */
	const char *image_path, *image_sha256;
	char *const *argv;          /* NULL-terminated */
	char *const *envp;          /* only its digest is recorded */
	json_t *mounts;             /* array or NULL; borrowed */
	uint64_t start_batch;
	enum trace_level level;
	int deterministic;          /* no wall-clock fields; namespace pids */
	json_t *determinism;        /* header "determinism" object or NULL; borrowed */
	const char *hash_cache;     /* file of exec hashes kept across runs (a cache:
				     * identity + boot id checked, damage ignored), or NULL */
	/* a restored deterministic run (sbx-restore --trace-from): the trace begins
	 * with resume_text (the run's header and first resume_seq events, checked by
	 * trace_trace_prefix), its chain at resume_head; the restore's own exec and
	 * what precedes it are not events */
	const char *resume_text;
	size_t resume_len;
	uint64_t resume_seq;
	const uint8_t *resume_head;
};
/* path "-" writes to stdout; fd >= 0 (path NULL) writes to that fd. */
struct trace_rec *trace_rec_open(const char *path, int fd, const struct trace_rec_info *info,
				 struct common_err *e);
/* At a seccomp stop: 1 if the recorder wants the syscall-exit stop. */
int trace_rec_want_exit(struct trace_rec *r, const struct trace_stop *s);
/* At entry (has_result 0) or exit (has_result 1) of a syscall. When an exit
 * was wanted, the entry call stores the stop and the exit call emits one
 * completion event; otherwise the entry call emits the event. */
int trace_rec_syscall(struct trace_rec *r, const struct trace_stop *s);
/* PTRACE_EVENT_EXEC: the binary's path (NULL: /proc/PID/exe), its SHA-256
 * (hashed once per file identity), argv (NULL: /proc/PID/cmdline). */
int trace_rec_exec(struct trace_rec *r, pid_t pid, pid_t ppid, const char *path,
		   char *const *argv);
/* kind: "fork", "vfork", "clone" or "thread". */
int trace_rec_spawn(struct trace_rec *r, pid_t parent, pid_t child, const char *kind);
int trace_rec_exit(struct trace_rec *r, pid_t tid, pid_t pid, int wstatus);
/* The recorder as the layer TRACE_LAYER_RECORD (a zeroed layer for NULL): after
 * the inspector and determinism, so the recorded action and result are the final
 * ones; entry sets st->want_exit when the level records this call's result. */
struct trace_layer trace_rec_layer(struct trace_rec *r);
int trace_rec_flush(struct trace_rec *r); /* also done by size and time */
/* Deterministic traces: tid's events since its last call join the chain now,
 * in the schedule's order (trace_layer.on_order). */
void trace_rec_order(struct trace_rec *r, pid_t tid);
/* Writes the end event with the guest's wait status, closes, frees; head
 * (may be NULL) receives the last chain hash. r is freed even on error. */
int trace_rec_close(struct trace_rec *r, int wstatus, uint8_t head[32], struct common_err *e);
/* Frees without an end event (the trace stays a truncated prefix). */
void trace_rec_abort(struct trace_rec *r);

/* A --deterministic run's queued events, the recorder's section of a
 * snapshot's determinism record (trace/record/state.c). The save (rec: the
 * recorder; a trace_determ_queued_fn): every task's events no turn has put in
 * the chain, by namespace id (ns), into b; for each task of again (parked at a
 * call it issues again once restored) the event its entry made is taken back,
 * or, already in the chain, not made again. -1 and *why (static), nothing
 * written, while a task in flight is inside a recorded call. The check: NULL,
 * or why the section is refused (each field checked). The resume (map: the
 * host id of each namespace id) queues the events again, before the restored
 * tasks stop. */
int trace_rec_state_save(void *rec, struct trace_supervisor *sv, pid_t (*ns)(pid_t),
			 const struct trace_sv_again *again, size_t n, struct codec_buf *b,
			 const char **why);
const char *trace_rec_state_why(const uint8_t *p, size_t n);
int trace_rec_state_resume(struct trace_rec *r, const uint8_t *p, size_t n,
			   const struct trace_sv_idmap *map, size_t nmap, struct common_err *e);

/* Events a recorder has written after its header. */
uint64_t trace_rec_events(const struct trace_rec *r);
/* Bytes of trace written so far (the lease meters them as storage_write). */
uint64_t trace_rec_bytes(const struct trace_rec *r);
/* The chain hash of the last line it wrote (snapshots record it). */
void trace_rec_head(const struct trace_rec *r, uint8_t head[32]);

#endif
