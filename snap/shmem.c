/* snap: shared memory objects of a process tree (version 5): shared
 * anonymous memory inherited over fork and memfds, since version 7 deleted
 * files on a tmpfs of the run (Python multiprocessing's heap), each named by
 * its inode (/proc/PID/maps, the descriptor's stat), captured once whoever maps
 * or holds it, and restored as one object: a memfd made again under its name,
 * a deleted file created at its path and unlinked, at a holder descriptor,
 * anonymous memory as a shared mapping the root holds before the tree is
 * forked; every process maps it again at its addresses (mmap of the holder, or
 * mremap of the holder mapping with old size 0: a new mapping of the same
 * pages). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "snap/snap-internal.h"

#define PAGE_UP(x) (((x) + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1))
#define ANON_PATH "/dev/zero (deleted)"
#define DELETED " (deleted)"

/* "/memfd:NAME (deleted)": NAME's length, or -1. */
static int memfd_name_len(const char *path)
{
	size_t n = strlen(path), d = strlen(DELETED);
	if (strncmp(path, "/memfd:", 7) || n < 7 + d || strcmp(path + n - d, DELETED))
		return -1;
	return (int)(n - 7 - d);
}

/* "/PATH (deleted)" of another file than a memfd, /dev/zero or a SysV segment:
 * PATH's length (at most SNAP_SHM_PATH_MAX), or -1. */
static int deleted_len(const char *path)
{
	size_t n = strlen(path), d = strlen(DELETED);
	if (path[0] != '/' || n <= d + 1 || strcmp(path + n - d, DELETED) ||
	    memfd_name_len(path) >= 0 || !strcmp(path, ANON_PATH) || snap_sysv_mapping(path) ||
	    n - d > SNAP_SHM_PATH_MAX)
		return -1;
	return (int)(n - d);
}

int snap_shm_mapping(const char *path)
{
	return !strcmp(path, ANON_PATH) || memfd_name_len(path) >= 0 || deleted_len(path) >= 0;
}

int snap_shm_deleted(const char *path)
{
	return deleted_len(path) >= 0;
}

int snap_shm_on_tmpfs(pid_t pid, const char *path, dev_t dev)
{
	int len = deleted_len(path);
	if (len < 0)
		return 0;
	/* the directory as the guest sees it: restore creates the file there */
	const char *slash = path + len;
	while (*slash != '/')
		slash--;
	char dir[SNAP_SHM_PATH_MAX + 64];
	snprintf(dir, sizeof dir, "/proc/%d/root%.*s", (int)pid, (int)(slash - path), path);
	struct stat sb;
	struct statfs fs;
	return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_dev == dev &&
	       statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

int snap_shm_relinked(pid_t pid, struct trace_map *m)
{
	int len = deleted_len(m->path), found = 0;
	if (len < 0)
		return 0;
	const char *slash = m->path + len;
	while (*slash != '/')
		slash--;
	char dir[SNAP_SHM_PATH_MAX + 64], name[256];
	snprintf(dir, sizeof dir, "/proc/%d/root%.*s", (int)pid, (int)(slash - m->path), m->path);
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_ino == m->ino && strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    found++ == 0)
			snprintf(name, sizeof name, "%s", de->d_name);
	if (d)
		closedir(d);
	/* one other name, in the same directory: the file is that one (checked by
	 * snap_shm_named) */
	if (found != 1 || (size_t)(slash - m->path) + 1 + strlen(name) > SNAP_SHM_PATH_MAX)
		return 0;
	char p[SNAP_SHM_PATH_MAX + 1];
	snprintf(p, sizeof p, "%.*s/%s", (int)(slash - m->path), m->path, name);
	snprintf(m->path, sizeof m->path, "%s", p);
	return 1;
}

int snap_shm_named(pid_t pid, const struct trace_map *m)
{
	char p[SNAP_SHM_PATH_MAX + 64];
	struct stat sb;
	struct statfs fs;
	if (m->path[0] != '/' || strlen(m->path) > SNAP_SHM_PATH_MAX || snap_shm_mapping(m->path) ||
	    snap_sysv_mapping(m->path))
		return 0;
	snprintf(p, sizeof p, "/proc/%d/root%s", (int)pid, m->path);
	return lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == m->dev &&
	       sb.st_ino == m->ino && sb.st_nlink == 1 && statfs(p, &fs) == 0 &&
	       fs.f_type == TMPFS_MAGIC;
}

