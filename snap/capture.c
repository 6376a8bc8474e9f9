/* snap: capturing a stopped guest (its process tree, each process with its
 * threads) into the canonical encoding. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <unistd.h>
#include "snap/snap-internal.h"

#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

int snap_map_kind(const struct trace_map *m)
{
	if (!strcmp(m->path, "[vvar]") || !strcmp(m->path, "[vvar_vclock]") ||
	    !strcmp(m->path, "[vsyscall]"))
		return -1;
	if (!strcmp(m->path, "[vdso]"))
		return SNAP_REGION_VDSO;
	if (!strcmp(m->path, "[heap]"))
		return SNAP_REGION_HEAP;
	if (!strcmp(m->path, "[stack]"))
		return SNAP_REGION_STACK;
	if (m->perms[3] == 's' && snap_sysv_mapping(m->path))
		return SNAP_REGION_SYSV;
	if (m->perms[3] == 's' && snap_shm_mapping(m->path))
		return SNAP_REGION_SHM;
	if (m->path[0] == '/')
		return SNAP_REGION_FILE;
	return SNAP_REGION_ANON;
}

/* Registers in canonical form: never inside a syscall (orig_rax = -1); a
 * syscall caught at entry or interrupted for a restart runs again from its
 * instruction. */
int snap_canon_regs(pid_t pid, struct user_regs_struct *r, struct common_err *e)
{
	int rc = trace_regs_get(pid, r);
	if (rc < 0)
		return common_errno(e, -rc, "capture registers of %d", (int)pid);
	int op = trace_syscall_op(pid);
	if (op < 0)
		return common_errno(e, -op, "PTRACE_GET_SYSCALL_INFO of %d", (int)pid);
	if (op == PTRACE_SYSCALL_INFO_ENTRY || op == PTRACE_SYSCALL_INFO_SECCOMP) {
		r->rip -= 2;
		r->rax = r->orig_rax;
	} else if ((int64_t)r->orig_rax >= 0) {
		int64_t rv = (int64_t)r->rax;
		/* a sleep or poll with a restart block starts over with its own
		 * arguments: the kernel's restart state is not part of a snapshot */
		if (rv == -ERESTARTSYS || rv == -ERESTARTNOINTR || rv == -ERESTARTNOHAND ||
		    rv == -ERESTART_RESTARTBLOCK) {
			r->rip -= 2;
			r->rax = r->orig_rax;
		}
	}
	r->orig_rax = (uint64_t)-1;
	return 0;
}

static int read_umask(pid_t pid, uint32_t *um, struct common_err *e)
{
	struct trace_status s;
	unsigned long long v;
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
	int rc = trace_status_read(pid, &s);
	if (rc < 0)
		return common_errno(e, -rc, "%s", p);
	rc = trace_status_num(&s, "Umask", 8, &v);
	trace_status_free(&s);
	if (rc < 0)
		return common_errf(e, p, "no Umask line");
	*um = (uint32_t)v;
	return 0;
}

static int read_link(const char *p, char *out, size_t cap, struct common_err *e)
{
	ssize_t n = readlink(p, out, cap - 1);
	if (n < 0)
		return common_errno(e, errno, "readlink %s", p);
	out[n] = 0;
	return 0;
}

static int hash_fd_file(const char *p, uint8_t out[32], uint64_t *size, struct common_err *e)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "open %s", p);
	struct common_sha256 h;
	common_sha256_init(&h);
	uint8_t *buf = common_xmalloc(1 << 20);
	uint64_t total = 0;
	ssize_t n;
	while ((n = read(fd, buf, 1 << 20)) > 0) {
		common_sha256_update(&h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	int err = n < 0 ? errno : 0;
	free(buf);
	close(fd);
	common_sha256_final(&h, out);
	if (err)
		return common_errno(e, err, "read %s", p);
	*size = total;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* A pipe end: pos is the pipe's inode until snap_pipes_capture numbers it. A
 * named FIFO's end (version 5) carries its path, and its mode in size. */
static int pipe_fd(struct snap_fd *f, const char *link, const struct stat *sb, uint32_t version,
		   struct common_err *e)
{
	int named = strncmp(link, "pipe:[", 6) != 0;
	if (named && (version < 5 || link[0] != '/' || strstr(link, " (deleted)")))
		return common_errf(e, "capture", "fd %u: named FIFO %s is not supported%s", f->fd,
				   link, version < 5 ? "" : " (it is not reachable by its path)");
	/* a named FIFO's (version 7) is opened again at its path */
	if ((f->flags & O_ACCMODE) == O_RDWR && (!named || version < 7))
		return common_errf(e, "capture", "fd %u: %s%s opened for reading and writing "
				   "is not supported", f->fd, named ? "named FIFO " : "a pipe",
				   named ? link : "");
	f->kind = SNAP_FD_PIPE;
	f->path = common_xstrdup(named ? link : "");
	f->size = named ? (uint64_t)(sb->st_mode & 07777) : 0;
	f->pos = (uint64_t)sb->st_ino;
	f->flags &= O_ACCMODE | O_NONBLOCK | O_CLOEXEC;
	return 0;
}

/* The descriptor numbers of pid, ascending (an object is captured at the
 * lowest descriptor that holds it). */
static int fd_numbers(pid_t pid, uint32_t **out, size_t *n, struct common_err *e)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return common_errno(e, errno, "open %s", dir);
	size_t cap = 16;
	*out = common_xcalloc(cap, sizeof **out);
	*n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (*n == cap)
			*out = common_xrealloc(*out, (cap *= 2) * sizeof **out);
		(*out)[(*n)++] = (uint32_t)strtoul(de->d_name, NULL, 10);
	}
	closedir(d);
	qsort(*out, *n, sizeof **out, cmp_u32);
	return 0;
}

