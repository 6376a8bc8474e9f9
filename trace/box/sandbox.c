/* The sandbox boundary: the child's set-up from clone() to execveat(), one step
 * after another in kernel order, and the supervisor's spawn and release of it
 * (SPEC §6.1, §6.2); the plan it follows is built in plan.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/box/box-internal.h"
#include "trace/trace.h" /* TRACE_STATE_FD */

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3; newer than the system headers */
#endif

/* Report "WHAT\tWHY" to the supervisor and die: set-up failed, nothing ran. */
__attribute__((noreturn)) static void child_fail(struct trace_plan *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void child_fail(struct trace_plan *p, int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg - 200, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof msg - 200)
		n = sizeof msg - 200;
	const char *why = err ? strerrordesc_np(err) : "refused"; /* strerror may lock (locale) */
	n += snprintf(msg + n, sizeof msg - (size_t)n, "\t%s", why ? why : "unknown error");
	(void)!write(p->err_fd[1], msg, (size_t)n);
	_exit(SBX_EXIT_SBX);
}

/* mkdir -p of at's missing components, creating a file for the last one when is_file */
static int make_path(const char *at, int is_file)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", at);
	for (char *s = buf + strlen(NEWROOT) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (is_file) {
		int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		close(fd);
		return 0;
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int is_prefix(const char *pre, const char *path)
{
	size_t n = strlen(pre);
	if (strcmp(pre, "/") == 0)
		return 1;
	return strncmp(pre, path, n) == 0 && (path[n] == '/' || path[n] == 0);
}

/* A missing mount target is created only inside a tmpfs of this run (or a
 * top-level name the host / lacks), never in a host directory. */
/* The child's mount-point overlays, sealed last: the child's own copy of this
 * memory (no malloc after clone, and nothing on a caller thread's stack). */
static char ovl[TRACE_OVERLAYS_MAX][PATH_MAX];
static size_t novl;

/* A target missing under a read-only directory of the guest's tree: the
 * deepest directory that exists gets an overlay whose upper layer is the
 * set-up tmpfs, so the mount point is made there and never on the host. */
static void overlay_missing(struct trace_plan *p, const struct trace_mnt *m)
{
	char d[PATH_MAX], up[64], opts[2 * PATH_MAX];
	struct stat st;
	char *slash;

	snprintf(d, sizeof d, "%s", m->at);
	do {
		slash = strrchr(d, '/');
		if (!slash || slash <= d + strlen(NEWROOT))
			child_fail(p, ENOENT, "mount target %s: no directory above it", m->dst);
		*slash = 0;
	} while (lstat(d, &st) < 0);
	if (!S_ISDIR(st.st_mode))
		child_fail(p, ENOTDIR, "mount target %s: %s is not a directory", m->dst,
			   d + strlen(NEWROOT));
	for (size_t i = 0; i < novl; i++)
		if (strcmp(ovl[i], d) == 0)
			return; /* made for an earlier target */
	if (novl == TRACE_OVERLAYS_MAX || strpbrk(d, ",:\\"))
		child_fail(p, EINVAL, "mount target %s: cannot add a mount point below %s", m->dst,
			   d + strlen(NEWROOT));
	snprintf(up, sizeof up, "/ovl%zu", novl);
	snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s/u,workdir=%s/w", d, up, up);
	char u[80], w[80];
	snprintf(u, sizeof u, "%s/u", up);
	snprintf(w, sizeof w, "%s/w", up);
	if (mkdir(up, 0700) < 0 || mkdir(u, 0755) < 0 || mkdir(w, 0700) < 0 ||
	    mount("overlay", d, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		child_fail(p, errno, "mount target %s: overlay on %s", m->dst, d + strlen(NEWROOT));
	snprintf(ovl[novl++], PATH_MAX, "%s", d);
}

static void ensure_target(struct trace_plan *p, size_t i)
{
	struct trace_mnt *m = &p->m[i];
	struct stat st;
	if (lstat(m->at, &st) == 0) {
		if (S_ISDIR(st.st_mode) == !m->is_file)
			return;
		child_fail(p, ENOTDIR, "mount target %s: file/directory mismatch", m->dst);
	}
	const struct trace_mnt *c = NULL;
	for (size_t j = 0; j < i; j++)
		if (is_prefix(p->m[j].dst, m->dst) && (!c || strlen(p->m[j].dst) >= strlen(c->dst)))
			c = &p->m[j];
	int ok = 0;
	if (c && (c->type == TRACE_MOUNT_TMPFS || c->type == PLAN_MOUNT_DEV)) {
		ok = 1;
	} else if (c && c->expand && strcmp(c->dst, "/") == 0) {
		char top[PATH_MAX];
		const char *slash = strchr(m->dst + 1, '/');
		size_t n = slash ? (size_t)(slash - m->dst) : strlen(m->dst);
		snprintf(top, sizeof top, NEWROOT "%.*s", (int)n, m->dst);
		ok = !slash || lstat(top, &st) < 0;
	}
	if (!ok)
		overlay_missing(p, m);
	if (make_path(m->at, m->is_file) < 0)
		child_fail(p, errno, "creating mount target %s", m->dst);
}

static void set_attr(struct trace_plan *p, const char *at, unsigned flags, int recursive)
{
	struct mount_attr a = { .attr_set = flags };
	if (syscall(SYS_mount_setattr, AT_FDCWD, at, recursive ? AT_RECURSIVE : 0, &a, sizeof a) < 0)
		child_fail(p, errno, "mount_setattr %s", at);
}

/* One top-level entry of the host directory, bound (or copied, for a symlink)
 * onto the tmpfs root. */
static void expand_entry(struct trace_plan *p, const struct trace_mnt *m, const char *name)
{
	char from[PATH_MAX], to[PATH_MAX], dst[PATH_MAX];
	struct stat st;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return;
	snprintf(dst, sizeof dst, "%s/%s", strcmp(m->dst, "/") == 0 ? "" : m->dst, name);
	for (size_t j = 0; j < p->nm; j++) /* replaced by a mount of the plan: left to it */
		if (p->m[j].type != TRACE_MOUNT_BIND && strcmp(p->m[j].dst, dst) == 0)
			return;
	snprintf(from, sizeof from, "%s/%s", m->src, name);
	snprintf(to, sizeof to, "%s/%s", m->at, name);
	if (lstat(from, &st) < 0)
		return;
	struct statfs sfs;
	/* the host's procfs would show every host process: never bound */
	if (S_ISDIR(st.st_mode) && statfs(from, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC)
		return;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(from, target, sizeof target - 1);
		if (n < 0)
			return;
		target[n] = 0;
		if (symlink(target, to) < 0)
			child_fail(p, errno, "symlink %s", dst);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(to, 0755) < 0)
			child_fail(p, errno, "mkdir %s", dst);
	} else if (S_ISREG(st.st_mode)) {
		int fd = open(to, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			child_fail(p, errno, "creating %s", dst);
		close(fd);
	} else {
		return;
	}
	if (mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
		child_fail(p, errno, "bind %s", dst);
	/* devices come only from the host's /dev */
	set_attr(p, to, (m->rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID |
			(strcmp(dst, "/dev") ? MOUNT_ATTR_NODEV : 0), 1);
}

/* Bind each top-level entry of a host directory onto the tmpfs at "at", so
 * targets like /src can be created although the host / lacks them. getdents64,
 * not opendir: no malloc in a child cloned from a possibly multi-threaded host. */
static void expand_root(struct trace_plan *p, const struct trace_mnt *m)
{
	union { struct dirent64 align; char b[8192]; } buf;
	long n;
	if (mount("tmpfs", m->at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		child_fail(p, errno, "tmpfs root");
	int dfd = open(m->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		child_fail(p, errno, "reading %s", m->src + strlen(OLDROOT));
	while ((n = syscall(SYS_getdents64, dfd, buf.b, sizeof buf.b)) > 0)
		for (long off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf.b + off);
			off += de->d_reclen;
			expand_entry(p, m, de->d_name);
		}
	if (n < 0)
		child_fail(p, errno, "reading %s", m->src + strlen(OLDROOT));
	close(dfd);
}

/* The run's own /dev: a tmpfs with the host's harmless nodes bound in, a devpts
 * instance of its own with at most TRACE_PTY_MAX terminals, the usual links.
 * Nothing else of the host's devices (fuse, tun, kmsg, disks) is there. */
static void make_dev(struct trace_plan *p, const struct trace_mnt *m)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = { { "ptmx", "pts/ptmx" }, { "fd", "/proc/self/fd" },
		{ "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
		{ "stderr", "/proc/self/fd/2" } };
	char at[PATH_MAX], opts[96];

	if (mount("tmpfs", m->at, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		child_fail(p, errno, "tmpfs at /dev");
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		char host[64];
		struct stat st;
		snprintf(host, sizeof host, OLDROOT "/dev/%s", nodes[i]);
		if (stat(host, &st) < 0 || !S_ISCHR(st.st_mode))
			continue; /* the host has none: neither has the run */
		snprintf(at, sizeof at, "%s/%s", m->at, nodes[i]);
		int fd = open(at, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			child_fail(p, errno, "creating /dev/%s", nodes[i]);
		close(fd);
		if (mount(host, at, NULL, MS_BIND, NULL) < 0)
			child_fail(p, errno, "bind /dev/%s", nodes[i]);
	}
	snprintf(at, sizeof at, "%s/pts", m->at);
	snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620,max=%d", TRACE_PTY_MAX);
	if (mkdir(at, 0755) < 0 || mount("devpts", at, "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
		child_fail(p, errno, "devpts at /dev/pts");
	snprintf(at, sizeof at, "%s/shm", m->at);
	if (mkdir(at, 0755) < 0)
		child_fail(p, errno, "creating /dev/shm");
	for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
		snprintf(at, sizeof at, "%s/%s", m->at, links[i][0]);
		if (symlink(links[i][1], at) < 0)
			child_fail(p, errno, "symlink /dev/%s", links[i][0]);
	}
}

static void do_mount(struct trace_plan *p, size_t i)
{
	struct trace_mnt *m = &p->m[i];
	if (m->expand) {
		expand_root(p, m);
		return;
	}
	if (m->type == PLAN_MOUNT_MASK) {
		struct stat st;
		/* hidden already unless the guest's tree shows it */
		if (lstat(m->at, &st) == 0 && S_ISDIR(st.st_mode) &&
		    mount("tmpfs", m->at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "mode=0,size=4k") < 0)
			child_fail(p, errno, "masking %s", m->dst);
		return;
	}
	if (i > 0)
		ensure_target(p, i);
	switch (m->type) {
	case TRACE_MOUNT_TMPFS: {
		/* tmpfs pages are memory: no mount holds more than the run's memory bound */
		char opts[256];
		const char *o = m->opts ? m->opts : "mode=0755";
		if (p->cfg->tmpfs_bytes && !strstr(o, "size="))
			snprintf(opts, sizeof opts, "%s,size=%llu", o, (unsigned long long)p->cfg->tmpfs_bytes);
		else
			snprintf(opts, sizeof opts, "%s", o);
		if (mount("tmpfs", m->at, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			child_fail(p, errno, "tmpfs at %s", m->dst);
		break;
	}
	case PLAN_MOUNT_DEV:
		make_dev(p, m);
		break;
	case PLAN_MOUNT_SYS: {
		const char *what;
		int rc = trace_view_sys("/sysfs", OLDROOT "/sys", m->at, &what);
		if (rc < 0)
			child_fail(p, -rc, "%s", what);
		break;
	}
	case TRACE_MOUNT_PROC:
		/* a fresh /proc shows only this run's PID namespace */
		if (mount("proc", m->at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			child_fail(p, errno, "proc at %s", m->dst);
		break;
	case TRACE_MOUNT_BIND:
		if (m->tree_fd >= 0) {
			/* the supervisor cut this tree (idmapped when rw) in the host namespace */
			if (syscall(SYS_move_mount, m->tree_fd, "", AT_FDCWD, m->at,
				    MOVE_MOUNT_F_EMPTY_PATH) < 0)
				child_fail(p, errno, "attaching bind %s", m->dst);
			close(m->tree_fd);
			m->tree_fd = -1;
		} else {
			if (mount(m->src, m->at, NULL, MS_BIND | MS_REC, NULL) < 0)
				child_fail(p, errno, "bind %s on %s", m->src + strlen(OLDROOT), m->dst);
			/* mount_setattr, unlike a remount, keeps the locked flags of the source */
			set_attr(p, m->at, (m->rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID |
					   MOUNT_ATTR_NODEV, 1);
		}
		break;
	}
}

/* The run's network namespace holds only lo: up, so guest servers and clients
 * meet on 127.0.0.1 and ::1, and nothing else exists to reach. IPv4 multicast
 * is routed to lo (natively the default route takes it), so a group joined
 * without naming an interface works inside the run. */
static void loopback_up(struct trace_plan *p)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		child_fail(p, errno, "loopback interface");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		child_fail(p, errno, "bringing the loopback interface up");
	struct rtentry rt = { .rt_flags = RTF_UP, .rt_dev = ifr.ifr_name };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xe0000000) };
	struct sockaddr_in mask = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xf0000000) };
	memcpy(&rt.rt_dst, &dst, sizeof dst);
	memcpy(&rt.rt_genmask, &mask, sizeof mask);
	if (ioctl(s, SIOCADDRT, &rt) < 0)
		child_fail(p, errno, "routing multicast to the loopback interface");
	close(s);
}

/* The guest's hostname resolves: its own /etc/hosts and /etc/hostname, made in
 * the set-up tmpfs and bound read-only over the host's (never written). */
static void name_host(struct trace_plan *p)
{
	static const struct { const char *at, *text; } files[] = {
		{ NEWROOT "/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tsbx\n"
					"::1\tlocalhost ip6-localhost ip6-loopback\n" },
		{ NEWROOT "/etc/hostname", "sbx\n" },
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char made[32];
		struct stat st;
		if (lstat(files[i].at, &st) < 0 || !S_ISREG(st.st_mode))
			continue; /* a tree without one (a --mount root): left as it is */
		snprintf(made, sizeof made, "/etc-%zu", i);
		int fd = open(made, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		size_t n = strlen(files[i].text);
		if (fd < 0 || write(fd, files[i].text, n) != (ssize_t)n)
			child_fail(p, errno, "writing the guest's %s", files[i].at + strlen(NEWROOT));
		close(fd);
		if (mount(made, files[i].at, NULL, MS_BIND, NULL) < 0)
			child_fail(p, errno, "bind %s", files[i].at + strlen(NEWROOT));
		set_attr(p, files[i].at, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
	}
}

static void drop_caps(struct trace_plan *p)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0)
		child_fail(p, errno, "dropping capabilities");
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

/* Raw syscalls from here to exec: glibc's set*id wrappers in a child of a
 * multi-threaded host signal the host's threads under a lock another host
 * thread may have held at the clone, and wait for ever. */
static int set_guest_ids(void)
{
	if (syscall(SYS_setresgid, TRACE_GUEST_UID, TRACE_GUEST_UID, TRACE_GUEST_UID) < 0 ||
	    syscall(SYS_setresuid, TRACE_GUEST_UID, TRACE_GUEST_UID, TRACE_GUEST_UID) < 0)
		return -1;
	return 0;
}

static void become_guest_user(struct trace_plan *p)
{
	/* the bounding set goes while we still hold CAP_SETPCAP */
	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (set_guest_ids() < 0)
		child_fail(p, errno, "switching to uid %d", TRACE_GUEST_UID);
	/* root-invoked: the host uid was not root inside, so setuid kept the caps */
	drop_caps(p);
}

/* Landlock, where the kernel has it: a second wall behind the read-only mounts,
 * so writes happen only beneath the run's writable mounts (and to devices and
 * /proc files, which the mounts already confine). Without it, the mounts alone. */
static void apply_landlock(struct trace_plan *p)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return;
	uint64_t w = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
		     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
		     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
		     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
		     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
	uint64_t dev = LANDLOCK_ACCESS_FS_WRITE_FILE;
	if (abi >= 2)
		w |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3) {
		w |= LANDLOCK_ACCESS_FS_TRUNCATE;
		dev |= LANDLOCK_ACCESS_FS_TRUNCATE;
	}
	struct landlock_ruleset_attr ra = { .handled_access_fs = w };
	int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
	if (rs < 0)
		child_fail(p, errno, "landlock ruleset");
	for (size_t i = 0; i <= p->nm + 1; i++) {
		const char *path;
		uint64_t allow = w;
		if (i < p->nm) {
			if (!p->m[i].rw || p->m[i].type == TRACE_MOUNT_PROC)
				continue;
			path = p->m[i].dst;
			if (p->m[i].is_file)
				allow = dev; /* a file takes only a file's rights: write, truncate */
		} else {
			path = i == p->nm ? "/dev" : "/proc";
			allow = dev;
		}
		int fd = open(path, O_PATH | O_CLOEXEC);
		if (fd < 0)
			continue; /* not in this run's tree */
		struct landlock_path_beneath_attr pb = { .allowed_access = allow, .parent_fd = fd };
		if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			child_fail(p, errno, "landlock rule for %s", path);
		close(fd);
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		child_fail(p, errno, "landlock");
	close(rs);
}

/* The guest's last steps: fds, limits, credentials, no_new_privs, seccomp, exec. */
__attribute__((noreturn)) static void guest_exec(struct trace_plan *p)
{
	const struct trace_config *cfg = p->cfg;
	/* dispositions as sbx-run found them (SIG_IGN survives exec, as without sbx) */
	for (int s = 1; s < NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		signal(s, sigismember(&p->ignored, s) == 1 ? SIG_IGN : SIG_DFL);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	if ((cfg->stdout_fd >= 0 && dup2(cfg->stdout_fd, 1) < 0) ||
	    (cfg->stderr_fd >= 0 && dup2(cfg->stderr_fd, 2) < 0))
		child_fail(p, errno, "output relay");
	int keep = 3;
	if (cfg->state_fd >= 0) {
		/* through a high number first: dup2(fd, fd) would keep FD_CLOEXEC */
		int hi = fcntl(cfg->state_fd, F_DUPFD_CLOEXEC, 100);
		if (hi < 0 || dup2(hi, TRACE_STATE_FD) < 0)
			child_fail(p, errno, "state fd");
		close(hi);
		keep = TRACE_STATE_FD + 1;
	}
	/* nothing of sbx's crosses exec: the image fd closes itself after use */
	if (syscall(SYS_close_range, keep, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(p, errno, "close_range");
	/* one image fd number in every run: the exec file name (/dev/fd/N) is copied
	 * onto the new stack, so its length moves every guest stack address (SPEC §9);
	 * below a soft RLIMIT_NOFILE under 100, the highest number it allows */
	struct rlimit nofile;
	int top = 99;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 100)
		top = (int)nofile.rlim_cur - 1;
	if (top < 5)
		child_fail(p, EMFILE, "image fd: RLIMIT_NOFILE %d leaves no room", top + 1);
	int img = p->err_fd[1] == top ? top - 1 : top;
	if (p->image_fd != img) {
		if (dup3(p->image_fd, img, O_CLOEXEC) < 0)
			child_fail(p, errno, "image fd");
		p->image_fd = img;
	}

	struct rlimit rl;
	rl.rlim_cur = rl.rlim_max = cfg->rlimit_nproc ? cfg->rlimit_nproc : TRACE_NPROC_DEFAULT;
	if (setrlimit(RLIMIT_NPROC, &rl) < 0)
		child_fail(p, errno, "RLIMIT_NPROC");
	if (cfg->rlimit_as) {
		rl.rlim_cur = rl.rlim_max = cfg->rlimit_as;
		if (setrlimit(RLIMIT_AS, &rl) < 0)
			child_fail(p, errno, "RLIMIT_AS");
	}
	become_guest_user(p);
	/* set after the uid change, which clears it; init's death kills us */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (cfg->no_aslr && personality(ADDR_NO_RANDOMIZE) < 0)
		child_fail(p, errno, "personality");
	/* kept across exec and fork: every guest rdtsc faults into the supervisor */
	if (cfg->tsc_sigsegv && prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) < 0)
		child_fail(p, errno, "prctl PR_SET_TSC");
	apply_landlock(p);
	/* after landlock, whose ruleset and rule descriptors a small table bound
	 * would otherwise refuse (EMFILE): the bound is the guest's, not ours */
	if (cfg->rlimit_nofile) {
		rl.rlim_cur = rl.rlim_max = cfg->rlimit_nofile;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			child_fail(p, errno, "RLIMIT_NOFILE %llu", (unsigned long long)cfg->rlimit_nofile);
	}
	/* the listener's program first (the boundary's refuses a new listener); its
	 * descriptor is close-on-exec: the supervisor takes it at the exec's stop */
	if (p->nprog.len && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				    SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->nprog) < 0)
		child_fail(p, errno, "seccomp listener (kernel user notification unavailable?)");
	/* seccomp last: every later syscall, the exec first, meets the filter */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog) < 0)
		child_fail(p, errno, "seccomp filter (kernel seccomp-bpf unavailable?)");
	syscall(SYS_execveat, p->image_fd, "", p->argv, p->envp, AT_EMPTY_PATH);
	int err = errno;
	char msg[32];
	int n = snprintf(msg, sizeof msg, "exec\t%d", err);
	(void)!write(p->err_fd[1], msg, (size_t)n);
	_exit(err == ENOENT ? SBX_EXIT_NOTFOUND : SBX_EXIT_NOEXEC);
}

/* pid 1 of the run: reaps everything, exits when the guest's main process does
 * (which kills whatever the guest left behind: the PID namespace dies with it). */
__attribute__((noreturn)) static void init_loop(pid_t guest)
{
	for (;;) {
		int st;
		pid_t w = waitpid(-1, &st, 0);
		if (w < 0 && errno != EINTR)
			_exit(SBX_EXIT_SBX);
		if (w == guest)
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
}

/* One seccomp program on the sync pipe: its length, then its instructions; a
 * length of 0 is none (empty allowed); EOF means the supervisor gave up. */
static void read_prog(struct trace_plan *p, struct sock_fprog *prog, int empty)
{
	uint16_t n;
	size_t want = sizeof n, got = 0;
	char *dst = (char *)&n;
	for (int part = 0; part < 2; part++) {
		while (got < want) {
			ssize_t r = read(p->sync_fd[0], dst + got, want - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				_exit(SBX_EXIT_SBX);
			got += (size_t)r;
		}
		if (part == 0 && ((n == 0 && !empty) || n > BPF_MAXINSNS))
			child_fail(p, EINVAL, "seccomp program length %u", (unsigned)n);
		want = (size_t)n * sizeof(struct sock_filter);
		got = 0;
		dst = (char *)prog->filter;
	}
	prog->len = n;
}

/* The programs the supervisor built meanwhile: the boundary's, then the listener's. */
static void read_filter(struct trace_plan *p)
{
	read_prog(p, &p->prog, 0);
	read_prog(p, &p->nprog, 1);
	close(p->sync_fd[0]);
	p->sync_fd[0] = -1;
}

/* The child, pid 1 in fresh user/mount/PID/net/IPC/UTS namespaces. */
__attribute__((noreturn)) static void sandbox_child(struct trace_plan *p)
{
	char c;
	/* the supervisor's death must take us with it, even before ptrace holds us */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* our own session and process group, for us and every guest task: kill(0)
	 * and the host's job control (a stop of sbx-run's group) stay on their side */
	if (setsid() < 0)
		child_fail(p, errno, "setsid");
	/* no exec from here on can add privilege (setuid bits, file capabilities) */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(p, errno, "no_new_privs");
	close(p->sync_fd[1]);
	close(p->err_fd[0]);
	/* wait until the supervisor has seized us and written our uid/gid maps */
	if (read(p->sync_fd[0], &c, 1) != 1)
		_exit(SBX_EXIT_SBX);
	/* root-invoked: drop root's supplementary groups (the maps allow it) */
	if (p->privileged && syscall(SYS_setgroups, 0, NULL) < 0)
		child_fail(p, errno, "setgroups");
	/* become the mapped uid/gid now, so files we create have an owner inside;
	 * host root is not root in this namespace, so the capabilities stay */
	if (set_guest_ids() < 0)
		child_fail(p, errno, "switching to uid %d", TRACE_GUEST_UID);
	/* the run's share of the invoker's per-user allowances, set while we hold
	 * CAP_SYS_RESOURCE in its user namespace; every guest task inherits it */
	const char *what;
	int rc = trace_view_bound_userns(&p->allow, &what);
	if (rc < 0 || (rc = trace_view_bound_rlimits(&p->allow, &what)) < 0)
		child_fail(p, -rc, "bounding %s", what);
	/* nothing we mount may propagate back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(p, errno, "making / private");
	/* a scratch tmpfs becomes the root while the guest's tree is built below it */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0)
		child_fail(p, errno, "scratch tmpfs");
	if (chdir("/tmp") < 0 || mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0)
		child_fail(p, errno, "scratch directories");
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		child_fail(p, errno, "pivot_root to the scratch tmpfs");
	if (chdir("/") < 0)
		child_fail(p, errno, "chdir /");
	/* the run's mount list, in order, each target read-only unless declared rw */
	for (size_t i = 0; i < p->nm; i++)
		do_mount(p, i);
	name_host(p);
	/* the root itself read-only, now that every mount point exists */
	if (p->m[0].type != TRACE_MOUNT_BIND || p->m[0].expand)
		set_attr(p, NEWROOT, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0);
	for (size_t i = 0; i < p->nm; i++)
		if (p->m[i].type == PLAN_MOUNT_DEV || p->m[i].sealed)
			set_attr(p, p->m[i].at, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0);
	for (size_t i = 0; i < novl; i++)
		set_attr(p, ovl[i], MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
	/* into the guest's tree; the old root (the host) is detached, cwd included */
	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(p, errno, "pivot_root to the guest tree");
	if (umount2(".", MNT_DETACH) < 0)
		child_fail(p, errno, "detaching the host root");
	const char *wd = p->cfg->cwd ? p->cfg->cwd : "/ns";
	if (chdir("/") < 0 || chdir(wd) < 0)
		child_fail(p, errno, "chdir %s", wd);
	if (sethostname("sbx", 3) < 0)
		child_fail(p, errno, "sethostname");
	loopback_up(p);
	read_filter(p);

	/* raw: glibc's fork() takes locks the host's other threads may have held */
	pid_t g = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (g < 0)
		child_fail(p, errno, "fork");
	if (g == 0)
		guest_exec(p);
	/* init keeps nothing the guest could use: no fds, no caps, not dumpable */
	close(p->err_fd[1]);
	if (p->cfg->state_fd >= 0)
		close(p->cfg->state_fd);
	syscall(SYS_close_range, 3, ~0U, 0);
	for (int c2 = 0; c2 <= 63; c2++)
		if (prctl(PR_CAPBSET_DROP, c2, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (set_guest_ids() == 0) {
		struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
		struct __user_cap_data_struct d[2];
		memset(d, 0, sizeof d);
		syscall(SYS_capset, &h, d);
	}
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	init_loop(g);
}

pid_t trace_sandbox_spawn(struct trace_plan *p, struct common_err *e)
{
	/* remember what sbx-run's caller ignored, for the guest (in the plan: two
	 * threads may spawn at once) */
	sigemptyset(&p->ignored);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sigaddset(&p->ignored, s);
	}
	long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
		     CLONE_NEWUTS | CLONE_NEWCGROUP;
	/* init's pidfd: a signal through it cannot reach a host process that reused the pid */
	int pidfd = -1;
	flags |= CLONE_PIDFD | SIGCHLD;
	/* root: the namespace is the guest's uid's, or root's where the host refuses
	 * users a namespace (then only the run's share bounds what it takes) */
	pid_t pid = p->privileged ? trace_view_clone(p->host_uid, flags, &pidfd) : -1;
	if (!p->privileged || (pid < 0 && (errno == EPERM || errno == EACCES || errno == ENOSPC)))
		pid = (pid_t)syscall(SYS_clone, flags, NULL, &pidfd, NULL, 0);
	if (pid < 0)
		return common_errno(e, errno, "creating the sandbox namespaces (user namespaces "
				    "disabled? see /proc/sys/user/max_user_namespaces)");
	if (pid == 0)
		sandbox_child(p);
	p->init_pidfd = pidfd;
	trace_box_close(&p->sync_fd[0]);
	trace_box_close(&p->err_fd[1]);
	for (size_t i = 0; i < p->nm; i++)
		trace_box_close(&p->m[i].tree_fd);
	return pid;
}

void trace_sandbox_kill(struct trace_plan *p)
{
	if (p->init_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, p->init_pidfd, SIGKILL, NULL, 0);
}

int trace_sandbox_release(struct trace_plan *p, pid_t child, struct common_err *e)
{
	char path[64], map[64];
	if (!p->privileged) {
		/* an unprivileged map of one's own gid needs setgroups denied */
		snprintf(path, sizeof path, "/proc/%d/setgroups", (int)child);
		if (trace_box_write(path, "deny", e) < 0)
			return -1;
	}
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)child);
	snprintf(map, sizeof map, "%d %u 1\n", TRACE_GUEST_UID, (unsigned)p->host_uid);
	if (trace_box_write(path, map, e) < 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)child);
	snprintf(map, sizeof map, "%d %u 1\n", TRACE_GUEST_UID, (unsigned)p->host_gid);
	if (trace_box_write(path, map, e) < 0)
		return -1;
	if (write(p->sync_fd[1], "g", 1) != 1)
		return common_errno(e, errno, "starting the sandbox");
	/* while init builds the guest's tree (a cgroup move waits out an RCU grace
	 * period, milliseconds): init forks the guest only once it has read the
	 * programs below, so every guest task is born inside */
	if (p->cfg->cgroup && trace_cgroup_enter(p->cfg->cgroup, child, e) < 0)
		return -1;
	/* built (or found) now, while the child mounts; a pipe holds the largest program */
	int rc = 0;
	for (int k = 0; k < 2 && rc == 0; k++) {
		struct sock_fprog prog = { 0 };
		if (k == 0 || p->cfg->notify_files)
			rc = trace_filter_get(p->cfg->filter_cache, k ? TRACE_FILTER_NOTIFY_PROG
						    : p->cfg->trace_classes, &prog, e);
		if (rc < 0)
			break;
		uint16_t n = prog.len;
		rc = common_write_quiet(p->sync_fd[1], &n, sizeof n);
		if (rc == 0 && n)
			rc = common_write_quiet(p->sync_fd[1], prog.filter, n * sizeof(struct sock_filter));
		free(prog.filter);
		if (rc == -EPIPE) { /* init failed its set-up: its error pipe says why */
			rc = 0;
			break;
		}
		if (rc < 0)
			rc = common_errno(e, -rc, "passing the seccomp program to the sandbox");
	}
	trace_box_close(&p->sync_fd[1]);
	trace_plan_reap(p);
	return rc;
}
