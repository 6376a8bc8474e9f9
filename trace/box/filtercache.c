/* The seccomp program's cache, kept by the supervisor in the store. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/box/box-internal.h"

/* libseccomp takes ~3 ms to build the program, on every run's critical path (the
 * child waits for it), so each program built is kept, named by all it derives
 * from: this build of sbx (its build id), libseccomp's version and kernel API
 * level, the classes. Only a cache: a file that is not exactly the magic, the
 * SHA-256 of the instructions and the instructions is ignored and replaced. */
#define BPF_CACHE_MAGIC "sbx-bpf\n"
#define BPF_CACHE_HDR (8 + COMMON_SHA256_LEN)
#define BPF_CACHE_KEEP 64 /* more entries than this (old builds): all are dropped */

static char *bpf_cache_path(const char *dir, unsigned classes)
{
	uint8_t id[64], d[COMMON_SHA256_LEN];
	size_t idlen;
	char hex[COMMON_SHA256_HEX];
	struct common_sha256 h;

	if (common_build_id(id, sizeof id, &idlen) < 0)
		return NULL; /* a build without an identity: nothing to name a program by */
	const struct scmp_version *v = seccomp_version();
	uint32_t w[5] = { v->major, v->minor, v->micro, (uint32_t)seccomp_api_get(), classes };
	common_sha256_init(&h);
	common_sha256_update(&h, BPF_CACHE_MAGIC, 8);
	common_sha256_update(&h, id, idlen);
	common_sha256_update(&h, w, sizeof w);
	common_sha256_final(&h, d);
	common_hex(d, sizeof d, hex);
	return common_xasprintf("%s/%s", dir, hex);
}

static int bpf_cache_load(const char *path, struct sock_fprog *prog)
{
	size_t max = BPF_CACHE_HDR + BPF_MAXINSNS * sizeof(struct sock_filter);
	uint8_t *buf = common_xmalloc(max + 1), d[COMMON_SHA256_LEN];
	struct stat st;
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		n = common_read_all(fd, buf, max + 1);
	if (fd >= 0)
		close(fd);
	size_t body = n > BPF_CACHE_HDR ? (size_t)n - BPF_CACHE_HDR : 0;
	if (body == 0 || (size_t)n > max || body % sizeof(struct sock_filter) ||
	    memcmp(buf, BPF_CACHE_MAGIC, 8) != 0) {
		free(buf);
		return -1;
	}
	common_sha256(buf + BPF_CACHE_HDR, body, d);
	if (memcmp(d, buf + 8, sizeof d) != 0) {
		free(buf);
		return -1;
	}
	prog->len = (unsigned short)(body / sizeof(struct sock_filter));
	prog->filter = common_xmalloc(body);
	memcpy(prog->filter, buf + BPF_CACHE_HDR, body);
	free(buf);
	return 0;
}

/* Best effort, without fsync: a torn file is only a miss. */
static void bpf_cache_save(const char *dir, const char *path, const struct sock_fprog *prog)
{
	size_t body = prog->len * sizeof(struct sock_filter), n = 0;
	DIR *d;
	struct dirent *de;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return;
	if ((d = opendir(dir))) {
		while ((de = readdir(d)))
			n += de->d_name[0] != '.';
		rewinddir(d);
		while (n > BPF_CACHE_KEEP && (de = readdir(d)))
			if (de->d_name[0] != '.')
				(void)unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	uint8_t *buf = common_xmalloc(BPF_CACHE_HDR + body);
	memcpy(buf, BPF_CACHE_MAGIC, 8);
	common_sha256(prog->filter, body, buf + 8);
	memcpy(buf + BPF_CACHE_HDR, prog->filter, body);
	(void)common_write_replace(path, buf, BPF_CACHE_HDR + body, 0600);
	free(buf);
}

int trace_filter_get(const char *cache_dir, unsigned classes, struct sock_fprog *prog,
		     struct common_err *e)
{
	char *path = cache_dir ? bpf_cache_path(cache_dir, classes) : NULL;

	if (path && bpf_cache_load(path, prog) == 0) {
		free(path);
		return 0;
	}
	if (trace_filter_build(classes, prog, e) < 0) {
		free(path);
		return -1;
	}
	if (path)
		bpf_cache_save(cache_dir, path, prog);
	free(path);
	return 0;
}

