/* libFuzzer target for sbx-trace verify-provenance: any bytes as an envelope
 * must give a verdict or a clean error, never a crash or a leak (the store is
 * made once, in a temporary directory). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char store[] = "/tmp/sbx-fuzz-prov.XXXXXX";
	static int fd = -1;
	char path[64];
	struct common_err e;

	if (fd < 0) {
		if (!mkdtemp(store))
			abort();
		fd = memfd_create("envelope", 0);
		if (fd < 0 || !freopen("/dev/null", "w", stdout))
			abort();
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	trace_cmd_verify_provenance(path, store, &e);
	return 0;
}
