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

#endif
