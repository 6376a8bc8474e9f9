/* Lookups the supervisor makes itself in a guest's view: user notification's
 * served calls (notify.c) and, under --deterministic, a stat answered at its
 * seccomp stop (trace_guest_stat). The very string the call names is looked
 * up with the guest's file system ids, an absolute one in the guest's root
 * (RESOLVE_IN_ROOT from /proc/GUEST/root), a relative one beneath the
 * directory object its dirfd or cwd names (RESOLVE_BENEATH); what it cannot
 * answer as the guest's kernel would (magic links, /proc and kin, a symlink
 * dangling for it, a relative path leaving its directory, an error other than
 * a name verified absent) is left to the guest's own call. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#define EAGAIN_TRIES 64     /* a ".." raced by a rename on the host: looked up again */
#define UP_TRIES 16         /* components walked up to find where an ENOENT lookup failed */

/* Pseudo file systems whose entries depend on who looks (pid namespace, the
 * opener's task): the guest's own lookup decides those. */
static int special_fs(int fd)
{
	struct statfs f;
	if (fstatfs(fd, &f) < 0)
		return 1;
	switch ((unsigned long)f.f_type) {
	case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case CGROUP_SUPER_MAGIC: case CGROUP2_SUPER_MAGIC:
	case DEVPTS_SUPER_MAGIC: case SECURITYFS_MAGIC: case DEBUGFS_MAGIC: case TRACEFS_MAGIC:
	case BPF_FS_MAGIC: case NSFS_MAGIC:
		return 1;
	default:
		return 0;
	}
}

/* Where a lookup starts: the guest's root for an absolute path (never above it),
 * else the very directory object the call names (its dirfd, or the cwd), never
 * left (a ".." above it or an absolute symlink goes back to the guest). */
struct base {
	int fd, own;
	uint64_t resolve;
};

static int lookup(const struct base *b, const char *path, uint64_t flags)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC | flags, .resolve = b->resolve };
	int fd = -1;
	for (int i = 0; i < EAGAIN_TRIES; i++)
		if ((fd = (int)syscall(SYS_openat2, b->fd, path, &how, sizeof how)) >= 0 ||
		    errno != EAGAIN)
			break;
	return fd;
}

/* An ENOENT lookup is the guest's too when, walking up, the first prefix that
 * resolves is an ordinary directory in which the next name is absent (no
 * symlink there that only the guest's /proc would resolve). */
static int absent_for_guest(const struct base *b, const char *path)
{
	char pre[PATH_MAX];
	snprintf(pre, sizeof pre, "%s", path);
	for (int up = 0; up < UP_TRIES; up++) {
		char *slash = strrchr(pre, '/');
		const char *name = slash ? slash + 1 : pre;
		char nm[NAME_MAX + 1];
		if (!strcmp(name, ".") && slash && slash != pre) {
			*slash = 0; /* "D/." is absent where D is */
			continue;
		}
		if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > NAME_MAX)
			return 0;
		strcpy(nm, name);
		if (!slash)
			strcpy(pre, "."); /* the base directory itself */
		else if (slash == pre)
			slash[1] = 0; /* the root */
		else
			*slash = 0;
		int d = lookup(b, pre, O_DIRECTORY);
		if (d < 0) {
			if (errno != ENOENT || !slash)
				return 0;
			continue;
		}
		struct stat sb;
		int absent = !special_fs(d) && fstatat(d, nm, &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
			     errno == ENOENT;
		close(d);
		return absent;
	}
	return 0;
}

void trace_lookup_fd_path(pid_t tid, int64_t dirfd, char *out, size_t n)
{
	if ((int)dirfd == AT_FDCWD)
		snprintf(out, n, "/proc/%d/cwd", (int)tid);
	else
		snprintf(out, n, "/proc/%d/fd/%d", (int)tid, (int)dirfd);
}

