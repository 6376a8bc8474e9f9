/* snap: the run's own tmpfs mounts (version 8). Files the guest left in /tmp
 * that no process holds (gcc's ccXXXX.s between cc1 and as) are captured from
 * the root's view without following a symlink, and recreated in the restored
 * run's tmpfs before its descriptors are reopened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "codec/codec.h"
#include "snap/snap-internal.h"

static const char *const mount_at[SNAP_TMP_MOUNTS] = { "tmp", "dev/shm" };

struct tmp_walk {
	struct snap_state *root;
	uint32_t mount, depth;
	dev_t dev;
	size_t cap;
	uint64_t bytes, data_cap;
	uint64_t *off;             /* a file's offset in root->tmp_data until the end */
	struct common_err *e;
};

static int open_beneath(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC, .resolve = resolve };
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	return fd < 0 ? -errno : fd;
}

/* The mount at mount_at[m] in pid's view, when it is a tmpfs no mount of the
 * supervisor's namespace shows (the run's own, not a bound host one). */
static int open_mount(pid_t pid, uint32_t m, dev_t *dev)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/root", (int)pid);
	int rfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	int fd = open_beneath(rfd, mount_at[m], O_RDONLY | O_DIRECTORY,
			      RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	close(rfd);
	struct statfs fs;
	struct stat sb;
	if (fd < 0)
		return fd;
	if (fstatfs(fd, &fs) < 0 || fs.f_type != TMPFS_MAGIC || fstat(fd, &sb) < 0) {
		close(fd);
		return -ENOENT;
	}
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	unsigned maj, mnr;
	int host = 0;
	while (mi && !host && fgets(line, sizeof line, mi))
		host = sscanf(line, "%*u %*u %u:%u", &maj, &mnr) == 2 &&
		       makedev(maj, mnr) == sb.st_dev;
	if (mi)
		fclose(mi);
	if (!mi || host) {
		close(fd);
		return -ENOENT;
	}
	*dev = sb.st_dev;
	return fd;
}

static struct snap_tmp *add_entry(struct tmp_walk *w, const char *path, uint32_t kind,
				  const struct stat *sb)
{
	struct snap_state *st = w->root;
	if (st->ntmps == SNAP_TMP_MAX) {
		common_errf(w->e, "capture", "more than %u entries in the run's tmpfs", SNAP_TMP_MAX);
		return NULL;
	}
	if (st->ntmps == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		st->tmps = common_xrealloc(st->tmps, w->cap * sizeof *st->tmps);
		w->off = common_xrealloc(w->off, w->cap * sizeof *w->off);
	}
	struct snap_tmp *t = &st->tmps[st->ntmps++];
	*t = (struct snap_tmp){ .mount = w->mount, .kind = kind, .mode = sb->st_mode & 07777,
				.path = common_xstrdup(path) };
	return t;
}

/* A file mapped shared on the tmpfs is a shared memory object already. */
static int is_shm(const struct snap_state *st, uint32_t m, const char *rel)
{
	size_t n = strlen(mount_at[m]);
	for (size_t j = 0; j < st->nshms; j++) {
		const char *name = st->shms[j].name;
		if (st->shms[j].kind == SNAP_SHM_NAMED && name[0] == '/' &&
		    !strncmp(name + 1, mount_at[m], n) && name[1 + n] == '/' &&
		    !strcmp(name + 2 + n, rel))
			return 1;
	}
	return 0;
}

static int read_file(struct tmp_walk *w, int dfd, const char *name, const char *path,
		     const struct stat *sb)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat now;
	if (fd < 0 || fstat(fd, &now) < 0 || now.st_ino != sb->st_ino || !S_ISREG(now.st_mode)) {
		if (fd >= 0)
			close(fd);
		return common_errf(w->e, "capture", "/%s/%s changed while it was read", mount_at[w->mount], path);
	}
	uint64_t size = (uint64_t)now.st_size;
	if (w->bytes + size > SNAP_TMP_BYTES_MAX) {
		close(fd);
		return common_errf(w->e, "capture", "the run's tmpfs holds more than %u bytes of files",
				   SNAP_TMP_BYTES_MAX);
	}
	if (w->bytes + size > w->data_cap) {
		w->data_cap = 2 * (w->bytes + size) < SNAP_TMP_BYTES_MAX ? 2 * (w->bytes + size)
									 : SNAP_TMP_BYTES_MAX;
		w->root->tmp_data = common_xrealloc(w->root->tmp_data, (size_t)w->data_cap);
	}
	uint64_t got = 0;
	ssize_t n = 1;
	while (got < size && (n = pread(fd, w->root->tmp_data + w->bytes + got, (size_t)(size - got),
					(off_t)got)) > 0)
		got += (uint64_t)n;
	close(fd);
	if (got != size)
		return common_errf(w->e, "capture", "/%s/%s changed while it was read", mount_at[w->mount], path);
	struct snap_tmp *t = add_entry(w, path, SNAP_TMP_FILE, sb);
	if (!t)
		return -1;
	t->size = size;
	w->off[w->root->ntmps - 1] = w->bytes;
	w->bytes += size;
	return 0;
}

