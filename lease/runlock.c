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

#include "lease/lease-internal.h"

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
