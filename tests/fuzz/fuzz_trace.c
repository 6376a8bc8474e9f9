/* libFuzzer target for the trace reader and the build record built on it:
 * any bytes must give events or a clean error, never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64];
	struct common_err e;
	struct trace_reader *t;
	struct trace_event ev;
	json_t *b;

	if (fd < 0)
		fd = memfd_create("fuzz_trace", 0);
	if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	t = trace_reader_open(path, &e);
	if (t) {
		while (trace_reader_next(t, &ev, &e) > 0)
			;
		trace_reader_close(t);
	}
	b = trace_buildrec(path, 1, &e);
	json_decref(b);
	return 0;
}
