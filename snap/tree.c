/* snap: the process tree of a guest (version 4): which processes a snapshot
 * holds, the pipes between them with the bytes queued in them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "snap/snap-internal.h"

/* The host pids of tid's children (appended to *out). */
static int children_of(pid_t pid, pid_t tid, pid_t **out, size_t *n, size_t *cap,
		       struct common_err *e)
{
	char p[96], *buf, *s, *end;
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/task/%d/children", (int)pid, (int)tid);
	if (common_read_file(p, 1u << 20, &buf, &len, NULL) < 0)
		return 0; /* the thread exited meanwhile */
	for (s = buf; *s; s = end) {
		long v = strtol(s, &end, 10);
		if (end == s)
			break;
		if (*n == *cap)
			*out = common_xrealloc(*out, (*cap = *cap * 2 + 8) * sizeof **out);
		(*out)[(*n)++] = (pid_t)v;
	}
	free(buf);
	return *n > SNAP_PROCS_MAX + 1 ? common_errf(e, "capture", "the guest has more than %u "
						   "processes", SNAP_PROCS_MAX + 1) : 0;
}

/* State letter and exit code (wait status) from /proc/PID/stat. */
static int proc_state(pid_t pid, char *state, uint32_t *wstatus, struct common_err *e)
{
	char p[64], *buf;
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	if (common_read_file(p, 4096, &buf, &len, e) < 0)
		return -1;
	char *rp = strrchr(buf, ')');
	int rc = 0;
	if (!rp || rp[1] != ' ') {
		rc = common_errf(e, "capture", "%s: unreadable", p);
	} else {
		*state = rp[2];
		/* exit_code is the 52nd field; the state is the 3rd */
		char *f = rp + 2;
		for (int k = 3; k < 52 && f; k++)
			f = strchr(f + 1, ' ');
		*wstatus = f ? (uint32_t)strtoul(f + 1, NULL, 10) : 0;
	}
	free(buf);
	return rc;
}

static int ns_pid_of(pid_t pid, uint32_t *ns, struct common_err *e)
{
	struct trace_status s;
	int rc = trace_status_read(pid, &s);
	if (rc < 0)
		return common_errno(e, -rc, "/proc/%d/status", (int)pid);
	pid_t v = trace_status_nspid(&s);
	trace_status_free(&s);
	if (v <= 0)
		return common_errf(e, "capture", "process %d has no NSpid", (int)pid);
	*ns = (uint32_t)v;
	return 0;
}

