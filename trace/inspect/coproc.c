/* --inspect-exec PROG (SPEC §6.3): a co-process reads one JSON event per trapped call
 * on its stdin and answers one JSON decision per line on its stdout. Malformed, late
 * or missing replies are failures: the caller stops the guest and writes nothing back.
 *
 * event:    {"id":N,"pid":P,"tid":T,"name":"openat","nr":257,"args":[6 ints],
 *            "path":["a",null],"real":["/d/a",null]}   (args are the registers as signed
 *            64-bit integers; real: each path resolved inside the guest's root) 
 * decision: {"id":N,"action":"allow"|"deny"|"record"[,"errno":"EACCES"|13]
 *            [,"nr":N|"name"][,"args":[6 × int|null]][,"path":[2 × string|null]]} */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "trace/inspect/inspect.h"

#define REPLY_MAX (64u << 10)
#define PATH_MAX_REPLY 4096

struct trace_coproc {
	pid_t pid;
	int pidfd;         /* kills it without racing pid reuse */
	int to, from;      /* its stdin (our write end), its stdout (our read end) */
	int timeout_ms;
	uint64_t next_id;
	char *buf;         /* reply bytes read so far */
	size_t len;
	char *prog;
};

/* A path as a JSON string, or, when its bytes are not UTF-8 (JSON strings
 * cannot hold them), {"hex":"2f…"}: every path reaches the co-process exactly. */
static json_t *path_value(const char *p)
{
	if (!p)
		return json_null();
	json_t *v = json_string(p);
	if (v)
		return v;
	char *hex = common_xmalloc(2 * strlen(p) + 1);
	common_hex((const uint8_t *)p, strlen(p), hex);
	v = json_pack("{s:s}", "hex", hex);
	free(hex);
	return v;
}

char *trace_coproc_event(uint64_t id, const struct trace_stop *st, const char *const real[2])
{
	json_t *args = json_array(), *paths = json_array(), *reals = json_array(), *o;
	char *s;

	for (int i = 0; i < 6; i++)
		json_array_append_new(args, json_integer((json_int_t)(int64_t)st->args[i]));
	for (int i = 0; i < 2; i++) {
		json_array_append_new(paths, path_value(st->path[i]));
		json_array_append_new(reals, path_value(real ? real[i] : NULL));
	}
	o = json_pack("{sIsisisssIsososo}", "id", (json_int_t)id, "pid", (int)st->pid,
		      "tid", (int)st->tid, "name", st->sys ? st->sys->name : "",
		      "nr", (json_int_t)st->nr, "args", args, "path", paths, "real", reals);
	if (!o)
		abort();
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		abort();
	return s;
}

static int bad(struct common_err *e, const char *fmt, const char *field)
{
	common_errf(e, "inspector reply", fmt, field);
	return -1;
}

static int reply_errno(const json_t *v, int *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 4095) {
		*out = (int)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v))
		for (int i = 1; i < 4096; i++) {
			const char *n = strerrorname_np(i);
			if (n && strcmp(n, json_string_value(v)) == 0) {
				*out = i;
				return 0;
			}
		}
	return -1;
}

/* The reply's "action" and "errno": allow, record, or deny with an errno (EPERM). */
static int reply_action(json_t *o, struct trace_decision *d, struct common_err *e)
{
	json_t *v = json_object_get(o, "action");
	const char *act = json_is_string(v) ? json_string_value(v) : "";

	if (strcmp(act, "deny") == 0) {
		d->deny_errno = EPERM;
		if ((v = json_object_get(o, "errno")) && reply_errno(v, &d->deny_errno) < 0)
			return bad(e, "malformed: field \"%s\" is not an errno name or 1..4095", "errno");
	} else if (strcmp(act, "record") == 0) {
		d->record = 1;
	} else if (strcmp(act, "allow") != 0) {
		return bad(e, "malformed: field \"%s\" must be allow, deny or record", "action");
	}
	if (!d->deny_errno && json_object_get(o, "errno"))
		return bad(e, "malformed: field \"%s\" belongs to a deny", "errno");
	return 0;
}

