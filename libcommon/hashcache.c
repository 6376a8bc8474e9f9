/* Cache keys and a file-hash cache. The identities caches are keyed by: this
 * boot's id, this program's build id.
 * A file-hash cache persisted in the store (exec-hashes, image-hashes): a file's
 * SHA-256 kept under its identity, so a 33 MB cc1 is hashed once per boot.
 * Text: a header "sbx-TAG 1 BOOT_ID", one line "DEV INO SIZE MSEC MNSEC CSEC
 * CNSEC HEX" per file (newest first), a trailer "sum HEX" (SHA-256 of everything
 * before it). It is only a cache: another boot, a bad sum or a bad line drops it
 * whole, and it is written without fsync. Only files on block devices are kept:
 * anonymous devices (tmpfs, overlay) reuse inode numbers in the next run's
 * mounts; ctime cannot be set back, so an identity seen again is the same content. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "libcommon/common.h"

#define HC_BUCKETS 1024
#define HC_FILE_MAX (1u << 20) /* bytes read at most */
#define HC_ENTS 4096           /* entries kept at most */

struct hc_ent {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	char hex[COMMON_SHA256_HEX];
	unsigned long age;      /* higher is newer */
	struct hc_ent *next;
};

struct common_hashcache {
	char *path, *head;
	struct hc_ent *b[HC_BUCKETS];
	size_t n;
	unsigned long clock;
	int dirty;
};

int common_boot_id(char out[COMMON_BOOT_ID_LEN])
{
	char *b = NULL;
	size_t n = 0;
	int ok = common_read_file("/proc/sys/kernel/random/boot_id", 64, &b, &n, NULL) == 0 &&
		 n == 37 && b[36] == '\n' && strspn(b, "0123456789abcdef-") == 36;

	if (ok) {
		memcpy(out, b, 36);
		out[36] = '\0';
	}
	free(b);
	return ok ? 0 : -1;
}

struct build_id {
	uint8_t *out;
	size_t cap, len;
};

/* The first object dl_iterate_phdr reports is the program itself. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct build_id *b = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !b->len; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		size_t al = ph->p_align == 8 ? 8 : 4;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *n = (const void *)p;
			size_t nsz = (n->n_namesz + al - 1) & ~(al - 1), dsz = (n->n_descsz + al - 1) & ~(al - 1);

			if (nsz > (size_t)(end - p) - sizeof *n || dsz > (size_t)(end - p) - sizeof *n - nsz)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    memcmp(p + sizeof *n, "GNU", 4) == 0 && n->n_descsz && n->n_descsz <= b->cap) {
				memcpy(b->out, p + sizeof *n + nsz, n->n_descsz);
				b->len = n->n_descsz;
				break;
			}
			p += sizeof *n + nsz + dsz;
		}
	}
	return 1;
}

int common_build_id(uint8_t *out, size_t cap, size_t *len)
{
	struct build_id b = { .out = out, .cap = cap };

	dl_iterate_phdr(find_build_id, &b);
	*len = b.len;
	return b.len ? 0 : -1;
}

static size_t bucket(dev_t dev, ino_t ino)
{
	return (size_t)((ino * 31u) ^ dev) % HC_BUCKETS;
}

static struct hc_ent *find(const struct common_hashcache *c, const struct stat *st)
{
	for (struct hc_ent *h = c->b[bucket(st->st_dev, st->st_ino)]; h; h = h->next)
		if (h->dev == st->st_dev && h->ino == st->st_ino && h->size == st->st_size &&
		    h->mtim.tv_sec == st->st_mtim.tv_sec && h->mtim.tv_nsec == st->st_mtim.tv_nsec &&
		    h->ctim.tv_sec == st->st_ctim.tv_sec && h->ctim.tv_nsec == st->st_ctim.tv_nsec)
			return h;
	return NULL;
}

static int num(const char **p, unsigned long long *v)
{
	char *end;

	if (**p < '0' || **p > '9')
		return 0;
	errno = 0;
	*v = strtoull(*p, &end, 10);
	if (errno || *end != ' ')
		return 0;
	*p = end + 1;
	return 1;
}

static void insert(struct common_hashcache *c, struct hc_ent *h)
{
	size_t b = bucket(h->dev, h->ino);

	h->next = c->b[b];
	c->b[b] = h;
	c->n++;
}

static void drop_all(struct common_hashcache *c)
{
	for (size_t i = 0; i < HC_BUCKETS; i++)
		while (c->b[i]) {
			struct hc_ent *n = c->b[i]->next;
			free(c->b[i]);
			c->b[i] = n;
		}
	c->n = 0;
}

/* Entries of a file that checks out; any defect leaves the cache empty. */
static void load(struct common_hashcache *c)
{
	char *buf = NULL, *sum, hex[COMMON_SHA256_HEX];
	size_t len = 0, hl = strlen(c->head);
	uint8_t d[COMMON_SHA256_LEN];
	struct common_sha256 s;
	const char *p;

	if (common_read_file(c->path, HC_FILE_MAX, &buf, &len, NULL) < 0)
		return;
	if (len < hl + 69 || memcmp(buf, c->head, hl) != 0)
		goto out;
	sum = buf + len - 69;
	if (memcmp(sum, "sum ", 4) != 0 || sum[68] != '\n' || sum[-1] != '\n')
		goto out;
	common_sha256_init(&s);
	common_sha256_update(&s, buf, (size_t)(sum - buf));
	common_sha256_final(&s, d);
	common_hex(d, sizeof d, hex);
	if (memcmp(hex, sum + 4, 64) != 0)
		goto out;
	*sum = '\0';
	/* newest first in the file: the first line gets the highest age */
	for (p = buf + hl; *p; p += 65) {
		unsigned long long f[7];
		struct hc_ent *h;
		for (int i = 0; i < 7; i++)
			if (!num(&p, &f[i]))
				goto bad;
		if (c->n >= HC_ENTS || strspn(p, "0123456789abcdef") != 64 || p[64] != '\n' ||
		    f[4] >= 1000000000ull || f[6] >= 1000000000ull || major((dev_t)f[0]) == 0)
			goto bad;
		h = common_xcalloc(1, sizeof *h);
		*h = (struct hc_ent){ .dev = (dev_t)f[0], .ino = (ino_t)f[1], .size = (off_t)f[2],
				      .mtim = { (time_t)f[3], (long)f[4] },
				      .ctim = { (time_t)f[5], (long)f[6] }, .age = HC_ENTS - c->n };
		memcpy(h->hex, p, 64);
		insert(c, h);
	}
	c->clock = HC_ENTS;
	goto out;
bad:
	drop_all(c);
out:
	free(buf);
}

