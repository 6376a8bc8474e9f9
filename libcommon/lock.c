/* Store lock (flock): one mutation at a time, released by the kernel on death. */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include "libcommon/common.h"

static int lock_as(const char *path, int how, struct common_err *e)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return common_errno(e, errno, "lock %s", path);
	while (flock(fd, how) < 0) {
		if (errno == EINTR)
			continue;
		int err = errno;
		close(fd);
		return common_errno(e, err, "lock %s", path);
	}
	return fd;
}

int common_lock(const char *path, struct common_err *e)
{
	return lock_as(path, LOCK_EX, e);
}

int common_lock_shared(const char *path, struct common_err *e)
{
	return lock_as(path, LOCK_SH, e);
}

void common_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}
