/* trace/record/cmd: the sbx-trace commands over the reader (their entries are
 * in trace/trace.h); what the files of this room share. */
#ifndef SBX_TRACE_CMD_INTERNAL_H
#define SBX_TRACE_CMD_INTERNAL_H

#include "trace/record/reader/reader.h"
#include "trace/trace.h"

/* An event as one text line: canonical JSON, with what JSON leaves raw (DEL,
 * C1 controls) escaped too; JSON's own backslash escapes stay as they are. */
char *trace_json_text(const json_t *j);
/* Prints j as JSON and drops the reference. */
int trace_json_print(json_t *j);

/* adjudicate's re-execution from the latest snapshot of lease that lies within
 * the n agreed chain values heads (trace/record/cmd/adjfrom.c): restored into a
 * fresh lease (stopped once its trace holds stop_after events, 0: at its end) with the run's mounts (m, nm, replace) and o's environment, its
 * trace written to replay; *from says whence. 0 done, 1 no such snapshot, -1. */
int trace_adj_from_snapshot(const struct trace_adj_opts *o, const char *lease,
			    const uint8_t (*heads)[32], size_t n, uint64_t stop_after,
			    const struct trace_mount *m, size_t nm, int replace, const char *scratch,
			    const char *replay, json_t **from, struct common_err *e);

#endif
