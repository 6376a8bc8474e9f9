/* The guest's default view of the host beyond the read-only tree: which homes
 * are masked (every home passwd names, the invoker's $HOME and XDG
 * directories), the run's own /sys, and the per-user kernel allowances a run
 * may take from its invoker. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>
#include "trace/box/box-internal.h"

/* Trees the view needs whole (programs, libraries, configuration, the run's own
 * mounts): a home inside one, or above one, is never masked. */
static const char *const system_trees[] = {
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/ns", "/proc",
	"/run", "/sbin", "/sys", "/tmp", "/usr", "/var/lib/dpkg", "/var/tmp",
};

/* a is b or lies beneath it */
static int within(const char *a, const char *b)
{
	size_t n = strlen(b);
	return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/');
}

int trace_view_maskable(const char *real)
{
	if (!real || real[0] != '/' || strcmp(real, "/") == 0)
		return 0;
	for (size_t i = 0; i < sizeof system_trees / sizeof system_trees[0]; i++)
		if (within(real, system_trees[i]) || within(system_trees[i], real))
			return 0;
	return 1;
}

static void add_home(char ***v, size_t *n, const char *path)
{
	char real[PATH_MAX];
	struct stat st;
	if (!path || path[0] != '/' || !realpath(path, real) || stat(real, &st) < 0 ||
	    !S_ISDIR(st.st_mode) || !trace_view_maskable(real))
		return; /* none here, or a system directory the view needs */
	*v = common_xrealloc(*v, (*n + 2) * sizeof **v);
	(*v)[(*n)++] = common_xstrdup(real);
	(*v)[*n] = NULL;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* a mount of the run's list replaces what lies at dst */
static int replaced(const struct trace_config *cfg, const char *dst)
{
	for (size_t i = 0; i < cfg->nmounts; i++)
		if (strcmp(cfg->mounts[i].dst, dst) == 0)
			return 1;
	return 0;
}

char **trace_view_homes(const struct trace_config *cfg)
{
	static const char *const env[] = { "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
					   "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR" };
	char **v = common_xmalloc(sizeof *v);
	char buf[4096];
	size_t n = 0;
	struct passwd pw, *r;
	v[0] = NULL;
	add_home(&v, &n, "/home");
	add_home(&v, &n, "/root");
	for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
		add_home(&v, &n, getenv(env[i]));
	/* the passwd entry may name another home than $HOME (sudo, a service's env) */
	if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &r) == 0 && r)
		add_home(&v, &n, r->pw_dir);
	/* the file, not NSS: a directory service may enumerate without end */
	FILE *f = fopen("/etc/passwd", "re");
	while (f && (r = fgetpwent(f)))
		add_home(&v, &n, r->pw_dir);
	if (f)
		fclose(f);
	/* sorted, a directory comes before what lies in it: keep only the outermost */
	qsort(v, n, sizeof *v, by_path);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int inside = replaced(cfg, v[i]);
		for (size_t j = 0; j < k && !inside; j++)
			inside = within(v[i], v[j]);
		if (inside)
			free(v[i]);
		else
			v[k++] = v[i];
	}
	v[k] = NULL;
	return v;
}

void trace_view_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The parts of a sysfs a build reads: CPUs and NUMA nodes (nproc, os.cpu_count,
 * lscpu, hwloc), huge page settings (jemalloc, Go, the JVM) and the network
 * directories, which a sysfs mounted in the run's network namespace fills with
 * lo alone. DMI ids, firmware tables, PCI and block devices with their serial
 * numbers, other devices' hardware addresses and the cgroup tree stay out. */
static const struct { const char *path; int net; } sys_kept[] = {
	{ "devices/system/cpu", 0 }, { "devices/system/node", 0 },
	{ "kernel/mm/transparent_hugepage", 0 }, { "devices/virtual/net", 1 }, { "class/net", 1 },
};

