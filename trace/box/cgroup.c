/* The run's memory cgroup (SPEC §4.1 "kernel-enforced limits wherever they exist"):
 * a child of sbx-run's own cgroup whose limit is the memory bound, so the kernel
 * refuses the page that would cross it (reclaiming cache first, then OOM) instead
 * of a sample finding the excess later. cgroup v2 needs the memory controller
 * already delegated to sbx-run's cgroup; v1 needs a writable memory hierarchy.
 * Where neither is, the run has no cgroup and the meter's samples alone hold memory.
 * The cgroup also sees what no process maps (memfd, SysV shm, tmpfs) and the pages
 * of threads whose group leader has exited: its anon + shmem counts as held.
 * Where the cgroup counts the tree's CPU time (v2: always, cpu.stat; v1: a writable
 * cpuacct hierarchy), the fuel bound is held by a fuse on that count (fuse.c), armed
 * at each full sample with what the sample left. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/box/box-internal.h"

struct trace_cgroup {
	char dir[PATH_MAX];
	char acct_dir[PATH_MAX]; /* v1: the cpuacct hierarchy's cgroup (may be dir); else "" */
	int v2;
	uint64_t bound;
	struct trace_fuse *fuse; /* NULL: the tree's CPU is not counted here */
};

/* Whether list (words separated by any of seps) holds word as a whole word: a
 * named hierarchy "name=memoryx" or an option "memory_recursiveprot" is not it. */
static int has_word(const char *list, const char *seps, const char *word)
{
	size_t wl = strlen(word);
	for (const char *w = list; *w; w += strcspn(w, seps), w += strspn(w, seps))
		if (strcspn(w, seps) == wl && strncmp(w, word, wl) == 0)
			return 1;
	return 0;
}

/* The directory of sbx-run's own cgroup in the v2 hierarchy (ctl NULL) or in the
 * v1 hierarchy of controller ctl. */
static int own_dir(const char *ctl, char *out, size_t cap)
{
	char line[PATH_MAX + 256], rel[PATH_MAX] = "", root[PATH_MAX], mnt[PATH_MAX], type[32];
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		int match = !ctl ? strcmp(line, "0") == 0 && c1[1] == 0
				 : has_word(c1 + 1, ",", ctl);
		if (match) {
			snprintf(rel, sizeof rel, "%s", c2 + 1);
			rel[strcspn(rel, "\n")] = 0;
			break;
		}
	}
	fclose(f);
	if (!rel[0] || !(f = fopen("/proc/self/mountinfo", "re")))
		return -1;
	int found = -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		const char *dash = strstr(line, " - ");
		char opts[256] = "";
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
		    sscanf(dash, " - %31s %*s %255s", type, opts) < 1)
			continue;
		if (!ctl ? strcmp(type, "cgroup2") : strcmp(type, "cgroup") || !has_word(opts, ",", ctl))
			continue;
		size_t rl = strcmp(root, "/") ? strlen(root) : 0;
		if (strncmp(rel, root, rl) || (rel[rl] && rel[rl] != '/'))
			continue; /* this mount does not show our cgroup */
		if ((size_t)snprintf(out, cap, "%s%s", mnt, rel + rl) < cap)
			found = 0;
	}
	fclose(f);
	return found;
}

