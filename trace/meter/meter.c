/* Metering (SPEC §4.1) of the whole guest tree, exited tasks included:
 * fuel from per-task schedstat (summed at each task's exit event and sampled while it
 * lives), memory as the peak of the tree's resident memory (Σ PSS samples, a page
 * shared inside the tree counted once; VmHWM at exit), storage_read from the kernel's
 * per-task I/O accounting (rchar of /proc/TID/task/TID/io, sampled while a task lives
 * and taken at its exit event), storage_write exactly from the calls that store (the
 * metering layer reports each at its stops: trace/meter/store.c), table_elements as the peak
 * of open fds, namespace_bytes from the ns directory (one it cannot measure completely
 * counts as one byte past its bound). Output comes from the relay.
 * Every value is kept monotonic. A task sampled at a tick keeps its schedstat and io
 * files open (a bounded number of tasks), so later samples and its exit stop cost a
 * pread each; the fd count is the size the kernel reports for /proc/PID/fd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/meter/meter.h"
#include "trace/tracee/tracee.h"

_Static_assert(TRACE_DIMS == LEASE_DIM_COUNT, "trace and lease agree on the dimensions");

#define KEEP_MAX 128             /* tasks whose files stay open (two fds each)... */
#define KEEP_SHARE 8             /* ...using at most a quarter of RLIMIT_NOFILE */
#define NS_STEP 16384            /* namespace entries looked at per tick */
#define NS_DEPTH LEASE_NS_DEPTH_MAX /* as deep as the lease's own walk goes */
#define NS_KEY_MAX ((NS_DEPTH + 1) * 256) /* the longest key: a NAME_MAX name per level */

/* The namespace walked a bounded step per tick (a guest may make it huge): one
 * open directory per level, so memory and fds stay bounded whatever the tree. */
struct ns_walk {
	DIR *d[NS_DEPTH + 1];
	size_t keylen[NS_DEPTH + 1]; /* each open directory's key (relative path) length */
	int n;                       /* directories open; 0 between passes */
	uint64_t acc;                /* this pass's bytes so far */
	uint64_t cells;              /* and cells */
};

struct task {
	pid_t tgid, tid;
	uint64_t cpu_ns;       /* last samples */
	uint64_t rchar;
	int sched_fd, io_fd;   /* kept open once sampled, else -1 */
	uint64_t store_w;      /* what its call in progress may store (reserved) */
	int store_by_result;   /* that call returns the bytes it stored */
	int store_lazy;        /* that call settles by its wchar's growth, at its next stop */
	uint64_t wchar;        /* its wchar before that call */
	int wchar_now;         /* wchar was read at this stop (the thread has not run since) */
	uint64_t load_w;       /* what its read in progress may read (reserved) */
	int loading;           /* a read of it is between its entry and its exit */
	uint64_t ns_w;         /* what its storing call may add to the namespace */
	int vec_way;           /* its vectored call's enum trace_vector_way, 0: none */
	int64_t vec_result;
};

struct trace_meter {
	struct task *t;
	size_t n, cap;
	uint64_t dead_ns;        /* on-CPU time of exited tasks */
	uint64_t dead_r;         /* their rchar */
	uint64_t taken_r;        /* datagrams the supervisor took for the guest (TRACE_VECTOR_TAKEN) */
	uint64_t u[LEASE_DIM_COUNT];
	char *ns_dir;
	uint64_t ns_bound;
	long page;
	size_t nkept, keep_max;  /* tasks holding open files, and their budget */
	const struct trace_relay *relay;
	const struct trace_cgroup *cg;
	uint64_t mem_bound;
	struct ns_walk walk;
	uint64_t host_w;         /* bytes sbx wrote on the guest's behalf (its trace) */
	uint64_t stored;         /* bytes the guest's calls stored on files (exact) */
	uint64_t inflight;       /* what calls in progress may still store */
	uint64_t load_inflight;  /* what reads in progress may still read */
	dev_t ns_dev;            /* the file system the namespace is on */
	uint64_t ns_base;        /* the namespace at the last whole walk; UINT64_MAX: none yet */
	uint64_t ns_since;       /* what calls may have added since (reserved, or running) */
	uint64_t ns_inflight;    /* what calls running now may add */
	int execd;               /* the guest's program runs: its descriptors are its own */
};