/* The reply's "nr": a syscall by number or name, run instead. */
static int reply_nr(json_t *o, struct trace_decision *d, struct common_err *e)
{
	json_t *v = json_object_get(o, "nr");
	const struct trace_sysinfo *si = NULL;

	if (!v)
		return 0;
	if (json_is_integer(v))
		si = trace_sys_by_nr((long)json_integer_value(v));
	else if (json_is_string(v))
		si = trace_sys_by_name(json_string_value(v));
	if (!si)
		return bad(e, "malformed: field \"%s\" names no known syscall", "nr");
	d->set_nr = 1;
	d->nr = si->nr;
	return 0;
}

/* The reply's "args": six entries, null for an argument left as it is. */
static int reply_args(json_t *o, struct trace_decision *d, struct common_err *e)
{
	json_t *v = json_object_get(o, "args");

	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) != 6)
		return bad(e, "malformed: field \"%s\" must hold 6 entries", "args");
	for (unsigned i = 0; i < 6; i++) {
		json_t *a = json_array_get(v, i);
		if (json_is_null(a))
			continue;
		if (!json_is_integer(a))
			return bad(e, "malformed: field \"%s\" holds a non-integer", "args");
		d->set_args |= 1u << i;
		d->args[i] = (uint64_t)(int64_t)json_integer_value(a);
	}
	return 0;
}

/* The reply's "path": one or two strings replacing the path arguments, null for one
 * left as it is. */
static int reply_paths(json_t *o, struct trace_decision *d, struct common_err *e)
{
	json_t *v = json_object_get(o, "path");

	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > 2)
		return bad(e, "malformed: field \"%s\" must hold 1 or 2 entries", "path");
	for (unsigned i = 0; i < json_array_size(v); i++) {
		json_t *p = json_array_get(v, i);
		if (json_is_null(p))
			continue;
		if (!json_is_string(p) || json_string_length(p) == 0 ||
		    json_string_length(p) >= PATH_MAX_REPLY ||
		    strlen(json_string_value(p)) != json_string_length(p))
			return bad(e, "malformed: field \"%s\" holds a bad path", "path");
		d->path[i] = common_xstrdup(json_string_value(p));
	}
	return 0;
}

int trace_coproc_parse_reply(const char *line, size_t len, uint64_t id,
			     struct trace_decision *d, struct common_err *e)
{
	json_error_t je;
	json_t *o, *v;
	const char *key;
	int rc = -1;

	memset(d, 0, sizeof *d);
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return common_errf(e, "inspector reply", "malformed JSON: %s", je.text);
	if (!json_is_object(o)) {
		bad(e, "malformed: expected a JSON object%s", "");
		goto out;
	}
	json_object_foreach(o, key, v) {
		if (strcmp(key, "id") && strcmp(key, "action") && strcmp(key, "errno") &&
		    strcmp(key, "nr") && strcmp(key, "args") && strcmp(key, "path")) {
			bad(e, "malformed: unknown field \"%s\"", key);
			goto out;
		}
	}
	v = json_object_get(o, "id");
	if (!json_is_integer(v) || (uint64_t)json_integer_value(v) != id) {
		common_errf(e, "inspector reply", "malformed: \"id\" must be %llu, the event "
			    "being answered", (unsigned long long)id);
		goto out;
	}
	if (reply_action(o, d, e) == 0 && reply_nr(o, d, e) == 0 && reply_args(o, d, e) == 0 &&
	    reply_paths(o, d, e) == 0)
		rc = 0;
out:
	if (rc < 0)
		trace_decision_clear(d);
	json_decref(o);
	return rc;
}

/* The co-process is a grandchild handed to init: the supervisor's loop runs until
 * it has no children left, so the co-process must not be one of them. */
static pid_t spawn_orphan(const char *prog, int in_fd, int out_fd, int *err)
{
	int pp[2];
	pid_t mid, pid = -1;

	if (pipe2(pp, O_CLOEXEC) < 0) {
		*err = errno;
		return -1;
	}
	mid = fork();
	if (mid < 0) {
		*err = errno;
		close(pp[0]);
		close(pp[1]);
		return -1;
	}
	if (mid == 0) {
		pid_t g = fork();
		if (g == 0) {
			/* its own process group: stopping it stops what it started */
			if (setpgid(0, 0) < 0 || dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0)
				_exit(127);
			execl("/bin/sh", "sh", "-c", prog, (char *)NULL);
			_exit(127);
		}
		if (write(pp[1], &g, sizeof g) != (ssize_t)sizeof g)
			_exit(1);
		_exit(0);
	}
	close(pp[1]);
	if (read(pp[0], &pid, sizeof pid) != (ssize_t)sizeof pid || pid <= 0) {
		*err = EAGAIN;
		pid = -1;
	}
	close(pp[0]);
	waitpid(mid, NULL, __WNOTHREAD);
	return pid;
}

