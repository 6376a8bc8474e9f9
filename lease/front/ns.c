/* Namespace cells: files under ns/ID, key = relative path (SPEC §4.1 namespace_bytes).
 * A bounded walk measures them (the meter's last measurement, snapshot admission); an
 * unbounded one digests them in key order (destroy, the replay checks). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

/* What the bounded walk has counted. */
struct tally {
	uint64_t cells, bytes;
};

int lease_ns_vanished(int err)
{
	return err == ENOENT || err == ENOTDIR || err == ELOOP;
}

static int collect(int fd, const char *root, const char *rel, int depth, struct tally *t,
		   struct common_err *e);

/* Enter directory NAME of d, whose key is rel, depth levels below the root. */
static int enter(DIR *d, const char *name, const char *root, const char *rel, int depth,
		 struct tally *t, struct common_err *e)
{
	int fd;

	if (depth > LEASE_NS_DEPTH_MAX)
		return common_errf(e, root, "namespace nested deeper than %d: %s",
				   LEASE_NS_DEPTH_MAX, rel);
	fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return lease_ns_vanished(errno) ? 0 : common_errno(e, errno, "namespace %s/%s",
								   root, rel);
	return collect(fd, root, rel, depth, t, e);
}

/* Count the cells beneath the directory fd (closed here), whose key is rel.
 * Descriptors, not paths, so a key longer than PATH_MAX is still reached. */
static int collect(int fd, const char *root, const char *rel, int depth, struct tally *t,
		   struct common_err *e)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	struct stat st;
	int r = 0;

	if (!d) {
		close(fd);
		return common_errno(e, errno, "namespace %s/%s", root, rel);
	}
	while (r == 0) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = common_errno(e, errno, "namespace %s/%s", root, rel);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *k = rel[0] ? common_xasprintf("%s/%s", rel, de->d_name) : common_xstrdup(de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (!lease_ns_vanished(errno))
				r = common_errno(e, errno, "namespace %s/%s", root, k);
		} else if (S_ISDIR(st.st_mode)) {
			r = enter(d, de->d_name, root, k, depth + 1, t, e);
		} else if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
			   ++t->cells > LEASE_NS_CELLS_MAX) {
			r = common_errf(e, root, "more than %u namespace cells", LEASE_NS_CELLS_MAX);
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			/* a symlink's size is its target's length */
			t->bytes += strlen(k) + (uint64_t)st.st_size;
		} /* fifos, sockets, devices hold no bytes */
		free(k);
	}
	closedir(d);
	return r;
}

static void put_u64(struct common_sha256 *h, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	common_sha256_update(h, b, sizeof b);
}

/* Open up an entry its owner cannot read (a directory: also search and write), as
 * sbx's own namespace tree is about to be deleted; others' entries are left alone. */
static void open_up(int dirfd, const char *name, const struct stat *st)
{
	mode_t want = S_ISDIR(st->st_mode) ? 0700 : 0400;

	if ((st->st_mode & want) != want && st->st_uid == geteuid())
		fchmodat(dirfd, name, (st->st_mode & 07777) | want, 0);
}

/* One directory of the digest's walk: its entries sorted with a directory's name
 * ending in '/', which is the order of the whole keys ("a.b" < "a/x" < "a0"). */
struct level {
	char **name;
	size_t n, i;
	size_t prefix;  /* length of the directory's key prefix, "" or "a/b/" */
	dev_t dev;      /* to check the way back up through ".." */
	ino_t ino;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void level_free(struct level *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->name[i]);
	free(l->name);
}

/* The sorted entries of the directory fd (cells and directories; the rest holds no
 * bytes), key the directory's key prefix for messages. */
static int list_dir(int fd, struct level *l, int repair, const char *root, const char *key,
		    struct common_err *e)
{
	struct stat st;
	DIR *d = common_dir_stream(fd, &st);
	struct dirent *de;
	size_t cap = 0;
	int r = 0;

