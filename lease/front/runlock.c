/* A lease is one sandbox: the sbx-run that runs it holds STORE/run/ID.lock
 * (flock, released by the kernel when that process dies, however it dies).
 * Claim and release happen under the store lock, so a store write that finds
 * the file unlocked knows its run died without closing the lease. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease/front/front-internal.h"

static char *run_lock_path(const struct lease_store *s, const char *id)
{
	return common_xasprintf("%s/run/%s.lock", lease_store_dir(s), id);
}

int lease_run_claim(struct lease_store *s, const char *id, struct common_err *e)
{
	char *dir = common_xasprintf("%s/run", lease_store_dir(s)), *p = run_lock_path(s, id);
	int fd = -1;

	if (lease_lock_host(s, e) < 0) {
		free(dir);
		free(p);
		return -1;
	}

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		common_errno(e, errno, "run directory %s", dir);
		goto out;
	}
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		common_errno(e, errno, "run lock %s", p);
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;
		char pid[24] = "";
		ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		close(fd);
		fd = -1;
		if (err == EWOULDBLOCK)
			common_errf(e, "lease", "lease %s is already running (sbx-run pid %s): a lease "
				    "is one sandbox", id, *pid ? pid : "?");
		else
			common_errno(e, err, "run lock %s", p);
		goto out;
	}
	char pid[24];
	int len = snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
		common_errno(e, errno, "run lock %s", p);
		close(fd);
		fd = -1;
	}
out:
	lease_unlock(s);
	free(dir);
	free(p);
	return fd;
}

void lease_run_release(struct lease_store *s, const char *id, int fd)
{
	struct common_err e;
	char *p = run_lock_path(s, id);
	int locked = lease_lock_host(s, &e) == 0;

	unlink(p); /* gone before it is unlocked: no write mistakes an ended run for a dead one */
	close(fd);
	if (locked)
		lease_unlock(s);
	free(p);
}

int lease_run_orphans(struct lease_store *s, char ***ids, size_t *n, struct common_err *e)
{
	char *dir = common_xasprintf("%s/run", lease_store_dir(s));
	DIR *d = opendir(dir);
	struct dirent *de;

	*ids = NULL;
	*n = 0;
	if (!d) {
		int err = errno;
		free(dir);
		return err == ENOENT ? 0 : common_errno(e, err, "run directory");
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char id[LEASE_ID_LEN + 1];
		if (l != LEASE_ID_LEN + 5 || strcmp(de->d_name + LEASE_ID_LEN, ".lock"))
			continue;
		memcpy(id, de->d_name, LEASE_ID_LEN);
		id[LEASE_ID_LEN] = 0;
		if (!lease_id_valid(id) || lease_run_held(s, id))
			continue;
		*ids = common_xrealloc(*ids, (*n + 1) * sizeof **ids);
		(*ids)[(*n)++] = common_xstrdup(id);
	}
	closedir(d);
	free(dir);
	return 0;
}

void lease_run_forget(struct lease_store *s, const char *id)
{
	char *p = run_lock_path(s, id), *sock = common_xasprintf("%s/run/%s.sock",
								 lease_store_dir(s), id);
	unlink(sock);
	unlink(p);
	free(sock);
	free(p);
}

int lease_run_held(const struct lease_store *s, const char *id)
{
	char *p = run_lock_path(s, id);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), held = 0;

	free(p);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0)
		held = errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/* A run's bound lives past the pid at RUN_BOUND_OFF of its claim, in two slots
 * written in turn (the torn one is the other): magic, dimensions, lease id, seq,
 * one value per dimension, and the SHA-256 of all that. x86-64 byte order. */
#define RUN_BOUND_OFF 4096
#define RUN_BOUND_MAGIC "sbxbound"
#define RUN_BOUND_ID 48
#define RUN_BOUND_VALS 72
#define RUN_BOUND_SUM (LEASE_RUN_BOUND_SLOT - COMMON_SHA256_LEN)

static void bound_encode(uint8_t buf[LEASE_RUN_BOUND_SLOT], const char *id, uint64_t seq,
			 const uint64_t bound[LEASE_DIM_COUNT])
{
	uint32_t dims = LEASE_DIM_COUNT;

	memset(buf, 0, LEASE_RUN_BOUND_SLOT);
	memcpy(buf, RUN_BOUND_MAGIC, 8);
	memcpy(buf + 8, &dims, 4);
	memcpy(buf + 16, id, strnlen(id, RUN_BOUND_ID - 1));
	memcpy(buf + 64, &seq, 8);
	memcpy(buf + RUN_BOUND_VALS, bound, LEASE_DIM_COUNT * sizeof bound[0]);
	common_sha256(buf, RUN_BOUND_SUM, buf + RUN_BOUND_SUM);
}

int lease_run_bound_decode(const uint8_t *buf, size_t len, const char *id, uint64_t *seq,
			   uint64_t bound[LEASE_DIM_COUNT])
{
	uint8_t sum[COMMON_SHA256_LEN];
	char want[RUN_BOUND_ID] = "";
	uint32_t dims;

	if (len < LEASE_RUN_BOUND_SLOT || memcmp(buf, RUN_BOUND_MAGIC, 8) != 0)
		return -1;
	common_sha256(buf, RUN_BOUND_SUM, sum);
	memcpy(&dims, buf + 8, 4);
	strncpy(want, id, RUN_BOUND_ID - 1);
	if (memcmp(sum, buf + RUN_BOUND_SUM, sizeof sum) != 0 || dims != LEASE_DIM_COUNT ||
	    memcmp(buf + 16, want, RUN_BOUND_ID) != 0)
		return -1;
	memcpy(seq, buf + 64, 8);
	memcpy(bound, buf + RUN_BOUND_VALS, LEASE_DIM_COUNT * sizeof bound[0]);
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		if (bound[d] > LEASE_USAGE_MAX)
			return -1;
	return 0;
}

int lease_run_bound_write(int run_fd, const char *id, uint64_t seq,
			  const uint64_t bound[LEASE_DIM_COUNT], int durable, struct common_err *e)
{
	uint8_t buf[LEASE_RUN_BOUND_SLOT];
	off_t at = RUN_BOUND_OFF + (off_t)(seq & 1) * LEASE_RUN_BOUND_SLOT;

	bound_encode(buf, id, seq, bound);
	if (pwrite(run_fd, buf, sizeof buf, at) != (ssize_t)sizeof buf ||
	    (durable && fdatasync(run_fd) < 0))
		return common_errno(e, errno, "run claim of %s: writing its usage bound", id);
	return 0;
}

int lease_run_bound_read(struct lease_store *s, const char *id, uint64_t bound[LEASE_DIM_COUNT])
{
	uint8_t buf[2 * LEASE_RUN_BOUND_SLOT];
	uint64_t seq[2], v[2][LEASE_DIM_COUNT];
	char *p = run_lock_path(s, id);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), ok[2];
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf, RUN_BOUND_OFF);

	free(p);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 2; i++)
		ok[i] = n >= (ssize_t)((i + 1) * LEASE_RUN_BOUND_SLOT) &&
			lease_run_bound_decode(buf + i * LEASE_RUN_BOUND_SLOT, LEASE_RUN_BOUND_SLOT,
					       id, &seq[i], v[i]) == 0;
	if (!ok[0] && !ok[1])
		return n > 0 ? -1 : 0;
	int newest = !ok[0] || (ok[1] && seq[1] > seq[0]);
	memcpy(bound, v[newest], sizeof v[newest]);
	return 1;
}
