/* snap: persistence as a 44-byte manifest and chunks of at most 65,536 bytes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "snap/snap-internal.h"

uint64_t snap_persist_bytes(uint64_t len)
{
	uint64_t chunks = (len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX;
	/* "snapshot/" + 64 hex + "/manifest" and "snapshot/" + 64 hex + "/NNNNNN" */
	return len + SNAP_MANIFEST_LEN + (9 + 64 + 9) + chunks * (9 + 64 + 7);
}

static int write_file(const char *path, const void *buf, size_t len, struct common_err *e)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return common_errno(e, errno, "create %s", path);
	int rc = common_write_all(fd, buf, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc < 0)
		return common_errno(e, -rc, "write %s", path);
	return 0;
}

int snap_store_write(const char *dir, const struct snap_image *im, struct common_err *e)
{
	struct stat sb;
	if (lstat(dir, &sb) == 0)
		return common_errf(e, dir, "snapshot already stored");
	char *tmp = common_xasprintf("%s.tmp.%d", dir, (int)getpid());
	common_rm_rf(tmp, NULL);
	if (common_mkdir_p(tmp, 0700, e) < 0) {
		free(tmp);
		return -1;
	}
	struct snap_manifest m;
	memcpy(m.digest, im->digest, 32);
	m.len = im->len;
	m.chunks = (uint32_t)((im->len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX);
	uint8_t mb[SNAP_MANIFEST_LEN];
	snap_manifest_encode(&m, mb);
	int rc = 0;
	for (uint32_t i = 0; i < m.chunks && rc == 0; i++) {
		char *p = common_xasprintf("%s/%06u", tmp, i);
		size_t off = (size_t)i * SNAP_CHUNK_MAX;
		size_t n = im->len - off < SNAP_CHUNK_MAX ? im->len - off : SNAP_CHUNK_MAX;
		common_fault_point("snap-chunk");
		rc = write_file(p, im->bytes + off, n, e);
		free(p);
	}
	/* the manifest last: a directory without one is never a snapshot */
	char *mp = common_xasprintf("%s/manifest", tmp);
	if (rc == 0)
		rc = write_file(mp, mb, sizeof mb, e);
	free(mp);
	if (rc == 0)
		rc = common_fsync_dir(tmp, e);
	if (rc == 0 && rename(tmp, dir) < 0)
		rc = common_errno(e, errno, "rename %s to %s", tmp, dir);
	if (rc == 0) {
		char *parent = common_xstrdup(dir);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = 0;
			rc = common_fsync_dir(parent, e);
		}
		free(parent);
	}
	if (rc < 0)
		common_rm_rf(tmp, NULL);
	free(tmp);
	return rc;
}

/* SHA-256 of the chunks read so far, on a second thread: on two cores reading
 * (first touching the buffer) and hashing overlap. */
struct hash_behind {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const uint8_t *buf;
	uint64_t ready, done; /* bytes read, bytes hashed */
	int closing;
	struct common_sha256 h;
};

static void *hash_behind(void *arg)
{
	struct hash_behind *b = arg;
	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (b->done == b->ready && !b->closing)
			pthread_cond_wait(&b->cv, &b->mu);
		if (b->done == b->ready)
			break;
		uint64_t from = b->done, to = b->ready;
		pthread_mutex_unlock(&b->mu);
		common_sha256_update(&b->h, b->buf + from, (size_t)(to - from));
		pthread_mutex_lock(&b->mu);
		b->done = to;
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

static void hash_publish(struct hash_behind *b, uint64_t ready, int closing)
{
	pthread_mutex_lock(&b->mu);
	b->ready = ready;
	b->closing = closing;
	pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

/* Chunk i of the manifest m into dst (want bytes, its whole length); 0 or -1. */
static int read_chunk(const char *dir, const struct snap_manifest *m, uint32_t i, uint8_t *dst,
		      size_t want, struct common_err *e)
{
	char *p = common_xasprintf("%s/%06u", dir, i);
	int rc = 0, fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = errno == ENOENT ? common_errf(e, p, "chunk %u of %u is missing", i, m->chunks)
				     : common_errno(e, errno, "open %s", p);
	} else {
		struct stat sb;
		ssize_t n = -1;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == want)
			n = common_read_all(fd, dst, want);
		close(fd);
		if (n != (ssize_t)want)
			rc = common_errf(e, p, "chunk %u holds %lld bytes, the manifest needs %zu", i,
					 n < 0 ? (long long)sb.st_size : (long long)n, want);
	}
	free(p);
	return rc;
}