	if (!d)
		return common_errno(e, errno, "namespace %s/%s", root, key);
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	while (r == 0) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = common_errno(e, errno, "namespace %s/%s", root, key);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (!lease_ns_vanished(errno))
				r = common_errno(e, errno, "namespace %s/%s%s", root, key, de->d_name);
			continue;
		}
		if (repair)
			open_up(fd, de->d_name, &st);
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
			continue;
		if (l->n == cap) {
			cap = cap ? 2 * cap : 16;
			l->name = common_xrealloc(l->name, cap * sizeof *l->name);
		}
		l->name[l->n++] = common_xasprintf("%s%s", de->d_name, S_ISDIR(st.st_mode) ? "/" : "");
	}
	closedir(d);
	if (l->n)
		qsort(l->name, l->n, sizeof *l->name, cmp_name);
	return r;
}

/* Hash cell NAME of the directory fd, whose key is key: its key, length and value.
 * 1 when it vanished first (nothing hashed). */
static int hash_cell(int fd, const char *name, const char *key, struct common_sha256 *h,
		     uint64_t *len, struct common_err *e)
{
	char buf[65536];
	struct stat st;
	ssize_t n;
	int f;

	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lease_ns_vanished(errno) ? 1 : common_errno(e, errno, "namespace cell %s", key);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlinkat(fd, name, buf, sizeof buf)) < 0)
			return lease_ns_vanished(errno) ? 1 :
			       common_errno(e, errno, "namespace cell %s", key);
		*len = (uint64_t)n;
		put_u64(h, strlen(key));
		common_sha256_update(h, key, strlen(key));
		put_u64(h, *len);
		common_sha256_update(h, buf, (size_t)n);
		return 0;
	}
	f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (f < 0)
		return lease_ns_vanished(errno) ? 1 : common_errno(e, errno, "namespace cell %s", key);
	if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(f);
		return 1; /* replaced by something that holds no bytes */
	}
	*len = (uint64_t)st.st_size;
	put_u64(h, strlen(key));
	common_sha256_update(h, key, strlen(key));
	put_u64(h, *len);
	uint64_t left = *len;
	while (left > 0 && (n = read(f, buf, sizeof buf)) > 0) {
		size_t take = (uint64_t)n < left ? (size_t)n : (size_t)left;
		common_sha256_update(h, buf, take);
		left -= take;
	}
	close(f);
	if (left > 0)
		return common_errf(e, key, "namespace cell shrank while hashing");
	return 0;
}

struct digest_walk {
	struct level *lv;
	size_t nl, capl;
	char *key;
	size_t keycap;
	int fd;         /* the directory of the deepest level */
};

/* Enter directory NAME ("x/") of the deepest level, one descriptor held at a time. */
static int dig_enter(struct digest_walk *w, char *name, int repair, const char *root,
		     struct common_err *e)
{
	size_t prefix = w->lv[w->nl - 1].prefix + strlen(name);
	int r, child;

