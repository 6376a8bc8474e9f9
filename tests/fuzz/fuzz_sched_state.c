/* libFuzzer target for the schedule's decoder in a determinism record version
 * 2 (trace/sv/sched_state.c), fed the bytes as is: a refusal says why, an
 * acceptance reads no byte past the input. */
#include <stdint.h>
#include <stdlib.h>
#include "codec/codec.h"
#include "trace/sv/sv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct codec_rd r;
	codec_rd_init(&r, data, size);
	struct trace_sched_saved *s = trace_sched_saved_load(&r);
	if ((!s && !r.why) || (s && r.why) || r.off > size)
		abort();
	trace_sched_saved_free(s);
	return 0;
}