static int walk(struct tmp_walk *w, int dfd, const char *prefix);

static int walk_entry(struct tmp_walk *w, int dfd, const char *name, const char *path)
{
	struct stat sb;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return common_errno(w->e, errno, "stat /%s/%s", mount_at[w->mount], path);
	if (sb.st_dev != w->dev)
		return 0; /* another mount below: not this tmpfs */
	if (S_ISDIR(sb.st_mode)) {
		/* each level holds two descriptors while its entries are walked */
		if (++w->depth > SNAP_TMP_DEPTH)
			return common_errf(w->e, "capture", "/%s/%s: directories nested deeper than %u",
					   mount_at[w->mount], path, SNAP_TMP_DEPTH);
		if (!add_entry(w, path, SNAP_TMP_DIR, &sb))
			return -1;
		int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0)
			return common_errno(w->e, errno, "open /%s/%s", mount_at[w->mount], path);
		int rc = walk(w, cfd, path);
		close(cfd);
		w->depth--;
		return rc;
	}
	if (S_ISREG(sb.st_mode))
		return is_shm(w->root, w->mount, path) ? 0 : read_file(w, dfd, name, path, &sb);
	if (S_ISFIFO(sb.st_mode))
		return add_entry(w, path, SNAP_TMP_FIFO, &sb) ? 0 : -1;
	if (!S_ISLNK(sb.st_mode))
		return 0; /* a socket is its object's, rebound on restore */
	/* on the heap: this frame recurs once per directory level */
	char *target = common_xmalloc(SNAP_STR_MAX + 1);
	ssize_t n = readlinkat(dfd, name, target, SNAP_STR_MAX + 1);
	struct snap_tmp *t = NULL;
	if (n <= 0 || n > SNAP_STR_MAX)
		common_errf(w->e, "capture", "symlink /%s/%s unreadable or too long",
			    mount_at[w->mount], path);
	else if ((t = add_entry(w, path, SNAP_TMP_SYMLINK, &sb))) {
		target[n] = 0;
		t->target = common_xstrdup(target);
	}
	free(target);
	return t ? 0 : -1;
}

static int walk(struct tmp_walk *w, int dfd, const char *prefix)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return common_errno(w->e, errno, "read /%s/%s", mount_at[w->mount], prefix);
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *path = prefix[0] ? common_xasprintf("%s/%s", prefix, de->d_name)
				       : common_xstrdup(de->d_name);
		rc = strlen(path) > SNAP_STR_MAX
			     ? common_errf(w->e, "capture", "a path in /%s is longer than %u bytes",
					   mount_at[w->mount], SNAP_STR_MAX)
			     : walk_entry(w, dfd, de->d_name, path);
		free(path);
	}
	closedir(d);
	return rc;
}

static int cmp_tmp(const void *a, const void *b)
{
	const struct snap_tmp *x = a, *y = b;
	return x->mount != y->mount ? (x->mount < y->mount ? -1 : 1) : strcmp(x->path, y->path);
}

int snap_tmps_capture(struct snap_state *root, pid_t pid, struct common_err *e)
{
	struct tmp_walk w = { .root = root, .e = e };
	int rc = 0;
	for (uint32_t m = 0; m < SNAP_TMP_MOUNTS && rc == 0; m++) {
		int fd = open_mount(pid, m, &w.dev);
		if (fd < 0)
			continue; /* not the run's own tmpfs: nothing of the run's to carry */
		w.mount = m;
		rc = walk(&w, fd, "");
		close(fd);
	}
	for (size_t i = 0; rc == 0 && i < root->ntmps; i++)
		if (root->tmps[i].kind == SNAP_TMP_FILE)
			root->tmps[i].bytes = root->tmp_data + w.off[i];
	free(w.off);
	if (rc == 0 && root->ntmps) {
		/* the bytes pointers move with their entries; the order is canonical */
		qsort(root->tmps, root->ntmps, sizeof *root->tmps, cmp_tmp);
	}
	return rc;
}

