/* libFuzzer target for the guest-image check (libelf): arbitrary bytes as an
 * ELF file are validated or refused with a message, never crash. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "lease/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64], hex[COMMON_SHA256_HEX];
	struct common_err e;

	if (fd < 0)
		fd = memfd_create("fuzz_image", 0);
	if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	lease_image_check(path, hex, &e);
	return 0;
}
