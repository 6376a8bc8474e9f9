/* libFuzzer target for the decoder of an inspector co-process's reply line
 * (trace/inspect/coproc.c), fed as is, answering event 42: an accepted reply
 * holds only what a reply may (an errno in range, paths of bounded length). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "trace/inspect/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_decision d;
	struct common_err e;
	if (trace_coproc_parse_reply((const char *)data, size, 42, &d, &e) == 0) {
		if (d.deny_errno < 0 || d.deny_errno > 4095 || d.set_args > 63)
			abort();
		for (int i = 0; i < 2; i++)
			if (d.path[i] && !d.path[i][0])
				abort();
		trace_decision_clear(&d);
	} else if (d.path[0] || d.path[1]) {
		abort(); /* a refused reply leaves nothing behind */
	}
	return 0;
}