int snap_shm_fd(pid_t pid, const char *link, const struct stat *sb, uint32_t version)
{
	return memfd_name_len(link) >= 0 ||
	       (version >= 7 && sb->st_nlink == 0 && snap_shm_on_tmpfs(pid, link, sb->st_dev));
}

/* Where an object's content is read: a copy of a descriptor of it, else the
 * mappings of it (pages no process maps read as zero: nobody can reach them). */
struct shm_map {
	struct trace_tracee *t;
	uint64_t start, off, len;
};
struct snap_shm_src {
	uint64_t ino;
	int fd;                  /* our copy of the first descriptor, or -1 */
	int mapfd;               /* a deleted file opened through map_files, or -1 */
	pid_t fd_pid;            /* the first descriptor, for kcmp */
	uint32_t fd_num;
	uint64_t extent;         /* the end of the furthest mapping */
	struct shm_map *maps;
	size_t nmaps;
};

/* Object j of this inode (a file's: of this path too, as inode numbers are per
 * tmpfs), added when new. */
static size_t object_of(struct snap_state *st, struct snap_shm_src **src, uint64_t ino,
			uint32_t kind, const char *name)
{
	size_t j = 0;
	while (j < st->nshms && ((*src)[j].ino != ino ||
				 (st->shms[j].kind >= SNAP_SHM_FILE) != (kind >= SNAP_SHM_FILE) ||
				 (kind >= SNAP_SHM_FILE && strcmp(st->shms[j].name, name))))
		j++;
	if (j < st->nshms)
		return j;
	st->shms = common_xrealloc(st->shms, (j + 1) * sizeof *st->shms);
	*src = common_xrealloc(*src, (j + 1) * sizeof **src);
	memset(&st->shms[j], 0, sizeof st->shms[j]);
	memset(&(*src)[j], 0, sizeof (*src)[j]);
	st->shms[j].kind = kind;
	st->shms[j].name = common_xstrdup(name);
	(*src)[j].ino = ino;
	(*src)[j].fd = -1;
	(*src)[j].mapfd = -1;
	st->nshms = j + 1;
	return j;
}

/* A memfd's or deleted file's descriptor f of process pid: its object, held
 * once (one open file). */
static int shm_fd(struct snap_state *st, struct snap_shm_src **src, pid_t pid, struct snap_fd *f,
		  struct common_err *e)
{
	char p[64], link[SNAP_STR_MAX];
	snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)pid, f->fd);
	ssize_t n = readlink(p, link, sizeof link - 1);
	if (n < 0)
		return common_errno(e, errno, "readlink %s", p);
	link[n] = 0;
	int len = memfd_name_len(link), dlen = deleted_len(link);
	uint32_t kind = len >= 0 ? SNAP_SHM_MEMFD : SNAP_SHM_FILE;
	if ((len < 0 && dlen < 0) || len > (int)SNAP_SHM_NAME_MAX)
		return common_errf(e, "capture", "fd %u: %s is not a memfd or a deleted file", f->fd,
				   link);
	link[len >= 0 ? 7 + len : dlen] = 0;
	const char *name = len >= 0 ? link + 7 : link;
	size_t j = object_of(st, src, f->size, kind, name);
	struct snap_shm_src *s = &(*src)[j];
	if (st->nshms > SNAP_OBJ_MAX)
		return common_errf(e, "capture", "more than %u shared memory objects", SNAP_OBJ_MAX);
	if (st->shms[j].kind != kind)
		return common_errf(e, "capture", "fd %u: memfd %s is also anonymous memory", f->fd, link);
	f->size = j;
	if (s->fd >= 0)
		return syscall(SYS_kcmp, s->fd_pid, pid, KCMP_FILE, s->fd_num, f->fd) == 0 ? 0 :
			common_errf(e, "capture", "fd %u of process %d: %s %s is open more than once "
				    "(one open file per object is supported)", f->fd, (int)pid,
				    len >= 0 ? "memfd" : "deleted file", name);
	s->fd = open(p, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return common_errno(e, errno, "open %s", p);
	s->fd_pid = pid;
	s->fd_num = f->fd;
	return 0;
}