struct trace_meter *trace_meter_new(const char *ns_dir, uint64_t ns_bound,
				    const struct trace_relay *relay)
{
	struct trace_meter *m = common_xcalloc(1, sizeof *m);
	struct rlimit rl;

	m->ns_dir = ns_dir ? common_xstrdup(ns_dir) : NULL;
	m->ns_bound = ns_bound;
	m->ns_base = UINT64_MAX;
	struct stat sb;
	if (ns_dir && stat(ns_dir, &sb) == 0)
		m->ns_dev = sb.st_dev;
	m->page = sysconf(_SC_PAGESIZE);
	m->relay = relay;
	m->keep_max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / KEEP_SHARE < KEEP_MAX ?
		      (size_t)(rl.rlim_cur / KEEP_SHARE) : KEEP_MAX;
	return m;
}

static void task_close(struct trace_meter *m, struct task *t)
{
	if (t->sched_fd < 0)
		return;
	close(t->sched_fd);
	close(t->io_fd);
	t->sched_fd = t->io_fd = -1;
	m->nkept--;
}

static void ns_close(struct ns_walk *w)
{
	while (w->n > 0)
		closedir(w->d[--w->n]);
}

void trace_meter_free(struct trace_meter *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		task_close(m, &m->t[i]);
	ns_close(&m->walk);
	free(m->t);
	free(m->ns_dir);
	free(m);
}

static void raise_to(uint64_t *slot, uint64_t v)
{
	if (v > *slot)
		*slot = v;
}

/* Small /proc reads: one pread into a stack buffer, from the kept fd when there is
 * one (a /proc file is generated afresh at every read from offset 0). */
static ssize_t pread_small(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);

	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pread_small(fd, buf, cap);
	close(fd);
	return n;
}

/* Keep a sampled task's files open while the budget allows. */
static void task_keep(struct trace_meter *m, struct task *t)
{
	char path[64];

	if (t->sched_fd >= 0 || m->nkept >= m->keep_max)
		return;
	snprintf(path, sizeof path, "/proc/%d/schedstat", (int)t->tid);
	t->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof path, "/proc/%d/task/%d/io", (int)t->tid, (int)t->tid);
	t->io_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->sched_fd < 0 || t->io_fd < 0) {
		if (t->sched_fd >= 0)
			close(t->sched_fd);
		if (t->io_fd >= 0)
			close(t->io_fd);
		t->sched_fd = t->io_fd = -1;
		return;
	}
	m->nkept++;
}

static int task_cpu_ns(const struct task *t, uint64_t *ns)
{
	char path[64], buf[128];
	ssize_t n;

	if (t->sched_fd >= 0) {
		n = pread_small(t->sched_fd, buf, sizeof buf);
	} else {
		snprintf(path, sizeof path, "/proc/%d/schedstat", (int)t->tid);
		n = read_small(path, buf, sizeof buf);
	}
	if (n <= 0)
		return -1;
	*ns = strtoull(buf, NULL, 10);
	return 0;
}

/* One thread's own I/O counters (the task/ file: not its whole thread group). */
static ssize_t task_io_text(struct task *t, char buf[512])
{
	char path[64];

	if (t->io_fd >= 0)
		return pread_small(t->io_fd, buf, 512);
	snprintf(path, sizeof path, "/proc/%d/task/%d/io", (int)t->tid, (int)t->tid);
	return read_small(path, buf, 512);
}

static void task_io(struct task *t)
{
	char buf[512], *p;

	if (task_io_text(t, buf) <= 0)
		return;
	if ((p = strstr(buf, "rchar:")) && strtoull(p + 6, NULL, 10) > t->rchar)
		t->rchar = strtoull(p + 6, NULL, 10);
}

/* The bytes the thread's write-family calls moved so far (wchar): 0, or -1. */
static int task_wchar(struct task *t, uint64_t *w)
{
	char buf[512], *p;

	if (task_io_text(t, buf) <= 0 || !(p = strstr(buf, "wchar:")))
		return -1;
	*w = strtoull(p + 6, NULL, 10);
	return 0;
}

