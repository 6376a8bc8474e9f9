/* snap: SysV shared memory segments the run has attached. Capture names each
 * by its id (the inode /proc/PID/maps shows) and asks the kernel its key,
 * size and mode by an injected shmctl; restore makes each again under the
 * same id in the run's IPC namespace (shm_next_id, from a short-lived child
 * that joins it), attaches it at the same address, and marks for removal the
 * ones that were. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "snap/snap-internal.h"

#define PAGE_UP(x) (((x) + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1))

int snap_sysv_mapping(const char *path)
{
	size_t n = strlen(path);
	return !strncmp(path, "/SYSV", 5) && n > 10 && !strcmp(path + n - 10, " (deleted)");
}

int snap_region_has_content(const struct snap_state *root, const struct snap_state *p, size_t i)
{
	const struct snap_region *r = &p->regions[i];
	if (r->kind == SNAP_REGION_VDSO || r->kind == SNAP_REGION_SHM)
		return 0;
	if (r->kind != SNAP_REGION_SYSV)
		return 1;
	/* a segment's content once: in its first attachment in the tree, by address */
	int starts = 0;
	uint64_t id0 = r->offset & ~(uint64_t)0xffffffffu;
	for (size_t k = 0; k <= root->nprocs; k++) {
		const struct snap_state *q = k ? &root->procs[k - 1] : root;
		size_t n = q == p ? i + 1 : q->nregions;
		for (size_t j = 0; !q->zombie && j < n; j++)
			starts += q->regions[j].kind == SNAP_REGION_SYSV && q->regions[j].offset == id0;
		if (q == p)
			break;
	}
	return starts == 1;
}

int snap_sysv_id(pid_t pid, uint64_t start, uint32_t *id, struct common_err *e)
{
	char p[64], *buf, head[32];
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
	if (common_read_file(p, (size_t)64 << 20, &buf, &len, e) < 0)
		return -1;
	snprintf(head, sizeof head, "%" PRIx64 "-", start);
	int rc = common_errf(e, "capture", "SysV mapping at %#" PRIx64 " not in %s", start, p);
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		unsigned long long ino;
		if (strncmp(line, head, strlen(head)) ||
		    sscanf(line, "%*s %*s %*s %*s %llu", &ino) != 1)
			continue;
		*id = (uint32_t)ino;
		rc = 0;
		break;
	}
	free(buf);
	return rc;
}

static int cmp_seg(const void *a, const void *b)
{
	uint32_t x = ((const struct snap_segment *)a)->id, y = ((const struct snap_segment *)b)->id;
	return x < y ? -1 : x > y;
}

/* Each attachment of a segment covers it whole, from offset 0 (pieces may
 * differ in protection): what restore's shmat gives back. */
static int whole_attachments(const struct snap_state *st, const struct snap_segment *g,
			     struct common_err *e)
{
	uint64_t next = 0, base = 0, size = PAGE_UP(g->size);
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		if (r->kind != SNAP_REGION_SYSV || r->offset >> 32 != g->id)
			continue;
		uint64_t off = r->offset & 0xffffffffu;
		if (off == 0 && next == size)
			next = 0;
		if (off == 0)
			base = r->start;
		if (off != next || r->start != base + off || r->end - r->start > size - off)
			return common_errf(e, "capture", "SysV segment %u is mapped in part: only "
					   "whole attachments are supported", g->id);
		next = off + (r->end - r->start);
	}
	if (next != size)
		return common_errf(e, "capture", "SysV segment %u is mapped in part: only whole "
				   "attachments are supported", g->id);
	return 0;
}