#define READ_STEP (1u << 20) /* bytes populated, read and handed to the hasher at a time */

int snap_store_read(const char *dir, struct snap_image *out, struct common_err *e)
{
	char *mp = common_xasprintf("%s/manifest", dir);
	char *mb;
	size_t ml;
	struct snap_manifest m;
	int rc = common_read_file(mp, SNAP_MANIFEST_LEN + 1, &mb, &ml, e);
	if (rc == 0) {
		rc = snap_manifest_decode((uint8_t *)mb, ml, &m, e);
		if (rc < 0)
			common_err_context(e, "%s", mp);
		free(mb);
	}
	free(mp);
	if (rc < 0)
		return -1;
	/* small pages, faulted in by one call rather than one trap each: a huge
	 * page's first touch here (a PVM guest) cost 10-300 ms per restore when the
	 * host had taken the free 2 MiB block back (bench/snap.sh, issue 32) */
	size_t cap = ((size_t)m.len + SNAP_PAGE - 1) / SNAP_PAGE * SNAP_PAGE;
	uint8_t *buf = aligned_alloc(SNAP_PAGE, cap ? cap : SNAP_PAGE);
	if (!buf)
		return common_errf(e, dir, "cannot hold %llu bytes", (unsigned long long)m.len);
	madvise(buf, cap, MADV_NOHUGEPAGE);
	struct hash_behind b = { .buf = buf };
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cv, NULL);
	common_sha256_init(&b.h);
	pthread_t th;
	int threaded = pthread_create(&th, NULL, hash_behind, &b) == 0;
	uint64_t off = 0, populated = 0;
	for (uint32_t i = 0; i < m.chunks && rc == 0; i++) {
		size_t want = m.len - off < SNAP_CHUNK_MAX ? (size_t)(m.len - off) : SNAP_CHUNK_MAX;
		if (off + want > populated) { /* before Linux 5.14: faulted by the read */
			size_t step = cap - populated < READ_STEP ? cap - populated : READ_STEP;
			madvise(buf + populated, step, MADV_POPULATE_WRITE);
			populated += step;
			hash_publish(&b, off, 0);
		}
		if ((rc = read_chunk(dir, &m, i, buf + off, want, e)) == 0)
			off += want;
	}
	hash_publish(&b, off, 1);
	if (threaded)
		pthread_join(th, NULL);
	else
		common_sha256_update(&b.h, buf, (size_t)off);
	pthread_mutex_destroy(&b.mu);
	pthread_cond_destroy(&b.cv);
	common_sha256_final(&b.h, out->digest);
	if (rc < 0) {
		free(buf);
		return -1;
	}
	char extra[4096];
	snprintf(extra, sizeof extra, "%s/%06u", dir, m.chunks);
	if (access(extra, F_OK) == 0) {
		free(buf);
		return common_errf(e, extra, "chunk beyond the manifest's %u", m.chunks);
	}
	if (memcmp(out->digest, m.digest, 32)) {
		free(buf);
		char want[65], got[65];
		common_hex(m.digest, 32, want);
		common_hex(out->digest, 32, got);
		return common_errf(e, dir, "chunks hash to digest %s, the manifest says %s", got, want);
	}
	out->bytes = buf;
	out->len = (size_t)m.len;
	return 0;
}