/* One descriptor of a process (root: the tree's root): its kind, flags and
 * what it names. */
static int capture_fd(struct snap_fdctx *c, struct snap_fd *f, struct snap_state *st,
		      const struct snap_std *sd, int root, struct common_err *e)
{
	char p[128], link[SNAP_STR_MAX], info[128], *buf;
	size_t len;
	struct stat sb;
	snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)c->pid, f->fd);
	if (read_link(p, link, sizeof link, e) < 0)
		return -1;
	if (stat(p, &sb) < 0)
		return common_errno(e, errno, "stat %s", p);
	snprintf(info, sizeof info, "/proc/%d/fdinfo/%u", (int)c->pid, f->fd);
	if (common_read_file(info, 65536, &buf, &len, e) < 0)
		return -1;
	char *q = strstr(buf, "pos:"), *fl = strstr(buf, "flags:");
	f->pos = q ? strtoull(q + 4, NULL, 10) : 0;
	f->flags = fl ? (uint32_t)strtoul(fl + 6, NULL, 8) : 0;
	free(buf);
	int stream = snap_std_fd(sd, c->pid, root, f, &sb, e);
	if (stream)
		return stream < 0 ? -1 : 0;
	if (S_ISFIFO(sb.st_mode) && st->version >= 4)
		return pipe_fd(f, link, &sb, st->version, e);
	if (S_ISREG(sb.st_mode) && st->version >= 5 && snap_shm_fd(c->pid, link, &sb, st->version)) {
		/* numbered with the tree's shared memory (snap_shm_capture) */
		if ((f->flags & O_ACCMODE) != O_RDWR)
			return common_errf(e, "capture", "fd %u: %s opened read-only or write-only "
					   "is not supported", f->fd, link);
		f->kind = SNAP_FD_SHM;
		f->path = common_xstrdup("");
		f->size = (uint64_t)sb.st_ino;
		f->flags &= O_CLOEXEC | O_NONBLOCK | O_APPEND;
		return 0;
	}
	if (st->version >= 4 && snap_fd_is_object(&sb)) {
		/* an object another process shares is the tree's (version 6,
		 * snap_kobjs_capture; refused before); version 4 holds the
		 * root's only */
		if (!root && st->version < 5)
			return common_errf(e, "capture", "fd %u of process %u: %s: a descriptor "
					   "object outside the root process is not supported",
					   f->fd, st->pid, link);
		f->kind = SNAP_FD_OBJECT;
		f->path = common_xstrdup("");
		f->pos = 0;
		f->flags &= O_CLOEXEC | O_NONBLOCK;
		return snap_fd_object(c, f, link, &sb, st, e);
	}
	if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode) && !S_ISCHR(sb.st_mode))
		return common_errf(e, "capture", "fd %u: %s cannot be snapshotted "
				   "(special files are not supported)", f->fd, link);
	if (link[0] != '/' || strstr(link, " (deleted)"))
		return common_errf(e, "capture", "fd %u: %s is not a reachable file", f->fd, link);
	f->kind = S_ISREG(sb.st_mode) ? SNAP_FD_FILE : S_ISDIR(sb.st_mode) ? SNAP_FD_DIR : SNAP_FD_DEV;
	f->path = common_xstrdup(link);
	if (f->kind == SNAP_FD_DIR)
		f->pos = 0;
	return f->kind == SNAP_FD_FILE ? hash_fd_file(p, f->hash, &f->size, e) : 0;
}

/* The descriptors of process k of tree (its host pid hosts[k]) into st; tree
 * NULL: its objects all read from it. */
static int capture_fds(const struct snap_state *tree, const pid_t *hosts, size_t k,
		       struct snap_state *st, const struct snap_std *sd,
		       const struct snap_state *expect, struct common_err *e)
{
	pid_t pid = hosts[k];
	int root = k == 0;
	uint32_t *nums = NULL;
	size_t n = 0;
	struct snap_fdctx c;
	if (fd_numbers(pid, &nums, &n, e) < 0)
		return -1;
	snap_fdctx_init(&c, pid);
	c.expect = expect;
	c.tree = tree;
	c.hosts = hosts;
	c.k = k;
	st->fds = common_xcalloc(n + 1, sizeof *st->fds);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct snap_fd *f = &st->fds[st->nfds++];
		f->fd = nums[i];
		rc = capture_fd(&c, f, st, sd, root, e);
	}
	if (rc == 0 && st->version >= 4)
		rc = snap_objects_link(st, e);
	snap_fdctx_close(&c);
	free(nums);
	return rc;
}

