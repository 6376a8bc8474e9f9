/* What one trapped call may store on host files (SPEC §4.1 storage_write), read
 * from the syscall table's argument kinds at the call's seccomp stop: the bytes a
 * write-family call, sendfile, splice or copy_file_range moves into a regular file
 * or block device (pipes, sockets and terminals are not storage), the length
 * fallocate allocates or setxattr stores, the length of a shared file mapping that
 * can be written (the most its stores can put in the file), a mapping's growth, and
 * one inode's worth for every call that may create an inode or a name. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include "trace/meter/meter.h"
#include "trace/tracee/tracee.h"

#define PAGE_ROUND(n) ((n) > UINT64_MAX - 4095 ? UINT64_MAX : ((n) + 4095) & ~(uint64_t)4095)

/* The descriptor is a regular file or a block device (its mode, through /proc);
 * *dev its file system. */
static int fd_stores(pid_t tid, uint64_t fd, dev_t *dev)
{
	char path[64];
	struct stat sb;

	if (fd > INT_MAX)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, (int)fd);
	if (stat(path, &sb) < 0 || !(S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode)))
		return 0;
	if (dev)
		*dev = sb.st_dev;
	return 1;
}

/* The descriptor was opened for writing: a shared mapping of it may become
 * writable later (mprotect), so the mapping counts as writable now. */
static int fd_writable(pid_t tid, uint64_t fd)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)tid, (int)fd);
	if (!(f = fopen(path, "re")))
		return 1; /* cannot tell: count it */
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	if (!(p = strstr(buf, "flags:")))
		return 1;
	return (strtoul(p + 6, NULL, 8) & O_ACCMODE) != O_RDONLY;
}

/* One call moves at most this (the kernel's MAX_RW_COUNT). */
#define RW_MAX (0x7fffffffu & ~4095u)

int trace_vector_read(struct trace_guest *g, const struct trace_stop *st, struct trace_vector *v)
{
	const struct trace_sysinfo *s = st->sys;
	int iov = trace_sys_arg(s, TRACE_ARG_IOV), cnt = trace_sys_arg(s, TRACE_ARG_IOVCNT);

	v->n = 0;
	v->bytes = 0;
	if (iov < 0 || cnt < 0)
		return 0;
	if (st->args[cnt] > IOV_MAX)
		return -EINVAL;
	v->n = (size_t)st->args[cnt];
	if (v->n && trace_guest_read(g, st->args[iov], v->v, v->n * sizeof v->v[0]) !=
		    (ssize_t)(v->n * sizeof v->v[0]))
		return -EFAULT;
	for (size_t i = 0; i < v->n; i++) {
		if (v->v[i].iov_len > SSIZE_MAX - v->bytes)
			return -EINVAL;
		v->bytes += v->v[i].iov_len;
	}
	if (v->bytes > RW_MAX)
		v->bytes = RW_MAX;
	return 1;
}

/* A descriptor a plain read or write never blocks on for long: a file, a block
 * device, a memory device (/dev/zero, /dev/urandom...). */
static int fd_steady(pid_t tid, uint64_t fd)
{
	char path[64];
	struct stat sb;

	if (fd > INT_MAX)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, (int)fd);
	if (stat(path, &sb) < 0)
		return 0;
	return S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode) ||
	       (S_ISCHR(sb.st_mode) && major(sb.st_rdev) == 1);
}

int trace_vector_runs(struct trace_guest *g, const struct trace_stop *st)
{
	int load = st->sys && (st->sys->classes & TRACE_CLASS_LOAD);
	int fd = trace_sys_arg(st->sys, load ? TRACE_ARG_INFD : TRACE_ARG_OUTFD);

	return fd >= 0 && trace_sys_arg(st->sys, TRACE_ARG_IOV) >= 0 &&
	       fd_steady(trace_guest_tid(g), st->args[fd]);
}

/* The plain call a vectored one runs as: read or write, at an offset or not. */
static long vector_plain(const struct trace_stop *st, int positioned)
{
	int load = !!(st->sys->classes & TRACE_CLASS_LOAD);
	const struct trace_sysinfo *p = trace_sys_by_name(load ? (positioned ? "pread64" : "read")
							      : (positioned ? "pwrite64" : "write"));
	return p ? p->nr : -1;
}

int trace_vector_run(struct trace_guest *g, struct trace_stop *st, const struct trace_vector *v,
		     uint64_t cap, int64_t *result)
{
	const struct trace_sysinfo *s = st->sys;
	int load = !!(s->classes & TRACE_CLASS_LOAD);
	int fdk = trace_sys_arg(s, load ? TRACE_ARG_INFD : TRACE_ARG_OUTFD);
	int off = trace_sys_arg(s, TRACE_ARG_OFFSET), fl = trace_sys_arg(s, TRACE_ARG_FLAGS);
	uint64_t flags = fl >= 0 ? st->args[fl] : 0, done = 0;
	/* preadv2/pwritev2 at offset -1 work at the file position */
	int positioned = off >= 0 && !(fl >= 0 && st->args[off] == UINT64_MAX);
	long nr = vector_plain(st, positioned);
	pid_t tid = trace_guest_tid(g);
	int64_t r = 0;
	int rc;

	if (nr < 0)
		return -ENOSYS;
	if (flags & ~(uint64_t)(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT))
		r = -EOPNOTSUPP; /* RWF_APPEND and later flags have no plain form */
	for (size_t i = 0; r == 0 && i < v->n && done < cap; i++) {
		uint64_t len = v->v[i].iov_len < cap - done ? v->v[i].iov_len : cap - done;
		uint64_t a[6] = { st->args[fdk], (uint64_t)(uintptr_t)v->v[i].iov_base, len,
				  positioned ? st->args[off] + done : 0, 0, 0 };
		if (!len)
			continue;
		if ((rc = trace_inject_at_entry(tid, nr, a, &r)) < 0)
			return rc;
		if (r > 0)
			done += (uint64_t)r;
		if (r > 0 && (uint64_t)r == len)
			r = 0; /* whole: on to the next segment */
	}
	if (!load && done && (flags & (RWF_DSYNC | RWF_SYNC))) {
		const struct trace_sysinfo *sync = trace_sys_by_name(flags & RWF_SYNC ? "fsync" : "fdatasync");
		uint64_t a[6] = { st->args[fdk], 0, 0, 0, 0, 0 };
		int64_t sr = 0;
		if (sync && (rc = trace_inject_at_entry(tid, sync->nr, a, &sr)) < 0)
			return rc;
		if (sr < 0)
			done = 0, r = sr;
	}
	*result = done ? (int64_t)done : r;
	/* the call itself moves nothing: none of its segments */
	st->args[trace_sys_arg(s, TRACE_ARG_IOVCNT)] = 0;
	return trace_guest_set_syscall(g, st->nr, st->args);
}