/* What a process holds: its proportional set size (a page shared by n
 * processes counts 1/n to each, so the tree's sum counts a shared page once),
 * or its resident size where the kernel has no smaps_rollup. */
static uint64_t rss_bytes(const struct trace_meter *m, pid_t pid)
{
	char path[64], buf[1024], *p;

	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
	if (read_small(path, buf, sizeof buf) > 0 && (p = strstr(buf, "\nPss:")))
		return strtoull(p + 5, NULL, 10) * 1024;
	snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return 0;
	p = strchr(buf, ' ');
	return p ? strtoull(p + 1, NULL, 10) * (uint64_t)m->page : 0;
}

static uint64_t fd_count(pid_t pid)
{
	char path[64];
	struct stat st;
	DIR *d;
	struct dirent *de;
	uint64_t n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	/* Linux >= 6.2 gives the number of open fds as the directory's size; 0 (an older
	 * kernel, or no fd open) is counted by listing */
	if (stat(path, &st) == 0 && st.st_size > 0)
		return (uint64_t)st.st_size;
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static struct task *task_of(struct trace_meter *m, pid_t tid);
static void ns_unmeasured(struct trace_meter *m);

static struct task *find(struct trace_meter *m, pid_t tid)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->t[i].tid == tid)
			return &m->t[i];
	return NULL;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* A reserved call is over: an error stored nothing, a byte count what it says (a
 * count past the reservation, a guest racing its own iovec, counts whole), any
 * other success all it reserved; INT64_MAX (its task gone) all it reserved. */
static void store_settle(struct trace_meter *m, struct task *t, int64_t result)
{
	uint64_t got = t->store_w, w;

	/* settled at a later stop: what its thread's wchar grew by, at most its reservation */
	if (t->store_lazy && result == INT64_MAX && task_wchar(t, &w) == 0 && w >= t->wchar) {
		result = (int64_t)(w - t->wchar < t->store_w ? w - t->wchar : t->store_w);
		t->wchar = w;
		t->wchar_now = 1;
	}
	t->store_lazy = 0;
	m->ns_inflight -= t->ns_w;
	t->ns_w = 0;
	if (!t->store_w)
		return;
	if (result < 0 && result > -4096)
		got = 0;
	else if (t->store_by_result && result != INT64_MAX)
		got = (uint64_t)result;
	m->inflight -= t->store_w;
	m->stored = sat_add(m->stored, got);
	t->store_w = 0;
	raise_to(&m->u[LEASE_DIM_STORAGE_WRITE], sat_add(m->stored, m->host_w));
}

/* A read is over: its bytes are in its task's count from now on. */
static void load_settle(struct trace_meter *m, struct task *t)
{
	m->load_inflight -= t->load_w;
	t->load_w = 0;
	t->loading = 0;
}

static pid_t tgid_of(pid_t tid)
{
	struct trace_status s;
	unsigned long long v = (unsigned long long)tid;

	if (trace_status_read(tid, &s) == 0) {
		trace_status_num(&s, "Tgid", 10, &v);
		trace_status_free(&s);
	}
	return (pid_t)v;
}

void trace_meter_task_new(struct trace_meter *m, pid_t tgid, pid_t tid)
{
	struct task *t = find(m, tid);

	if (t) {
		if (tgid)
			t->tgid = tgid;
		return;
	}
	if (!tgid)
		tgid = tgid_of(tid);
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 16;
		m->t = common_xrealloc(m->t, m->cap * sizeof *m->t);
	}
	m->t[m->n++] = (struct task){.tgid = tgid, .tid = tid, .sched_fd = -1, .io_fd = -1};
}

/* At PTRACE_EVENT_EXIT the task still has its mm and files: take the final figures. */
void trace_meter_task_exit(struct trace_meter *m, pid_t tgid, pid_t tid)
{
	struct task *t = find(m, tid);
	uint64_t ns = 0;

	if (!t) {
		trace_meter_task_new(m, tgid, tid);
		if (!(t = find(m, tid)))
			return;
	}
	if (task_cpu_ns(t, &ns) < 0 || ns < t->cpu_ns)
		ns = t->cpu_ns;
	m->dead_ns += ns;
	task_io(t);
	m->dead_r += t->rchar;
	store_settle(m, t, INT64_MAX);
	load_settle(m, t);
	if (tid == t->tgid && m->execd)
		raise_to(&m->u[LEASE_DIM_TABLE_ELEMENTS], fd_count(tid));
	task_close(m, t);
	*t = m->t[--m->n];
}

