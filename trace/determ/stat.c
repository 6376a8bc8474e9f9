/* The stat family under --deterministic (SPEC §9): inode and device numbers
 * and times as the run tells them (files.c). A call whose answer the table
 * holds is answered at its seccomp stop and skipped, no exit stop: an fstat
 * through /proc/TID/fd, a path through the supervisor's own lookup in the
 * guest's view (trace_guest_stat). Any other runs, its answer rewritten at
 * its exit (determ.c), or at the task's turn when it is a first sight. The
 * call is recorded allowed and uncounted either way: which way it went
 * depends on what the other tasks had numbered when it came, not on the lease. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/determ/determ.h"
#include "trace/determ/determ-internal.h"

static int in_ns_path(const char *p)
{
	return p && (!strcmp(p, "/ns") || !strncmp(p, "/ns/", 4));
}

static int fd_in_ns(pid_t tid, int fd)
{
	char link[64], target[PATH_MAX];
	snprintf(link, sizeof link, fd == AT_FDCWD ? "/proc/%d/cwd" : "/proc/%d/fd/%d", (int)tid, fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return in_ns_path(target);
}

/* fstat, or a stat of fd's own object (an empty path): the supervisor stats it
 * too, through /proc/TID/fd (the same inode; a symlink held with O_PATH stays
 * the link), so when the table holds what the answer needs it is answered here
 * and the call skipped: no exit stop. 0 when it is not (a bad descriptor, a
 * first sight, whose numbers wait for the task's turn): the call runs, its
 * answer rewritten at its exit. Either way the call stays "allowed" and is not
 * counted as emulated: which way it went depends on what the other tasks had
 * numbered when it came, not on the lease. */
static int fstat_now(struct trace_determ *d, struct trace_guest *g, const struct trace_stop *st,
		     int fd, uint64_t buf)
{
	char link[64];
	struct stat sb;
	uint8_t b[144];
	_Static_assert(sizeof sb == sizeof b, "the x86-64 struct stat the kernel writes");
	snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)st->tid, fd);
	if (fd < 0 || stat(link, &sb) < 0)
		return 0;
	struct proc *pr = trace_determ_proc(g), scratch = *pr; /* a probe raises no clock */
	struct trace_determ_view v = { d->epoch, &scratch.ns, fd_in_ns(st->tid, fd) };
	memcpy(b, &sb, sizeof b);
	trace_determ_files_probe(d->files);
	trace_determ_files_stat(d->files, &v, b);
	if (trace_determ_files_probe_end(d->files) && !trace_guest_alone(g))
		return 0; /* a first sight waits for the task's turn, unless that is now */
	memcpy(b, &sb, sizeof b);
	v.clock = &pr->ns;
	trace_determ_files_stat(d->files, &v, b);
	return trace_determ_skip(g, trace_determ_put(g, buf, b, sizeof b) < 0 ? -EFAULT : 0) == 0;
}

/* A stat of a path: the supervisor's own lookup in the guest's view gives the
 * kernel's answer at the entry (trace_guest_stat), so, as for an fstat, when
 * the table holds what the answer needs (or the name is verified absent) it is
 * answered there and the call skipped: no exit stop. 0 when it is not (/proc
 * and kin, a lookup only the guest's kernel can make, a first sight): the call
 * runs, its answer rewritten at its exit. Allowed and uncounted either way. */
static int stat_now(struct trace_determ *d, struct trace_guest *g, const struct trace_stop *st,
		    enum pend_kind k, uint64_t buf, int in_ns)
{
	uint8_t b[256], c[256];
	int64_t rc;
	size_t n = k == P_STATX ? 256 : 144;
	_Static_assert(sizeof(struct statx) == 256, "the statx the kernel writes");
	if (st->action != TRACE_ALLOWED || trace_guest_stat(g, st, b, &rc) < 0)
		return 0;
	if (rc < 0)
		return trace_determ_skip(g, rc) == 0;
	struct proc *pr = trace_determ_proc(g), scratch = *pr; /* a probe raises no clock */
	struct trace_determ_view v = { d->epoch, &scratch.ns, in_ns };
	memcpy(c, b, n);
	trace_determ_files_probe(d->files);
	if (k == P_STATX)
		trace_determ_files_statx(d->files, &v, c);
	else
		trace_determ_files_stat(d->files, &v, c);
	if (trace_determ_files_probe_end(d->files) && !trace_guest_alone(g))
		return 0; /* a first sight waits for the task's turn, unless that is now */
	v.clock = &pr->ns;
	if (k == P_STATX)
		trace_determ_files_statx(d->files, &v, b);
	else
		trace_determ_files_stat(d->files, &v, b);
	return trace_determ_skip(g, trace_determ_put(g, buf, b, n) < 0 ? -EFAULT : 0) == 0;
}

/* newfstatat(fd, "", AT_EMPTY_PATH | ...): a stat of fd's own object */
static int empty_path(struct trace_guest *g, const struct trace_stop *st)
{
	char c;
	const uint64_t *a = st->args;
	return (int)a[0] >= 0 && (a[3] & AT_EMPTY_PATH) &&
	       !(a[3] & ~(uint64_t)(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT)) &&
	       trace_guest_read(g, a[1], &c, 1) == 1 && c == 0;
}

void trace_determ_stat_entry(struct trace_determ *d, struct trace_guest *g, struct trace_stop *st)
{
	const uint64_t *a = st->args;
	struct proc *pr = trace_determ_proc(g);
	if (st->nr == TRACE_SYS_fstat) {
		if (!fstat_now(d, g, st, (int)a[0], a[1])) {
			trace_determ_want(g, st, P_STAT, a[1], (int)a[0]);
			pr->pend.in_ns = fd_in_ns(st->tid, (int)a[0]);
		}
		return;
	}
	if (st->nr == TRACE_SYS_newfstatat && empty_path(g, st) &&
	    fstat_now(d, g, st, (int)a[0], a[2]))
		return;
	int statx = st->nr == TRACE_SYS_statx, at = statx || st->nr == TRACE_SYS_newfstatat;
	enum pend_kind k = statx ? P_STATX : P_STAT;
	uint64_t buf = statx ? a[4] : at ? a[2] : a[1];
	int in_ns = in_ns_path(st->path[0]) ||
		    (at && (!st->path[0] || !*st->path[0]) && fd_in_ns(st->tid, (int)a[0]));
	if (st->path[0] && *st->path[0] && stat_now(d, g, st, k, buf, in_ns))
		return;
	trace_determ_want(g, st, k, buf, -1);
	pr->pend.in_ns = in_ns;
}
