/* Durable files: atomic replace (temp, fsync, rename, fsync dir), appends, bounded reads. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
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

/* A reader gone away answers with -EPIPE, not with a SIGPIPE that would kill the
 * host: blocked in this thread only and, if this write raised it, taken back (the
 * host's disposition is never touched). */
int common_write_quiet(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old, pending;
	struct timespec zero = { 0, 0 };

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	int had = sigismember(&pending, SIGPIPE) == 1;
	int r = common_write_all(fd, buf, len);
	if (r == -EPIPE && !had)
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
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

/* A directory being removed: the names of its subdirectories still to remove. */
struct rm_level {
	char **sub;
	size_t n;
	dev_t dev;   /* to check the way back up through ".." */
	ino_t ino;
};

/* A directory of ours that we may not list or change is opened up: it goes next. */
DIR *common_dir_stream(int fd, struct stat *st)
{
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0), err;
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);

	if (d && fstat(fd, st) == 0)
		return d;
	err = errno;
	if (d)
		closedir(d);
	else if (dfd >= 0)
		close(dfd);
	errno = err;
	return NULL;
}

static void rm_open_up(int at, const char *name, const struct stat *st)
{
	if ((st->st_mode & 0700) != 0700 && st->st_uid == geteuid())
		fchmodat(at, name, (st->st_mode & 07777) | 0700, 0);
}

/* Unlink what directory fd holds except directories, whose names go to l. */
static int rm_files(int fd, struct rm_level *l, struct common_err *e)
{
	struct stat st;
	DIR *d = common_dir_stream(fd, &st);
	struct dirent *de;
	size_t cap = 0;
	int r = 0;

	if (!d)
		return common_errno(e, errno, "opendir");
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				r = common_errno(e, errno, "stat %s", de->d_name);
		} else if (S_ISDIR(st.st_mode)) {
			rm_open_up(fd, de->d_name, &st);
			if (l->n == cap) {
				cap = cap ? 2 * cap : 8;
				l->sub = common_xrealloc(l->sub, cap * sizeof *l->sub);
			}
			l->sub[l->n++] = common_xstrdup(de->d_name);
		} else if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT) {
			r = common_errno(e, errno, "unlink %s", de->d_name);
		}
	}
	closedir(d);
	return r;
}

/* Leave the deepest level for its parent, checked, and remove the directory left. */
static int rm_up(int *fd, struct rm_level *parent, struct common_err *e)
{
	struct stat st;
	int up = openat(*fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *name = parent->sub[--parent->n];
	int r = 0;

	if (up < 0 || fstat(up, &st) < 0 || st.st_dev != parent->dev || st.st_ino != parent->ino) {
		r = common_errf(e, name, "moved while it was removed");
		if (up >= 0)
			close(up);
	} else {
		close(*fd);
		*fd = up;
		if (unlinkat(up, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			r = common_errno(e, errno, "rmdir %s", name);
	}
	free(name);
	return r;
}

/* Any depth with two descriptors: a directory's files go first, then its
 * subdirectories one at a time, coming back up through "..". */
int common_rm_rf(const char *path, struct common_err *e)
{
	struct rm_level *lv;
	size_t nl = 1, capl = 16;
	struct stat st;
	int fd, r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : common_errno(e, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) < 0 && errno != ENOENT)
			return common_errno(e, errno, "unlink %s", path);
		return 0;
	}
	rm_open_up(AT_FDCWD, path, &st);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return common_errno(e, errno, "open %s", path);
	lv = common_xcalloc(capl, sizeof *lv);
	r = rm_files(fd, &lv[0], e);
	while (r == 0 && nl > 0) {
		if (lv[nl - 1].n == 0) {
			free(lv[--nl].sub);
			if (nl > 0)
				r = rm_up(&fd, &lv[nl - 1], e);
			continue;
		}
		const char *name = lv[nl - 1].sub[lv[nl - 1].n - 1];
		int child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0) {
			if (errno != ENOENT)
				r = common_errno(e, errno, "open %s", name);
			else
				free(lv[nl - 1].sub[--lv[nl - 1].n]);
			continue;
		}
		if (nl == capl) {
			capl *= 2;
			lv = common_xrealloc(lv, capl * sizeof *lv);
		}
		lv[nl] = (struct rm_level){ 0 };
		r = rm_files(child, &lv[nl++], e);
		close(fd);
		fd = child;
	}
	while (nl > 0) {
		struct rm_level *l = &lv[--nl];
		while (l->n > 0)
			free(l->sub[--l->n]);
		free(l->sub);
	}
	free(lv);
	close(fd);
	if (r == 0 && rmdir(path) < 0 && errno != ENOENT)
		r = common_errno(e, errno, "rmdir %s", path);
	return r;
}
