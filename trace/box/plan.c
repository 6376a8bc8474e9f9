/* The supervisor's side of the boundary before the child exists: the options'
 * mount list checked, the mount plan built (the binds' trees opened, idmapped or
 * read-only, the image and the fds lifted), and the plan freed (SPEC §6.1). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/box/box-internal.h"
#include "trace/trace.h" /* TRACE_STATE_FD */

static int path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) >= PATH_MAX - 16)
		return 0;
	for (const char *c = p; *c; c++) {
		if (c[0] == '/' && c[1] == '/')
			return 0;
		if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || c[2] == 0))
			return 0;
		if (c[0] == '/' && c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == 0))
			return 0;
	}
	size_t n = strlen(p);
	return n == 1 || p[n - 1] != '/';
}

/* a is b or lies beneath it (both real paths) */
static int beneath(const char *a, const char *b)
{
	size_t n = strlen(b);
	return strcmp(b, "/") == 0 || (strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/'));
}

/* A bind of src other than the whole host tree that contains the store or lies
 * in it: the guest would read keys and journals, forge cached programs and reach
 * control sockets. The whole tree ("/") gets the store masked instead. */
static int shows_store(const struct trace_config *cfg, const char *src)
{
	char real[PATH_MAX];
	if (!cfg->store_dir || !realpath(src, real) || strcmp(real, "/") == 0)
		return 0;
	return beneath(cfg->store_dir, real) || beneath(real, cfg->store_dir);
}

int trace_config_check(const struct trace_config *cfg, struct common_err *e)
{
	if (!cfg->argv || !cfg->argv[0])
		return common_errf(e, "run", "no program given");
	if (!cfg->image)
		return common_errf(e, "run", "no image given");
	for (size_t i = 0; cfg->envp && cfg->envp[i]; i++)
		if (!strchr(cfg->envp[i], '=') || cfg->envp[i][0] == '=')
			return common_errf(e, "environment", "entry \"%s\" is not NAME=VALUE", cfg->envp[i]);
	if (cfg->replace_defaults && (cfg->nmounts == 0 || strcmp(cfg->mounts[0].dst, "/") != 0 ||
				      cfg->mounts[0].type == TRACE_MOUNT_PROC))
		return common_errf(e, "mount list", "the first --mount must supply / (bind or tmpfs)");
	for (size_t i = 0; i < cfg->nmounts; i++) {
		const struct trace_mount *m = &cfg->mounts[i];
		if (!path_ok(m->dst))
			return common_errf(e, "mount", "target \"%s\" must be an absolute, normalized path",
					   m->dst ? m->dst : "");
		if (strcmp(m->dst, "/") == 0 && !(cfg->replace_defaults && i == 0))
			return common_errf(e, "mount", "target / can only be the first --mount");
		if (strcmp(m->dst, "/ns") == 0 || strncmp(m->dst, "/ns/", 4) == 0)
			return common_errf(e, "mount", "target %s: /ns is the lease namespace", m->dst);
		for (size_t j = 0; j < i; j++)
			if (strcmp(cfg->mounts[j].dst, m->dst) == 0)
				return common_errf(e, "mount", "duplicate target %s", m->dst);
		if (m->type == TRACE_MOUNT_BIND) {
			struct stat st;
			if (!path_ok(m->src))
				return common_errf(e, "mount", "source \"%s\" must be an absolute, normalized path",
						   m->src ? m->src : "");
			if (stat(m->src, &st) < 0)
				return common_errno(e, errno, "mount source %s", m->src);
			if (shows_store(cfg, m->src))
				return common_errf(e, "mount", "bind of %s would show the store %s to the guest",
						   m->src, cfg->store_dir);
		} else if (m->type == TRACE_MOUNT_TMPFS) {
			if (m->opts && (strlen(m->opts) > 128 || strspn(m->opts,
				"abcdefghijklmnopqrstuvwxyz0123456789=,kmgKMG%") != strlen(m->opts)))
				return common_errf(e, "mount", "tmpfs options \"%s\": only mode= and size= are accepted",
						   m->opts);
		} else if (m->type != TRACE_MOUNT_PROC) {
			return common_errf(e, "mount", "unknown mount type for %s", m->dst);
		}
	}
	if (cfg->ns_dir) {
		struct stat st;
		if (stat(cfg->ns_dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return common_errf(e, "namespace directory", "%s is not a directory", cfg->ns_dir);
	}
	return 0;
}

static void add_mnt(struct trace_plan *p, int type, const char *src, const char *dst,
		    const char *opts, int rw)
{
	p->m = common_xrealloc(p->m, (p->nm + 1) * sizeof *p->m);
	struct trace_mnt *m = &p->m[p->nm++];
	memset(m, 0, sizeof *m);
	m->type = type;
	m->src = src ? common_xasprintf(OLDROOT "%s", strcmp(src, "/") == 0 ? "" : src) : NULL;
	m->dst = common_xstrdup(dst);
	m->at = common_xasprintf(NEWROOT "%s", strcmp(dst, "/") == 0 ? "" : dst);
	m->opts = opts ? common_xstrdup(opts) : NULL;
	m->rw = rw;
	m->tree_fd = -1;
	if (type == TRACE_MOUNT_BIND && src) {
		struct stat st;
		m->is_file = stat(src, &st) == 0 && !S_ISDIR(st.st_mode);
	}
}

int trace_box_write(const char *path, const char *s, struct common_err *e)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "%s", path);
	ssize_t n = write(fd, s, strlen(s));
	int err = errno;
	close(fd);
	if (n != (ssize_t)strlen(s))
		return common_errno(e, n < 0 ? err : EIO, "writing %s", path);
	return 0;
}

/* A user namespace mapping the host owner uid:gid to the guest's host ids: an
 * idmapped rw bind then shows the owner's files as the guest's own, and files
 * the guest creates land on the host as the owner's, nothing wider. *fd gets it. */
static int make_idmap_userns(const struct trace_plan *p, uid_t uid, gid_t gid, int *fd,
			     pid_t *helper, struct common_err *e)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return common_errno(e, errno, "idmap: pipe");
	pid_t h = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
	if (h < 0) {
		close(pp[0]);
		close(pp[1]);
		return common_errno(e, errno, "idmap: creating a user namespace (user namespaces "
				    "disabled? see /proc/sys/user/max_user_namespaces)");
	}
	if (h == 0) {
		char c;
		close(pp[1]);
		(void)!read(pp[0], &c, 1); /* wait until the parent opened our namespace */
		_exit(0);
	}
	close(pp[0]);
	char path[64], map[64];
	int rc = 0;
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)p->host_uid);
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)h);
	rc = trace_box_write(path, map, e);
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)p->host_gid);
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)h);
	if (rc == 0)
		rc = trace_box_write(path, map, e);
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)h);
	if (rc == 0 && (*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		rc = common_errno(e, errno, "idmap: %s", path);
	close(pp[1]); /* the helper's EOF: it exits, reaped later (trace_plan_reap) */
	*helper = h;
	return rc;
}

/* A rw bind for a root invoker: nothing written through it is owned on the host
 * by more than the bound directory's owner (or --owner), nothing in it is a
 * device or setuid to the guest (the lease namespace stays the store's). */
static int make_idmapped_tree(struct trace_plan *p, struct trace_mnt *m, const char *host_src,
			      struct common_err *e)
{
	struct stat st, tst;
	if (stat(host_src, &st) < 0)
		return common_errno(e, errno, "rw bind %s", host_src);
	uid_t uid = p->cfg->owner_set && !m->lease_ns ? p->cfg->owner_uid : st.st_uid;
	gid_t gid = p->cfg->owner_set && !m->lease_ns ? p->cfg->owner_gid : st.st_gid;
	int ns = -1;
	if (make_idmap_userns(p, uid, gid, &ns, &m->idmap_helper, e) < 0)
		return -1;
	int t = (int)syscall(SYS_open_tree, AT_FDCWD, host_src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (t < 0) {
		int err = errno;
		close(ns);
		return common_errno(e, err, "rw bind %s: open_tree", host_src);
	}
	/* the directory whose owner was read is the one cut */
	if (fstat(t, &tst) < 0 || tst.st_ino != st.st_ino || tst.st_dev != st.st_dev ||
	    tst.st_uid != st.st_uid || tst.st_gid != st.st_gid) {
		close(ns);
		close(t);
		return common_errf(e, "rw bind", "%s changed while it was being bound", host_src);
	}
	struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
				.userns_fd = (uint64_t)ns };
	int rc = (int)syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a), err = errno;
	close(ns);
	if (rc < 0) {
		close(t);
		return common_errf(e, "rw bind", "%s: idmapped mount refused (%s); sbx-run as root "
				   "needs a filesystem with idmapped mounts", host_src, strerror(err));
	}
	m->tree_fd = t;
	return 0;
}