static void add_region(struct snap_state *st, struct snap_region r, const char *path)
{
	struct snap_region *prev = st->nregions ? &st->regions[st->nregions - 1] : NULL;
	/* the kernel splits and merges VMAs as it likes: one region per run */
	if (prev && prev->end == r.start && prev->prot == r.prot && prev->kind == r.kind &&
	    r.kind != SNAP_REGION_VDSO &&
	    ((r.kind != SNAP_REGION_SYSV && r.kind != SNAP_REGION_SHM) ||
	     prev->offset + (prev->end - prev->start) == r.offset) &&
	    (r.kind != SNAP_REGION_FILE ||
	     (!strcmp(prev->path, path) && prev->offset + (prev->end - prev->start) == r.offset))) {
		prev->end = r.end;
		return;
	}
	/* a shared memory object's name, until snap_shm_capture reads it */
	if (r.kind == SNAP_REGION_FILE || r.kind == SNAP_REGION_SHM)
		r.path = common_xstrdup(path);
	st->regions[st->nregions++] = r;
}

/* A shared mapping that may be made writable (VmFlags "mw": its file is open for
 * writing), such as one the storage meter holds read-only until a page is charged. */
static int shared_may_write(pid_t pid, uint64_t start, struct common_err *e)
{
	char p[64], *buf, *at, head[32];
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/smaps", (int)pid);
	if (common_read_file(p, (size_t)64 << 20, &buf, &len, e) < 0)
		return -1;
	snprintf(head, sizeof head, "\n%" PRIx64 "-", start);
	int mw = 1; /* not found: refused, never guessed */
	if ((at = strstr(buf, head)) || (!strncmp(buf, head + 1, strlen(head + 1)) && (at = buf))) {
		char *flags = strstr(at, "\nVmFlags:"), *eol = flags ? strchr(flags + 1, '\n') : NULL;
		if (eol)
			*eol = 0;
		mw = !flags || strstr(flags, " mw") != NULL;
	}
	free(buf);
	return mw;
}

/* The kind mapping m of pid is captured as: a shared mapping that may store into
 * a file still linked on a tmpfs of the run is a shared memory object (version 7),
 * named by its link (m->path rewritten when it mapped a name since removed). */
static int region_kind(pid_t pid, struct trace_map *m, uint32_t version)
{
	if (version >= 7 && m->perms[3] == 's')
		snap_shm_relinked(pid, m);
	int kind = snap_map_kind(m);
	if (kind == SNAP_REGION_FILE && version >= 7 && m->perms[3] == 's' &&
	    snap_shm_named(pid, m) && (m->perms[1] == 'w' || shared_may_write(pid, m->start, NULL) == 1))
		return SNAP_REGION_SHM;
	return kind;
}

/* What a snapshot cannot hold, refused while the guest is untouched: a shared
 * mapping that can be written (or that no file names), a deleted file (but one
 * shared on a tmpfs of the run, version 7). A shared read-only file mapping is
 * held by content and mapped shared again. */
