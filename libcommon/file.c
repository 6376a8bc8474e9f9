/* Durable files: atomic replace (temp, fsync, rename, fsync dir), appends, bounded reads. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "libcommon/common.h"

int common_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t common_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int common_read_fd(int fd, const char *name, size_t max, char **buf, size_t *len,
		   struct common_err *e)
{
	size_t cap = 4096, n = 0;
	char *p = common_xmalloc(cap + 1);

	for (;;) {
		ssize_t r;
		if (n == cap) {
			if (cap > max) {
				free(p);
				return common_errf(e, name, "input larger than %zu bytes", max);
			}
			cap *= 2;
			p = common_xrealloc(p, cap + 1);
		}
		r = read(fd, p + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int err = errno;
			free(p);
			return common_errno(e, err, "%s", name);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		free(p);
		return common_errf(e, name, "input larger than %zu bytes", max);
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	return 0;
}

int common_read_file(const char *path, size_t max, char **buf, size_t *len, struct common_err *e)
{
	int fd, r;

	if (strcmp(path, "-") == 0)
		return common_read_fd(0, "<stdin>", max, buf, len, e);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "%s", path);
	r = common_read_fd(fd, path, max, buf, len, e);
	close(fd);
	return r;
}

int common_fsync_dir(const char *dir, struct common_err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return common_errno(e, errno, "%s", dir);
	if (fsync(fd) < 0 && errno != EINVAL) {
		int err = errno;
		close(fd);
		return common_errno(e, err, "fsync %s", dir);
	}
	close(fd);
	return 0;
}

static char *dir_of(const char *path)
{
	char *copy = common_xstrdup(path), *d = common_xstrdup(dirname(copy));

	free(copy);
	return d;
}

int common_write_atomic(const char *path, const void *buf, size_t len, mode_t mode,
			struct common_err *e)
{
	char *tmp = common_xasprintf("%s.tmp.%ld", path, (long)getpid());
	char *dir = dir_of(path);
	int fd, r, rc = -1;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0) {
		common_errno(e, errno, "%s", tmp);
		goto out;
	}
	if ((r = common_write_all(fd, buf, len)) < 0 || fsync(fd) < 0) {
		common_errno(e, r < 0 ? -r : errno, "write %s", tmp);
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	common_fault_point("atomic-before-rename");
	if (rename(tmp, path) < 0) {
		common_errno(e, errno, "rename %s", path);
		unlink(tmp);
		goto out;
	}
	rc = common_fsync_dir(dir, e);
out:
	free(tmp);
	free(dir);
	return rc;
}

int common_write_replace(const char *path, const void *buf, size_t len, mode_t mode)
{
	char *tmp = common_xasprintf("%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	int ok = fd >= 0 && common_write_all(fd, buf, len) == 0;

	if (fd >= 0)
		close(fd);
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		ok = 0;
	}
	free(tmp);
	return ok ? 0 : -1;
}

int common_append_durable(const char *path, const void *buf, size_t len, struct common_err *e)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int r;

	if (fd < 0)
		return common_errno(e, errno, "%s", path);
	r = common_write_all(fd, buf, len);
	if (r < 0 || fsync(fd) < 0) {
		int err = r < 0 ? -r : errno;
		close(fd);
		return common_errno(e, err, "append %s", path);
	}
	close(fd);
	return 0;
}

int common_same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int common_mkdir_p(const char *path, mode_t mode, struct common_err *e)
{
	char *p = common_xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST) {
			common_errno(e, errno, "mkdir %s", p);
			free(p);
			return -1;
		}
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST) {
		common_errno(e, errno, "mkdir %s", p);
		free(p);
		return -1;
	}
	free(p);
	return 0;
}

static int rm_at(int at, const char *name, struct common_err *e)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int fd;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : common_errno(e, errno, "stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(at, name, 0) < 0 && errno != ENOENT)
			return common_errno(e, errno, "unlink %s", name);
		return 0;
	}
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "open %s", name);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return common_errno(e, errno, "opendir %s", name);
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_at(dirfd(d), de->d_name, e) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return common_errno(e, errno, "rmdir %s", name);
	return 0;
}

int common_rm_rf(const char *path, struct common_err *e)
{
	return rm_at(AT_FDCWD, path, e);
}