static int shared_file_map(pid_t tid, uint64_t addr)
{
	char path[64], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)tid);
	if (!(f = fopen(path, "re")))
		return 1; /* cannot tell: count it */
	while (!found && fgets(line, sizeof line, f)) {
		unsigned long long lo, hi, ino;
		char perms[8];
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &lo, &hi, perms, &ino) == 4 &&
		    addr >= lo && addr < hi)
			found = (perms[3] == 's' && ino != 0) ? 1 : -1;
		if (!strchr(line, '\n')) /* a long path: skip the rest of its line */
			while (fgets(line, sizeof line, f) && !strchr(line, '\n'))
				;
	}
	fclose(f);
	return found > 0;
}

static int mapping(struct trace_guest *g, const struct trace_stop *st, struct trace_store_call *c)
{
	const struct trace_sysinfo *s = st->sys;
	int len = trace_sys_arg(s, TRACE_ARG_LEN), fl = trace_sys_arg(s, TRACE_ARG_MFLAGS);
	int prot = trace_sys_arg(s, TRACE_ARG_PROT), fd = trace_sys_arg(s, TRACE_ARG_OUTFD);
	int old = trace_sys_arg(s, TRACE_ARG_MAPLEN), at = trace_sys_arg(s, TRACE_ARG_MAPADDR);
	pid_t tid = trace_guest_tid(g);

	if (len < 0)
		return 0;
	if (old >= 0) { /* growing a mapping: the growth, when it is a shared file mapping */
		if (at < 0 || st->args[len] <= st->args[old] || !shared_file_map(tid, st->args[at]))
			return 0;
		c->bytes = PAGE_ROUND(st->args[len]) - PAGE_ROUND(st->args[old]);
		return c->bytes > 0;
	}
	if (fl < 0 || fd < 0 || !(st->args[fl] & MAP_SHARED) || (st->args[fl] & MAP_ANONYMOUS) ||
	    !fd_stores(tid, st->args[fd], NULL))
		return 0;
	if (prot >= 0 && !(st->args[prot] & PROT_WRITE) && !fd_writable(tid, st->args[fd]))
		return 0;
	c->bytes = PAGE_ROUND(st->args[len]);
	return c->bytes > 0;
}

int trace_store_entry(struct trace_guest *g, const struct trace_stop *st,
		      struct trace_store_call *c, struct trace_vector *v)
{
	const struct trace_sysinfo *s = st->sys;
	int out = trace_sys_arg(s, TRACE_ARG_OUTFD), oflags = trace_sys_arg(s, TRACE_ARG_OFLAGS);
	int count = trace_sys_arg(s, TRACE_ARG_COUNT), iov = trace_sys_arg(s, TRACE_ARG_IOV);
	int len = trace_sys_arg(s, TRACE_ARG_LEN);

	memset(c, 0, sizeof *c);
	if (!s || !(s->classes & TRACE_CLASS_STORE))
		return 0;
	if (trace_sys_arg(s, TRACE_ARG_MFLAGS) >= 0 || trace_sys_arg(s, TRACE_ARG_MAPLEN) >= 0) {
		c->mapping = 1;
		return mapping(g, st, c);
	}
	if (oflags >= 0 && !(st->args[oflags] & TRACE_CREATE_FLAGS))
		return 0; /* an open creates nothing without O_CREAT or O_TMPFILE */
	if (out < 0) { /* by path: an xattr's value, or an inode or name created */
		c->bytes = len >= 0 ? st->args[len] : TRACE_INODE_BYTES;
		c->by_path = 1;
		return c->bytes > 0;
	}
	if (!fd_stores(trace_guest_tid(g), st->args[out], &c->dev))
		return 0;
	c->by_result = count >= 0 || iov >= 0;
	if (count >= 0)
		c->bytes = st->args[count];
	else if (iov >= 0) {
		int rc = trace_vector_read(g, st, v);
		c->vector = 1;
		c->refuse = rc < 0 ? -rc : 0;
		c->bytes = v->bytes;
		return 1; /* run per segment, even when it moves nothing */
	}
	else if (len >= 0)
		c->bytes = st->args[len];
	return c->bytes > 0;
}

int64_t trace_store_result(struct trace_guest *g, const struct trace_stop *st)
{
	char path[64];
	struct stat sb;

	int oflags = trace_sys_arg(st->sys, TRACE_ARG_OFLAGS);

	if (oflags < 0 || !(st->args[oflags] & TRACE_CREATE_FLAGS) || st->result < 0)
		return st->result;
	/* O_CREAT makes only regular files: "> /dev/null" created nothing */
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)trace_guest_tid(g), (int)st->result);
	return stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) ? -ENOENT : st->result;
}