void trace_meter_peak_rss(struct trace_meter *m, uint64_t bytes)
{
	/* in a cgroup the kernel held the tree to the bound: an exited process's
	 * resident peak past it is file pages charged elsewhere (its refusals count) */
	if (m->cg && bytes > m->mem_bound)
		bytes = m->mem_bound;
	raise_to(&m->u[LEASE_DIM_MEMORY], bytes);
}

/* Σ(key length + value length) of the cells, by the lease's own definition (one walk
 * for the meter and the store); -1 when the namespace cannot be measured completely. */
int trace_meter_ns_bytes(const char *dir, uint64_t *bytes)
{
	return lease_ns_measure(dir, bytes, NULL);
}

/* What the meter cannot see counts as full: one byte past the bound closes the lease
 * (a guest hiding bytes from the walk only closes its own lease). */
static void ns_unmeasured(struct trace_meter *m)
{
	ns_close(&m->walk);
	if (m->ns_bound < UINT64_MAX)
		raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], m->ns_bound + 1);
}

/* One entry of the walk: a cell adds key + value length, a directory is entered;
 * -1 when the entry cannot be measured (the lease's walk would fail on it too). */
static int ns_entry(struct ns_walk *w, DIR *d, const char *name)
{
	struct stat st;
	size_t kl = w->keylen[w->n - 1] + (w->n > 1) + strlen(name);
	if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lease_ns_vanished(errno) ? 0 : -1;
	if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
		w->acc += kl + (uint64_t)st.st_size; /* a symlink's size is its target's length */
		return ++w->cells > LEASE_NS_CELLS_MAX ? -1 : 0;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (w->n > NS_DEPTH)
		return -1;
	int fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return lease_ns_vanished(errno) ? 0 : -1;
	if (!(w->d[w->n] = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	w->keylen[w->n++] = kl;
	return 0;
}

/* At most NS_STEP entries of the namespace. What the pass has seen so far raises the
 * meter at every step, not only at its end: a guest adding entries faster than the
 * walk reads them would otherwise keep a pass from ever ending. */
static void ns_step(struct trace_meter *m)
{
	struct ns_walk *w = &m->walk;
	int started = w->n > 0;
	for (size_t left = NS_STEP; left > 0; left--) {
		if (w->n == 0) {
			if (started) {
				raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], w->acc);
				return;
			}
			int fd = open(m->ns_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0 && errno == ENOENT)
				return; /* not made yet: no cells */
			if (fd < 0 || !(w->d[0] = fdopendir(fd))) {
				if (fd >= 0)
					close(fd);
				ns_unmeasured(m);
				return;
			}
			w->keylen[0] = 0;
			w->n = 1;
			w->acc = w->cells = 0;
			started = 1;
			continue;
		}
		errno = 0;
		struct dirent *de = readdir(w->d[w->n - 1]);
		if (!de && errno) {
			ns_unmeasured(m);
			return;
		}
		if (!de)
			closedir(w->d[--w->n]);
		else if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			 ns_entry(w, w->d[w->n - 1], de->d_name) < 0) {
			ns_unmeasured(m);
			return;
		}
	}
	raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], w->acc);
}

/* Memory held in the run's tmpfs mounts (/tmp, /run, /dev/shm, --mount tmpfs):
 * pages no process needs to map, seen through a live guest task's mount table. */