static int get_name(struct codec_rd *r, char **out)
{
	const uint8_t *p;
	uint32_t n;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	if (n > SNAP_STR_MAX)
		return codec_rd_fail(r, "tmpfs entry: path or target longer than 4096 bytes");
	if (codec_get_raw(r, &p, n) < 0)
		return -1;
	if (memchr(p, 0, n))
		return codec_rd_fail(r, "tmpfs entry: NUL byte inside a path or target");
	*out = common_xmalloc(n + 1);
	memcpy(*out, p, n);
	(*out)[n] = 0;
	return 0;
}

/* Relative, no empty, "." or ".." component. */
static int path_ok(const char *p)
{
	if (!*p || *p == '/')
		return 0;
	for (;;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (!p[n])
			return 1;
		p += n + 1;
	}
}

/* Its parent is an earlier directory of the same mount (entries are sorted). */
static int parent_ok(const struct snap_state *st, size_t i)
{
	const struct snap_tmp *t = &st->tmps[i];
	const char *slash = strrchr(t->path, '/');
	if (!slash)
		return 1;
	struct snap_tmp key = { .mount = t->mount,
				.path = common_xasprintf("%.*s", (int)(slash - t->path), t->path) };
	const struct snap_tmp *p = bsearch(&key, st->tmps, i, sizeof *st->tmps, cmp_tmp);
	free(key.path);
	return p && p->kind == SNAP_TMP_DIR;
}

static int get_entry(struct codec_rd *r, struct snap_state *st, size_t i, uint64_t *bytes)
{
	struct snap_tmp *t = &st->tmps[i];
	if (codec_get_u32(r, &t->mount) < 0 || get_name(r, &t->path) < 0 ||
	    codec_get_u32(r, &t->kind) < 0 || codec_get_u32(r, &t->mode) < 0)
		return -1;
	if (t->mount >= SNAP_TMP_MOUNTS)
		return codec_rd_fail(r, "tmpfs entry: mount out of range");
	if (!path_ok(t->path))
		return codec_rd_fail(r, "tmpfs entry: path empty, absolute, or with an empty, "
				     "\".\" or \"..\" component");
	if (t->kind > SNAP_TMP_FIFO || t->mode > 07777)
		return codec_rd_fail(r, "tmpfs entry: kind or mode invalid");
	if (i && cmp_tmp(&st->tmps[i - 1], t) >= 0)
		return codec_rd_fail(r, "tmpfs entries are not in mount and path order");
	if (!parent_ok(st, i))
		return codec_rd_fail(r, "tmpfs entry: its parent is not an earlier directory");
	if (is_shm(st, t->mount, t->path))
		return codec_rd_fail(r, "tmpfs entry: the file is a shared memory object's");
	if (t->kind == SNAP_TMP_SYMLINK) {
		if (get_name(r, &t->target) < 0)
			return -1;
		return t->target[0] ? 0 : codec_rd_fail(r, "tmpfs entry: empty symlink target");
	}
	if (t->kind != SNAP_TMP_FILE)
		return 0;
	if (codec_get_u64(r, &t->size) < 0)
		return -1;
	if (t->size > SNAP_TMP_BYTES_MAX - *bytes || t->size > r->len - r->off)
		return codec_rd_fail(r, "tmpfs entry: file size exceeds its bound or the input");
	*bytes += t->size;
	return codec_get_raw(r, &t->bytes, (size_t)t->size);
}

int snap_tmps_get(struct codec_rd *r, struct snap_state *st)
{
	uint32_t n;
	uint64_t bytes = 0;
	if (codec_get_u32(r, &n) < 0)
		return -1;
	/* an entry is at least 16 bytes: mount, path length and a byte, kind, mode */
	if (n > SNAP_TMP_MAX || (uint64_t)n * 17 > r->len - r->off)
		return codec_rd_fail(r, "tmpfs entry count out of range");
	st->tmps = common_xcalloc(n ? n : 1, sizeof *st->tmps);
	for (uint32_t i = 0; i < n; i++) {
		st->ntmps = i + 1;
		if (get_entry(r, st, i, &bytes) < 0)
			return -1;
	}
	return 0;
}

void snap_tmps_free(struct snap_state *st)
{
	for (size_t i = 0; i < st->ntmps; i++) {
		free(st->tmps[i].path);
		free(st->tmps[i].target);
	}
	free(st->tmps);
	free(st->tmp_data);
	st->tmps = NULL;
	st->tmp_data = NULL;
	st->ntmps = 0;
}

/* Its parent (resolved beneath the mount, no symlink followed), as a path fd. */
static int open_parent(int mfd, const struct snap_tmp *t, const char **name)
{
	const char *slash = strrchr(t->path, '/');
	*name = slash ? slash + 1 : t->path;
	if (!slash)
	{
		int fd = fcntl(mfd, F_DUPFD_CLOEXEC, 0);
		return fd < 0 ? -errno : fd;
	}
	char *dir = common_xasprintf("%.*s", (int)(slash - t->path), t->path);
	int fd = open_beneath(mfd, dir, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			      RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS);
	free(dir);
	return fd;
}

