/* A restored --deterministic run's trace (sbx-restore --trace-from): it begins
 * with the first events of the run its snapshot was taken from, read back
 * through the reader (every line checked, the chain recomputed) and required
 * to end at the snapshot's position and head; the recorder then appends the
 * restored run's events to that chain, as the uninterrupted run would have. */
#include <stdlib.h>
#include <string.h>
#include "trace/record/reader/reader.h"

static void put(char **p, size_t *n, size_t *cap, const char *s, size_t k)
{
	if (*n + k > *cap) {
		*cap = (*n + k) * 2;
		*p = common_xrealloc(*p, *cap);
	}
	memcpy(*p + *n, s, k);
	*n += k;
}

static int prefix(const char *from, uint64_t seq, const uint8_t head[32], char **out, size_t *len,
		  size_t *cap, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(from, e);
	struct trace_event ev;
	uint64_t lines = 0;
	int rc = 0;
	char hex[COMMON_SHA256_HEX];

	if (!t)
		return -1;
	while (lines <= seq && (rc = trace_reader_next(t, &ev, e)) > 0) {
		if (lines == 0 && !json_is_true(json_object_get(ev.ev, "deterministic"))) {
			rc = common_errf(e, from, "not the trace of a --deterministic run");
			break;
		}
		if (!strcmp(ev.kind, "end")) {
			rc = 0;
			break;
		}
		/* the line as the recorder wrote it: its hashed bytes, then its chain value */
		common_hex(ev.h, 32, hex);
		put(out, len, cap, ev.canon, ev.canon_len - 1);
		put(out, len, cap, ",\"h\":\"", 6);
		put(out, len, cap, hex, 64);
		put(out, len, cap, "\"}\n", 3);
		lines++;
		if (lines == seq + 1 && memcmp(ev.h, head, 32)) {
			rc = common_errf(e, from, "its event %llu does not end at the snapshot's trace head: "
					 "not the trace of the run the snapshot was taken from",
					 (unsigned long long)seq);
			break;
		}
	}
	trace_reader_close(t);
	if (rc < 0)
		return -1;
	if (lines != seq + 1)
		return common_errf(e, from, "holds %llu events; the snapshot was taken after %llu",
				   (unsigned long long)(lines ? lines - 1 : 0), (unsigned long long)seq);
	return 0;
}

int trace_trace_prefix(const char *from, uint64_t seq, const uint8_t head[32], char **text,
		       size_t *len, struct common_err *e)
{
	size_t cap = 0;
	*text = NULL;
	*len = 0;
	if (prefix(from, seq, head, text, len, &cap, e) == 0)
		return 0;
	free(*text);
	*text = NULL;
	return -1;
}
