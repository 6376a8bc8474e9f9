/* trace/tracee: a stopped thread's memory and registers. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>
#include "trace/tracee/tracee.h"

ssize_t trace_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(tid, &l, 1, &r, 1, 0);
	return n < 0 ? -errno : n;
}

ssize_t trace_mem_write(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_writev(tid, &l, 1, &r, 1, 0);
	return n < 0 ? -errno : n;
}

ssize_t trace_mem_read_str(pid_t tid, uint64_t addr, char *buf, size_t max)
{
	size_t got = 0;
	if (max == 0)
		return -ENAMETOOLONG;
	while (got < max) {
		/* page by page: a string may end just before an unmapped page */
		size_t chunk = 4096 - ((addr + got) & 4095);
		if (chunk > max - got)
			chunk = max - got;
		ssize_t n = trace_mem_read(tid, addr + got, buf + got, chunk);
		if (n <= 0)
			return n < 0 ? n : -EFAULT;
		char *z = memchr(buf + got, 0, (size_t)n);
		if (z)
			return z - buf;
		got += (size_t)n;
	}
	buf[max - 1] = 0;
	return -ENAMETOOLONG;
}

static int mem_open(pid_t tid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)tid);
	return open(path, O_RDWR | O_CLOEXEC);
}

ssize_t trace_mem_poke(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	int fd = mem_open(tid);
	if (fd < 0)
		return -errno;
	ssize_t n = pwrite(fd, buf, len, (off_t)addr);
	int err = errno;
	close(fd);
	return n < 0 ? -err : n;
}

int trace_tracee_open(struct trace_tracee *t, pid_t tid, struct common_err *e)
{
	t->tid = tid;
	t->insn = 0;
	t->memfd = mem_open(tid);
	if (t->memfd < 0)
		return common_errno(e, errno, "open /proc/%d/mem", (int)tid);
	return 0;
}

void trace_tracee_close(struct trace_tracee *t)
{
	if (t->memfd >= 0)
		close(t->memfd);
	t->memfd = -1;
}

int trace_tracee_read(struct trace_tracee *t, uint64_t addr, void *buf, size_t len,
		      struct common_err *e)
{
	/* process_vm_readv first: /proc/TID/mem bounces every page through a kernel
	 * page and costs ~5x the CPU (0.8 vs 0.17 s per GiB here); it goes on where
	 * the guest's protections stop process_vm_readv (a short read) */
	ssize_t fast = trace_mem_read(t->tid, addr, buf, len);
	size_t done = fast > 0 ? (size_t)fast : 0;
	while (done < len) {
		ssize_t n = pread(t->memfd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return common_errno(e, n < 0 ? errno : EIO, "read guest memory at %#" PRIx64,
					    addr + done);
		done += (size_t)n;
	}
	return 0;
}

int trace_tracee_write(struct trace_tracee *t, uint64_t addr, const void *buf, size_t len,
		       struct common_err *e)
{
	/* as trace_tracee_read: process_vm_writev where the guest's protections let it */
	ssize_t fast = trace_mem_write(t->tid, addr, buf, len);
	size_t done = fast > 0 ? (size_t)fast : 0;
	while (done < len) {
		ssize_t n = pwrite(t->memfd, (const char *)buf + done, len - done,
				   (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return common_errno(e, n < 0 ? errno : EIO, "write guest memory at %#" PRIx64,
					    addr + done);
		done += (size_t)n;
	}
	return 0;
}

int trace_regs_get(pid_t tid, struct user_regs_struct *r)
{
	return ptrace(PTRACE_GETREGS, tid, NULL, r) < 0 ? -errno : 0;
}

int trace_regs_set(pid_t tid, const struct user_regs_struct *r)
{
	return ptrace(PTRACE_SETREGS, tid, NULL, r) < 0 ? -errno : 0;
}

void trace_regs_set_args(struct user_regs_struct *r, const uint64_t a[6])
{
	r->rdi = a[0], r->rsi = a[1], r->rdx = a[2], r->r10 = a[3], r->r8 = a[4], r->r9 = a[5];
}

int trace_xstate_get(pid_t tid, void *buf, size_t *len)
{
	struct iovec iov = { buf, *len };
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	*len = iov.iov_len;
	return 0;
}

int trace_xstate_set(pid_t tid, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	return ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) < 0 ? -errno : 0;
}

int trace_sigmask_get(pid_t tid, uint64_t *mask)
{
	return ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof *mask, mask) < 0 ? -errno : 0;
}

int trace_sigmask_set(pid_t tid, uint64_t mask)
{
	return ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) < 0 ? -errno : 0;
}

int trace_sigqueue_peek(pid_t tid, int shared, uint64_t off, uint8_t info[128])
{
	struct __ptrace_peeksiginfo_args a = {
		.off = off, .flags = shared ? PTRACE_PEEKSIGINFO_SHARED : 0, .nr = 1 };
	memset(info, 0, 128);
	long n = ptrace(PTRACE_PEEKSIGINFO, tid, &a, info);
	return n < 0 ? -errno : (int)n;
}

int trace_rseq_get(pid_t tid, uint64_t *ptr, uint32_t *len, uint32_t *sig)
{
	struct __ptrace_rseq_configuration c;
	memset(&c, 0, sizeof c);
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, tid, (void *)sizeof c, &c) < 0)
		return -errno;
	*ptr = c.rseq_abi_pointer;
	*len = c.rseq_abi_size;
	*sig = c.signature;
	return 0;
}

int trace_siginfo(pid_t tid, siginfo_t *si)
{
	return ptrace(PTRACE_GETSIGINFO, tid, NULL, si) < 0 ? -errno : 0;
}
