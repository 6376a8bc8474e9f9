/* The host's devices: fuse, tun, kmsg, disks and the like must not be there;
 * terminals come from the run's own devpts, and only so many of them. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	const char *host[] = { "/dev/fuse", "/dev/net/tun", "/dev/kmsg", "/dev/userfaultfd",
			       "/dev/mem", "/dev/console", "/dev/loop-control", "/dev/vda",
			       "/dev/sda", "/dev/tty0", "/dev/vsock", "/dev/btrfs-control" };
	for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
		char what[64];
		snprintf(what, sizeof what, "open %s", host[i]);
		expect_refused(what, open(host[i], O_RDWR | O_CLOEXEC));
	}
	int n = 0, first = -1;
	for (; n < 100; n++) {
		int fd = posix_openpt(O_RDWR | O_NOCTTY);
		if (fd < 0)
			break;
		if (first < 0)
			first = fd;
	}
	char name[64] = "none";
	if (first >= 0)
		ptsname_r(first, name, sizeof name);
	printf("ptys: %d, first %s\n", n, name);
	int fd = open("/dev/null", O_WRONLY);
	if (fd < 0 || write(fd, "x", 1) != 1) {
		printf("/dev/null unusable\n");
		return 2;
	}
	return finish();
}
