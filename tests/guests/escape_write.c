/* Write outside /ns: the read-only host tree, the root, a bind not declared rw. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	const char *paths[] = { "/etc/sbx-escape", "/usr/sbx-escape", "/sbx-escape",
				"/var/tmp/sbx-escape", "/root/sbx-escape", "/home/sbx-escape" };
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		char what[128];
		snprintf(what, sizeof what, "create %s", paths[i]);
		expect_refused(what, open(paths[i], O_WRONLY | O_CREAT, 0644));
	}
	expect_refused("append /etc/passwd", open("/etc/passwd", O_WRONLY | O_APPEND));
	expect_refused("mkdir /etc/sbx-dir", mkdir("/etc/sbx-dir", 0755));
	expect_refused("chmod /usr/bin", chmod("/usr/bin", 0777));
	expect_refused("rename /etc/hostname", rename("/etc/hostname", "/etc/hostname2"));
	for (int i = 1; i < argc; i++) { /* extra targets given by the test (ro binds) */
		char what[256];
		snprintf(what, sizeof what, "create in %s", argv[i]);
		char p[256];
		snprintf(p, sizeof p, "%s/sbx-escape", argv[i]);
		expect_refused(what, open(p, O_WRONLY | O_CREAT, 0644));
	}
	int fd = open("/ns/allowed", O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || write(fd, "ok\n", 3) != 3) {
		printf("cannot write /ns\n");
		return 2;
	}
	close(fd);
	return finish();
}
