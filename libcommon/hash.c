/* SHA-256 on OpenSSL EVP (SHA-NI: ~4x coreutils here) and hex codecs. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "libcommon/common.h"

static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	if (!(sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)))
		abort();
}

/* Fetched once: EVP_sha256() makes every init search the provider's method
 * store again (a lock and a hash table), ~a third of a short hash's cost. */
const struct evp_md_st *common_sha256_md(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256_md;
}

void common_sha256_init(struct common_sha256 *h)
{
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || !EVP_DigestInit_ex(h->ctx, common_sha256_md(), NULL))
		abort();
}

void common_sha256_update(struct common_sha256 *h, const void *buf, size_t len)
{
	if (len && !EVP_DigestUpdate(h->ctx, buf, len))
		abort();
}

/* dst (initialised or not) takes src's state: a stream hashed on from a mark */
void common_sha256_copy(struct common_sha256 *dst, const struct common_sha256 *src)
{
	if (!dst->ctx && !(dst->ctx = EVP_MD_CTX_new()))
		abort();
	if (!EVP_MD_CTX_copy_ex(dst->ctx, src->ctx))
		abort();
}

void common_sha256_free(struct common_sha256 *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

void common_sha256_final(struct common_sha256 *h, uint8_t out[COMMON_SHA256_LEN])
{
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(h->ctx, out, &n) || n != COMMON_SHA256_LEN)
		abort();
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

void common_sha256(const void *buf, size_t len, uint8_t out[COMMON_SHA256_LEN])
{
	struct common_sha256 h;

	common_sha256_init(&h);
	common_sha256_update(&h, buf, len);
	common_sha256_final(&h, out);
}

int common_sha256_fd(int fd, const char *name, uint8_t out[COMMON_SHA256_LEN],
		     struct common_err *e)
{
	struct common_sha256 h;
	size_t cap = 1u << 20;
	char *buf = common_xmalloc(cap);
	off_t off = 0;
	ssize_t n;
	int rc = 0;

	common_sha256_init(&h);
	while ((n = pread(fd, buf, cap, off)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = common_errno(e, errno, "%s", name);
			break;
		}
		common_sha256_update(&h, buf, (size_t)n);
		off += n;
	}
	common_sha256_final(&h, out);
	free(buf);
	return rc;
}

int common_sha256_file(const char *path, uint8_t out[COMMON_SHA256_LEN], struct common_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return common_errno(e, errno, "%s", path);
	int rc = common_sha256_fd(fd, path, out, e);
	close(fd);
	return rc;
}

void common_hex(const uint8_t *buf, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[buf[i] >> 4];
		out[2 * i + 1] = digits[buf[i] & 15];
	}
	out[2 * len] = '\0';
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int common_unhex(const char *hex, uint8_t *out, size_t len)
{
	if (!hex || strlen(hex) != 2 * len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