static int refuse_mappings(pid_t pid, uint32_t version, int root, struct common_err *e)
{
	struct trace_map *m;
	size_t n;
	int rc = 0;
	if (trace_proc_maps(pid, &m, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int kind = region_kind(pid, &m[i], version);
		/* SysV segments and shared memory objects are the tree's (version 5) */
		int deleted = snap_shm_deleted(m[i].path);
		if (kind < 0 || (kind == SNAP_REGION_SYSV && version >= 4 && (root || version >= 5)) ||
		    (kind == SNAP_REGION_SHM && version >= 5 && !deleted) ||
		    (kind == SNAP_REGION_SHM && version >= 7 && snap_shm_on_tmpfs(pid, m[i].path, m[i].dev)))
			continue;
		if (kind == SNAP_REGION_SHM)
			rc = common_errf(e, "capture", "mapping of deleted file %s is not supported%s",
					 m[i].path, version < 7 ? " (before version 7)" :
					 " (only on a tmpfs of the run, its directory still there)");
		else if (kind == SNAP_REGION_SYSV)
			rc = common_errf(e, "capture", "SysV shared memory at %#" PRIx64 " %s",
					 m[i].start, root ? "needs a version 4 snapshot" :
					 "outside the root process is not supported");
		else if (kind == SNAP_REGION_FILE && strstr(m[i].path, " (deleted)"))
			rc = common_errf(e, "capture", "mapping of deleted file %s is not supported",
					 m[i].path);
		else if (m[i].perms[3] == 's' && (kind != SNAP_REGION_FILE || m[i].perms[1] == 'w' ||
						  shared_may_write(pid, m[i].start, e) != 0))
			rc = common_errf(e, "capture", "shared %s mapping %#" PRIx64 "-%#" PRIx64
					 " %s is not supported (only read-only shared file mappings, "
					 "shared anonymous memory and memfds are)",
					 kind != SNAP_REGION_FILE ? "anonymous" : "writable", m[i].start,
					 m[i].end, m[i].path[0] ? m[i].path : "(anonymous)");
	}
	free(m);
	return rc;
}

static int capture_regions(pid_t pid, struct snap_state *st, const struct snap_capture_opts *o,
			   struct common_err *e)
{
	struct trace_map *m;
	size_t n;
	if (trace_proc_maps(pid, &m, &n, e) < 0)
		return -1;
	/* room for each mapping split in three around the brk area */
	st->regions = common_xcalloc(3 * n + 1, sizeof *st->regions);
	uint64_t hs = st->start_brk, he = (st->brk + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1);
	for (size_t i = 0; i < n; i++) {
		int kind = region_kind(pid, &m[i], st->version);
		if (kind < 0)
			continue;
		struct snap_region r = {
			.start = m[i].start, .end = m[i].end, .kind = (uint32_t)kind,
			.prot = (m[i].perms[0] == 'r' ? 1u : 0) | (m[i].perms[1] == 'w' ? 2u : 0) |
				(m[i].perms[2] == 'x' ? 4u : 0) |
				(m[i].perms[3] == 's' ? SNAP_PROT_SHARED : 0),
			.offset = kind == SNAP_REGION_ANON || kind == SNAP_REGION_HEAP || kind == SNAP_REGION_STACK ||
				  kind == SNAP_REGION_VDSO ? 0 : m[i].offset,
		};
		if (kind == SNAP_REGION_SYSV || kind == SNAP_REGION_SHM) {
			/* the segment's id, the object's inode (renumbered later) */
			uint32_t id;
			if (snap_sysv_id(pid, m[i].start, &id, e) < 0) {
				free(m);
				return -1;
			}
			r.prot &= ~SNAP_PROT_SHARED; /* shared by kind */
			r.offset |= (uint64_t)id << 32;
			/* a mapping the storage meter holds: as the guest asked for it
			 * (the restoring run's meter holds it again) */
			int asked;
			if (o->held_prot && o->held_prot(o->held_ctx, pid, r.start, r.end - r.start, &asked))
				r.prot = (uint32_t)asked & 7u;
		}
		if (kind != SNAP_REGION_ANON && kind != SNAP_REGION_HEAP) {
			add_region(st, r, m[i].path);
			continue;
		}
		/* anonymous memory is heap exactly where it lies in the brk area,
		 * however the kernel merged the VMAs */
		uint64_t cut[4] = { r.start, r.end, r.end, r.end };
		if (hs < r.end && r.start < he) {
			cut[1] = hs > r.start ? hs : r.start;
			cut[2] = he < r.end ? he : r.end;
		} else {
			cut[1] = cut[2] = r.end;
		}
		for (int k = 0; k < 3; k++) {
			if (cut[k] >= cut[k + 1])
				continue;
			struct snap_region piece = r;
			piece.start = cut[k];
			piece.end = cut[k + 1];
			piece.kind = k == 1 ? SNAP_REGION_HEAP : SNAP_REGION_ANON;
			add_region(st, piece, "");
		}
	}
	free(m);
	return 0;
}

/* One process being captured, and what puts it back as it was on failure. */
struct cap_proc {
	pid_t pid;
	struct trace_tracee t;
	int pagemap;
	struct user_regs_struct entry, regs;
	uint64_t sigmask;
	int touched, mask_set;
	struct cap_proc *first;      /* the root's */
};

/* Region contents, read from the process whose state holds the region. */
struct fill_ctx {
	struct cap_proc *cp;         /* the root's, then each proc's */
	const struct snap_state *st; /* the root's */
	struct snap_shm_src *shm;    /* where each shared memory object is read */
};

static struct cap_proc *owner(struct fill_ctx *c, const struct snap_region *r,
			      const struct snap_state **st)
{
	for (size_t k = 0; k <= c->st->nprocs; k++) {
		const struct snap_state *p = k ? &c->st->procs[k - 1] : c->st;
		if (r >= p->regions && r < p->regions + p->nregions) {
			*st = p;
			return &c->cp[k];
		}
	}
	*st = c->st;
	return &c->cp[0];
}

/* Region content: a shared memory object's, or read from the process whose
 * state holds the region (held: the pages are known to be held, pagemap is
 * not asked which are). */
static int region_pages(struct fill_ctx *fc, const struct snap_region *whole, uint64_t first,
			uint64_t pages, uint8_t *dst, int held, struct common_err *e)
{
	const struct snap_state *st;
	for (size_t j = 0; j < fc->st->nshms; j++)
		if (whole == &fc->st->shms[j].content)
			return snap_shm_fill(fc->shm, j, first, pages, dst, e);
	struct cap_proc *c = owner(fc, whole, &st);
	return snap_pages_read(&c->t, c->pagemap, st, whole, first, pages, dst, held, e);
}

static int fill_region(void *ctx, const struct snap_region *r, uint64_t first, uint64_t pages,
		       uint8_t *dst, struct common_err *e)
{
	return region_pages(ctx, r, first, pages, dst, 0, e);
}

static int read_region(void *ctx, const struct snap_region *r, uint64_t first, uint64_t pages,
		       uint8_t *dst, struct common_err *e)
{
	return region_pages(ctx, r, first, pages, dst, 1, e);
}

static int64_t held_pages(void *ctx, const struct snap_region *r, uint8_t *bm)
{
	struct fill_ctx *fc = ctx;
	const struct snap_state *st;
	for (size_t j = 0; j < fc->st->nshms; j++)
		if (r == &fc->st->shms[j].content)
			return -1;
	return snap_pages_held(owner(fc, r, &st)->pagemap, r, bm);
}

/* Queued signals, the thread's then the process's, in queue order. */
static int capture_pending(pid_t pid, struct snap_state *st, struct common_err *e)
{
	st->pending = common_xcalloc(SNAP_PENDING_MAX, sizeof *st->pending);
	for (uint32_t shared = 0; shared < 2; shared++) {
		for (uint64_t off = 0;; off++) {
			uint8_t info[128];
			int n = trace_sigqueue_peek(pid, (int)shared, off, info);
			if (n < 0)
				return common_errno(e, -n, "PTRACE_PEEKSIGINFO of %d", (int)pid);
			if (n == 0)
				break;
			if (st->npending == SNAP_PENDING_MAX)
				return common_errf(e, "capture", "more than %d pending signals",
						   SNAP_PENDING_MAX);
			struct snap_sigpend *q = &st->pending[st->npending++];
			int signo;
			memcpy(&signo, info, sizeof signo);
			q->sig = (uint32_t)signo;
			q->shared = shared;
			memcpy(q->info, info, sizeof info);
		}
	}
	return 0;
}

struct cell_list {
	struct snap_cell *c;
	size_t n, cap;
	uint64_t bytes;
	const struct snap_state *tree; /* its named FIFOs are made again by their holders */
};

static int held_fifo(const struct snap_state *st, const struct stat *sb)
{
	for (size_t i = 0; st && i < st->npipes; i++)
		if (st->pipes[i].ino == (uint64_t)sb->st_ino && st->pipes[i].dev == (uint64_t)sb->st_dev)
			return 1;
	return 0;
}

static int walk_cells(const char *root, const char *rel, struct cell_list *l,
		      struct common_err *e)
{
	char *dir = rel[0] ? common_xasprintf("%s/%s", root, rel) : common_xstrdup(root);
	DIR *d = opendir(dir);
	if (!d) {
		int rc = common_errno(e, errno, "open namespace directory %s", dir);
		free(dir);
		return rc;
	}
	struct dirent *de;
	int rc = 0;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *key = rel[0] ? common_xasprintf("%s/%s", rel, de->d_name)
				   : common_xstrdup(de->d_name);
		char *full = common_xasprintf("%s/%s", root, key);
		struct stat sb;
		if (lstat(full, &sb) < 0) {
			rc = common_errno(e, errno, "stat %s", full);
		} else if (S_ISDIR(sb.st_mode)) {
			rc = walk_cells(root, key, l, e);
		} else if (S_ISFIFO(sb.st_mode) && !held_fifo(l->tree, &sb)) {
			rc = common_errf(e, "capture", "namespace entry %s is a FIFO no process holds "
					 "open: not supported", key);
		} else if (S_ISFIFO(sb.st_mode)) {
			/* made again, by its path, with its holders (snap_tree_skeleton) */
		} else if (!S_ISREG(sb.st_mode)) {
			rc = common_errf(e, "capture", "namespace entry %s is not a regular file", key);
		} else if (strlen(key) > SNAP_STR_MAX) {
			rc = common_errf(e, "capture", "namespace key %s is too long", key);
		} else {
			char *buf;
			size_t len;
			if (common_read_file(full, SNAP_MAX_BYTES, &buf, &len, e) < 0) {
				rc = -1;
			} else {
				if (l->n == l->cap)
					l->c = common_xrealloc(l->c, (l->cap = l->cap * 2 + 16) * sizeof *l->c);
				l->c[l->n++] = (struct snap_cell){ key, (uint8_t *)buf, len };
				l->bytes += len;
				key = NULL;
				if (l->bytes > SNAP_MAX_BYTES)
					rc = common_errf(e, "capture", "namespace holds more than %llu bytes",
							 (unsigned long long)SNAP_MAX_BYTES);
			}
		}
		free(key);
		free(full);
	}
	closedir(d);
	free(dir);
	return rc;
}

