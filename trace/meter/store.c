/* What one trapped call may store on host files (SPEC §4.1 storage_write), read
 * from the syscall table's argument kinds at the call's seccomp stop: the bytes a
 * write-family call, sendfile, splice or copy_file_range moves into a regular file
 * or block device (pipes, sockets and terminals are not storage), the length
 * fallocate allocates or setxattr stores, and one inode's worth for every call that
 * may create an inode or a name; a shared file mapping that can store is held, its
 * pages charged at their first store (mapping.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include "trace/meter/meter.h"
#include "trace/tracee/tracee.h"


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
	unsigned fl;
	/* cannot tell: count it */
	return trace_fdinfo(tid, (int)fd, NULL, &fl) < 0 || (fl & O_ACCMODE) != O_RDONLY;
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

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9 */
#endif

/* The descriptor's socket type (SOCK_DGRAM...) and a duplicate of it in *dup, or 0
 * when it is no socket (or cannot be taken). The thread's own table, which may not
 * be its leader's; before Linux 6.9 only a process has a pidfd. */
static int fd_socket(pid_t tid, pid_t tgid, uint64_t fd, int *dup)
{
	char path[64];
	struct stat sb;
	int type = 0, pfd;
	socklen_t tl = sizeof type;

	*dup = -1;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, (int)fd);
	if (fd > INT_MAX || stat(path, &sb) < 0 || !S_ISSOCK(sb.st_mode))
		return 0;
	if ((pfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD)) < 0 &&
	    (pfd = (int)syscall(SYS_pidfd_open, tgid, 0)) < 0)
		return 0;
	*dup = (int)syscall(SYS_pidfd_getfd, pfd, (int)fd, 0);
	close(pfd);
	if (*dup >= 0 && getsockopt(*dup, SOL_SOCKET, SO_TYPE, &type, &tl) < 0)
		type = 0;
	return type;
}

/* The longest datagram a local socket can carry: a Unix one is held to its sender's
 * buffer (at most twice wmem_max), a UDP one to 64 KiB. */
static size_t dgram_max(void)
{
	unsigned long long w = 0;
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "re");

	if (f && fscanf(f, "%llu", &w) != 1)
		w = 0;
	if (f)
		fclose(f);
	return 2 * w > 65536 ? (size_t)(2 * w) : 65536;
}

/* Copy n received bytes into the segments as the kernel would: bytes placed, or
 * -EFAULT when the first segment cannot take any. */
static int64_t scatter(pid_t tid, const struct trace_vector *v, const uint8_t *b, size_t n)
{
	size_t done = 0;

	for (size_t i = 0; i < v->n && done < n; i++) {
		size_t len = v->v[i].iov_len < n - done ? v->v[i].iov_len : n - done;
		ssize_t w = len ? trace_mem_write(tid, (uint64_t)(uintptr_t)v->v[i].iov_base, b + done, len) : 0;
		if (w > 0)
			done += (size_t)w;
		if (w < (ssize_t)len)
			break;
	}
	return done || !n ? (int64_t)done : -EFAULT;
}

/* A datagram for several segments, taken by the supervisor on its duplicate (never
 * waiting: MSG_DONTWAIT). With none queued on a blocking socket the guest's call
 * becomes recvfrom(fd, NULL, 0, MSG_PEEK), which waits in the guest, not here. */
static int dgram_take(struct trace_guest *g, struct trace_stop *st, int dup, const struct trace_vector *v,
		      uint64_t cap, int64_t *result)
{
	size_t want = cap < v->bytes ? cap : v->bytes, max = dgram_max();
	size_t len = want < max ? want : max; /* more than a datagram can hold is never filled */
	uint8_t *b = common_xmalloc(len);
	ssize_t n = recv(dup, b, len, MSG_DONTWAIT);
	int err = errno, flags = fcntl(dup, F_GETFL);

	if (n >= 0) {
		*result = scatter(trace_guest_tid(g), v, b, (size_t)n);
	} else if ((err == EAGAIN || err == EWOULDBLOCK) && flags >= 0 && !(flags & O_NONBLOCK)) {
		const struct trace_sysinfo *peek = trace_sys_by_name("recvfrom");
		uint64_t a[6] = { st->args[0], 0, 0, MSG_PEEK, 0, 0 };
		free(b);
		if (!peek)
			return -ENOSYS;
		return trace_guest_set_syscall(g, peek->nr, a) < 0 ? -EIO : TRACE_VECTOR_WAIT;
	} else {
		*result = -err;
	}
	free(b);
	return TRACE_VECTOR_TAKEN;
}