int snap_chunk_write(void *vctx, const uint8_t *p, size_t n, struct common_err *e)
{
	struct snap_chunk_sink *c = vctx;
	while (n) {
		if (c->fd < 0) {
			char path[4200];
			common_fault_point("snap-chunk");
			snprintf(path, sizeof path, "%s/%06u", c->dir, c->index);
			c->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (c->fd < 0)
				return common_errno(e, errno, "create %s", path);
			c->fill = 0;
		}
		size_t k = SNAP_CHUNK_MAX - c->fill < n ? SNAP_CHUNK_MAX - c->fill : n;
		int rc = common_write_all(c->fd, p, k);
		if (rc < 0)
			return common_errno(e, -rc, "write chunk %u in %s", c->index, c->dir);
		p += k;
		n -= k;
		c->fill += k;
		if (c->fill == SNAP_CHUNK_MAX) {
			close(c->fd);
			c->fd = -1;
			c->index++;
		}
	}
	return 0;
}

/* Back to byte at of the stream: the chunks after it removed, its own cut there. */
int snap_chunk_rewind(void *vctx, uint64_t at, struct common_err *e)
{
	struct snap_chunk_sink *c = vctx;
	uint32_t keep = (uint32_t)(at / SNAP_CHUNK_MAX);
	size_t cut = (size_t)(at % SNAP_CHUNK_MAX);
	char path[4200];
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	for (uint32_t i = c->index; i > keep; i--) {
		snprintf(path, sizeof path, "%s/%06u", c->dir, i);
		if (unlink(path) < 0 && errno != ENOENT)
			return common_errno(e, errno, "remove %s", path);
	}
	snprintf(path, sizeof path, "%s/%06u", c->dir, keep);
	if (cut == 0 && unlink(path) < 0 && errno != ENOENT)
		return common_errno(e, errno, "remove %s", path);
	if (cut) {
		c->fd = open(path, O_WRONLY | O_CLOEXEC);
		if (c->fd < 0 || ftruncate(c->fd, (off_t)cut) < 0 ||
		    lseek(c->fd, (off_t)cut, SEEK_SET) < 0)
			return common_errno(e, errno, "cut %s", path);
	}
	c->index = keep;
	c->fill = cut;
	return 0;
}

int snap_manifest_write(const char *dir, const struct snap_manifest *m, struct common_err *e)
{
	uint8_t mb[SNAP_MANIFEST_LEN];
	snap_manifest_encode(m, mb);
	char *mp = common_xasprintf("%s/manifest", dir);
	common_fault_point("snap-manifest");
	int fd = open(mp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = fd < 0 ? common_errno(e, errno, "create %s", mp) : 0;
	if (rc == 0 && common_write_all(fd, mb, sizeof mb) < 0)
		rc = common_errno(e, errno, "write %s", mp);
	/* one sync for every chunk, the manifest and the directory entries */
	if (rc == 0 && syncfs(fd) < 0)
		rc = common_errno(e, errno, "sync %s", dir);
	if (fd >= 0)
		close(fd);
	free(mp);
	return rc;
}

void snap_manifest_encode(const struct snap_manifest *m, uint8_t out[SNAP_MANIFEST_LEN])
{
	memcpy(out, m->digest, 32);
	for (int i = 0; i < 8; i++)
		out[32 + i] = (uint8_t)(m->len >> (8 * i));
	for (int i = 0; i < 4; i++)
		out[40 + i] = (uint8_t)(m->chunks >> (8 * i));
}

int snap_manifest_decode(const uint8_t *buf, size_t len, struct snap_manifest *m,
			 struct common_err *e)
{
	if (len != SNAP_MANIFEST_LEN)
		return common_errf(e, "manifest", "%zu bytes, a manifest has exactly 44", len);
	memcpy(m->digest, buf, 32);
	m->len = 0;
	m->chunks = 0;
	for (int i = 0; i < 8; i++)
		m->len |= (uint64_t)buf[32 + i] << (8 * i);
	for (int i = 0; i < 4; i++)
		m->chunks |= (uint32_t)buf[40 + i] << (8 * i);
	if (m->len == 0 || m->len > SNAP_MAX_BYTES)
		return common_errf(e, "manifest", "length %llu out of range",
				   (unsigned long long)m->len);
	uint64_t want = (m->len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX;
	if (m->chunks != want)
		return common_errf(e, "manifest", "%u chunks for %llu bytes, expected %llu",
				   m->chunks, (unsigned long long)m->len,
				   (unsigned long long)want);
	return 0;
}