static int make_ro_tree(struct trace_mnt *m, const char *host_src, struct common_err *e)
{
	int t = (int)syscall(SYS_open_tree, AT_FDCWD, host_src,
			     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (t < 0)
		return common_errno(e, errno, "bind %s: open_tree", host_src);
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0) {
		int err = errno;
		close(t);
		return common_errno(e, err, "bind %s: read-only", host_src);
	}
	m->tree_fd = t;
	return 0;
}

/* fd above 0-3, which the child fills (stdout, stderr, the state fd) before it
 * uses this one: with other threads closing fds, any number may come back */
static int lift_fd(int fd)
{
	if (fd < 0 || fd > TRACE_STATE_FD)
		return fd;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, TRACE_STATE_FD + 1);
	int err = errno;
	close(fd);
	errno = err;
	return hi;
}

int trace_plan_build(const struct trace_config *cfg, struct trace_plan *p, struct common_err *e)
{
	memset(p, 0, sizeof *p);
	p->cfg = cfg;
	p->image_fd = p->init_pidfd = -1;
	p->sync_fd[0] = p->sync_fd[1] = p->err_fd[0] = p->err_fd[1] = -1;
	if (trace_config_check(cfg, e) < 0)
		return -1;
	p->argv = (char *const *)cfg->argv;
	static char *const empty_env[] = { NULL };
	p->envp = cfg->envp ? (char *const *)cfg->envp : empty_env;
	p->privileged = geteuid() == 0;
	p->host_uid = p->privileged ? trace_view_guest_id() : geteuid();
	p->host_gid = p->privileged ? (gid_t)trace_view_guest_id() : getegid();
	trace_view_allowances(&p->allow);

	/* the image is opened here, on the host, so the file exec'd is the one named
	 * (and hashed by the caller), whatever the guest's mounts show */
	p->image_fd = lift_fd(cfg->image_fd > 2 ? fcntl(cfg->image_fd, F_DUPFD_CLOEXEC, 3)
						: open(cfg->image, O_PATH | O_CLOEXEC));
	if (p->image_fd < 0) {
		common_errno(e, errno, "image %s", cfg->image);
		goto fail;
	}
	/* the program itself is built while the child sets up its mounts (release) */
	p->prog.filter = common_xmalloc(BPF_MAXINSNS * sizeof(struct sock_filter));
	p->prog.len = 0;
	p->nprog.filter = common_xmalloc(BPF_MAXINSNS * sizeof(struct sock_filter));
	p->nprog.len = 0;

	if (!cfg->replace_defaults) {
		struct stat st;
		add_mnt(p, TRACE_MOUNT_BIND, "/", "/", NULL, 0);
		add_mnt(p, TRACE_MOUNT_PROC, NULL, "/proc", NULL, 0);
		add_mnt(p, PLAN_MOUNT_DEV, NULL, "/dev", NULL, 0);
		add_mnt(p, TRACE_MOUNT_TMPFS, NULL, "/tmp", "mode=1777", 1);
		/* host daemons' sockets live under /run: not reachable from inside */
		add_mnt(p, TRACE_MOUNT_TMPFS, NULL, "/run", "mode=0755", 1);
		/* nor are the invoker's private files (keys, agent sockets, the default
		 * store): /home, /root, every home and the XDG directories (view.c) */
		char **homes = trace_view_homes(cfg);
		for (size_t i = 0; homes[i]; i++) {
			add_mnt(p, TRACE_MOUNT_TMPFS, NULL, homes[i], "mode=0755", 0);
			p->m[p->nm - 1].sealed = 1;
		}
		trace_view_free(homes);
		/* nor the host's interfaces, devices and cgroups: a /sys of the run's own */
		if (stat("/sys", &st) == 0 && S_ISDIR(st.st_mode)) {
			add_mnt(p, PLAN_MOUNT_SYS, NULL, "/sys", NULL, 0);
			p->m[p->nm - 1].sealed = 1;
		}
		if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
			add_mnt(p, TRACE_MOUNT_TMPFS, NULL, "/dev/shm", "mode=1777", 1);
	}
	for (size_t i = 0; i < cfg->nmounts; i++) {
		const struct trace_mount *m = &cfg->mounts[i];
		add_mnt(p, m->type, m->type == TRACE_MOUNT_BIND ? m->src : NULL, m->dst, m->opts,
			m->type == TRACE_MOUNT_TMPFS ? 1 : m->rw);
	}
	if (cfg->ns_dir) {
		add_mnt(p, TRACE_MOUNT_BIND, cfg->ns_dir, "/ns", NULL, 1);
		p->m[p->nm - 1].lease_ns = 1;
	}
	else
		add_mnt(p, TRACE_MOUNT_TMPFS, NULL, "/ns", "mode=0755", 1);
	if (p->m[0].type == TRACE_MOUNT_BIND && !p->m[0].is_file)
		p->m[0].expand = 1;
	/* the store, wherever the whole host tree shows it, is an empty read-only tmpfs */
	if (cfg->store_dir && p->m[0].type == TRACE_MOUNT_BIND && strcmp(p->m[0].src, OLDROOT) == 0)
		add_mnt(p, PLAN_MOUNT_MASK, NULL, cfg->store_dir, NULL, 0);

	if (p->privileged) {
		/* every bind but the expanded root is cut here, with root's access to the
		 * sources the invoker named: the child runs as the unprivileged uid */
		for (size_t i = 0; i < p->nm; i++) {
			struct trace_mnt *m = &p->m[i];
			if (m->type != TRACE_MOUNT_BIND || m->expand)
				continue;
			if (m->rw ? make_idmapped_tree(p, m, m->src + strlen(OLDROOT), e) < 0
				  : make_ro_tree(m, m->src + strlen(OLDROOT), e) < 0)
				goto fail;
		}
	}
	/* relay pipes are ours: let the guest's uid reopen them (/dev/stdout) */
	for (int i = 0; p->privileged && i < 2; i++) {
		int fd = i ? cfg->stderr_fd : cfg->stdout_fd;
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
			(void)!fchown(fd, p->host_uid, p->host_gid);
	}
	if (pipe2(p->sync_fd, O_CLOEXEC) < 0 || pipe2(p->err_fd, O_CLOEXEC) < 0 ||
	    (p->err_fd[1] = lift_fd(p->err_fd[1])) < 0) {
		common_errno(e, errno, "pipe");
		goto fail;
	}
	return 0;
fail:
	trace_plan_free(p);
	return -1;
}

void trace_box_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void trace_plan_reap(struct trace_plan *p)
{
	for (size_t i = 0; i < p->nm; i++) {
		if (p->m[i].idmap_helper > 0)
			waitpid(p->m[i].idmap_helper, NULL, __WNOTHREAD);
		p->m[i].idmap_helper = 0;
	}
}

void trace_plan_free(struct trace_plan *p)
{
	trace_plan_reap(p);
	for (size_t i = 0; i < p->nm; i++) {
		free(p->m[i].src);
		free(p->m[i].dst);
		free(p->m[i].at);
		free(p->m[i].opts);
		trace_box_close(&p->m[i].tree_fd);
	}
	free(p->m);
	p->m = NULL;
	p->nm = 0;
	free(p->prog.filter);
	p->prog.filter = NULL;
	free(p->nprog.filter);
	p->nprog.filter = NULL;
	trace_box_close(&p->image_fd);
	trace_box_close(&p->init_pidfd);
	for (int i = 0; i < 2; i++) {
		trace_box_close(&p->sync_fd[i]);
		trace_box_close(&p->err_fd[i]);
	}
}

