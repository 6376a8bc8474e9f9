/* trace/record/reader: the trace reader (bytes -> lines -> checked events,
 * verifying the chain; SPEC §7) and the build record read from a trace. */
#ifndef SBX_TRACE_READER_H
#define SBX_TRACE_READER_H

#include <stdint.h>
#include "libcommon/common.h"

struct trace_reader;
struct trace_event {           /* one checked line; valid until the next call */
	uint64_t line;
	json_t *ev;                /* the parsed event (header for line 1) */
	uint8_t h[32];
	const char *kind;          /* "header", "sys", "exec", "spawn", "exit", "end" */
	const char *canon;         /* the hashed bytes: canonical event without h */
	size_t canon_len;
};
struct trace_reader *trace_reader_open(const char *path, struct common_err *e);
/* 1 event read, 0 end of input, -1 error (chain, type, length...). */
int trace_reader_next(struct trace_reader *t, struct trace_event *out, struct common_err *e);
const json_t *trace_reader_header(const struct trace_reader *t);
int trace_reader_complete(const struct trace_reader *t); /* saw the end event */
const char *trace_reader_name(const struct trace_reader *t); /* path, "<stdin>" for "-" */
uint64_t trace_reader_events(const struct trace_reader *t); /* read so far, header not counted */
int trace_reader_partial(const struct trace_reader *t); /* an unterminated last line was ignored */
void trace_reader_close(struct trace_reader *t);
/* A restored --deterministic run's trace begins as the run's (prefix.c): the
 * header and first seq events of from, read and checked as any trace, required
 * to end at head, as the recorder wrote them (*text malloc'd, *len bytes). */
int trace_trace_prefix(const char *from, uint64_t seq, const uint8_t head[32], char **text,
		       size_t *len, struct common_err *e);

/* The build record of a trace as JSON (new reference), or NULL. */
json_t *trace_buildrec(const char *path, int hash_inputs, struct common_err *e);

#endif