	name[strlen(name) - 1] = 0; /* the '/' is for sorting only */
	child = openat(w->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	name[strlen(name)] = '/';
	if (child < 0)
		return lease_ns_vanished(errno) ? 0 : common_errno(e, errno, "namespace %s/%s",
								   root, w->key);
	if (w->nl == w->capl) {
		w->capl = 2 * w->capl;
		w->lv = common_xrealloc(w->lv, w->capl * sizeof *w->lv);
	}
	w->lv[w->nl] = (struct level){ .prefix = prefix };
	r = list_dir(child, &w->lv[w->nl++], repair, root, w->key, e);
	close(w->fd);
	w->fd = child;
	return r;
}

/* Back up to the parent level through "..", checking it is the directory left. */
static int dig_leave(struct digest_walk *w, const char *root, struct common_err *e)
{
	struct stat st;
	const struct level *p = &w->lv[w->nl - 1];
	int up = openat(w->fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (up < 0 || fstat(up, &st) < 0 || st.st_dev != p->dev || st.st_ino != p->ino) {
		if (up >= 0)
			close(up);
		return common_errf(e, root, "namespace moved while it was digested");
	}
	close(w->fd);
	w->fd = up;
	return 0;
}

/* The digest of the cells in key order, a directory at a time in sorted order, so
 * any depth or size is digested with two descriptors and one directory's names per
 * level held; repair opens up what the owner cannot read (destroy only). */
static int digest(const char *root, int repair, char *hex, uint64_t *cells, uint64_t *bytes,
		  struct common_err *e)
{
	static const char domain[] = "sbx/namespace/v1";
	struct digest_walk w = { .capl = 16, .keycap = 256 };
	struct common_sha256 h;
	uint8_t d[COMMON_SHA256_LEN];
	uint64_t nc = 0, total = 0, len;
	struct stat st;
	int r = 0;

	if (repair && stat(root, &st) == 0)
		open_up(AT_FDCWD, root, &st);
	common_sha256_init(&h);
	common_sha256_update(&h, domain, sizeof domain);
	w.fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w.fd < 0 && errno != ENOENT)
		return common_errno(e, errno, "namespace %s", root);
	w.lv = common_xcalloc(w.capl, sizeof *w.lv);
	w.key = common_xcalloc(1, w.keycap);
	if (w.fd >= 0) {
		w.nl = 1;
		r = list_dir(w.fd, &w.lv[0], repair, root, "", e);
	}
	while (r == 0 && w.nl > 0) {
		struct level *l = &w.lv[w.nl - 1];
		if (l->i == l->n) {
			level_free(&w.lv[--w.nl]);
			if (w.nl > 0)
				r = dig_leave(&w, root, e);
			continue;
		}
		char *name = l->name[l->i++];
		size_t nlen = strlen(name), klen = l->prefix + nlen;
		if (klen + 1 > w.keycap) {
			w.keycap = 2 * (klen + 1);
			w.key = common_xrealloc(w.key, w.keycap);
		}
		memcpy(w.key + l->prefix, name, nlen + 1);
		if (name[nlen - 1] == '/') {
			r = dig_enter(&w, name, repair, root, e);
		} else if ((r = hash_cell(w.fd, name, w.key, &h, &len, e)) == 0) {
			nc++;
			total += klen + len;
		} else if (r == 1) {
			r = 0;
		}
	}
	while (w.nl > 0)
		level_free(&w.lv[--w.nl]);
	if (w.fd >= 0)
		close(w.fd);
	free(w.lv);
	free(w.key);
	common_sha256_final(&h, d);
	if (r < 0)
		return -1;
	common_hex(d, sizeof d, hex);
	if (cells)
		*cells = nc;
	*bytes = total;
	return 0;
}

/* Σ(key length + value length) of the cells by the bounded walk; a root not yet
 * made has none. */
static int measure(const char *dir, uint64_t *bytes, struct common_err *e)
{
	struct tally t = { 0 };
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 && errno != ENOENT)
		return common_errno(e, errno, "namespace %s", dir);
	if (fd >= 0 && collect(fd, dir, "", 0, &t, e) < 0)
		return -1;
	*bytes = t.bytes;
	return 0;
}

int lease_ns_measure(const char *dir, uint64_t *bytes, struct common_err *e)
{
	return measure(dir, bytes, e);
}

int lease_ns_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
		    uint64_t *bytes, struct common_err *e)
{
	return digest(dir, 0, hex, cells, bytes, e);
}

int lease_ns_destroy_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
			    uint64_t *bytes, struct common_err *e)
{
	return digest(dir, 1, hex, cells, bytes, e);
}

int lease_ns_bytes(struct lease_store *s, const char *id, uint64_t *bytes, struct common_err *e)
{
	char *dir;
	int r;

	if (!lease_id_valid(id))
		return common_errf(e, id, "not a lease id");
	dir = lease_ns_dir(s, id);
	r = measure(dir, bytes, e);
	free(dir);
	return r;
}