int snap_segments_capture(struct trace_tracee *t, uint64_t scratch, struct snap_state *st,
			  struct common_err *e)
{
	struct shmid_ds ds;
	uint8_t saved[sizeof ds];
	int rc = 0;
	for (size_t i = 0; i < st->nregions; i++) {
		const struct snap_region *r = &st->regions[i];
		uint32_t id = (uint32_t)(r->offset >> 32);
		size_t k = 0;
		while (k < st->nsegments && st->segments[k].id != id)
			k++;
		if (r->kind != SNAP_REGION_SYSV || k < st->nsegments)
			continue;
		if (st->nsegments == SNAP_OBJ_MAX)
			return common_errf(e, "capture", "more than %u SysV segments", SNAP_OBJ_MAX);
		st->segments = common_xrealloc(st->segments, (st->nsegments + 1) * sizeof *st->segments);
		st->segments[st->nsegments++] = (struct snap_segment){ .id = id };
	}
	if (!st->nsegments || trace_tracee_read(t, scratch, saved, sizeof saved, e) < 0)
		return st->nsegments ? -1 : 0;
	qsort(st->segments, st->nsegments, sizeof *st->segments, cmp_seg);
	for (size_t i = 0; i < st->nsegments && rc == 0; i++) {
		struct snap_segment *g = &st->segments[i];
		uint64_t a[6] = { g->id, IPC_STAT, scratch, 0, 0, 0 };
		int64_t ret;
		if (trace_tracee_inject(t, SYS_shmctl, a, &ret, e) < 0 ||
		    trace_tracee_read(t, scratch, &ds, sizeof ds, e) < 0) {
			rc = -1;
			break;
		}
		if (ret < 0) {
			rc = common_errf(e, "capture", "SysV segment %u: shmctl(IPC_STAT): %s", g->id,
					 strerror((int)-ret));
			break;
		}
		g->key = (uint32_t)ds.shm_perm.__key;
		g->mode = ds.shm_perm.mode & 0777;
		g->uid = ds.shm_perm.uid;
		g->gid = ds.shm_perm.gid;
		g->removed = (ds.shm_perm.mode & SHM_DEST) != 0;
		g->size = ds.shm_segsz;
		if (g->removed)
			g->key = 0;
		rc = whole_attachments(st, g, e);
	}
	if (trace_tracee_write(t, scratch, saved, sizeof saved, rc ? NULL : e) < 0)
		rc = -1;
	return rc;
}

int snap_segments_gather(struct snap_state *st, struct common_err *e)
{
	for (size_t k = 0; k < st->nprocs; k++) {
		struct snap_state *p = &st->procs[k];
		for (size_t i = 0; i < p->nsegments; i++) {
			size_t j = 0;
			while (j < st->nsegments && st->segments[j].id != p->segments[i].id)
				j++;
			if (j < st->nsegments)
				continue;
			if (st->nsegments == SNAP_OBJ_MAX)
				return common_errf(e, "capture", "more than %u SysV segments", SNAP_OBJ_MAX);
			st->segments = common_xrealloc(st->segments,
						       (st->nsegments + 1) * sizeof *st->segments);
			st->segments[st->nsegments++] = p->segments[i];
		}
		free(p->segments);
		p->segments = NULL;
		p->nsegments = 0;
	}
	if (st->nsegments)
		qsort(st->segments, st->nsegments, sizeof *st->segments, cmp_seg);
	return 0;
}

/* In the child, inside the run's IPC namespace: each segment made under its
 * id; the ids got, or -errno, to out. */
static void make_segments(const struct snap_state *st, int out)
{
	for (size_t i = 0; i < st->nsegments; i++) {
		const struct snap_segment *g = &st->segments[i];
		char num[16];
		int n = snprintf(num, sizeof num, "%u", g->id), got = -1;
		int fd = open("/proc/sys/kernel/shm_next_id", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, num, (size_t)n) != n)
			got = -errno;
		if (fd >= 0)
			close(fd);
		struct shmid_ds ds;
		if (got == -1) {
			got = shmget(g->key ? (key_t)g->key : IPC_PRIVATE, (size_t)g->size,
				     IPC_CREAT | IPC_EXCL | (int)g->mode);
			got = got < 0 ? -errno : got;
		}
		/* made by this child, owned as it was by the run's user */
		if (got >= 0 && shmctl(got, IPC_STAT, &ds) == 0) {
			ds.shm_perm.uid = g->uid;
			ds.shm_perm.gid = g->gid;
			if (shmctl(got, IPC_SET, &ds) < 0)
				got = -errno;
		}
		(void)!write(out, &got, sizeof got);
	}
}

/* In the child: the id of every segment of the namespace, then INT_MIN. */
static void list_segments(const struct snap_state *st, int out)
{
	(void)st;
	FILE *f = fopen("/proc/sysvipc/shm", "re");
	char line[512];
	int id, end = INT_MIN;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%*d %d", &id) == 1)
			(void)!write(out, &id, sizeof id);
	(void)!write(out, &end, sizeof end);
}

/* 1 when pid is in this process's namespace of that kind. */
static int same_ns(pid_t pid, const char *kind)
{
	char p[64], q[64];
	struct stat a, b;
	snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)pid, kind);
	snprintf(q, sizeof q, "/proc/self/ns/%s", kind);
	return stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* A short-lived child joins pid's user and IPC namespaces and runs fn there,
 * writing ints to *rd's other end (a raw clone: glibc's fork() takes locks
 * other threads of this process may hold). The child's pid, or -1. */