/* mkdir -p, without malloc (the child of a possibly multi-threaded host) */
static int make_dirs(char *path, size_t from)
{
	for (char *s = path + from; (s = strchr(s + 1, '/'));) {
		*s = 0;
		int rc = mkdir(path, 0755);
		*s = '/';
		if (rc < 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int trace_view_sys(const char *scratch, const char *host_sys, const char *at, const char **what)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct stat st;
	const char *src = scratch;
	*what = "sysfs of the run's network namespace";
	if (mkdir(scratch, 0700) < 0)
		return -errno;
	if (mount("sysfs", scratch, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		if (errno != EPERM)
			return -errno;
		/* a host /sys partly covered (a container's) makes the kernel refuse a
		 * new one: the host's then, without its network directories */
		src = host_sys;
	}
	*what = "tmpfs at /sys";
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return -errno;
	for (size_t i = 0; i < sizeof sys_kept / sizeof sys_kept[0]; i++) {
		snprintf(from, sizeof from, "%s/%s", src, sys_kept[i].path);
		if ((sys_kept[i].net && src != scratch) || stat(from, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* the host's interfaces, or a part this kernel lacks */
		snprintf(to, sizeof to, "%s/%s", at, sys_kept[i].path);
		*what = sys_kept[i].path;
		struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
		if (make_dirs(to, strlen(at)) < 0 || mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    syscall(SYS_mount_setattr, AT_FDCWD, to, AT_RECURSIVE, &a, sizeof a) < 0)
			return -errno;
	}
	return 0;
}

/* The per-user-namespace counters (max_* of /proc/sys/user): the kernel
 * charges a guest's inotify instances, watches, namespaces and fanotify
 * groups to each ancestor namespace's owner too, the invoker among them; a
 * bound in the run's own namespace caps what the run takes of the invoker's. */
static const char *const user_max[TRACE_VIEW_COUNTERS] = {
	"max_inotify_instances", "max_inotify_watches", "max_user_namespaces",
	"max_fanotify_groups", "max_fanotify_marks", "max_cgroup_namespaces",
	"max_ipc_namespaces", "max_mnt_namespaces", "max_net_namespaces",
	"max_pid_namespaces", "max_time_namespaces", "max_uts_namespaces",
};

void trace_view_allowances(struct trace_view_allow *a)
{
	memset(a, 0, sizeof *a);
	for (size_t i = 0; i < TRACE_VIEW_COUNTERS; i++) {
		char path[96], buf[32];
		snprintf(path, sizeof path, "/proc/sys/user/%s", user_max[i]);
		FILE *f = fopen(path, "re");
		long long v = -1;
		if (f && fgets(buf, sizeof buf, f))
			v = strtoll(buf, NULL, 10);
		if (f)
			fclose(f);
		/* a counter this kernel lacks, or none the invoker has: nothing to share */
		a->user_max[i] = v > 0 ? v / TRACE_VIEW_SHARE : -1;
	}
	struct rlimit rl;
	int res[2] = { RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE };
	for (int i = 0; i < 2; i++)
		a->rlimit[i] = getrlimit(res[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			? (long long)(rl.rlim_cur / TRACE_VIEW_SHARE) : -1;
}

int trace_view_bound_userns(const struct trace_view_allow *a, const char **what)
{
	for (size_t i = 0; i < TRACE_VIEW_COUNTERS; i++) {
		char path[96], num[24];
		if (a->user_max[i] < 0)
			continue;
		snprintf(path, sizeof path, "/proc/sys/user/%s", user_max[i]);
		int len = snprintf(num, sizeof num, "%lld", a->user_max[i]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		*what = user_max[i];
		if (fd < 0 && errno == ENOENT)
			continue; /* a counter this kernel lacks */
		if (fd < 0)
			return -errno;
		ssize_t w = write(fd, num, (size_t)len);
		int err = errno;
		close(fd);
		if (w != len)
			return w < 0 ? -err : -EIO;
	}
	return 0;
}

int trace_view_bound_rlimits(const struct trace_view_allow *a, const char **what)
{
	static const char *const names[2] = { "RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE" };
	int res[2] = { RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE };
	for (int i = 0; i < 2; i++) {
		struct rlimit rl = { (rlim_t)a->rlimit[i], (rlim_t)a->rlimit[i] };
		*what = names[i];
		if (a->rlimit[i] >= 0 && setrlimit(res[i], &rl) < 0)
			return -errno;
	}
	return 0;
}

uid_t trace_view_guest_id(void)
{
	/* pids are unique among live processes: no two sbx processes share one */
	return (uid_t)(TRACE_HOST_ID_BASE + (unsigned)getpid());
}

/* Only this thread's euid moves (a raw syscall, not glibc's process-wide
 * setresuid); the euid change clears the process's dumpable flag, put back. */
pid_t trace_view_clone(uid_t owner, long flags, int *pidfd)
{
	int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	if (syscall(SYS_setresuid, -1, owner, -1) < 0)
		return -1;
	pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, pidfd, NULL, 0);
	if (pid == 0)
		return 0; /* the child: its namespace is made, its ids are the map's */
	int err = errno;
	if (syscall(SYS_setresuid, -1, 0, -1) < 0)
		abort(); /* never left running as the guest's uid */
	if (dumpable >= 0)
		prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
	errno = err;
	return pid;
}
