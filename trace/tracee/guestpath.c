/* What a path argument names in the guest's view, for decisions on paths: the
 * string folded lexically ("//", "/./", ".."), and the real location with every
 * symlink in it and the /proc/self magic links (root, cwd, fd/N, exe) resolved
 * inside the guest's root. Symlinks are read one component at a time with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so no link leaves the root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "trace/tracee/tracee.h"

#define HOPS_MAX 40 /* as the kernel's MAXSYMLINKS */

void trace_path_fold(const char *in, char out[PATH_MAX])
{
	size_t n = 0;
	const char *p = in;

	while (*p) {
		while (*p == '/')
			p++;
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0 || (len == 1 && p[0] == '.')) {
			/* nothing */
		} else if (len == 2 && p[0] == '.' && p[1] == '.') {
			while (n > 0 && out[--n] != '/')
				;
		} else if (n + 1 + len < PATH_MAX) {
			out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = 0;
}

/* The next component of *rest (advanced past it) into c; 0 when none is left. */
static int next_component(const char **rest, char c[PATH_MAX])
{
	const char *p = *rest + strspn(*rest, "/");
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= PATH_MAX)
		return 0;
	memcpy(c, p, n);
	c[n] = 0;
	*rest = p + n;
	return 1;
}

/* What a /proc/self magic link leads to for tid: "root", "cwd", "exe" or a
 * descriptor number under "fd". 1 with target set, 0 when name is no such link,
 * -1 when it leads to no path (a pipe, a socket, a closed fd). */
static int magic_target(pid_t tid, const char *dir, const char *name, char target[PATH_MAX])
{
	char link[96];
	int fd_dir = strcmp(dir, "/proc/self/fd") == 0;

	if (fd_dir && name[strspn(name, "0123456789")] == 0)
		snprintf(link, sizeof link, "/proc/%d/fd/%s", (int)tid, name);
	else if (!fd_dir && strcmp(dir, "/proc/self") == 0 && !strcmp(name, "root"))
		return strcpy(target, "/"), 1;
	else if (!fd_dir && strcmp(dir, "/proc/self") == 0 && (!strcmp(name, "cwd") || !strcmp(name, "exe")))
		snprintf(link, sizeof link, "/proc/%d/%s", (int)tid, name);
	else
		return 0;
	ssize_t n = readlink(link, target, PATH_MAX - 1);
	if (n <= 0 || target[0] != '/')
		return -1;
	target[n] = 0;
	/* a deleted file or a memfd has no path left: only the link reaches it */
	if (n > 10 && strcmp(target + n - 10, " (deleted)") == 0)
		return -1;
	return 1;
}

/* A symlink at path in the guest's root: 1 with its target, 0 when path is no
 * symlink (2: nor a directory), -1 when path is not there. */
static int guest_link(int root, const char *path, char target[PATH_MAX])
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how), rc = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(fd, "", target, PATH_MAX - 1);
		if (n > 0) {
			target[n] = 0;
			rc = 1;
		}
	} else if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
		rc = 2;
	}
	close(fd);
	return rc;
}

/* Walk path one component at a time as the kernel does: ".." leaves the
 * directory a link led to, not the link's spelling. Every /proc/<any pid> is
 * read as tid's (the guest's processes share one root). */
int trace_path_real(pid_t tid, const char *path, int follow_last, char out[PATH_MAX])
{
	char link[64], comp[PATH_MAX], cand[PATH_MAX], target[PATH_MAX], buf[2][2 * PATH_MAX];
	const char *rest = path;
	int hops = 0, which = 0, missing = 0, toolong = 0, notdir = 0;

	snprintf(link, sizeof link, "/proc/%d/root", (int)tid);
	int root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	out[0] = 0;
	while (next_component(&rest, comp)) {
		int last = rest[strspn(rest, "/")] == 0, r = 0;
		if (!strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) {
			char *slash = strrchr(out, '/');
			if (slash)
				*slash = 0;
			continue;
		}
		if (strlen(out) + 1 + strlen(comp) >= PATH_MAX) {
			toolong = 1;
			break;
		}
		if (!strcmp(out, "/proc") && (!strcmp(comp, "self") || !strcmp(comp, "thread-self") ||
					      comp[strspn(comp, "0123456789")] == 0)) {
			strcpy(out, "/proc/self");
			continue;
		}
		snprintf(cand, sizeof cand, "%s/%s", out, comp);
		if (!missing && (!last || follow_last)) {
			r = magic_target(tid, out, comp, target);
			if (r == 0 && strncmp(cand, "/proc/self/", 11) != 0)
				r = guest_link(root, cand, target);
			if (r < 0)
				missing = 1; /* not there (a file being made): the rest as written */
			if (r == 2 && !last) {
				notdir = 1; /* the kernel stops here: ENOTDIR */
				break;
			}
		}
		if (r <= 0 || r == 2) {
			strcpy(out, cand);
			continue;
		}
		if (++hops > HOPS_MAX)
			break;
		/* the target, then what followed the link; relative targets from its directory */
		snprintf(buf[which], sizeof buf[which], "%s/%s", target, rest);
		rest = buf[which];
		which ^= 1;
		if (target[0] == '/')
			out[0] = 0;
	}
	close(root);
	if (notdir)
		return -ENOTDIR;
	if (hops > HOPS_MAX || toolong)
		return -1;
	if (!out[0])
		strcpy(out, "/");
	return 0;
}

int trace_path_open(pid_t tid, const char *path, int follow_last)
{
	char link[64], real[PATH_MAX];
	struct open_how how = { .flags = O_PATH | O_CLOEXEC | (follow_last ? 0 : O_NOFOLLOW),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };

	if (trace_path_real(tid, path, follow_last, real) < 0)
		return -ELOOP;
	snprintf(link, sizeof link, "/proc/%d/root", (int)tid);
	int root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	int fd = (int)syscall(SYS_openat2, root, real, &how, sizeof how);
	int err = errno;
	close(root);
	return fd < 0 ? -err : fd;
}

int trace_fd_open(pid_t tid, int fd)
{
	char link[64];
	if (fd == AT_FDCWD)
		snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
	else
		snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, fd);
	int o = open(link, O_PATH | O_CLOEXEC);
	return o < 0 ? -errno : o;
}