static pid_t in_ipc_namespace(pid_t pid, void (*fn)(const struct snap_state *, int),
			      const struct snap_state *st, int *rd, struct common_err *e)
{
	char p[64];
	int ns[2], pfd[2] = { -1, -1 };
	pid_t c = -1;
	snprintf(p, sizeof p, "/proc/%d/ns/user", (int)pid);
	ns[0] = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof p, "/proc/%d/ns/ipc", (int)pid);
	ns[1] = open(p, O_RDONLY | O_CLOEXEC);
	if (ns[0] < 0 || ns[1] < 0 || pipe2(pfd, O_CLOEXEC) < 0) {
		common_errno(e, errno, "the run's IPC namespace");
	} else if ((c = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0)) == 0) {
		/* a process may not join the user namespace it is in */
		if ((!same_ns(pid, "user") && setns(ns[0], CLONE_NEWUSER) < 0) ||
		    setns(ns[1], CLONE_NEWIPC) < 0) {
			int err = -errno;
			(void)!write(pfd[1], &err, sizeof err);
		} else {
			fn(st, pfd[1]);
		}
		_exit(0);
	} else if (c < 0) {
		common_errno(e, errno, "clone");
	}
	for (int i = 0; i < 2; i++)
		if (ns[i] >= 0)
			close(ns[i]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	*rd = pfd[0];
	if (c < 0 && pfd[0] >= 0)
		close(pfd[0]);
	return c;
}

static void reap(pid_t c, int rd)
{
	close(rd);
	while (waitpid(c, NULL, __WALL) < 0 && errno == EINTR)
		;
}

int snap_segments_unattached(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	int rd, id = 0, rc = 0;
	/* a guest sharing this process's IPC namespace (not an sbx-run guest) has
	 * no namespace of its own to account for */
	if (same_ns(pid, "ipc"))
		return 0;
	pid_t c = in_ipc_namespace(pid, list_segments, st, &rd, e);
	if (c < 0)
		return -1;
	for (;;) {
		if (read(rd, &id, sizeof id) != sizeof id || id < 0) {
			if (id != INT_MIN)
				rc = common_errf(e, "capture", "the run's SysV segments cannot be listed");
			break;
		}
		size_t k = 0;
		while (k < st->nsegments && st->segments[k].id != (uint32_t)id)
			k++;
		if (k == st->nsegments && rc == 0)
			rc = common_errf(e, "capture", "SysV segment %d exists but is not attached: "
					 "segments are held only through an attachment", id);
	}
	reap(c, rd);
	return rc;
}

int snap_segments_create(pid_t pid, const struct snap_state *st, struct common_err *e)
{
	if (!st->nsegments)
		return 0;
	int rd, rc = 0;
	pid_t c = in_ipc_namespace(pid, make_segments, st, &rd, e);
	if (c < 0)
		return -1;
	for (size_t i = 0; i < st->nsegments && rc == 0; i++) {
		int got;
		if (read(rd, &got, sizeof got) != sizeof got)
			rc = common_errf(e, "restore", "SysV segment %u: the helper in the run's IPC "
					 "namespace failed", st->segments[i].id);
		else if (got < 0)
			rc = common_errno(e, -got, "restore SysV segment %u", st->segments[i].id);
		else if ((uint32_t)got != st->segments[i].id)
			rc = common_errf(e, "restore", "SysV segment %u came back as %d",
					 st->segments[i].id, got);
	}
	reap(c, rd);
	return rc;
}

int snap_segment_attach(struct trace_tracee *t, const struct snap_region *r, struct common_err *e)
{
	if (r->offset & 0xffffffffu)
		return 0; /* a piece of an attachment made at its offset 0 */
	uint64_t a[6] = { r->offset >> 32, r->start, 0, 0, 0, 0 };
	int64_t got;
	if (trace_tracee_inject(t, SYS_shmat, a, &got, e) < 0)
		return -1;
	if ((uint64_t)got != r->start)
		return common_errf(e, "restore", "shmat of SysV segment %u at %#" PRIx64 " gave %#"
				   PRIx64, (uint32_t)(r->offset >> 32), r->start, (uint64_t)got);
	return 0;
}

int snap_segments_finish(struct trace_tracee *t, const struct snap_state *st,
			 struct common_err *e)
{
	for (size_t i = 0; i < st->nsegments; i++) {
		uint64_t a[6] = { st->segments[i].id, IPC_RMID, 0, 0, 0, 0 };
		int64_t ret;
		if (!st->segments[i].removed)
			continue;
		if (trace_tracee_inject(t, SYS_shmctl, a, &ret, e) < 0)
			return -1;
		if (ret < 0)
			return common_errf(e, "restore", "shmctl(IPC_RMID) of SysV segment %u: %s",
					   st->segments[i].id, strerror((int)-ret));
	}
	return 0;
}
