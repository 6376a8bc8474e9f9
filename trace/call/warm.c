/* The warm sandbox: one guest, started once, serves many sbx_call requests.
 *
 * The host keeps a socketpair to the guest's fd 3 and a thread that runs the
 * guest under the supervisor until it ends. Host to guest: [u64 n][u32 mode]
 * [request image]; guest to host: [u32 kind][u64 n][bytes]: a result image, an
 * error text, or the ready word the guest sends once its constructors ran. Calls
 * run in the warm guest process itself, or, when the caller asks for isolation,
 * each in a fork of it, so a call starts from the warm guest's state, never from
 * what an earlier call wrote. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "libcommon/common.h"
#include "trace/call/call-internal.h"
#include "trace/trace.h"

#define WARM_SLOTS 64
#define WARM_FRAME_MAX ((uint64_t)1 << 30)

enum warm_kind { WARM_RESULT = 0, WARM_ERROR = 1, WARM_READY = 2 };
enum warm_mode { WARM_FORK = 0, WARM_SHARED = 1 };

struct warm {
	unsigned gen;            /* of the handle last given out for this slot */
	int used, open, alive;   /* slot taken; handle valid until close; guest running */
	int sock, guest_fd, rc;
	pthread_t thread;
	pthread_mutex_t call;    /* one call at a time; never destroyed (slots are reused) */
	struct sbx_sandbox sb;
	struct call_exe ce;
	struct common_err end;   /* why the guest ended, when rc < 0 */
};

static struct warm warms[WARM_SLOTS];
static pthread_mutex_t warms_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t warms_once = PTHREAD_ONCE_INIT;

static void warms_init(void)
{
	for (int i = 0; i < WARM_SLOTS; i++)
		pthread_mutex_init(&warms[i].call, NULL);
}