int trace_vector_stream(struct trace_guest *g, struct trace_stop *st, const struct trace_vector *v,
			uint64_t cap, int64_t *result)
{
	const struct trace_sysinfo *s = st->sys;
	int off = trace_sys_arg(s, TRACE_ARG_OFFSET), fl = trace_sys_arg(s, TRACE_ARG_FLAGS);
	int cnt = trace_sys_arg(s, TRACE_ARG_IOVCNT), fdk = trace_sys_arg(s, TRACE_ARG_INFD);
	int positioned = off >= 0 && !(fl >= 0 && st->args[off] == UINT64_MAX);
	size_t first = v->n, full = 0;
	uint64_t a[6];
	int way = TRACE_VECTOR_PLAIN, dup = -1, type = 0;
	long nr = st->nr;

	for (size_t i = 0; i < v->n; i++)
		if (v->v[i].iov_len && full++ == 0)
			first = i;
	if (full > 1 && !positioned && cap > 0 && fdk >= 0) /* a plain read would cut a datagram */
		type = fd_socket(trace_guest_tid(g), trace_guest_pid(g), st->args[fdk], &dup);
	memcpy(a, st->args, sizeof a);
	a[cnt] = 0; /* unless it becomes a plain read, the guest's own call moves nothing */
	/* RWF_NOWAIT and later flags have no plain form: as on a descriptor without them */
	if (fl >= 0 && (st->args[fl] & ~(uint64_t)(RWF_HIPRI | RWF_DSYNC | RWF_SYNC))) {
		*result = -EOPNOTSUPP;
		way = TRACE_VECTOR_RESULT;
	} else if (dup >= 0 && (type == SOCK_DGRAM || type == SOCK_SEQPACKET)) {
		way = dgram_take(g, st, dup, v, cap, result);
	} else if (full && cap > 0) { /* the first segment's base and length, in registers */
		nr = vector_plain(st, positioned);
		a[1] = (uint64_t)(uintptr_t)v->v[first].iov_base;
		a[2] = v->v[first].iov_len < cap ? v->v[first].iov_len : cap;
		a[3] = positioned ? st->args[off] : 0;
		a[4] = a[5] = 0;
	}
	if (dup >= 0)
		close(dup);
	if (way == TRACE_VECTOR_WAIT || way < 0)
		return way;
	return nr < 0 ? -ENOSYS : trace_guest_set_syscall(g, nr, a) < 0 ? -EIO : way;
}

/* A mapping call stores nothing itself: an mmap that could store is held and its
 * pages charged at their first store (trace/meter/mapping.c), which keeps mremap
 * and mprotect of it held too. */
static int mapping(struct trace_guest *g, const struct trace_stop *st, struct trace_store_call *c)
{
	const struct trace_sysinfo *s = st->sys;
	int fl = trace_sys_arg(s, TRACE_ARG_MFLAGS), fd = trace_sys_arg(s, TRACE_ARG_OUTFD);
	pid_t tid = trace_guest_tid(g);
	char path[64];
	struct stat sb;

	c->mapping = 1;
	if (fl < 0 || fd < 0 || !(st->args[fl] & MAP_SHARED) || (st->args[fl] & MAP_ANONYMOUS) ||
	    st->args[fd] > INT_MAX || !fd_writable(tid, st->args[fd]))
		return 0;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, (int)st->args[fd]);
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 0; /* a block device's mapping stores too, but sbx gives the guest none */
	c->hold = 1;
	c->dev = sb.st_dev;
	c->ino = sb.st_ino;
	return 0;
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
	if (trace_sys_arg(s, TRACE_ARG_PROT) >= 0 || trace_sys_arg(s, TRACE_ARG_MAPLEN) >= 0)
		return mapping(g, st, c);
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
