/* libFuzzer target for the determinism record decoder (trace/determ/state.c)
 * with the recorder's section checked by its own decoder. A first byte of 0
 * decodes the rest as is; 1 puts a valid version 2 header (seed, epoch, an
 * empty file table, stdio) in front so mutations reach the schedule, the
 * queued events and the tasks; 2 the same with version 1. An accepted record
 * names a last id. (A resume decodes the same way, then waits for the clock.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void header(struct codec_buf *b, uint32_t ver)
{
	codec_put_u32(b, ver);
	codec_put_u32(b, 4);
	codec_put_raw(b, "seed", 4);
	codec_put_u64(b, 1700000000);
	codec_put_u64(b, 0);
	codec_put_u32(b, 4194304);        /* last pid: any task's */
	codec_put_u64(b, 0);              /* an empty file table */
	codec_put_u64(b, 1);
	codec_put_u64(b, 1);
	codec_put_u32(b, 0);
	codec_put_u32(b, 0);
	for (int k = 0; k < 6; k++)       /* stdio */
		codec_put_u64(b, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct codec_buf b;
	if (size == 0 || data[0] > 2)
		return 0;
	codec_buf_init(&b);
	if (data[0])
		header(&b, data[0] == 1 ? 2 : 1);
	codec_put_raw(&b, data + 1, size - 1);
	const char *why = trace_determ_record_why(b.p, b.len, trace_rec_state_why);
	if (!why && trace_determ_record_last_pid(b.p, b.len) == 0)
		abort();
	codec_buf_free(&b);
	return 0;
}