static uint64_t tmpfs_bytes(pid_t pid)
{
	char path[64], line[1024], at[PATH_MAX + 64];
	uint64_t sum = 0;
	snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		char mnt[PATH_MAX], fstype[64];
		const char *dash = strstr(line, " - ");
		struct statfs sf;
		if (!dash || sscanf(dash, " - %63s", fstype) != 1 || strcmp(fstype, "tmpfs") ||
		    sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		snprintf(at, sizeof at, "/proc/%d/root%s", (int)pid, mnt);
		if (statfs(at, &sf) == 0 && sf.f_blocks >= sf.f_bfree)
			sum += (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
	}
	fclose(f);
	return sum;
}

/* The anonymous and shared pages the cgroup holds (mapped or not, a gone leader's
 * threads' too, each page once); after a refused page the tree asked for more
 * than the bound. */
static uint64_t cgroup_memory(const struct trace_meter *m)
{
	struct trace_cgroup_mem cm;
	trace_cgroup_read(m->cg, &cm);
	return cm.ooms && cm.held <= m->mem_bound ? m->mem_bound + 1 : cm.held;
}

struct tgid_set {
	pid_t *v;
	size_t cap;
};

/* Whether t's thread group is met for the first time this sample: its threads
 * share one mm and one fd table, so any of them reads for all (a leader that has
 * exited reads empty, hence not the leader alone). */
static int group_first(struct tgid_set *s, const struct task *t)
{
	if (!s->v)
		return t->tid == t->tgid; /* no room to remember: the leader alone */
	size_t i = (size_t)t->tgid & (s->cap - 1);
	while (s->v[i] && s->v[i] != t->tgid)
		i = (i + 1) & (s->cap - 1);
	if (s->v[i])
		return 0;
	s->v[i] = t->tgid;
	return 1;
}

static void sample(struct trace_meter *m, int whole_ns)
{
	uint64_t live_ns = 0, rss = 0, fds = 0, rd = sat_add(m->dead_r, m->taken_r);
	struct tgid_set seen = { NULL, 16 };
	while (seen.cap < 2 * m->n)
		seen.cap *= 2;
	seen.v = calloc(seen.cap, sizeof *seen.v);

	for (size_t i = 0; i < m->n; i++) {
		struct task *t = &m->t[i];
		uint64_t ns;

		task_keep(m, t);
		if (task_cpu_ns(t, &ns) < 0) {
			/* reaped without an exit stop reaching us: keep its last figures,
			 * and stop polling a pid the host may hand to someone else */
			task_close(m, t);
			m->dead_ns += t->cpu_ns;
			m->dead_r += t->rchar;
			store_settle(m, t, INT64_MAX);
			load_settle(m, t);
			rd += t->rchar;
			*t = m->t[--m->n];
			i--;
			continue;
		}
		if (ns > t->cpu_ns)
			t->cpu_ns = ns;
		live_ns += t->cpu_ns;
		task_io(t);
		rd += t->rchar;
		if (group_first(&seen, t)) {
			rss += m->cg ? 0 : rss_bytes(m, t->tid);
			fds += m->execd ? fd_count(t->tid) : 0;
		}
	}
	free(seen.v);
	raise_to(&m->u[LEASE_DIM_FUEL], (m->dead_ns + live_ns) / 1000);
	if (m->cg) /* what the kernel holds to the bound: the tree's own pages, once */
		rss = cgroup_memory(m);
	else if (m->n)
		rss += tmpfs_bytes(m->t[0].tgid);
	raise_to(&m->u[LEASE_DIM_MEMORY], rss);
	raise_to(&m->u[LEASE_DIM_TABLE_ELEMENTS], fds);
	if (m->ns_dir && whole_ns) {
		uint64_t b;
		if (trace_meter_ns_bytes(m->ns_dir, &b) < 0)
			ns_unmeasured(m);
		else
			raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], b);
	} else if (m->ns_dir) {
		ns_step(m);
	}
	raise_to(&m->u[LEASE_DIM_STORAGE_READ], rd);
	raise_to(&m->u[LEASE_DIM_STORAGE_WRITE], m->stored + m->host_w);
	if (m->relay) {
		uint64_t b, l;
		trace_relay_counts(m->relay, &b, &l);
		raise_to(&m->u[LEASE_DIM_OUTPUT_BYTES], b);
		raise_to(&m->u[LEASE_DIM_OUTPUT_VALUES], l);
	}
}

void trace_meter_cgroup(struct trace_meter *m, const struct trace_cgroup *cg, uint64_t bound)
{
	m->cg = cg;
	m->mem_bound = bound;
}

void trace_meter_host_write(struct trace_meter *m, uint64_t bytes)
{
	m->host_w = bytes;
	raise_to(&m->u[LEASE_DIM_STORAGE_WRITE], m->stored + m->host_w);
}