static int put_in(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static int put(const struct trace_cgroup *cg, const char *file, const char *val)
{
	return put_in(cg->dir, file, val);
}

/* The value after "key " in a flat-keyed file, or -1. */
static long long keyed(const struct trace_cgroup *cg, const char *file, const char *key)
{
	char path[PATH_MAX + 64], line[256];
	long long v = -1;
	snprintf(path, sizeof path, "%s/%s", cg->dir, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t kl = strlen(key);
	while (v < 0 && fgets(line, sizeof line, f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			v = strtoll(line + kl + 1, NULL, 10);
	fclose(f);
	return v;
}

/* Cgroups left by an sbx-run that was killed: those whose sbx-run is gone (its
 * pid is in the name); a live one's, empty before its sandbox enters, stays. */
static void sweep(const char *parent)
{
	char path[PATH_MAX + 300];
	struct dirent *de;
	DIR *d = opendir(parent);
	if (!d)
		return;
	while ((de = readdir(d))) {
		int pid;
		if (sscanf(de->d_name, "sbx-run.%d.", &pid) != 1 || pid <= 0 ||
		    kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof path, "%s/%s", parent, de->d_name);
		(void)rmdir(path); /* a busy one refuses */
	}
	closedir(d);
}

static int lists(const char *path, const char *ctl)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return has_word(buf, " \n", ctl);
}

static int limit(const struct trace_cgroup *cg, uint64_t bound)
{
	char v[32];
	snprintf(v, sizeof v, "%llu", (unsigned long long)bound);
	if (cg->v2) {
		if (put(cg, "memory.max", v) < 0)
			return -1;
		/* no swap to hide pages in; one OOM ends the whole tree */
		if (put(cg, "memory.swap.max", "0") < 0 && errno != ENOENT)
			return -1;
		return put(cg, "memory.oom.group", "1");
	}
	if (put(cg, "memory.limit_in_bytes", v) < 0)
		return -1;
	/* present only with swap accounting: then swapped pages are held too */
	if (put(cg, "memory.memsw.limit_in_bytes", v) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

/* A child of sbx-run's own cgroup, not yet limited; why not in why. */
static int make(struct trace_cgroup *cg, int v2, char *why, size_t cap)
{
	char own[PATH_MAX], ctl[PATH_MAX + 32];
	static unsigned seq;
	if (own_dir(v2 ? NULL : "memory", own, sizeof own) < 0) {
		snprintf(why, cap, "no %s mount shows sbx-run's cgroup", v2 ? "cgroup2" : "cgroup v1 memory");
		return -1;
	}
	/* v2: a child gets memory.max only if the controller is delegated to us */
	snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", own);
	if (v2 && !lists(ctl, "memory")) {
		snprintf(why, cap, "the memory controller is not delegated to %.200s", own);
		return -1;
	}
	sweep(own);
	cg->v2 = v2;
	if ((size_t)snprintf(cg->dir, sizeof cg->dir, "%s/sbx-run.%d.%u", own, (int)getpid(),
			     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= sizeof cg->dir) {
		snprintf(why, cap, "%.200s: path too long", own);
		return -1;
	}
	if (mkdir(cg->dir, 0755) < 0) {
		snprintf(why, cap, "mkdir %.200s: %s", cg->dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* The count's file, (re)opened: the cgroup's cpu.stat (v2), or cpuacct.usage in the
 * cpuacct hierarchy's (v1). */
static int count_open(const struct trace_cgroup *cg)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof path, "%s/%s", cg->v2 ? cg->dir : cg->acct_dir,
		 cg->v2 ? "cpu.stat" : "cpuacct.usage");
	if (cg->fuse->count_fd >= 0)
		close(cg->fuse->count_fd);
	cg->fuse->count_fd = open(path, O_RDONLY | O_CLOEXEC);
	return cg->fuse->count_fd < 0 ? -1 : 0;
}

/* The v1 cpuacct cgroup (made unless it is the memory one) and its count. */
static int acct_v1_make(const struct trace_cgroup *cg)
{
	if (strcmp(cg->acct_dir, cg->dir) != 0 && mkdir(cg->acct_dir, 0755) < 0 && errno != EEXIST)
		return -1;
	return count_open(cg);
}

/* The tree's CPU count beside the memory cgroup, where it can be had; none is no
 * error (fuel is then held by the inspector's samples alone). */
static void count_make(struct trace_cgroup *cg)
{
	char own[PATH_MAX];
	const char *name = strrchr(cg->dir, '/') + 1;

	cg->fuse = common_xcalloc(1, sizeof *cg->fuse);
	cg->fuse->count_fd = cg->fuse->init_fd = -1;
	cg->fuse->v2 = cg->v2;
	int mapped = trace_fuse_open(cg->fuse) == 0; /* no count without a fuse to hold it */
	if (mapped && cg->v2) { /* the core's cpu.stat: no controller needed */
		(void)count_open(cg);
	} else if (mapped && own_dir("cpuacct", own, sizeof own) == 0 &&
		   (size_t)snprintf(cg->acct_dir, sizeof cg->acct_dir, "%s/%s", own, name) < sizeof cg->acct_dir) {
		if (strcmp(cg->acct_dir, cg->dir) != 0) /* not one hierarchy with memory */
			sweep(own);
		if (acct_v1_make(cg) < 0 && strcmp(cg->acct_dir, cg->dir) != 0)
			(void)rmdir(cg->acct_dir);
	}
	if (cg->fuse->count_fd >= 0)
		return;
	cg->acct_dir[0] = 0;
	trace_fuse_close(cg->fuse);
	free(cg->fuse);
	cg->fuse = NULL;
}

struct trace_cgroup *trace_cgroup_open(struct common_err *e)
{
	char why2[320], why1[320];
	struct trace_cgroup *cg = common_xcalloc(1, sizeof *cg);
	if (make(cg, 1, why2, sizeof why2) == 0 || make(cg, 0, why1, sizeof why1) == 0) {
		count_make(cg);
		return cg;
	}
	free(cg);
	common_errf(e, "memory", "no memory cgroup can be made for the run (cgroup v2: %s; "
		    "v1: %s), so its bound can only be sampled; for a cgroup run as root, or in "
		    "a cgroup v2 with the memory controller delegated (systemd-run --user --scope "
		    "-p Delegate=yes ...)", why2, why1);
	return NULL;
}

int trace_cgroup_limit(struct trace_cgroup *cg, uint64_t bound, struct common_err *e)
{
	cg->bound = bound;
	if (limit(cg, bound) < 0)
		return common_errno(e, errno, "memory cgroup %s: setting the bound", cg->dir);
	return 0;
}

int trace_cgroup_enter(const struct trace_cgroup *cg, pid_t pid, struct common_err *e)
{
	char v[32];
	snprintf(v, sizeof v, "%d", (int)pid);
	int rc = put(cg, "cgroup.procs", v);
	/* swept as stale by an sbx-run of another PID namespace: made again, once */
	if (rc < 0 && errno == ENOENT && mkdir(cg->dir, 0755) == 0 && limit(cg, cg->bound) == 0) {
		rc = put(cg, "cgroup.procs", v);
		if (cg->v2 && cg->fuse)
			(void)count_open(cg); /* the new cgroup's count; none: samples hold fuel */
	}
	if (rc < 0)
		return common_errno(e, errno, "memory cgroup %s: moving the sandbox in", cg->dir);
	if (cg->acct_dir[0] && strcmp(cg->acct_dir, cg->dir) != 0) {
		rc = put_in(cg->acct_dir, "cgroup.procs", v);
		if (rc < 0 && errno == ENOENT && acct_v1_make(cg) == 0) /* swept, as above */
			rc = put_in(cg->acct_dir, "cgroup.procs", v);
		if (rc < 0)
			return common_errno(e, errno, "cpuacct cgroup %s: moving the sandbox in", cg->acct_dir);
	}
	char procs[PATH_MAX + 32];
	snprintf(procs, sizeof procs, "%s/cgroup.procs", cg->dir);
	/* no fuse (no process can be made): the samples alone hold fuel */
	if (cg->fuse && trace_fuse_start(cg->fuse, procs, pid) < 0) {
		close(cg->fuse->count_fd);
		cg->fuse->count_fd = -1;
	}
	return 0;
}

int trace_cgroup_holds_fuel(const struct trace_cgroup *cg)
{
	return cg && cg->fuse && cg->fuse->count_fd >= 0;
}

int trace_cgroup_fuel(const struct trace_cgroup *cg, uint64_t us)
{
	if (!trace_cgroup_holds_fuel(cg))
		return -EOPNOTSUPP;
	int64_t now = trace_fuse_count_us(cg->fuse);
	if (now < 0)
		return -EIO;
	trace_fuse_arm(cg->fuse, (uint64_t)now + us);
	return 0;
}

void trace_cgroup_read(const struct trace_cgroup *cg, struct trace_cgroup_mem *m)
{
	long long anon, shm, oom;
	if (cg->v2) {
		anon = keyed(cg, "memory.stat", "anon");
		shm = keyed(cg, "memory.stat", "shmem");
		oom = keyed(cg, "memory.events", "oom");
	} else {
		anon = keyed(cg, "memory.stat", "total_rss");
		shm = keyed(cg, "memory.stat", "total_shmem");
		oom = keyed(cg, "memory.oom_control", "oom_kill");
		if (oom <= 0 && keyed(cg, "memory.oom_control", "under_oom") > 0)
			oom = 1;
	}
	m->held = (uint64_t)(anon > 0 ? anon : 0) + (uint64_t)(shm > 0 ? shm : 0);
	m->ooms = oom > 0 ? (uint64_t)oom : 0;
}

/* After the tree is gone; its last tasks may still be leaving the cgroup. */
void trace_cgroup_free(struct trace_cgroup *cg)
{
	if (!cg)
		return;
	if (cg->fuse) {
		trace_fuse_close(cg->fuse);
		if (cg->fuse->count_fd >= 0)
			close(cg->fuse->count_fd);
		free(cg->fuse);
	}
	for (int i = 0; i < 200 && rmdir(cg->dir) < 0 && errno == EBUSY; i++)
		usleep(5000);
	if (cg->acct_dir[0] && strcmp(cg->acct_dir, cg->dir) != 0)
		for (int i = 0; i < 200 && rmdir(cg->acct_dir) < 0 && errno == EBUSY; i++)
			usleep(5000);
	free(cg);
}