static int base_of(const struct trace_lookup *lk, const struct trace_stop *st, struct base *b)
{
	/* a magic link (/proc/N/root, /proc/N/fd/K) is the guest's kernel's to follow */
	*b = (struct base){ .fd = lk->rootfd, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	if (st->raw[0][0] == '/')
		return 0;
	int a = trace_sys_arg(st->sys, TRACE_ARG_DIRFD);
	char p[64];
	trace_lookup_fd_path(st->tid, a >= 0 ? st->args[a] : AT_FDCWD, p, sizeof p);
	b->fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	b->own = 1;
	b->resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	return b->fd < 0 ? -1 : 0;
}

int trace_lookup_resolve(const struct trace_lookup *lk, const struct trace_stop *st, int follow,
			 uint64_t flags)
{
	struct base b;
	int fd = TRACE_LOOKUP_BACK;
	if (base_of(lk, st, &b) < 0)
		return TRACE_LOOKUP_BACK; /* a bad dirfd: the kernel's error to give */
	int got = lookup(&b, st->raw[0], flags | (follow ? 0 : O_NOFOLLOW));
	if (got >= 0 && !special_fs(got))
		fd = got;
	else if (got >= 0)
		close(got);
	else if (errno == ENOENT && absent_for_guest(&b, st->raw[0]))
		fd = -ENOENT;
	if (b.own)
		close(b.fd);
	return fd;
}

void trace_lookup_ids(const struct trace_lookup *lk, uid_t *u, gid_t *g)
{
	*u = *u == lk->uid ? TRACE_GUEST_UID : lk->overflow_uid;
	*g = *g == lk->gid ? TRACE_GUEST_UID : lk->overflow_gid;
}

int trace_lookup_stat(const struct trace_lookup *lk, const struct trace_stop *st,
		      struct trace_lookup_stat *o)
{
	int is_statx = st->nr == TRACE_SYS_statx, fa = trace_sys_arg(st->sys, TRACE_ARG_FLAGS);
	uint32_t fl = fa >= 0 ? (uint32_t)st->args[fa] : 0, mask = 0;
	uint32_t known = AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT;
	if (is_statx) {
		known |= AT_STATX_SYNC_TYPE;
		mask = (uint32_t)st->args[3];
		if ((fl & AT_STATX_SYNC_TYPE) == AT_STATX_SYNC_TYPE || (mask & STATX__RESERVED))
			return TRACE_LOOKUP_BACK; /* EINVAL, the kernel's to say */
	}
	if (fl & ~known)
		return TRACE_LOOKUP_BACK;
	int follow = trace_sys_follows_last(st->sys, st->args, 0);
	int fd = -1, rc;
	if (!*st->raw[0] && !(fl & AT_EMPTY_PATH)) {
		o->result = -ENOENT;
		return 0;
	}
	if (!*st->raw[0]) {
		char p[64];
		trace_lookup_fd_path(st->tid, st->args[0], p, sizeof p);
		rc = is_statx ? statx(AT_FDCWD, p, (int)(fl & AT_STATX_SYNC_TYPE), mask, &o->sx)
			      : stat(p, &o->sb);
		o->result = rc < 0 ? (errno == ENOENT ? -EBADF : -errno) : 0;
	} else {
		if ((fd = trace_lookup_resolve(lk, st, follow, 0)) == TRACE_LOOKUP_BACK)
			return TRACE_LOOKUP_BACK;
		if (st->raw[0][0] == '/') /* the trace looks up the path string: the same walk */
			o->exists = fd >= 0 ? 1 : 2; /* the only error served: ENOENT */
		if (fd < 0) {
			o->result = fd;
			return 0;
		}
		rc = is_statx ? statx(fd, "", AT_EMPTY_PATH | (int)(fl & AT_STATX_SYNC_TYPE), mask, &o->sx)
			      : fstat(fd, &o->sb);
		o->result = rc < 0 ? -errno : 0;
		close(fd);
	}
	if (is_statx)
		trace_lookup_ids(lk, &o->sx.stx_uid, &o->sx.stx_gid);
	else
		trace_lookup_ids(lk, &o->sb.st_uid, &o->sb.st_gid);
	return 0;
}

void trace_lookup_as_guest(const struct trace_lookup *lk, int on)
{
	if (!lk->fsids)
		return;
	if (on) {
		setfsgid(lk->gid);
		setfsuid(lk->uid);
	} else {
		setfsuid(0);
		setfsgid(0);
	}
}

static unsigned read_overflow(const char *path)
{
	unsigned v = 65534;
	FILE *f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 65534;
		fclose(f);
	}
	return v;
}

int trace_lookup_open(struct trace_lookup *lk, const struct trace_supervisor *sv, pid_t guest)
{
	char root[64];
	lk->uid = sv->p->host_uid;
	lk->gid = sv->p->host_gid;
	lk->fsids = geteuid() == 0;
	lk->overflow_uid = read_overflow("/proc/sys/kernel/overflowuid");
	lk->overflow_gid = read_overflow("/proc/sys/kernel/overflowgid");
	snprintf(root, sizeof root, "/proc/%d/root", (int)guest);
	lk->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return lk->rootfd < 0 ? -1 : 0;
}

void trace_lookup_close(struct trace_lookup *lk)
{
	if (lk->rootfd >= 0)
		close(lk->rootfd);
	lk->rootfd = -1;
}

/* The user namespace tid is in, 0 when it cannot tell. */
static ino_t userns_of(pid_t tid)
{
	char p[64];
	struct stat sb;
	snprintf(p, sizeof p, "/proc/%d/ns/user", (int)tid);
	return stat(p, &sb) == 0 ? sb.st_ino : 0;
}

/* Opened at the first use from the guest's root, the tree's (a guest cannot
 * chroot or pivot_root), with the user namespace its ids map in. Off where
 * this thread's lookups would not be the guest's: it has supplementary groups
 * the guest has not. */
static struct trace_lookup *look_of(struct trace_supervisor *sv)
{
	if (sv->look || sv->look_off)
		return sv->look;
	struct trace_lookup *lk = common_xcalloc(1, sizeof *lk);
	lk->rootfd = -1;
	sv->look_userns = sv->guest_gone ? 0 : userns_of(sv->guest);
	if (!sv->look_userns || trace_lookup_open(lk, sv, sv->guest) < 0 ||
	    (lk->fsids && getgroups(0, NULL) != 0)) {
		trace_lookup_close(lk);
		free(lk);
		sv->look_off = 1;
		return NULL;
	}
	return sv->look = lk;
}

int trace_guest_stat(struct trace_guest *g, const struct trace_stop *st, void *out,
		     int64_t *result)
{
	struct trace_lookup *lk = look_of(g->sv);
	struct trace_lookup_stat o = { 0 };
	/* a task in a user namespace of its own sees other owners */
	if (!lk || !st->sys || !st->raw[0] || !st->path[0] || userns_of(st->tid) != g->sv->look_userns)
		return -1;
	trace_lookup_as_guest(lk, 1);
	int rc = trace_lookup_stat(lk, st, &o);
	trace_lookup_as_guest(lk, 0);
	if (rc == TRACE_LOOKUP_BACK)
		return -1;
	*result = o.result;
	if (st->nr == TRACE_SYS_statx)
		memcpy(out, &o.sx, sizeof o.sx);
	else
		memcpy(out, &o.sb, sizeof o.sb);
	return 0;
}

void trace_sv_lookup_end(struct trace_supervisor *sv)
{
	if (sv->look) {
		trace_lookup_close(sv->look);
		free(sv->look);
		sv->look = NULL;
	}
}
