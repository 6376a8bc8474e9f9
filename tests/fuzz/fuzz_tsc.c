/* libFuzzer target for the decoder of the instruction at a guest's faulting
 * rip under --deterministic (trace/determ/tsc.c): it names rdtsc or rdtscp
 * only when those bytes are there, and never a length past the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "trace/determ/determ.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = 99;
	int insn = trace_tsc_decode(data, size, &len);
	static const uint8_t rdtsc[] = { 0x0f, 0x31 }, rdtscp[] = { 0x0f, 0x01, 0xf9 };
	int ok = insn == TRACE_TSC_RDTSC ? len == 2 && size >= 2 && !memcmp(data, rdtsc, 2)
		 : insn == TRACE_TSC_RDTSCP ? len == 3 && size >= 3 && !memcmp(data, rdtscp, 3)
		 : insn == TRACE_TSC_NONE && len == 0 && !(size >= 2 && !memcmp(data, rdtsc, 2)) &&
		   !(size >= 3 && !memcmp(data, rdtscp, 3));
	if (!ok)
		abort();
	return 0;
}