uint64_t trace_meter_store_held(const struct trace_meter *m)
{
	return sat_add(sat_add(m->stored, m->inflight), m->host_w);
}

void trace_meter_store_begin(struct trace_meter *m, pid_t tid, uint64_t bytes, int by_result)
{
	struct task *t = find(m, tid);

	if (!t) {
		trace_meter_task_new(m, 0, tid);
		if (!(t = find(m, tid)))
			return;
	}
	store_settle(m, t, INT64_MAX); /* a call that never came back stored all it could */
	t->store_w = bytes;
	t->store_by_result = by_result;
	m->inflight = sat_add(m->inflight, bytes);
}

int trace_meter_store_lazy(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	if (!t || !t->store_w || !t->store_by_result)
		return 0;
	/* the last write's settling at this stop read the count this one starts from */
	if (!t->wchar_now && task_wchar(t, &t->wchar) < 0)
		return 0;
	t->wchar_now = 0;
	t->store_lazy = 1;
	return 1;
}

void trace_meter_store_stopped(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	if (t)
		t->wchar_now = 0;
	if (t && t->store_lazy)
		store_settle(m, t, INT64_MAX);
}

void trace_meter_store_end(struct trace_meter *m, pid_t tid, int64_t result)
{
	struct task *t = find(m, tid);

	if (t)
		store_settle(m, t, result);
}

/* A whole walk's figure, or what a calls' sum cannot hide: every byte into the
 * namespace's file system, every name a call may make (as long as the deepest key). */
uint64_t trace_meter_ns_charge(const struct trace_meter *m, const struct trace_store_call *c)
{
	if (!m->ns_dir || c->mapping)
		return 0;
	if (c->by_path)
		return c->bytes > NS_KEY_MAX ? c->bytes : NS_KEY_MAX;
	return c->dev == m->ns_dev ? c->bytes : 0;
}

int trace_meter_ns_reserve(struct trace_meter *m, pid_t tid, uint64_t bytes)
{
	struct task *t = task_of(m, tid);
	uint64_t b;

	if (!bytes || !t || m->ns_bound == UINT64_MAX)
		return 0;
	if (m->ns_base == UINT64_MAX || sat_add(sat_add(m->ns_base, m->ns_since), bytes) > m->ns_bound) {
		/* calls that may grow the namespace wait in their stops meanwhile */
		if (trace_meter_ns_bytes(m->ns_dir, &b) < 0) {
			ns_unmeasured(m);
			return -1;
		}
		raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], b);
		m->ns_base = b;
		m->ns_since = m->ns_inflight;
		if (sat_add(sat_add(b, m->ns_since), bytes) > m->ns_bound) {
			raise_to(&m->u[LEASE_DIM_NAMESPACE_BYTES], sat_add(m->ns_bound, 1));
			return -1;
		}
	}
	m->ns_since = sat_add(m->ns_since, bytes);
	m->ns_inflight = sat_add(m->ns_inflight, bytes);
	t->ns_w = sat_add(t->ns_w, bytes);
	return 0;
}

void trace_meter_guest_exec(struct trace_meter *m)
{
	m->execd = 1;
}

void trace_meter_vector_set(struct trace_meter *m, pid_t tid, int way, int64_t result)
{
	struct task *t = task_of(m, tid);

	if (t) {
		t->vec_way = way;
		t->vec_result = result;
	}
	if (way == TRACE_VECTOR_TAKEN && result > 0) /* in no task's rchar: the supervisor read it */
		m->taken_r = sat_add(m->taken_r, (uint64_t)result);
}

int trace_meter_vector_take(struct trace_meter *m, pid_t tid, int64_t *result)
{
	struct task *t = find(m, tid);
	int way = t ? t->vec_way : 0;

	if (!way)
		return 0;
	t->vec_way = 0;
	*result = t->vec_result;
	return way;
}

void trace_meter_store_charge(struct trace_meter *m, uint64_t bytes)
{
	m->stored = sat_add(m->stored, bytes);
	raise_to(&m->u[LEASE_DIM_STORAGE_WRITE], sat_add(m->stored, m->host_w));
}