static int cmp_cell(const void *a, const void *b)
{
	return strcmp(((const struct snap_cell *)a)->key, ((const struct snap_cell *)b)->key);
}

/* Injected queries: brk(0), every signal action, the altstack. A scratch
 * spot in a writable mapping receives the answers and is put back after. */
static const struct snap_region *scratch_region(const struct snap_state *st,
						 struct common_err *e)
{
	for (size_t i = 0; i < st->nregions; i++)
		if ((st->regions[i].prot & 2) && st->regions[i].kind != SNAP_REGION_VDSO)
			return &st->regions[i];
	common_errf(e, "capture", "no writable mapping for injected queries");
	return NULL;
}

static int query_kernel_state(struct trace_tracee *t, struct snap_state *st,
			      struct common_err *e)
{
	const struct snap_region *w = scratch_region(st, e);
	if (!w)
		return -1;
	uint8_t saved[64], buf[32];
	if (trace_tracee_read(t, w->start, saved, sizeof saved, e) < 0)
		return -1;
	int64_t ret;
	uint64_t a[6] = { 0 };
	int rc = 0;
	(void)a;
	for (int sig = 1; sig <= SNAP_NSIG && rc == 0; sig++) {
		if (sig == 9 || sig == 19)
			continue;
		uint64_t q[6] = { (uint64_t)sig, 0, w->start, 8, 0, 0 };
		if (trace_tracee_inject(t, SYS_rt_sigaction, q, &ret, e) < 0 ||
		    trace_tracee_read(t, w->start, buf, 32, e) < 0) {
			rc = -1;
			break;
		}
		if (ret < 0) {
			rc = common_errf(e, "capture", "rt_sigaction(%d) query failed: %s", sig,
					 strerror((int)-ret));
			break;
		}
		memcpy(&st->sigact[sig - 1], buf, 32);
	}
	if (rc == 0) {
		uint64_t q[6] = { 0, w->start, 0, 0, 0, 0 };
		if (trace_tracee_inject(t, SYS_sigaltstack, q, &ret, e) < 0 ||
		    trace_tracee_read(t, w->start, buf, 24, e) < 0)
			rc = -1;
		else {
			memcpy(&st->ss_sp, buf, 8);
			memcpy(&st->ss_flags, buf + 8, 4);
			memcpy(&st->ss_size, buf + 16, 8);
		}
	}
	if (trace_tracee_write(t, w->start, saved, sizeof saved, rc ? NULL : e) < 0)
		rc = -1;
	return rc;
}

