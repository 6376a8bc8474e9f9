/* Read host files that are not mounted (argv[1...], e.g. a file in the
 * host's /tmp), /etc/shadow, which a root-invoked guest must not read, and
 * anything in /root or /home (empty in the guest's tree). */
#include <dirent.h>
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
	const char *priv[] = { "/root", "/home" };
	for (int i = 0; i < 2; i++) {
		DIR *d = opendir(priv[i]);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				printf("ESCAPED: %s shows %s\n", priv[i], de->d_name);
				escaped = 1;
			}
		if (d)
			closedir(d);
		printf("contained: %s is empty\n", priv[i]);
	}
	return finish();
}
