/* Reads a file at full speed, forever, along one read path, until storage_read
 * stops it. usage: meter_load read|big|pread|readv|sendfile|threads FILE
 *   read: read() in 64 KiB; big: one read() asking 256 MiB at a time; pread:
 *   pread64 in 64 KiB; readv: 16 iovecs of 64 KiB; sendfile: 1 MiB at a time into
 *   /dev/null; threads: four threads reading in 64 KiB. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHUNK (64 << 10)

static const char *how, *file;

static int pass(char *buf, size_t big)
{
	int fd = open(file, O_RDONLY), out = -1;
	off_t off = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	if (!strcmp(how, "sendfile") && (out = open("/dev/null", O_WRONLY)) < 0)
		return -1;
	do {
		if (!strcmp(how, "big")) {
			n = read(fd, buf, big);
		} else if (!strcmp(how, "pread")) {
			n = pread(fd, buf, CHUNK, off);
			off += n > 0 ? n : 0;
		} else if (!strcmp(how, "readv")) {
			struct iovec v[16];
			for (int i = 0; i < 16; i++)
				v[i] = (struct iovec){ buf + (size_t)i * CHUNK, CHUNK };
			n = readv(fd, v, 16);
		} else if (!strcmp(how, "sendfile")) {
			n = sendfile(out, fd, NULL, 1 << 20);
		} else {
			n = read(fd, buf, CHUNK);
		}
	} while (n > 0);
	close(fd);
	if (out >= 0)
		close(out);
	return n < 0 ? -1 : 0;
}

static void *reader(void *arg)
{
	char *buf = malloc(16 * CHUNK);

	(void)arg;
	while (buf && pass(buf, 16 * CHUNK) == 0)
		;
	exit(1);
}

int main(int argc, char **argv)
{
	size_t big = 256u << 20;
	char *buf;

	if (argc != 3) {
		fprintf(stderr, "usage: meter_load read|big|pread|readv|sendfile|threads FILE\n");
		return 2;
	}
	how = argv[1];
	file = argv[2];
	if (!strcmp(how, "threads")) {
		pthread_t t;
		for (int i = 0; i < 3; i++)
			if (pthread_create(&t, NULL, reader, NULL) != 0)
				return 1;
		reader(NULL);
	}
	if (!(buf = malloc(!strcmp(how, "big") ? big : 16 * CHUNK)))
		return 1;
	while (pass(buf, big) == 0)
		;
	return 1;
}
