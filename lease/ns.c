/* Namespace cells: files under ns/ID, key = relative path (SPEC §4.1 namespace_bytes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/lease-internal.h"

struct cell {
	char *key;
	uint64_t len; /* the value's length as the walk saw it */
};

struct cells {
	struct cell *v;
	size_t n, cap;
};

int lease_ns_vanished(int err)
{
	return err == ENOENT || err == ENOTDIR || err == ELOOP;
}

static int add_cell(struct cells *c, char *key, uint64_t len, const char *root,
		    struct common_err *e)
{
	if (c->n >= LEASE_NS_CELLS_MAX) {
		free(key);
		return common_errf(e, root, "more than %u namespace cells", LEASE_NS_CELLS_MAX);
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->v = common_xrealloc(c->v, c->cap * sizeof *c->v);
	}
	c->v[c->n++] = (struct cell){ .key = key, .len = len };
	return 0;
}

static int collect(int fd, const char *root, const char *rel, int depth, struct cells *c,
		   struct common_err *e);

/* Enter directory NAME of d, whose key is rel, depth levels below the root. */
static int enter(DIR *d, const char *name, const char *root, const char *rel, int depth,
		 struct cells *c, struct common_err *e)
{
	int fd;

	if (depth > LEASE_NS_DEPTH_MAX)
		return common_errf(e, root, "namespace nested deeper than %d: %s",
				   LEASE_NS_DEPTH_MAX, rel);
	fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return lease_ns_vanished(errno) ? 0 : common_errno(e, errno, "namespace %s/%s",
								   root, rel);
	return collect(fd, root, rel, depth, c, e);
}

/* The cells beneath the directory fd (closed here), whose key is rel. Descriptors,
 * not paths, so a key longer than PATH_MAX is still reached. */
static int collect(int fd, const char *root, const char *rel, int depth, struct cells *c,
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
			free(k);
		} else if (S_ISDIR(st.st_mode)) {
			r = enter(d, de->d_name, root, k, depth + 1, c, e);
			free(k);
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			/* a symlink's size is its target's length */
			r = add_cell(c, k, (uint64_t)st.st_size, root, e);
		} else {
			free(k); /* fifos, sockets, devices hold no bytes */
		}
	}
	closedir(d);
	return r;
}

/* All cells of the namespace at root; a root not yet made has none. */
static int collect_root(const char *root, struct cells *c, struct common_err *e)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : common_errno(e, errno, "namespace %s", root);
	return collect(fd, root, "", 0, c, e);
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct cell *)a)->key, ((const struct cell *)b)->key);
}

static void cells_free(struct cells *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].key);
	free(c->v);
}

static void put_u64(struct common_sha256 *h, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	common_sha256_update(h, b, sizeof b);
}

/* Hash one cell's value; *len gets its length. */
static int hash_value(const char *path, struct common_sha256 *h, uint64_t *len,
		      struct common_err *e)
{
	struct stat st;
	char buf[65536];
	ssize_t n;
	int fd;

	if (lstat(path, &st) < 0)
		return common_errno(e, errno, "namespace %s", path);
	if (S_ISLNK(st.st_mode)) {
		n = readlink(path, buf, sizeof buf);
		if (n < 0)
			return common_errno(e, errno, "namespace %s", path);
		*len = (uint64_t)n;
		put_u64(h, *len);
		common_sha256_update(h, buf, (size_t)n);
		return 0;
	}
	*len = (uint64_t)st.st_size;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return common_errno(e, errno, "namespace %s", path);
	put_u64(h, *len);
	uint64_t left = *len;
	while (left > 0 && (n = read(fd, buf, sizeof buf)) > 0) {
		size_t take = (uint64_t)n < left ? (size_t)n : (size_t)left;
		common_sha256_update(h, buf, take);
		left -= take;
	}
	close(fd);
	if (left > 0)
		return common_errf(e, path, "namespace cell shrank while hashing");
	return 0;
}

/* Walk the cells in key order; hash them when hex is given. */
static int walk(const char *dir, char *hex, uint64_t *cells, uint64_t *bytes, struct common_err *e)
{
	static const char domain[] = "sbx/namespace/v1";
	struct cells c = { 0 };
	struct common_sha256 h;
	uint8_t d[COMMON_SHA256_LEN];
	uint64_t total = 0, len;
	int r = 0;

	if (collect_root(dir, &c, e) < 0) {
		cells_free(&c);
		return -1;
	}
	if (c.n)
		qsort(c.v, c.n, sizeof *c.v, cmp_key);
	if (hex) {
		common_sha256_init(&h);
		common_sha256_update(&h, domain, sizeof domain);
	}
	for (size_t i = 0; i < c.n && r == 0; i++) {
		size_t kl = strlen(c.v[i].key);
		len = c.v[i].len;
		if (hex) {
			char *p = common_xasprintf("%s/%s", dir, c.v[i].key);
			put_u64(&h, kl);
			common_sha256_update(&h, c.v[i].key, kl);
			r = hash_value(p, &h, &len, e);
			free(p);
		}
		total += kl + len;
	}
	if (hex)
		common_sha256_final(&h, d);
	if (r == 0) {
		if (hex)
			common_hex(d, sizeof d, hex);
		if (cells)
			*cells = c.n;
		*bytes = total;
	}
	cells_free(&c);
	return r < 0 ? -1 : 0;
}

int lease_ns_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
		    uint64_t *bytes, struct common_err *e)
{
	return walk(dir, hex, cells, bytes, e);
}

int lease_ns_bytes(struct lease_store *s, const char *id, uint64_t *bytes, struct common_err *e)
{
	char *dir;
	int r;

	if (!lease_id_valid(id))
		return common_errf(e, id, "not a lease id");
	dir = lease_ns_dir(s, id);
	r = walk(dir, NULL, NULL, bytes, e);
	free(dir);
	return r;
}
