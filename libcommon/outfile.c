/* Host files written after a guest ran (result records, state images): the
 * directory is opened before the guest starts and the file is replaced beneath
 * that descriptor, never by path, so a guest that swaps a directory of the path
 * for a symlink during the run redirects nothing. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "libcommon/common.h"

int common_outfile_open(struct common_outfile *o, const char *path, struct common_err *e)
{
	char *d = common_xstrdup(path), *b = common_xstrdup(path);
	const char *base = basename(b);
	o->dirfd = -1;
	o->path = common_xstrdup(path);
	o->base = common_xstrdup(base);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || path[strlen(path) - 1] == '/') {
		common_errf(e, path, "not a file name");
	} else if ((o->dirfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		common_errno(e, errno, "its directory");
	} else if (faccessat(o->dirfd, "", W_OK | X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0 && errno != ENOSYS && errno != EINVAL) {
		common_errno(e, errno, "its directory");
		close(o->dirfd);
		o->dirfd = -1;
	}
	free(d);
	free(b);
	if (o->dirfd < 0) {
		common_outfile_close(o);
		return -1;
	}
	return 0;
}

/* A fresh temporary beside the file: one component beneath the directory,
 * created exclusively, no symlink followed. */
int common_outfile_begin(struct common_outfile *o, mode_t mode, char **tmp, struct common_err *e)
{
	struct open_how how = {
		.flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	*tmp = common_xasprintf(".%s.tmp.%ld", o->base, (long)getpid());
	unlinkat(o->dirfd, *tmp, 0); /* a leftover (or a planted name) goes first */
	int fd = (int)syscall(SYS_openat2, o->dirfd, *tmp, &how, sizeof how);
	if (fd < 0) {
		common_errno(e, errno, "%s: temporary file", o->path);
		free(*tmp);
		*tmp = NULL;
	}
	return fd;
}

int common_outfile_commit(struct common_outfile *o, int fd, char *tmp, struct common_err *e)
{
	int rc = 0;
	if (fsync(fd) < 0)
		rc = common_errno(e, errno, "write %s", o->path);
	close(fd);
	/* renameat replaces the last component itself, whatever it is now */
	if (rc == 0 && renameat(o->dirfd, tmp, o->dirfd, o->base) < 0)
		rc = common_errno(e, errno, "rename into %s", o->path);
	if (rc < 0)
		unlinkat(o->dirfd, tmp, 0);
	else if (fsync(o->dirfd) < 0)
		rc = common_errno(e, errno, "fsync directory of %s", o->path);
	free(tmp);
	return rc;
}

int common_outfile_write(struct common_outfile *o, const void *buf, size_t len, mode_t mode,
			 struct common_err *e)
{
	char *tmp;
	int fd = common_outfile_begin(o, mode, &tmp, e), r;
	if (fd < 0)
		return -1;
	if ((r = common_write_all(fd, buf, len)) < 0) {
		common_errno(e, -r, "write %s", o->path);
		close(fd);
		unlinkat(o->dirfd, tmp, 0);
		free(tmp);
		return -1;
	}
	return common_outfile_commit(o, fd, tmp, e);
}

void common_outfile_close(struct common_outfile *o)
{
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
	free(o->path);
	free(o->base);
	o->path = o->base = NULL;
}