/* A deleted file no descriptor of the tree holds, opened through
 * /proc/PID/map_files (where the invoker may: root) for its size and mode; a
 * linked one at its path in pid's view (the inode checked). */
static void map_file(struct snap_shm_src *s, pid_t pid, const struct snap_region *r, uint32_t kind)
{
	char p[SNAP_SHM_PATH_MAX + 64];
	struct stat sb;
	if (kind == SNAP_SHM_NAMED)
		snprintf(p, sizeof p, "/proc/%d/root%s", (int)pid, r->path);
	else
		snprintf(p, sizeof p, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, r->start,
			 r->end);
	/* a map_files entry is a magic link, followed; a named file's is not one */
	s->mapfd = open(p, O_RDONLY | O_CLOEXEC | (kind == SNAP_SHM_NAMED ? O_NOFOLLOW : 0));
	if (s->mapfd >= 0 && (fstat(s->mapfd, &sb) < 0 || (uint32_t)sb.st_ino != (uint32_t)s->ino)) {
		close(s->mapfd);
		s->mapfd = -1;
	}
}

/* A region of process k mapping a shared memory object (path: its maps name). */
static int shm_region(struct snap_state *st, struct snap_shm_src **src, struct trace_tracee *t,
		      const struct snap_state *p, struct snap_region *r, struct common_err *e)
{
	int len = memfd_name_len(r->path), dlen = deleted_len(r->path);
	uint32_t kind = len >= 0 ? SNAP_SHM_MEMFD : dlen >= 0 ? SNAP_SHM_FILE :
			!strcmp(r->path, ANON_PATH) ? SNAP_SHM_ANON : SNAP_SHM_NAMED;
	if (len >= 0)
		r->path[7 + len] = 0;
	if (dlen >= 0)
		r->path[dlen] = 0;
	size_t j = object_of(st, src, r->offset >> 32, kind,
			     kind == SNAP_SHM_MEMFD ? r->path + 7 : kind >= SNAP_SHM_FILE ? r->path : "");
	struct snap_shm_src *s = &(*src)[j];
	uint64_t off = r->offset & 0xffffffffu;
	if (st->nshms > SNAP_OBJ_MAX)
		return common_errf(e, "capture", "more than %u shared memory objects", SNAP_OBJ_MAX);
	if (st->shms[j].kind != kind)
		return common_errf(e, "capture", "shared mapping at %#" PRIx64 ": one object seen "
				   "as a memfd and as anonymous memory", r->start);
	if (kind >= SNAP_SHM_FILE && s->mapfd < 0)
		map_file(s, t->tid, r, kind);
	/* the holder mapping is the root program's: gone in a process that ran another */
	if (kind == SNAP_SHM_ANON && p != st && strcmp(p->exe, st->exe))
		return common_errf(e, "capture", "shared anonymous memory at %#" PRIx64 " in process "
				   "%u, which runs %s, not the root's program, is not supported",
				   r->start, p->pid, p->exe);
	if (off + (r->end - r->start) > ((uint64_t)1 << 32))
		return common_errf(e, "capture", "shared mapping at %#" PRIx64 " reaches past 4 GiB "
				   "of its object", r->start);
	s->maps = common_xrealloc(s->maps, (s->nmaps + 1) * sizeof *s->maps);
	s->maps[s->nmaps++] = (struct shm_map){ t, r->start, off, r->end - r->start };
	if (off + (r->end - r->start) > s->extent)
		s->extent = off + (r->end - r->start);
	free(r->path);
	r->path = NULL;
	r->offset = (uint64_t)j << 32 | off;
	return 0;
}

/* Each object's size and seals (a deleted file's mode), once all its uses are
 * known. A deleted file no process holds nor map_files opens: its extent and
 * mode 0600 (mkstemp's, sem_open's). */