/* A refused call is charged what it asked, at most this: a usage the lease can
 * record (its totals stop at 2^62), still past any bound. */
#define REFUSED_MAX (1ull << 61)

void trace_meter_store_refused(struct trace_meter *m, uint64_t bytes)
{
	m->stored = sat_add(m->stored, bytes < REFUSED_MAX ? bytes : REFUSED_MAX);
	raise_to(&m->u[LEASE_DIM_STORAGE_WRITE], m->stored + m->host_w);
}

static struct task *task_of(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	if (!t) {
		trace_meter_task_new(m, 0, tid);
		t = find(m, tid);
	}
	return t;
}

void trace_meter_load_begin(struct trace_meter *m, pid_t tid, uint64_t bytes)
{
	struct task *t = task_of(m, tid);

	if (!t)
		return;
	load_settle(m, t);
	t->load_w = bytes;
	t->loading = 1;
	m->load_inflight = sat_add(m->load_inflight, bytes);
}

int trace_meter_load_pending(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	return t && t->loading;
}

void trace_meter_load_end(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	if (!t || !t->loading)
		return;
	load_settle(m, t);
	trace_meter_load_held(m); /* its bytes raise the usage now, not at the next tick */
}

uint64_t trace_meter_load_held(struct trace_meter *m)
{
	uint64_t rd = sat_add(m->dead_r, m->taken_r);

	for (size_t i = 0; i < m->n; i++) {
		task_keep(m, &m->t[i]);
		task_io(&m->t[i]);
		rd = sat_add(rd, m->t[i].rchar);
	}
	raise_to(&m->u[LEASE_DIM_STORAGE_READ], rd);
	return sat_add(m->u[LEASE_DIM_STORAGE_READ], m->load_inflight);
}

void trace_meter_load_refused(struct trace_meter *m, uint64_t bound)
{
	raise_to(&m->u[LEASE_DIM_STORAGE_READ], sat_add(bound, 1));
}

pid_t trace_meter_task_tgid(struct trace_meter *m, pid_t tid)
{
	struct task *t = find(m, tid);

	return t ? t->tgid : 0;
}

int trace_meter_group_live(const struct trace_meter *m, pid_t tgid)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->t[i].tgid == tgid)
			return 1;
	return 0;
}

size_t trace_meter_tasks(const struct trace_meter *m)
{
	return m->n;
}

void trace_meter_sample(struct trace_meter *m)
{
	sample(m, 1);
}

void trace_meter_tick(struct trace_meter *m)
{
	sample(m, 0);
}

void trace_meter_most(struct trace_meter *m, int fuel, uint64_t most[LEASE_DIM_COUNT])
{
	uint64_t live_ns = 0, ns;

	for (size_t i = 0; fuel && i < m->n; i++) {
		struct task *t = &m->t[i];
		if (task_cpu_ns(t, &ns) == 0 && ns > t->cpu_ns)
			t->cpu_ns = ns; /* one gone keeps its last figure until the next sample */
		live_ns = sat_add(live_ns, t->cpu_ns);
	}
	if (fuel)
		raise_to(&m->u[LEASE_DIM_FUEL], sat_add(m->dead_ns, live_ns) / 1000);
	memcpy(most, m->u, sizeof m->u);
	raise_to(&most[LEASE_DIM_STORAGE_WRITE], trace_meter_store_held(m));
	raise_to(&most[LEASE_DIM_STORAGE_READ], sat_add(m->u[LEASE_DIM_STORAGE_READ], m->load_inflight));
	if (m->ns_dir && m->ns_base != UINT64_MAX)
		raise_to(&most[LEASE_DIM_NAMESPACE_BYTES], sat_add(m->ns_base, m->ns_since));
}

void trace_meter_usage(const struct trace_meter *m, uint64_t usage[LEASE_DIM_COUNT])
{
	memcpy(usage, m->u, sizeof m->u);
}

/* The first dimension past its bound, or NULL. Lease-less runs use this alone. */
const char *trace_meter_over(const struct trace_meter *m, const uint64_t limits[LEASE_DIM_COUNT])
{
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		if (m->u[d] > limits[d])
			return lease_dim_name((enum lease_dim)d);
	return NULL;
}
