/* libFuzzer target for the recorder's section of a determinism record, the
 * events waiting for their task's turn (trace/record/state.c), fed as is: a
 * refusal says why, the same each time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "trace/record/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = trace_rec_state_why(data, size);
	if ((why && !*why) || trace_rec_state_why(data, size) != why)
		abort();
	return 0;
}