int trace_coproc_start(const char *prog, int timeout_ms, struct trace_coproc **out,
		       struct common_err *e)
{
	int in[2] = {-1, -1}, outp[2] = {-1, -1}, err = 0;
	struct trace_coproc *c;
	pid_t pid;

	*out = NULL;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
		err = errno;
		goto fail;
	}
	if ((pid = spawn_orphan(prog, in[0], outp[1], &err)) < 0)
		goto fail;
	close(in[0]);
	close(outp[1]);
	c = common_xcalloc(1, sizeof *c);
	c->pid = pid;
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	c->to = in[1];
	c->from = outp[0];
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : TRACE_COPROC_TIMEOUT_MS;
	c->buf = common_xmalloc(REPLY_MAX + 1);
	c->prog = common_xstrdup(prog);
	*out = c;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	return common_errno(e, err, "starting inspector %s", prog);
}

/* One line from the co-process within the deadline. */
static int read_line(struct trace_coproc *c, size_t *linelen, struct common_err *e)
{
	struct timespec t0;
	char *nl;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if ((nl = memchr(c->buf, '\n', c->len))) {
			*linelen = (size_t)(nl - c->buf);
			return 0;
		}
		if (c->len >= REPLY_MAX)
			return common_errf(e, "inspector reply", "malformed: a line longer than "
					   "%u bytes", REPLY_MAX);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long waited = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (waited >= c->timeout_ms)
			return common_errf(e, "inspector reply", "late: no decision within %d ms",
					   c->timeout_ms);
		struct pollfd p = {.fd = c->from, .events = POLLIN};
		int r = poll(&p, 1, (int)(c->timeout_ms - waited));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return common_errno(e, errno, "inspector reply");
		if (r == 0)
			continue;
		ssize_t n = read(c->from, c->buf + c->len, REPLY_MAX - c->len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return common_errno(e, errno, "inspector reply");
		if (n == 0)
			return common_errf(e, "inspector reply", "missing: the co-process closed "
					   "its output%s", c->len ? " mid-line" : "");
		c->len += (size_t)n;
	}
}

int trace_coproc_ask(struct trace_coproc *c, const struct trace_stop *st, const char *const real[2],
		     struct trace_decision *d, struct common_err *e)
{
	uint64_t id = ++c->next_id;
	char *ev = trace_coproc_event(id, st, real);
	size_t n = strlen(ev), linelen = 0;
	int r;

	ev[n] = '\n'; /* json_dumps leaves room only for the NUL: rewrite it */
	r = common_write_quiet(c->to, ev, n + 1);
	free(ev);
	if (r < 0)
		return common_errf(e, "inspector reply", "missing: the co-process is gone (%s)",
				   strerror(-r));
	if (read_line(c, &linelen, e) < 0)
		return -1;
	r = trace_coproc_parse_reply(c->buf, linelen, id, d, e);
	memmove(c->buf, c->buf + linelen + 1, c->len - linelen - 1);
	c->len -= linelen + 1;
	return r;
}

void trace_coproc_stop(struct trace_coproc *c)
{
	if (!c)
		return;
	close(c->to);
	close(c->from);
	/* EOF on its stdin is the request to finish; a slow one is killed */
	if (c->pidfd >= 0) {
		struct pollfd p = {.fd = c->pidfd, .events = POLLIN};
		if (poll(&p, 1, 500) == 0) {
			/* its group, by number, only while the leader our pidfd holds is
			 * there and stopped: it cannot exit, so the group id stays its own */
			if (syscall(SYS_pidfd_send_signal, c->pidfd, SIGSTOP, NULL, 0) == 0)
				kill(-c->pid, SIGKILL);
			syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		}
		close(c->pidfd);
	}
	free(c->buf);
	free(c->prog);
	free(c);
}
