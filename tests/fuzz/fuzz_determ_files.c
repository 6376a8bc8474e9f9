/* libFuzzer target for the file table of a determinism record
 * (trace/determ/files.c), fed as is: an accepted table saves again to exactly
 * the bytes it was read from. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "trace/determ/determ-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct codec_rd r;
	codec_rd_init(&r, data, size);
	struct trace_determ_files *f = trace_determ_files_load(&r);
	if (!f != !!r.why)
		abort();
	if (f) {
		struct codec_buf b;
		codec_buf_init(&b);
		trace_determ_files_save(f, &b);
		if (b.len != r.off || memcmp(b.p, data, b.len))
			abort();
		codec_buf_free(&b);
		trace_determ_files_free(f);
	}
	return 0;
}