static int shm_finish(struct snap_shm *g, struct snap_shm_src *s, struct common_err *e)
{
	g->size = s->extent;
	if (g->kind >= SNAP_SHM_FILE) {
		struct stat sb;
		int fd = s->fd >= 0 ? s->fd : s->mapfd;
		if (fd >= 0 && fstat(fd, &sb) < 0)
			return common_errno(e, errno, "deleted file %s", g->name);
		/* restored as one file under its one name, or none */
		if (fd >= 0 && sb.st_nlink != (g->kind == SNAP_SHM_NAMED))
			return common_errf(e, "capture", "%s%s has %lu links: a shared file also "
					   "linked under another name is not supported", g->name,
					   g->kind == SNAP_SHM_FILE ? " (deleted)" : "",
					   (unsigned long)sb.st_nlink);
		g->size = fd >= 0 ? (uint64_t)sb.st_size : g->size;
		g->mode = fd >= 0 ? sb.st_mode & 07777 : 0600;
	} else if (s->fd >= 0) {
		struct stat sb;
		int seals = fcntl(s->fd, F_GET_SEALS);
		if (fstat(s->fd, &sb) < 0 || seals < 0)
			return common_errno(e, errno, "memfd %s", g->name);
		if (seals != 0 && seals != F_SEAL_SEAL)
			return common_errf(e, "capture", "memfd %s has seals %#x: a sealed memfd is not "
					   "supported", g->name, (unsigned)seals);
		g->sealable = seals == 0;
		g->size = (uint64_t)sb.st_size;
	}
	if (g->size > SNAP_MAX_BYTES || (g->kind == SNAP_SHM_ANON && !g->size))
		return common_errf(e, "capture", "shared memory object %s of %" PRIu64 " bytes is "
				   "not supported", g->name[0] ? g->name : "(anonymous)", g->size);
	g->content = (struct snap_region){ .start = 0, .end = PAGE_UP(g->size),
					   .kind = SNAP_REGION_ANON };
	return 0;
}

int snap_shm_capture(struct snap_state *st, const pid_t *hosts, struct trace_tracee *const *t,
		     struct snap_shm_src **src, struct common_err *e)
{
	*src = NULL;
	for (size_t k = 0; k <= st->nprocs; k++) {
		struct snap_state *p = k ? &st->procs[k - 1] : st;
		if (p->zombie)
			continue;
		for (size_t i = 0; i < p->nfds; i++)
			if (p->fds[i].kind == SNAP_FD_SHM && shm_fd(st, src, hosts[k], &p->fds[i], e) < 0)
				return -1;
		for (size_t i = 0; i < p->nregions; i++)
			if (p->regions[i].kind == SNAP_REGION_SHM &&
			    shm_region(st, src, t[k], p, &p->regions[i], e) < 0)
				return -1;
	}
	for (size_t j = 0; j < st->nshms; j++)
		if (shm_finish(&st->shms[j], &(*src)[j], e) < 0)
			return -1;
	return 0;
}

int snap_shm_fill(struct snap_shm_src *src, size_t j, uint64_t first, uint64_t n, uint8_t *dst,
		  struct common_err *e)
{
	struct snap_shm_src *s = &src[j];
	int fd = s->fd >= 0 ? s->fd : s->mapfd;
	(void)e;
	memset(dst, 0, n * SNAP_PAGE);
	if (fd >= 0) {
		/* past the end of the file: zero */
		for (uint64_t done = 0; done < n * SNAP_PAGE;) {
			ssize_t got = pread(fd, dst + done, n * SNAP_PAGE - done,
					    (off_t)(first * SNAP_PAGE + done));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				break;
			done += (uint64_t)got;
		}
		return 0;
	}
	for (uint64_t pg = first; pg < first + n; pg++) {
		uint64_t at = pg * SNAP_PAGE;
		for (size_t m = 0; m < s->nmaps; m++) {
			const struct shm_map *x = &s->maps[m];
			if (at < x->off || at >= x->off + x->len)
				continue;
			/* a page past the end of a memfd cannot be read: zero */
			trace_tracee_read(x->t, x->start + (at - x->off), dst + (pg - first) * SNAP_PAGE,
					  SNAP_PAGE, NULL);
			break;
		}
	}
	return 0;
}