struct common_hashcache *common_hashcache_open(const char *path, const char *tag)
{
	struct common_hashcache *c = common_xcalloc(1, sizeof *c);
	char boot[COMMON_BOOT_ID_LEN];

	c->path = path ? common_xstrdup(path) : NULL;
	if (path && common_boot_id(boot) == 0) {
		c->head = common_xasprintf("sbx-%s 1 %s\n", tag, boot);
		load(c);
	}
	return c;
}

int common_hashcache_get(const struct common_hashcache *c, const struct stat *st,
			 char hex[COMMON_SHA256_HEX])
{
	const struct hc_ent *h = c ? find(c, st) : NULL;

	if (!h)
		return 0;
	memcpy(hex, h->hex, COMMON_SHA256_HEX);
	return 1;
}

void common_hashcache_put(struct common_hashcache *c, const struct stat *st,
			  const char hex[COMMON_SHA256_HEX])
{
	struct hc_ent *h;

	if (!c || find(c, st))
		return;
	h = common_xcalloc(1, sizeof *h);
	*h = (struct hc_ent){ .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
			      .mtim = st->st_mtim, .ctim = st->st_ctim, .age = ++c->clock };
	memcpy(h->hex, hex, COMMON_SHA256_HEX);
	insert(c, h);
	c->dirty = 1;
}

static int newer(const void *a, const void *b)
{
	unsigned long x = (*(struct hc_ent *const *)a)->age, y = (*(struct hc_ent *const *)b)->age;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Newest first, at most HC_ENTS block-device entries; failures only cost the
 * next run its hashing. */
static void save(struct common_hashcache *c)
{
	struct hc_ent **all = common_xcalloc(c->n ? c->n : 1, sizeof *all);
	size_t k = 0, cap = HC_FILE_MAX, len;
	char *buf = common_xmalloc(cap + 1), hex[COMMON_SHA256_HEX];
	uint8_t d[COMMON_SHA256_LEN];
	struct common_sha256 s;

	for (size_t i = 0; i < HC_BUCKETS; i++)
		for (struct hc_ent *h = c->b[i]; h; h = h->next)
			if (major(h->dev) != 0)
				all[k++] = h;
	qsort(all, k, sizeof *all, newer);
	len = (size_t)snprintf(buf, cap, "%s", c->head);
	for (size_t i = 0; i < k && i < HC_ENTS && len + 200 < cap; i++) {
		const struct hc_ent *h = all[i];
		len += (size_t)snprintf(buf + len, cap - len, "%llu %llu %llu %lld %ld %lld %ld %s\n",
					(unsigned long long)h->dev, (unsigned long long)h->ino,
					(unsigned long long)h->size, (long long)h->mtim.tv_sec,
					h->mtim.tv_nsec, (long long)h->ctim.tv_sec, h->ctim.tv_nsec,
					h->hex);
	}
	common_sha256_init(&s);
	common_sha256_update(&s, buf, len);
	common_sha256_final(&s, d);
	common_hex(d, sizeof d, hex);
	len += (size_t)snprintf(buf + len, cap + 1 - len, "sum %s\n", hex);
	(void)common_write_replace(c->path, buf, len, 0600);
	free(buf);
	free(all);
}

void common_hashcache_close(struct common_hashcache *c)
{
	if (!c)
		return;
	if (c->dirty && c->head)
		save(c);
	drop_all(c);
	free(c->path);
	free(c->head);
	free(c);
}
