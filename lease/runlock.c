/* A lease is one sandbox: the sbx-run that runs it holds STORE/run/ID.lock
 * (flock, released by the kernel when that process dies, however it dies). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
	free(dir);
	free(p);
	return fd;
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