void snap_shm_src_free(struct snap_shm_src *src, size_t n)
{
	for (size_t j = 0; src && j < n; j++) {
		if (src[j].fd >= 0)
			close(src[j].fd);
		if (src[j].mapfd >= 0)
			close(src[j].mapfd);
		free(src[j].maps);
	}
	free(src);
}

void snap_shms_free(struct snap_state *st)
{
	for (size_t j = 0; j < st->nshms; j++)
		free(st->shms[j].name);
	free(st->shms);
	st->shms = NULL;
	st->nshms = 0;
}

/* Where anonymous object j lies in the holder area: the sizes before it. */
static uint64_t anon_at(const struct snap_state *st, size_t j)
{
	uint64_t at = 0;
	for (size_t i = 0; i < j; i++)
		if (st->shms[i].kind == SNAP_SHM_ANON)
			at += PAGE_UP(st->shms[i].size);
	return at;
}

/* The non-zero pages of an object's content, at 'to' through write. */
static int put_content(const struct snap_shm *g, int (*write)(void *c, uint64_t at, const void *p,
							      size_t n), void *c)
{
	const struct snap_region *r = &g->content;
	const uint8_t *src = r->packed;
	uint64_t pages = (r->end - r->start) / SNAP_PAGE;
	for (uint64_t p = 0; p < pages; p++) {
		if (!(r->bitmap[p / 8] >> (p % 8) & 1))
			continue;
		if (write(c, p * SNAP_PAGE, src, SNAP_PAGE) < 0)
			return -1;
		src += SNAP_PAGE;
	}
	return 0;
}

struct mem_at { struct trace_tracee *t; uint64_t base; struct common_err *e; };
static int write_mem(void *c, uint64_t at, const void *p, size_t n)
{
	struct mem_at *m = c;
	return trace_tracee_write(m->t, m->base + at, p, n, m->e);
}

static int write_fd(void *c, uint64_t at, const void *p, size_t n)
{
	return pwrite(*(int *)c, p, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

/* The offset and flags of the open file every descriptor of object j shares. */
static const struct snap_fd *first_fd(const struct snap_state *st, size_t j)
{
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		for (size_t i = 0; !p->zombie && i < p->nfds; i++)
			if (p->fds[i].kind == SNAP_FD_SHM && p->fds[i].size == j)
				return &p->fds[i];
	}
	return NULL;
}

/* A memfd made again under its name; a file created at its path (never over
 * another: the run's tmpfs is fresh), a deleted one unlinked at once, given its
 * mode. */
static int create_object(struct trace_tracee *root, uint64_t scratch, const struct snap_shm *g,
			 int64_t *fd, struct common_err *e)
{
	char what[SNAP_SHM_PATH_MAX + 32];
	snprintf(what, sizeof what, "create %s", g->name);
	if (trace_tracee_write(root, scratch, g->name, strlen(g->name) + 1, e) < 0)
		return -1;
	if (g->kind == SNAP_SHM_MEMFD)
		return snap_inject(root, "memfd_create", SYS_memfd_create, scratch,
				   g->sealable ? MFD_ALLOW_SEALING : 0, 0, 0, fd, e);
	if (snap_inject(root, what, SYS_openat, (uint64_t)AT_FDCWD, scratch,
			O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, g->mode, fd, e) < 0)
		return -1;
	return (g->kind == SNAP_SHM_FILE &&
		snap_inject(root, "unlink", SYS_unlinkat, (uint64_t)AT_FDCWD, scratch, 0, 0, NULL, e) < 0) ||
	       snap_inject(root, "fchmod", SYS_fchmod, (uint64_t)*fd, g->mode, 0, 0, NULL, e) < 0 ? -1 : 0;
}

static int make_object(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		       size_t j, uint32_t slot, struct common_err *e)
{
	const struct snap_shm *g = &st->shms[j];
	const struct snap_fd *f = first_fd(st, j);
	int64_t fd, got;
	if (create_object(root, scratch, g, &fd, e) < 0 ||
	    snap_inject(root, "fcntl(F_DUPFD)", SYS_fcntl, (uint64_t)fd, F_DUPFD, slot, 0, &got, e) < 0 ||
	    snap_inject(root, "close", SYS_close, (uint64_t)fd, 0, 0, 0, NULL, e) < 0 ||
	    (f && snap_inject(root, "lseek", SYS_lseek, slot, f->pos, SEEK_SET, 0, NULL, e) < 0))
		return -1;
	if (got != slot)
		return common_errf(e, "restore", "shared memory holder landed on fd %lld, not %u",
				   (long long)got, slot);
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)root->tid, slot);
	int w = open(p, O_RDWR | O_CLOEXEC);
	if (w < 0)
		return common_errno(e, errno, "open %s", p);
	int rc = put_content(g, write_fd, &w) < 0 ? common_errno(e, errno, "fill %s", g->name) : 0;
	close(w);
	/* whole pages were written: the size last */
	return rc < 0 ? -1 : snap_inject(root, "ftruncate", SYS_ftruncate, slot, g->size, 0, 0, NULL, e);
}

