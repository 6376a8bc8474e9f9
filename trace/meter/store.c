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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include "trace/meter/meter.h"

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

/* Σ iov_len of the guest's iovec array; 0 for an array the kernel refuses
 * (unreadable, too long), which stores nothing. */
uint64_t trace_store_iov_bytes(struct trace_guest *g, uint64_t addr, uint64_t cnt)
{
	struct iovec v[64];
	uint64_t sum = 0;

	if (cnt > IOV_MAX)
		return 0;
	for (uint64_t done = 0; done < cnt;) {
		size_t k = cnt - done < 64 ? (size_t)(cnt - done) : 64;
		if (trace_guest_read(g, addr + done * sizeof v[0], v, k * sizeof v[0]) !=
		    (ssize_t)(k * sizeof v[0]))
			return 0;
		for (size_t i = 0; i < k; i++)
			sum = sum > UINT64_MAX - v[i].iov_len ? UINT64_MAX : sum + v[i].iov_len;
		done += k;
	}
	return sum;
}

/* The mapping holding addr is shared and backed by a file (an inode). */
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
		      struct trace_store_call *c)
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
	else if (iov >= 0)
		c->bytes = trace_store_iov_bytes(g, st->args[iov], st->args[trace_sys_arg(s, TRACE_ARG_IOVCNT)]);
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