/* The snapshot is taken from the thread-group leader, whose tid is the pid. */
static int leader_only(pid_t pid, struct common_err *e)
{
	struct trace_status s;
	unsigned long long tgid = 0;
	int rc = trace_status_read(pid, &s);
	if (rc < 0)
		return common_errno(e, -rc, "/proc/%d/status", (int)pid);
	rc = trace_status_num(&s, "Tgid", 10, &tgid);
	trace_status_free(&s);
	if (rc < 0 || tgid != (unsigned long long)pid)
		return common_errf(e, "capture", "thread %d is not its process's leader: a "
				   "snapshot is taken from the leader", (int)pid);
	return 0;
}

/* One live process, its descriptors already read: registers, XSAVE, signals,
 * limits, memory layout, kernel registrations, threads. It is left at the
 * canonical boundary the snapshot describes; c says what to undo on failure. */
static int capture_process(struct cap_proc *c, const struct snap_capture_opts *o,
			   struct snap_state *st, struct common_err *e)
{
	pid_t pid = c->pid;
	int err;
	if ((err = trace_regs_get(pid, &c->entry)) < 0)
		return common_errno(e, -err, "capture registers of %d", (int)pid);
	if (snap_canon_regs(pid, &c->regs, e) < 0)
		return -1;
	memcpy(st->regs, &c->regs, sizeof st->regs);
	uint8_t xbuf[SNAP_XSTATE_MAX];
	size_t xlen = sizeof xbuf;
	struct snap_xlayout xl;
	memset(xbuf, 0, sizeof xbuf);
	if ((err = trace_xstate_get(pid, xbuf, &xlen)) < 0)
		return common_errno(e, -err, "PTRACE_GETREGSET NT_X86_XSTATE of %d", (int)pid);
	st->xstate = common_xmalloc(SNAP_XCANON_SIZE);
	if (snap_xlayout_host(&xl, e) < 0 ||
	    snap_xstate_from_host(&xl, xbuf, xlen, &st->xfeatures, st->xstate, e) < 0)
		return -1;
	if ((err = trace_sigmask_get(pid, &st->sigmask)) < 0)
		return common_errno(e, -err, "PTRACE_GETSIGMASK of %d", (int)pid);
	c->sigmask = st->sigmask;
	/* no signal may be delivered in the middle of our injected syscalls */
	if ((err = trace_sigmask_set(pid, SNAP_INJECT_MASK)) < 0)
		return common_errno(e, -err, "PTRACE_SETSIGMASK of %d", (int)pid);
	c->mask_set = c->touched = 1;
	if (capture_pending(pid, st, e) < 0)
		return -1;
	if (trace_rseq_get(pid, &st->rseq_ptr, &st->rseq_len, &st->rseq_sig) < 0 || !st->rseq_len)
		st->rseq_ptr = st->rseq_len = st->rseq_sig = 0;
	for (int i = 0; i < SNAP_NRLIMIT; i++) {
		struct rlimit rl;
		if ((err = trace_prlimit(pid, i, NULL, &rl)) < 0)
			return common_errno(e, -err, "prlimit of %d", (int)pid);
		st->rlim[i][0] = rl.rlim_cur;
		st->rlim[i][1] = rl.rlim_max;
		/* the target's bounds stand in for the root's only: other processes
		 * were rebuilt with their own */
		if (c == c->first && o->rlim_mask >> i & 1)
			memcpy(st->rlim[i], o->rlim[i], sizeof st->rlim[i]);
	}
	char p[64], link[SNAP_STR_MAX];
	snprintf(p, sizeof p, "/proc/%d/cwd", (int)pid);
	if (read_link(p, link, sizeof link, e) < 0 || read_umask(pid, &st->umask, e) < 0 ||
	    trace_proc_start_brk(pid, &st->start_brk, e) < 0)
		return -1;
	st->cwd = common_xstrdup(link);
	if (trace_tracee_open(&c->t, pid, e) < 0 || trace_tracee_find_syscall(&c->t, e) < 0)
		return -1;
	int64_t brk;
	uint64_t none[6] = { 0 };
	if (trace_tracee_inject(&c->t, SYS_brk, none, &brk, e) < 0)
		return -1;
	st->brk = (uint64_t)brk;
	if (capture_regions(pid, st, o, e) < 0 || query_kernel_state(&c->t, st, e) < 0)
		return -1;
	const struct snap_region *w = scratch_region(st, e);
	/* each process's segments, gathered in the root's list (tree_segments) */
	if (!w || snap_segments_capture(&c->t, w->start, st, e) < 0 ||
	    snap_threads_capture(&c->t, w->start, st, e) < 0)
		return -1;
	/* leave the tracee at the canonical boundary the snapshot describes */
	c->mask_set = 0;
	if ((err = trace_sigmask_set(pid, st->sigmask)) < 0 ||
	    (err = trace_regs_set(pid, &c->regs)) < 0)
		return common_errno(e, -err, "PTRACE_SETREGS of %d", (int)pid);
	snprintf(p, sizeof p, "/proc/%d/pagemap", (int)pid);
	c->pagemap = open(p, O_RDONLY | O_CLOEXEC);
	return 0;
}

