/* snap: the run's standard streams. What the supervisor handed the guest as
 * its fds 0-2 is its own (pipes, terminals, log files): a restore's supervisor
 * gives its own instead. A descriptor is one of them only when it is the same
 * open file (kcmp) or the write end of the output relay's pipe: the guest's
 * own /dev/null is no copy of a stdin on the host's one, and what the root put
 * at its own 0-2 (`exec >/dev/null`, a pipe dup2'd onto 1) is what it is. */
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "snap/snap-internal.h"

void snap_std_read(pid_t root, const int *std_fds, struct snap_std *sd)
{
	memset(sd, 0, sizeof *sd);
	sd->root = root;
	for (int k = 0; k < 3; k++) {
		char p[64];
		struct stat sb;
		sd->fd[k] = std_fds ? std_fds[k] : -1;
		snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)root, k);
		if (sd->fd[k] >= 0 ? fstat(sd->fd[k], &sb) < 0 : stat(p, &sb) < 0)
			continue;
		sd->dev[k] = sb.st_dev;
		sd->ino[k] = sb.st_ino;
		sd->pipe[k] = sd->fd[k] >= 0 && S_ISFIFO(sb.st_mode) &&
			      (fcntl(sd->fd[k], F_GETFL) & O_ACCMODE) == O_RDONLY;
	}
}

/* Which stream fd of pid (flags: its fdinfo's) is, or -1. */
static int stream_of(const struct snap_std *sd, pid_t pid, uint32_t fd, uint32_t flags,
		     const struct stat *sb)
{
	for (int k = 0; sd && k < 3; k++) {
		if (!sd->ino[k] || sd->ino[k] != sb->st_ino || sd->dev[k] != sb->st_dev)
			continue;
		if (sd->fd[k] < 0 ? syscall(SYS_kcmp, sd->root, pid, KCMP_FILE, k, fd) == 0
				  : syscall(SYS_kcmp, getpid(), pid, KCMP_FILE, sd->fd[k], fd) == 0 ||
				    (sd->pipe[k] && (flags & O_ACCMODE) == O_WRONLY))
			return k;
	}
	return -1;
}

int snap_std_fd(const struct snap_std *sd, pid_t pid, int root, struct snap_fd *f,
		const struct stat *sb, struct common_err *e)
{
	int k = stream_of(sd, pid, f->fd, f->flags, sb);
	int unknown = root && f->fd <= 2 && (!sd || sd->fd[f->fd] < 0);
	if (k < 0 && !unknown)
		return 0;
	/* the root's own fd k (pos 0) stays the supervisor's; any other
	 * descriptor is a copy of stream k */
	int own = unknown || (root && k == (int)f->fd);
	/* pos 0 at the root's 0-2 means its own: a copy of stdin there has no name */
	if (!own && root && f->fd <= 2 && k == 0)
		return common_errf(e, "capture", "fd %u of the root process is a copy of the run's "
				   "standard input: not supported", f->fd);
	f->kind = SNAP_FD_STREAM;
	f->path = common_xstrdup("");
	f->pos = own ? 0 : (uint64_t)k;
	f->flags = own ? 0 : f->flags & O_CLOEXEC;
	return 1;
}

void snap_std_hold(pid_t pid, int fds[3])
{
	struct snap_fdctx c;
	struct common_err e;
	snap_fdctx_init(&c, pid);
	for (int k = 0; k < 3; k++)
		fds[k] = snap_fd_copy(&c, (uint32_t)k, &e);
	snap_fdctx_close(&c);
}
