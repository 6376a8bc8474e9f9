/* Close and dup fds 0-2, then probe every descriptor and the control socket:
 * nothing of sbx's leaks into the guest. argv[1...]: host paths to probe. */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "escape.h"

int main(int argc, char **argv)
{
	int out = dup(1);
	close(0);
	dup2(2, 1);
	close(2);
	FILE *o = fdopen(out, "w");
	int leaked = 0;
	for (int fd = 0; fd < 4096; fd++) {
		struct stat st;
		if (fd == out || fstat(fd, &st) < 0)
			continue;
		if (fd == 1)
			continue; /* our own dup of stderr */
		fprintf(o, "ESCAPED: inherited fd %d (mode %o)\n", fd, st.st_mode);
		leaked = 1;
	}
	for (int i = 1; i < argc; i++) {
		int u = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[i]);
		if (connect(u, (struct sockaddr *)&a, sizeof a) == 0) {
			fprintf(o, "ESCAPED: connected to %s\n", argv[i]);
			leaked = 1;
		} else {
			fprintf(o, "contained: control socket %s (%s)\n", argv[i], strerror(errno));
		}
		close(u);
	}
	/* init's descriptors through /proc */
	for (int fd = 0; fd < 64; fd++) {
		char p[64];
		snprintf(p, sizeof p, "/proc/1/fd/%d", fd);
		int f = open(p, O_RDONLY);
		if (f >= 0) {
			fprintf(o, "ESCAPED: opened %s\n", p);
			leaked = 1;
			close(f);
		}
	}
	fprintf(o, leaked ? "RESULT: escaped\n" : "contained: no descriptor leaked\nRESULT: contained\n");
	fclose(o);
	return leaked;
}
