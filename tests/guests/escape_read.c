/* Read host files that are not mounted (argv[1...], e.g. a file in the
 * host's /tmp), and /etc/shadow, which a root-invoked guest must not read. */
#include <fcntl.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char what[300];
		snprintf(what, sizeof what, "read %s", argv[i]);
		expect_refused(what, open(argv[i], O_RDONLY));
	}
	expect_errno("read /etc/shadow", open("/etc/shadow", O_RDONLY), EACCES, EPERM);
	expect_errno("read /etc/gshadow", open("/etc/gshadow", O_RDONLY), EACCES, ENOENT);
	expect_errno("list /root", open("/root", O_RDONLY | O_DIRECTORY), EACCES, ENOENT);
	return finish();
}