/* A free stretch for the anonymous objects' holder mapping, in the root now and
 * outside every process's regions and brk area (each keeps it until rebuilt). */
static int anon_area(struct trace_tracee *root, const struct snap_state *st, uint64_t len,
		     uint64_t *at, struct common_err *e)
{
	for (uint64_t a = 0x100000000ull; a < ((uint64_t)1 << 46); a += 0x10000000ull) {
		int clash = 0;
		for (size_t k = 0; k <= st->nprocs && !clash; k++) {
			const struct snap_state *p = k ? &st->procs[k - 1] : st;
			if (p->zombie)
				continue;
			clash = a < PAGE_UP(p->brk) + SNAP_PAGE && p->start_brk < a + len;
			for (size_t i = 0; i < p->nregions && !clash; i++)
				clash = a < p->regions[i].end && p->regions[i].start < a + len;
		}
		int64_t got;
		uint64_t m[6] = { a, len, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
		if (clash || trace_tracee_inject(root, SYS_mmap, m, &got, e) < 0)
			continue;
		if ((uint64_t)got == a) {
			*at = a;
			return 0;
		}
	}
	return common_errf(e, "restore", "no free address for %" PRIu64 " bytes of shared memory", len);
}

int snap_shm_holders(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		     struct snap_hosts *h, struct common_err *e)
{
	uint64_t len = anon_at(st, st->nshms);
	h->shm_fd = h->base + 2 * (uint32_t)st->npipes + 3;
	if (len && anon_area(root, st, len, &h->shm_at, e) < 0)
		return -1;
	h->shm_len = len;
	for (size_t j = 0; j < st->nshms; j++) {
		const struct snap_shm *g = &st->shms[j];
		struct mem_at m = { root, h->shm_at + anon_at(st, j), e };
		if (g->kind != SNAP_SHM_ANON ? make_object(root, scratch, st, j, h->shm_fd + (uint32_t)j, e) < 0
					     : put_content(g, write_mem, &m) < 0)
			return -1;
	}
	return 0;
}

int snap_shm_map(struct trace_tracee *t, const struct snap_region *r, const struct snap_state *root,
		 const struct snap_hosts *h, struct common_err *e)
{
	size_t j = (size_t)(r->offset >> 32);
	uint64_t off = r->offset & 0xffffffffu, len = r->end - r->start;
	int64_t got;
	int rc;
	if (root->shms[j].kind != SNAP_SHM_ANON) {
		uint64_t a[6] = { r->start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
				  h->shm_fd + j, off };
		rc = trace_tracee_inject(t, SYS_mmap, a, &got, e);
	} else {
		uint64_t a[6] = { h->shm_at + anon_at(root, j) + off, 0, len,
				  MREMAP_MAYMOVE | MREMAP_FIXED, r->start, 0 };
		rc = trace_tracee_inject(t, SYS_mremap, a, &got, e);
	}
	if (rc < 0)
		return -1;
	if ((uint64_t)got != r->start)
		return common_errf(e, "restore", "shared memory object %zu at %#" PRIx64 ": %s", j,
				   r->start, got < 0 && got > -4096 ? strerror((int)-got) : "moved");
	return 0;
}