static int cmp_task(const void *a, const void *b)
{
	const struct snap_task *x = a, *y = b;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

int snap_tree_list(pid_t root, struct snap_task **out, size_t *n, struct common_err *e)
{
	pid_t *queue = common_xcalloc(1, sizeof *queue), *ids = NULL;
	size_t nq = 1, cap = 1, nids = 0;
	int rc = 0;
	queue[0] = root;
	*out = NULL;
	*n = 0;
	for (size_t at = 0; at < nq && rc == 0; at++) {
		size_t first = nq;
		rc = children_of(queue[at], queue[at], &queue, &nq, &cap, e);
		if (rc == 0 && snap_thread_ids(queue[at], &ids, &nids, e) < 0)
			rc = -1;
		for (size_t i = 0; i < nids && rc == 0; i++)
			rc = children_of(queue[at], ids[i], &queue, &nq, &cap, e);
		free(ids);
		ids = NULL;
		uint32_t parent = 0;
		if (rc == 0 && nq > first)
			rc = ns_pid_of(queue[at], &parent, e);
		for (size_t i = first; i < nq && rc == 0; i++) {
			struct snap_task t = { .host = queue[i], .ns_ppid = parent };
			char state = 0;
			if (ns_pid_of(t.host, &t.ns, e) < 0 ||
			    proc_state(t.host, &state, &t.wstatus, e) < 0) {
				rc = -1;
				break;
			}
			t.zombie = state == 'Z';
			*out = common_xrealloc(*out, (*n + 1) * sizeof **out);
			(*out)[(*n)++] = t;
		}
	}
	free(queue);
	if (rc == 0 && *n)
		qsort(*out, *n, sizeof **out, cmp_task);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

int snap_tree_orphans(pid_t root, struct common_err *e)
{
	struct trace_status s;
	unsigned long long ppid = 0;
	int rc = trace_status_read(root, &s);
	if (rc < 0)
		return common_errno(e, -rc, "/proc/%d/status", (int)root);
	rc = trace_status_num(&s, "PPid", 10, &ppid);
	trace_status_free(&s);
	pid_t *kids = NULL;
	size_t n = 0, cap = 0;
	if (rc < 0 || children_of((pid_t)ppid, (pid_t)ppid, &kids, &n, &cap, e) < 0) {
		free(kids);
		return common_errf(e, "capture", "the guest's parent cannot be read");
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		if (kids[i] != root)
			rc = common_errf(e, "capture", "process %d outlived its parent (the run's init "
					 "adopted it): a snapshot holds the guest's own tree only",
					 (int)kids[i]);
	free(kids);
	return rc;
}

/* The bytes queued in the pipe host pid holds as fd, left in it: tee(2) from a
 * descriptor of our own on the same pipe into a scratch pipe as large. */
static int pipe_peek(pid_t pid, uint32_t fd, struct snap_pipe *q, struct common_err *e)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/fd/%u", (int)pid, fd);
	int in = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC), sp[2] = { -1, -1 }, rc = 0;
	if (in < 0)
		return common_errno(e, errno, "open %s", p);
	int cap = fcntl(in, F_GETPIPE_SZ), queued = 0;
	struct stat sb;
	if (cap <= 0 || ioctl(in, FIONREAD, &queued) < 0 || queued < 0 || queued > cap ||
	    fstat(in, &sb) < 0) {
		close(in);
		return common_errno(e, errno, "pipe of %s: size", p);
	}
	q->capacity = (uint32_t)cap;
	q->len = (uint64_t)queued;
	q->dev = (uint64_t)sb.st_dev;
	q->ino = (uint64_t)sb.st_ino;
	uint8_t *buf = common_xmalloc((size_t)cap);
	q->bytes = buf;
	if (queued && (pipe2(sp, O_CLOEXEC | O_NONBLOCK) < 0 || fcntl(sp[1], F_SETPIPE_SZ, cap) < cap))
		rc = common_errno(e, errno, "pipe of %s: a scratch pipe of %d bytes", p, cap);
	ssize_t got = rc == 0 && queued ? tee(in, sp[1], (size_t)queued, SPLICE_F_NONBLOCK) : 0;
	if (rc == 0 && queued && got != queued)
		rc = common_errf(e, "capture", "pipe of %s: copied %zd of its %d bytes", p, got, queued);
	if (rc == 0 && queued && read(sp[0], buf, (size_t)queued) != queued)
		rc = common_errno(e, errno, "pipe of %s: read the copy", p);
	for (int i = 0; i < 2; i++)
		if (sp[i] >= 0)
			close(sp[i]);
	close(in);
	return rc;
}

int snap_pipes_capture(struct snap_state *st, const pid_t *hosts, struct common_err *e)
{
	uint64_t *inos = NULL;
	size_t n = 0;
	for (size_t k = 0; k <= st->nprocs; k++) {
		struct snap_state *p = k ? &st->procs[k - 1] : st;
		for (size_t i = 0; i < p->nfds; i++) {
			struct snap_fd *f = &p->fds[i];
			if (f->kind != SNAP_FD_PIPE)
				continue;
			size_t j = 0;
			while (j < n && inos[j] != f->pos)
				j++;
			if (j == n) {
				if (n == SNAP_PIPES_MAX) {
					free(inos);
					return common_errf(e, "capture", "the guest has more than %u pipes",
							   SNAP_PIPES_MAX);
				}
				inos = common_xrealloc(inos, (n + 1) * sizeof *inos);
				st->pipes = common_xrealloc(st->pipes, (n + 1) * sizeof *st->pipes);
				memset(&st->pipes[n], 0, sizeof *st->pipes);
				inos[n] = f->pos;
				st->npipes = ++n;
				if (pipe_peek(hosts[k], f->fd, &st->pipes[j], e) < 0) {
					free(inos);
					return -1;
				}
			}
			f->pos = j; /* canonical: the order of first use */
		}
	}
	free(inos);
	return 0;
}

void snap_pipes_free(struct snap_state *st)
{
	for (size_t i = 0; i < st->npipes; i++)
		free((void *)st->pipes[i].bytes);
}
