/* Storage attacks: each puts up to 256 MiB into files of DIR through one path
 * the kernel's read/write byte counts do not see (or see late), at full speed.
 * usage: meter_store write|fallocate|aio|splice|mmap|copy|sendfile|pwritev2|files|huge DIR
 * (huge: one write(2) asking SSIZE_MAX bytes)
 * Exit 0: all of it was stored; 3: a call failed (message on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define TOTAL (256ll << 20)
#define CHUNK (1 << 20)

static char buf[CHUNK];
static const char *dir;

static int fail(const char *what)
{
	fprintf(stderr, "meter_store: %s: %s\n", what, strerror(errno));
	return 3;
}

static int open_in(const char *name)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
}

/* A sparse source of TOTAL zero bytes: reading it stores nothing. */
static int sparse_source(void)
{
	int fd = open_in("src");

	return fd < 0 || ftruncate(fd, TOTAL) < 0 ? -1 : fd;
}

static int aio(int fd)
{
	aio_context_t ctx = 0;
	struct iocb cb, *cbs[1] = { &cb };
	struct io_event ev;

	if (syscall(SYS_io_setup, 1, &ctx) < 0)
		return fail("io_setup");
	for (long long off = 0; off < TOTAL; off += CHUNK) {
		memset(&cb, 0, sizeof cb);
		cb.aio_fildes = (unsigned)fd;
		cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		cb.aio_buf = (uint64_t)(uintptr_t)buf;
		cb.aio_nbytes = CHUNK;
		cb.aio_offset = off;
		if (syscall(SYS_io_submit, ctx, 1, cbs) != 1 ||
		    syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
			return fail("io_submit");
	}
	return 0;
}

static int spliced(int fd)
{
	int p[2];
	struct iovec v = { buf, CHUNK };

	if (pipe(p) < 0 || fcntl(p[1], F_SETPIPE_SZ, CHUNK) < 0)
		return fail("pipe");
	for (long long done = 0; done < TOTAL; done += CHUNK) {
		v.iov_base = buf;
		v.iov_len = CHUNK;
		while (v.iov_len) {
			ssize_t n = vmsplice(p[1], &v, 1, 0);
			if (n <= 0)
				return fail("vmsplice");
			for (ssize_t left = n; left > 0;) {
				ssize_t m = splice(p[0], NULL, fd, NULL, (size_t)left, 0);
				if (m <= 0)
					return fail("splice");
				left -= m;
			}
			v.iov_base = (char *)v.iov_base + n;
			v.iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int mapped(int fd)
{
	char *p;

	if (ftruncate(fd, TOTAL) < 0)
		return fail("ftruncate");
	p = mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap");
	for (long long i = 0; i < TOTAL; i += 4096)
		p[i] = 1;
	return msync(p, TOTAL, MS_SYNC) < 0 ? fail("msync") : 0;
}

static int files(void)
{
	for (int i = 0; i < 100000; i++) {
		char name[32];
		int fd;
		snprintf(name, sizeof name, "e%d", i);
		if ((fd = open_in(name)) < 0)
			return fail("open");
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *how = argc > 2 ? argv[1] : "";
	int fd, src;

	dir = argv[2];
	memset(buf, 's', sizeof buf);
	if (strcmp(how, "files") == 0)
		return files();
	if ((fd = open_in("big")) < 0)
		return fail("open");
	if (strcmp(how, "write") == 0) {
		for (long long done = 0; done < TOTAL; done += CHUNK)
			if (write(fd, buf, CHUNK) != CHUNK)
				return fail("write");
	} else if (strcmp(how, "huge") == 0) {
		if (syscall(SYS_write, fd, buf, (size_t)SSIZE_MAX) < 0)
			return fail("write");
	} else if (strcmp(how, "fallocate") == 0) {
		if (fallocate(fd, 0, 0, TOTAL) < 0)
			return fail("fallocate");
	} else if (strcmp(how, "aio") == 0) {
		return aio(fd);
	} else if (strcmp(how, "splice") == 0) {
		return spliced(fd);
	} else if (strcmp(how, "mmap") == 0) {
		return mapped(fd);
	} else if (strcmp(how, "copy") == 0 || strcmp(how, "sendfile") == 0) {
		if ((src = sparse_source()) < 0)
			return fail("source");
		for (long long done = 0; done < TOTAL;) {
			ssize_t n = how[0] == 'c' ? copy_file_range(src, NULL, fd, NULL, CHUNK, 0)
						  : sendfile(fd, src, NULL, CHUNK);
			if (n <= 0)
				return fail(how);
			done += n;
		}
	} else if (strcmp(how, "pwritev2") == 0) {
		struct iovec v[4];
		for (int i = 0; i < 4; i++)
			v[i] = (struct iovec){ buf, CHUNK / 4 };
		for (long long off = 0; off < TOTAL; off += CHUNK)
			if (pwritev2(fd, v, 4, off, 0) != CHUNK)
				return fail("pwritev2");
	} else {
		fprintf(stderr, "usage: meter_store write|fallocate|aio|splice|mmap|copy|sendfile|"
			"pwritev2|files|huge DIR\n");
		return 2;
	}
	return 0;
}
