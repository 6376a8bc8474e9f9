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

#define NS_CELLS_MAX (1u << 20)
#define NS_DEPTH_MAX 64

struct cells {
	char **key;
	size_t n, cap;
};

static int collect(const char *root, const char *rel, int depth, struct cells *c,
		   struct common_err *e)
{
	char *dir = rel[0] ? common_xasprintf("%s/%s", root, rel) : common_xstrdup(root);
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d) {
		r = errno == ENOENT && !rel[0] ? 0 : common_errno(e, errno, "namespace %s", dir);
		free(dir);
		return r;
	}
	if (depth > NS_DEPTH_MAX) {
		closedir(d);
		r = common_errf(e, dir, "namespace nested deeper than %d", NS_DEPTH_MAX);
		free(dir);
		return r;
	}
	while (r == 0 && (de = readdir(d))) {
		char *k;
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		k = rel[0] ? common_xasprintf("%s/%s", rel, de->d_name) : common_xstrdup(de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = common_errno(e, errno, "namespace %s/%s", root, k);
			free(k);
		} else if (S_ISDIR(st.st_mode)) {
			r = collect(root, k, depth + 1, c, e);
			free(k);
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			if (c->n >= NS_CELLS_MAX) {
				free(k);
				r = common_errf(e, root, "more than %u namespace cells", NS_CELLS_MAX);
				break;
			}
			if (c->n == c->cap) {
				c->cap = c->cap ? 2 * c->cap : 64;
				c->key = common_xrealloc(c->key, c->cap * sizeof *c->key);
			}
			c->key[c->n++] = k;
		} else {
			free(k); /* fifos, sockets, devices hold no bytes */
		}
	}
	closedir(d);
	free(dir);
	return r;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void cells_free(struct cells *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->key[i]);
	free(c->key);
}

static void put_u64(struct common_sha256 *h, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	common_sha256_update(h, b, sizeof b);
}

/* Hash one cell's value; *len gets its length. */
static int hash_value(const char *path, struct common_sha256 *h, int hashing, uint64_t *len,
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
		if (hashing) {
			put_u64(h, *len);
			common_sha256_update(h, buf, (size_t)n);
		}
		return 0;
	}
	*len = (uint64_t)st.st_size;
	if (!hashing)
		return 0;
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
	int r;

	if (collect(dir, "", 0, &c, e) < 0) {
		cells_free(&c);
		return -1;
	}
	if (c.n)
		qsort(c.key, c.n, sizeof *c.key, cmp_key);
	if (hex) {
		common_sha256_init(&h);
		common_sha256_update(&h, domain, sizeof domain);
	}
	for (size_t i = 0; i < c.n; i++) {
		char *p = common_xasprintf("%s/%s", dir, c.key[i]);
		size_t kl = strlen(c.key[i]);
		if (hex) {
			put_u64(&h, kl);
			common_sha256_update(&h, c.key[i], kl);
		}
		r = hash_value(p, &h, hex != NULL, &len, e);
		free(p);
		if (r < 0) {
			if (hex)
				common_sha256_final(&h, d);
			cells_free(&c);
			return -1;
		}
		total += kl + len;
	}
	if (hex) {
		common_sha256_final(&h, d);
		common_hex(d, sizeof d, hex);
	}
	if (cells)
		*cells = c.n;
	*bytes = total;
	cells_free(&c);
	return 0;
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
