/* /proc/PID/mem of sbx's init (pid 1) and of a host pid (argv[1]), which this
 * PID namespace's /proc does not show. */
#include <fcntl.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	expect_refused("open /proc/1/mem (sbx's init)", open("/proc/1/mem", O_RDWR));
	expect_refused("open /proc/1/environ (sbx's init)", open("/proc/1/environ", O_RDONLY));
	for (int i = 1; i < argc; i++) {
		char p[64], what[100];
		snprintf(p, sizeof p, "/proc/%s/mem", argv[i]);
		snprintf(what, sizeof what, "open %s (outside pid)", p);
		expect_refused(what, open(p, O_RDWR));
	}
	return finish();
}
