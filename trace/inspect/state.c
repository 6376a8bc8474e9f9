/* State transport (SPEC §6.4): a memfd at guest fd 3 holding
 * [u64 LE input size incl. header][input][u64 LE result size incl. header][result].
 * The host keeps the result offset itself and trusts no length it reads back. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/inspect/inspect.h"

#define HDR 8u

static void put_le64(uint8_t b[HDR], uint64_t v)
{
	for (unsigned i = 0; i < HDR; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t b[HDR])
{
	uint64_t v = 0;

	for (unsigned i = 0; i < HDR; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

/* pread exactly len bytes at off; -errno, or -EIO when the file ends first. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n, len -= (size_t)n, off += (uint64_t)n;
	}
	return 0;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n, len -= (size_t)n, off += (uint64_t)n;
	}
	return 0;
}

/* Copy len bytes from in (at *inoff) to out (at its position); kernel copy first. */
static int copy_range(int in, uint64_t inoff, int out, uint64_t len)
{
	static uint8_t buf[1 << 16];
	loff_t off = (loff_t)inoff;

	while (len) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = copy_file_range(in, &off, out, NULL, chunk, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len -= (uint64_t)n;
	}
	while (len) {
		size_t chunk = len > sizeof buf ? sizeof buf : (size_t)len;
		int r = pread_full(in, buf, chunk, (uint64_t)off);
		if (r < 0)
			return r;
		if ((r = common_write_all(out, buf, chunk)) < 0)
			return r;
		off += (loff_t)chunk;
		len -= chunk;
	}
	return 0;
}

int trace_state_open(struct trace_state *st, const char *in_path, struct common_err *e)
{
	uint8_t hdr[HDR];
	uint64_t n = 0;
	int fd, r, in = -1;

	st->memfd = -1;
	st->result_off = 0;
	st->out = (struct common_outfile){ .dirfd = -1 };
	if (in_path) {
		struct stat sb;

		in = open(in_path, O_RDONLY | O_CLOEXEC);
		if (in < 0)
			return common_errno(e, errno, "state input %s", in_path);
		if (fstat(in, &sb) < 0 || !S_ISREG(sb.st_mode)) {
			close(in);
			return common_errf(e, in_path, "state input is not a regular file");
		}
		if ((uint64_t)sb.st_size > TRACE_STATE_MAX) {
			close(in);
			return common_errf(e, in_path, "state input of %lld bytes exceeds %llu",
					   (long long)sb.st_size,
					   (unsigned long long)TRACE_STATE_MAX);
		}
		n = (uint64_t)sb.st_size;
	}
	fd = memfd_create("sbx-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		if (in >= 0)
			close(in);
		return common_errno(e, errno, "memfd_create for state transport");
	}
	put_le64(hdr, n + HDR);
	r = pwrite_full(fd, hdr, HDR, 0);
	if (r == 0 && lseek(fd, HDR, SEEK_SET) < 0)
		r = -errno;
	if (r == 0 && in >= 0)
		r = copy_range(in, 0, fd, n);
	if (r < 0) {
		int err = -r;
		close(fd);
		if (in >= 0)
			close(in);
		return common_errno(e, err, "filling state memfd from %s",
				    in_path ? in_path : "(empty input)");
	}
	if (in >= 0)
		close(in);
	st->memfd = fd;
	st->result_off = n + HDR;
	return 0;
}

/* Every length the guest could have touched is checked against the sealed size. */
static int check_result(const struct trace_state *st, uint64_t *payload, struct common_err *e)
{
	uint8_t hdr[HDR];
	struct stat sb;
	uint64_t size, rsize, off = st->result_off;

	if (fstat(st->memfd, &sb) < 0)
		return common_errno(e, errno, "state result: fstat");
	size = (uint64_t)sb.st_size;
	if (size >= HDR && (pread_full(st->memfd, hdr, HDR, 0) < 0 || get_le64(hdr) != off))
		return common_errf(e, "state result", "overlapping: the input header was "
				   "changed (expected %llu)", (unsigned long long)off);
	if (size < off)
		return common_errf(e, "state result", "truncated: transport holds %llu bytes, "
				   "input alone is %llu", (unsigned long long)size,
				   (unsigned long long)off);
	if (size == off)
		return common_errf(e, "state result", "missing: the guest wrote no result");
	if (size - off < HDR)
		return common_errf(e, "state result", "truncated: %llu bytes after the input, "
				   "less than a size header", (unsigned long long)(size - off));
	if (pread_full(st->memfd, hdr, HDR, off) < 0)
		return common_errf(e, "state result", "unreadable size header");
	rsize = get_le64(hdr);
	if (rsize < HDR)
		return common_errf(e, "state result", "malformed: size %llu is smaller than "
				   "its own header", (unsigned long long)rsize);
	if (rsize == HDR)
		return common_errf(e, "state result", "empty: the result image has no bytes");
	if (rsize - HDR > TRACE_STATE_MAX)
		return common_errf(e, "state result", "oversized: %llu bytes exceed %llu",
				   (unsigned long long)(rsize - HDR),
				   (unsigned long long)TRACE_STATE_MAX);
	if (rsize > size - off)
		return common_errf(e, "state result", "truncated: header claims %llu bytes, "
				   "transport holds %llu", (unsigned long long)rsize,
				   (unsigned long long)(size - off));
	if (rsize < size - off)
		return common_errf(e, "state result", "oversized: %llu trailing bytes after "
				   "the result", (unsigned long long)(size - off - rsize));
	*payload = rsize - HDR;
	return 0;
}