/* Version 4: the other processes of the tree, listed (zombies complete). */
static int list_procs(pid_t pid, struct snap_state *st, struct cap_proc **cp,
		      struct common_err *e)
{
	struct snap_task *tasks = NULL;
	size_t n = 0;
	*cp = common_xcalloc(1, sizeof **cp);
	(*cp)[0] = (struct cap_proc){ .pid = pid, .pagemap = -1, .t = { .memfd = -1 } };
	(*cp)[0].first = *cp;
	if (st->version >= 4 && (snap_tree_orphans(pid, e) < 0 ||
				 snap_tree_list(pid, &tasks, &n, e) < 0))
		return -1;
	st->procs = common_xcalloc(n ? n : 1, sizeof *st->procs);
	*cp = common_xrealloc(*cp, (n + 1) * sizeof **cp);
	memset(*cp, 0, (n + 1) * sizeof **cp);
	int rc = 0;
	for (size_t k = 0; k <= n; k++) {
		(*cp)[k].pid = k ? tasks[k - 1].host : pid;
		(*cp)[k].pagemap = -1;
		(*cp)[k].t.memfd = -1;
		(*cp)[k].first = *cp;
	}
	for (size_t k = 0; k < n && rc == 0; k++) {
		struct snap_state *p = &st->procs[k];
		st->nprocs = k + 1;
		p->version = st->version;
		p->pid = tasks[k].ns;
		p->ppid = tasks[k].ns_ppid;
		p->zombie = (uint32_t)tasks[k].zombie;
		p->wstatus = p->zombie ? tasks[k].wstatus : 0;
		if (p->zombie && (p->wstatus & ~0xff7fu))
			rc = common_errf(e, "capture", "process %u dumped core: such a zombie is "
					 "not supported", p->pid);
	}
	free(tasks);
	return rc;
}

/* What may refuse the snapshot, read before any process is touched: each
 * live process's mappings and descriptors, its program, the pipes' bytes. */
static int precheck(struct snap_state *st, struct cap_proc *cp, const struct snap_state *expect,
		    const int *std_fds, struct common_err *e)
{
	struct snap_std sd;
	snap_std_read(cp[0].pid, std_fds, &sd);
	pid_t *hosts = common_xcalloc(st->nprocs + 1, sizeof *hosts);
	int rc = 0;
	for (size_t k = 0; k <= st->nprocs && rc == 0; k++) {
		struct snap_state *p = k ? &st->procs[k - 1] : st;
		char path[64], link[SNAP_STR_MAX];
		hosts[k] = cp[k].pid;
		if (p->zombie)
			continue;
		snprintf(path, sizeof path, "/proc/%d/exe", (int)cp[k].pid);
		if (refuse_mappings(cp[k].pid, st->version, k == 0, e) < 0 ||
		    capture_fds(st->version >= 6 ? st : NULL, hosts, k, p, st->version >= 4 ? &sd : NULL,
				!k || !expect ? expect : k <= expect->nprocs ? &expect->procs[k - 1] : NULL,
				e) < 0 ||
		    (st->version >= 4 && read_link(path, link, sizeof link, e) < 0))
			rc = -1;
		else if (st->version >= 4)
			p->exe = common_xstrdup(link);
	}
	if (rc == 0 && st->version >= 4)
		rc = snap_pipes_capture(st, hosts, e);
	if (rc == 0 && st->version == 5)
		rc = snap_objects_unshared(st, hosts, e);
	if (rc == 0 && st->version >= 6)
		rc = snap_kobjs_capture(st, hosts, expect, e);
	free(hosts);
	return rc;
}