/* host writes: a guest that is gone is an error, never a SIGPIPE */
static int send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p = (const char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* 0: n bytes read; 1: end of stream before the first byte; -1: error (errno) */
static int read_full(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0 && got == 0)
				return 1;
			if (r == 0)
				errno = EPIPE;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int write_frame(int fd, uint32_t kind, const void *p, uint64_t n)
{
	uint8_t h[12];
	memcpy(h, &kind, 4);
	memcpy(h + 4, &n, 8);
	return common_write_all(fd, h, sizeof h) < 0 || common_write_all(fd, p, n) < 0 ? -1 : 0;
}

/* A reply frame (malloc'd body) from fd. 0, 1 at end of stream, or -1. */
static int read_frame(int fd, uint32_t *kind, uint8_t **body, uint64_t *n)
{
	uint8_t h[12];
	int r = read_full(fd, h, sizeof h);
	*body = NULL;
	if (r)
		return r;
	memcpy(kind, h, 4);
	memcpy(n, h + 4, 8);
	if (*n > WARM_FRAME_MAX || *kind > WARM_READY) {
		errno = EPROTO;
		return -1;
	}
	*body = common_xmalloc(*n ? *n : 1);
	if (read_full(fd, *body, *n) != 0) {
		free(*body);
		*body = NULL;
		errno = EPROTO;
		return -1;
	}
	return 0;
}

/* Guest: one call into a frame on fd (a result or an error text). */
static void serve_call(int fd, const uint8_t *req, size_t len, const struct elfinfo *x)
{
	struct common_err e = { "", "" };
	struct codec_buf out;
	if (call_run_image(req, len, x, &out, &e) < 0) {
		char msg[sizeof e.what + sizeof e.why + 4];
		int m = snprintf(msg, sizeof msg, "%s: %s", e.what, e.why);
		write_frame(fd, WARM_ERROR, msg, (uint64_t)m);
		return;
	}
	write_frame(fd, WARM_RESULT, out.p, out.len);
	codec_buf_free(&out);
}

/* Guest: the call in a child of the warm guest; its whole frame, or an error
 * naming how the child ended, is what reaches the host. */
static void serve_forked(const uint8_t *req, size_t len, const struct elfinfo *x)
{
	int p[2];
	if (pipe(p) < 0)
		call_guest_die("warm sandbox: pipe", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		call_guest_die("warm sandbox: fork", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		serve_call(p[1], req, len, x);
		fflush(NULL);
		_exit(0);
	}
	close(p[1]);
	uint32_t kind;
	uint8_t *body;
	uint64_t n;
	int r = read_frame(p[0], &kind, &body, &n), st = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	if (r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		write_frame(TRACE_STATE_FD, kind, body, n);
	} else {
		char msg[96];
		int m = WIFSIGNALED(st) ?
			snprintf(msg, sizeof msg, "sbx_call: the call's process was killed by signal %d (%s)",
				 WTERMSIG(st), strsignal(WTERMSIG(st))) :
			snprintf(msg, sizeof msg, "sbx_call: the call's process exited with status %d "
				 "without a result", WEXITSTATUS(st));
		write_frame(TRACE_STATE_FD, WARM_ERROR, msg, (uint64_t)m);
	}
	free(body);
}

int call_guest_serve(int argc, char **argv, char **envp)
{
	struct common_err e = { "", "" };
	struct elfinfo x;
	(void)argc, (void)argv, (void)envp;

	if (call_elf_self(&x, &e) < 0)
		call_guest_die(e.what, e.why);
	if (write_frame(TRACE_STATE_FD, WARM_READY, "", 0) < 0)
		call_guest_die("warm sandbox (fd 3)", strerror(errno));
	for (;;) {
		uint64_t n;
		int r = read_full(TRACE_STATE_FD, &n, 8);
		if (r == 1)
			exit(0); /* the host closed the sandbox */
		if (r < 0 || n < 4 || n > WARM_FRAME_MAX)
			call_guest_die("warm sandbox (fd 3)", "a request frame out of bounds");
		uint8_t *req = common_xmalloc(n);
		if (read_full(TRACE_STATE_FD, req, n) != 0)
			call_guest_die("warm sandbox (fd 3)", "a short request frame");
		uint32_t mode;
		memcpy(&mode, req, 4);
		if (mode == WARM_SHARED)
			serve_call(TRACE_STATE_FD, req + 4, n - 4, &x);
		else
			serve_forked(req + 4, n - 4, &x);
		free(req);
	}
}

static void *warm_main(void *arg)
{
	struct warm *w = arg;
	w->rc = call_run_guest(&w->sb, w->ce.exe, &w->ce.x, w->guest_fd, 1, &w->end);
	/* the last copy of the guest's end: the host's reads now see its end */
	close(w->guest_fd);
	return NULL;
}

static int handle_of(const struct warm *w)
{
	return (int)(w->gen << 6 | (unsigned)(w - warms));
}

static void warm_release(struct warm *w)
{
	if (w->sock >= 0)
		close(w->sock);
	free(w->ce.x.funcs);
	w->ce.x.funcs = NULL;
	pthread_mutex_lock(&warms_lock);
	w->used = 0;
	pthread_mutex_unlock(&warms_lock);
}

/* The open sandbox a handle names, its call lock held; NULL (e) for any other. */
static struct warm *warm_enter(int h, struct common_err *e)
{
	struct warm *w = NULL;
	pthread_mutex_lock(&warms_lock);
	if (h >= 0 && warms[h & (WARM_SLOTS - 1)].used && warms[h & (WARM_SLOTS - 1)].open &&
	    handle_of(&warms[h & (WARM_SLOTS - 1)]) == h)
		w = &warms[h & (WARM_SLOTS - 1)];
	pthread_mutex_unlock(&warms_lock);
	if (!w) {
		common_errf(e, "sbx_sandbox", "%d is not an open sandbox (closed, or never opened)", h);
		return NULL;
	}
	pthread_mutex_lock(&w->call);
	if (!w->open || handle_of(w) != h) { /* closed (the slot maybe reused) meanwhile */
		pthread_mutex_unlock(&w->call);
		common_errf(e, "sbx_sandbox", "%d is not an open sandbox (closed, or never opened)", h);
		return NULL;
	}
	return w;
}

/* The guest is gone: its supervisor's word on why. */
static int warm_ended(struct warm *w, struct common_err *e)
{
	if (w->alive)
		pthread_join(w->thread, NULL);
	w->alive = 0;
	if (w->rc < 0)
		return common_errf(e, "sbx_sandbox", "the warm guest ended: %s: %s", w->end.what,
				   w->end.why);
	return common_errf(e, "sbx_sandbox", "the warm guest ended");
}

int sbx_sandbox_open(const struct sbx_sandbox *sb)
{
	static const struct sbx_sandbox none;
	struct common_err scratch, *e = sb && sb->err ? sb->err : &scratch;
	struct warm *w = NULL;
	int sv[2];

	pthread_once(&warms_once, warms_init);
	pthread_mutex_lock(&warms_lock);
	for (int i = 0; i < WARM_SLOTS && !w; i++)
		if (!warms[i].used)
			w = &warms[i];
	if (w) {
		w->used = 1;
		w->gen = (w->gen + 1) & 0xffffff;
		w->gen += !w->gen;
	}
	pthread_mutex_unlock(&warms_lock);
	if (!w)
		return common_errf(e, "sbx_sandbox_open", "%d sandboxes are open already", WARM_SLOTS);
	w->sb = sb ? *sb : none;
	w->open = w->alive = 0;
	w->rc = 0;
	if (call_exe_check(&w->ce, e) < 0) {
		w->sock = -1;
		warm_release(w);
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		common_errno(e, errno, "sbx_sandbox_open: socketpair");
		w->sock = -1;
		warm_release(w);
		return -1;
	}
	w->sock = sv[0];
	w->guest_fd = sv[1];
	if ((errno = pthread_create(&w->thread, NULL, warm_main, w)) != 0) {
		common_errno(e, errno, "sbx_sandbox_open: thread");
		close(sv[1]);
		warm_release(w);
		return -1;
	}
	w->alive = 1;
	uint32_t kind = 0;
	uint8_t *body;
	uint64_t n;
	int r = read_frame(w->sock, &kind, &body, &n);
	free(body);
	if (r != 0 || kind != WARM_READY) {
		warm_ended(w, e);
		warm_release(w);
		return -1;
	}
	w->open = 1;
	return handle_of(w);
}

/* Send one request; the reply's frame (malloc'd) back. */
static int warm_exchange(struct warm *w, const struct codec_buf *in, uint32_t *kind,
			 uint8_t **body, uint64_t *n, struct common_err *e)
{
	uint8_t h[12];
	uint64_t len = in->len + 4;
	uint32_t mode = w->sb.warm_isolated ? WARM_FORK : WARM_SHARED;
	memcpy(h, &len, 8);
	memcpy(h + 8, &mode, 4);
	if (!w->alive || send_all(w->sock, h, sizeof h) < 0 || send_all(w->sock, in->p, in->len) < 0)
		return warm_ended(w, e);
	int r = read_frame(w->sock, kind, body, n);
	if (r == 0 && *kind != WARM_READY)
		return 0;
	free(*body);
	*body = NULL;
	return warm_ended(w, e);
}

int sbx_sandbox_call(int sandbox, void (*fn)(void *), const struct sbx_type *type, void *root,
		     struct common_err *err)
{
	struct common_err scratch, *e = err ? err : &scratch;
	struct codec_graph *g = NULL;
	struct codec_buf in;
	uint8_t *body = NULL;
	uint64_t n = 0;
	uint32_t kind = 0;
	int rc = -1;

	struct warm *w = warm_enter(sandbox, e);
	if (!w)
		return -1;
	codec_buf_init(&in);
	if (call_request(fn, type, root, &w->ce, &in, &g, e) < 0 ||
	    warm_exchange(w, &in, &kind, &body, &n, e) < 0)
		goto out;
	if (kind == WARM_ERROR)
		common_errf(e, "sbx_call guest", "%.*s", (int)(n > 900 ? 900 : n), (char *)body);
	else if (call_writeback(&w->ce, g, body, n, e) == 0)
		rc = 0;
out:
	pthread_mutex_unlock(&w->call);
	free(body);
	codec_graph_free(g);
	codec_buf_free(&in);
	return rc;
}

int sbx_sandbox_close(int sandbox, struct common_err *err)
{
	struct common_err scratch, *e = err ? err : &scratch;
	struct warm *w = warm_enter(sandbox, e);
	if (!w)
		return -1;
	w->open = 0;
	shutdown(w->sock, SHUT_WR);
	if (w->alive)
		pthread_join(w->thread, NULL);
	w->alive = 0;
	int rc = w->rc < 0 ? common_errf(e, "sbx_sandbox_close", "%s: %s", w->end.what,
					 w->end.why) : 0;
	pthread_mutex_unlock(&w->call);
	warm_release(w);
	return rc;
}