static int copy_out(struct trace_state *st, uint64_t len, struct common_err *e)
{
	char *tmp;
	int fd = common_outfile_begin(&st->out, 0644, &tmp, e), r;

	if (fd < 0)
		return -1;
	if ((r = copy_range(st->memfd, st->result_off + HDR, fd, len)) < 0) {
		common_errno(e, -r, "writing state output %s", st->out.path);
		close(fd);
		unlinkat(st->out.dirfd, tmp, 0);
		free(tmp);
		return -1;
	}
	return common_outfile_commit(&st->out, fd, tmp, e);
}

int trace_state_output(struct trace_state *st, const char *out_path, struct common_err *e)
{
	if (st->out.path)
		common_outfile_close(&st->out);
	if (common_outfile_open(&st->out, out_path, e) < 0) {
		common_err_context(e, "--state-out %s", out_path);
		return -1;
	}
	return 0;
}

int trace_state_finish(struct trace_state *st, const char *out_path, struct common_err *e)
{
	uint64_t len = 0;
	int r;

	if (st->memfd < 0)
		return common_errf(e, "state result", "no state transport was set up");
	/* Sealing first: nothing can change the bytes between the check and the copy. */
	if (fcntl(st->memfd, F_ADD_SEALS,
		  F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0 && errno != EPERM)
		return common_errno(e, errno, "sealing the state memfd (a guest still maps it?)");
	if ((r = check_result(st, &len, e)) < 0)
		return r;
	if (!out_path)
		return 0;
	if (!st->out.path && trace_state_output(st, out_path, e) < 0)
		return -1;
	return copy_out(st, len, e);
}

void trace_state_close(struct trace_state *st)
{
	if (st->memfd >= 0)
		close(st->memfd);
	st->memfd = -1;
	if (st->out.path)
		common_outfile_close(&st->out);
}

/* Guest side: runs inside the sandbox, so it trusts fd 3 no more than the host does. */
static int guest_input_size(uint64_t *n, uint64_t *fsize)
{
	uint8_t hdr[HDR];
	struct stat sb;
	int r;

	if (fstat(TRACE_STATE_FD, &sb) < 0)
		return -errno;
	if ((r = pread_full(TRACE_STATE_FD, hdr, HDR, 0)) < 0)
		return r;
	*n = get_le64(hdr);
	*fsize = (uint64_t)sb.st_size;
	if (*n < HDR || *n > *fsize || *n - HDR > TRACE_STATE_MAX)
		return -EBADMSG;
	return 0;
}

int sbx_state_read_input(void **buf, size_t *len)
{
	uint64_t n, fsize;
	uint8_t *p;
	int r;

	*buf = NULL;
	*len = 0;
	if ((r = guest_input_size(&n, &fsize)) < 0)
		return r;
	p = malloc(n - HDR ? n - HDR : 1);
	if (!p)
		return -ENOMEM;
	if ((r = pread_full(TRACE_STATE_FD, p, n - HDR, HDR)) < 0) {
		free(p);
		return r;
	}
	*buf = p;
	*len = n - HDR;
	return 0;
}

int sbx_state_write_result(const void *buf, size_t len)
{
	uint8_t hdr[HDR];
	uint64_t n, fsize;
	int r;

	if ((uint64_t)len > TRACE_STATE_MAX)
		return -EFBIG;
	if ((r = guest_input_size(&n, &fsize)) < 0)
		return r;
	put_le64(hdr, (uint64_t)len + HDR);
	/* Payload before header: a guest killed midway leaves a result the host refuses. */
	if ((r = pwrite_full(TRACE_STATE_FD, buf, len, n + HDR)) < 0)
		return r;
	if ((r = pwrite_full(TRACE_STATE_FD, hdr, HDR, n)) < 0)
		return r;
	return ftruncate(TRACE_STATE_FD, (off_t)(n + HDR + len)) < 0 ? -errno : 0;
}
