/* Inspection guest: creates /tmp/hello.txt and /tmp/other.txt, then opens each
 * argument from its own buffer and prints what it read, and the buffer afterwards.
 * "@short" opens a path that ends exactly at an unmapped page. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			perror(path);
		close(fd);
	}
}

static void try_open(char *buf)
{
	char data[256];
	int fd = open(buf, O_RDONLY);

	if (fd < 0) {
		printf("open %s: %s\n", buf, strerrorname_np(errno));
	} else {
		ssize_t n = read(fd, data, sizeof data - 1);
		data[n > 0 ? n : 0] = 0;
		printf("open %s: ok: %s", buf, data);
		close(fd);
	}
	printf("buffer: %s\n", buf);
}

int main(int argc, char **argv)
{
	put("/tmp/hello.txt", "hello\n");
	put("/tmp/other.txt", "other\n");
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "@short") == 0) {
			char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			mprotect(p + 4096, 4096, PROT_NONE); /* unreadable, and no hole to reuse */
			memcpy(p + 4096 - 3, "/x", 3);
			try_open(p + 4096 - 3);
			continue;
		}
		char buf[4096];
		snprintf(buf, sizeof buf, "%s", argv[i]);
		try_open(buf);
	}
	return 0;
}