/* One entry at its name in its parent; a directory stays 0700 (searchable
 * while its entries are made) until set_dir_mode. */
static int make_entry(int mfd, const struct snap_tmp *t)
{
	const char *name;
	int pfd = open_parent(mfd, t, &name), rc = 0;
	if (pfd < 0)
		return pfd;
	if (t->kind == SNAP_TMP_DIR) {
		rc = mkdirat(pfd, name, 0700);
	} else if (t->kind == SNAP_TMP_SYMLINK) {
		rc = symlinkat(t->target, pfd, name);
	} else if (t->kind == SNAP_TMP_FIFO) {
		rc = mknodat(pfd, name, S_IFIFO | 0600, 0);
	} else {
		int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = fd < 0 ? -1 : 0;
		if (fd >= 0 && (rc = common_write_all(fd, t->bytes, (size_t)t->size)) < 0)
			errno = -rc;
		if (fd >= 0)
			close(fd);
	}
	/* created just now, never a symlink, by nobody else: the guest is stopped */
	if (rc == 0 && t->kind != SNAP_TMP_SYMLINK && t->kind != SNAP_TMP_DIR)
		rc = fchmodat(pfd, name, t->mode, 0);
	rc = rc < 0 ? -errno : 0;
	close(pfd);
	return rc;
}

static int set_dir_mode(int mfd, const struct snap_tmp *t)
{
	const char *name;
	int pfd = open_parent(mfd, t, &name);
	if (pfd < 0)
		return pfd;
	int rc = fchmodat(pfd, name, t->mode, 0) < 0 ? -errno : 0;
	close(pfd);
	return rc;
}

/* The guest's effective ids in the host's view: the tmpfs's user namespace maps
 * no other, so its entries are made with them as the filesystem ids. */
static int guest_ids(pid_t pid, uid_t *uid, gid_t *gid, struct common_err *e)
{
	char p[64], line[256];
	unsigned u = 0, g = 0;
	int have = 0;
	snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof line, f))
		have += sscanf(line, "Uid: %*u %u", &u) == 1 || sscanf(line, "Gid: %*u %u", &g) == 1;
	if (f)
		fclose(f);
	if (have != 2)
		return common_errf(e, "restore", "%s: no Uid or Gid line", p);
	*uid = u;
	*gid = g;
	return 0;
}

/* Mount mfd's entries [from, to), made in order, then their directories'
 * modes from the deepest up. */
static int write_mount(int mfd, const struct snap_state *st, size_t from, size_t to,
		       struct common_err *e)
{
	int err = 0;
	size_t i;
	for (i = from; i < to && err == 0; i++)
		err = make_entry(mfd, &st->tmps[i]);
	for (size_t j = to; err == 0 && j-- > from;)
		if (st->tmps[j].kind == SNAP_TMP_DIR && (err = set_dir_mode(mfd, &st->tmps[j])) < 0)
			i = j + 1;
	return err < 0 ? common_errno(e, -err, "recreate /%s/%s", mount_at[st->tmps[from].mount],
				      st->tmps[i - 1].path) : 0;
}

int snap_tmps_write(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	int mfd[SNAP_TMP_MOUNTS] = { -1, -1 }, rc = 0;
	uid_t uid;
	gid_t gid;
	if (!st->ntmps)
		return 0;
	if (guest_ids(pid, &uid, &gid, e) < 0)
		return -1;
	for (size_t i = 0; i < st->ntmps && rc == 0; i++) {
		uint32_t m = st->tmps[i].mount;
		dev_t dev;
		if (mfd[m] < 0 && (mfd[m] = open_mount(pid, m, &dev)) < 0)
			rc = common_errf(e, "restore", "/%s is not a tmpfs of the run's own, the "
					 "snapshot holds files there", mount_at[m]);
	}
	/* per thread: only this one creates, as the guest */
	int ogid = setfsgid(gid), ouid = setfsuid(uid);
	for (size_t i = 0, j; i < st->ntmps && rc == 0; i = j) {
		for (j = i; j < st->ntmps && st->tmps[j].mount == st->tmps[i].mount; j++)
			;
		rc = write_mount(mfd[st->tmps[i].mount], st, i, j, e);
	}
	setfsuid((uid_t)ouid);
	setfsgid((gid_t)ogid);
	for (uint32_t m = 0; m < SNAP_TMP_MOUNTS; m++)
		if (mfd[m] >= 0)
			close(mfd[m]);
	return rc;
}