/* What the processes share, once every one is captured: SysV segments (in
 * the root's list; none unattached), shared memory objects (version 5). */
static int shared_memory(struct snap_state *st, struct cap_proc *cp, struct snap_shm_src **src,
			 struct common_err *e)
{
	if (st->version < 4 || snap_segments_gather(st, e) < 0 ||
	    snap_segments_unattached(cp[0].pid, st, e) < 0)
		return st->version < 4 ? 0 : -1;
	if (st->version < 5)
		return 0;
	pid_t *hosts = common_xcalloc(st->nprocs + 1, sizeof *hosts);
	struct trace_tracee **t = common_xcalloc(st->nprocs + 1, sizeof *t);
	for (size_t k = 0; k <= st->nprocs; k++) {
		hosts[k] = cp[k].pid;
		t[k] = &cp[k].t;
	}
	int rc = snap_shm_capture(st, hosts, t, src, e);
	free(hosts);
	free(t);
	return rc;
}

static int capture_run(pid_t pid, const struct snap_capture_opts *o, struct snap_image *out,
		       const char *dir, struct snap_manifest *m, struct snap_expect *x,
		       struct common_err *e)
{
	struct snap_state st;
	struct cell_list cells = { 0 };
	struct cap_proc *cp = NULL;
	struct fill_ctx fc = { NULL, &st, NULL };
	int rc = -1;
	memset(&st, 0, sizeof st);

	if (leader_only(pid, e) < 0)
		return -1;
	st.meta = o->meta;
	st.version = o->version ? o->version : SNAP_VERSION;
	st.meta.lease = common_xstrdup(o->meta.lease ? o->meta.lease : "");
	st.meta.principal = common_xstrdup(o->meta.principal ? o->meta.principal : "");
	st.meta.host_program = common_xstrdup(o->meta.host_program ? o->meta.host_program : "");
	st.meta.ns_prefix = common_xstrdup(o->meta.ns_prefix ? o->meta.ns_prefix : "");
	/* a refused snapshot leaves the guest exactly as it was */
	if (list_procs(pid, &st, &cp, e) < 0 || precheck(&st, cp, o->expect, o->std_fds, e) < 0)
		goto out;
	for (size_t k = 0; k <= st.nprocs; k++) {
		struct snap_state *p = k ? &st.procs[k - 1] : &st;
		if (!p->zombie && capture_process(&cp[k], o, p, e) < 0)
			goto out;
	}
	if (shared_memory(&st, cp, &fc.shm, e) < 0 ||
	    (st.version >= 8 && snap_tmps_capture(&st, pid, e) < 0))
		goto out;
	if (o->ns_dir) {
		cells.tree = &st;
		if (walk_cells(o->ns_dir, "", &cells, e) < 0)
			goto out;
		if (cells.n)
			qsort(cells.c, cells.n, sizeof *cells.c, cmp_cell);
		st.cells = cells.c;
		st.ncells = cells.n;
	}
	st.determ = o->determ;
	st.determ_len = o->determ_len;
	fc.cp = cp;
	if (m)
		rc = snap_encode_stream(&st, &(struct snap_source){ fill_region, read_region, held_pages,
								    &fc }, x, dir, o->admit, o->admit_ctx, m, e);
	else
		rc = snap_encode_with(&st, fill_region, &fc, out, e);
out:
	for (size_t k = 0; cp && k <= st.nprocs; k++) {
		if (cp[k].mask_set)
			trace_sigmask_set(cp[k].pid, cp[k].sigmask);
		if (rc < 0 && cp[k].touched)
			trace_regs_set(cp[k].pid, &cp[k].entry);
		if (cp[k].pagemap >= 0)
			close(cp[k].pagemap);
		trace_tracee_close(&cp[k].t);
	}
	free(cp);
	for (size_t i = 0; i < cells.n; i++)
		free((void *)cells.c[i].val);
	snap_shm_src_free(fc.shm, st.nshms);
	snap_pipes_free(&st);
	snap_state_free(&st);
	return rc;
}

int snap_capture(pid_t pid, const struct snap_capture_opts *o, struct snap_image *out,
		 struct common_err *e)
{
	return capture_run(pid, o, out, NULL, NULL, NULL, e);
}

int snap_capture_store(pid_t pid, const struct snap_capture_opts *o, const char *dir,
		       struct snap_manifest *m, struct common_err *e)
{
	return capture_run(pid, o, NULL, dir, m, NULL, e);
}

int snap_capture_digest(pid_t pid, const struct snap_capture_opts *o, struct snap_manifest *m,
			struct common_err *e)
{
	return capture_run(pid, o, NULL, NULL, m, NULL, e);
}

int snap_capture_compare(pid_t pid, const struct snap_capture_opts *o, const struct snap_image *im,
			 uint64_t *differs, struct common_err *e)
{
	struct snap_expect x = { o->expect, im->bytes, im->len, UINT64_MAX };
	struct snap_manifest m;
	int rc = capture_run(pid, o, NULL, NULL, &m, &x, e);
	*differs = x.differs;
	return rc;
}
