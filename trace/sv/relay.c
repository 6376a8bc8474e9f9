/* The stdout/stderr relay (SPEC §4.1 output_bytes/output_values, §6.6): the guest
 * writes into pipes, one supervisor thread copies them to the real fds in order,
 * counting bytes and newline records. A slow reader blocks the relay, which lets the
 * pipe fill and blocks the guest exactly as a direct pipe would. The chunk that
 * passes a bound is counted (its records only up to the first past the bound) and
 * not delivered past it; then the pipes are no longer read, so the guest blocks on
 * a full pipe and nothing more is counted, and the supervisor is woken to close. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "trace/sv/sv.h"

struct stream {
	int rd, wr;     /* pipe ends: rd stays here, wr goes to the guest */
	int out;        /* the real destination */
	int open;       /* rd not at EOF yet */
	int broken;     /* destination gone: guest sees EPIPE */
};

struct trace_relay {
	struct stream s[2];
	pthread_t thread;
	int started;
	int stop_pipe[2];           /* wakes the thread for a final drain */
	uint64_t max_bytes, max_lines;
	_Atomic uint64_t bytes, lines;
	_Atomic int over;
	int wake_fd;                /* eventfd: readable once a bound is passed */
	/* what may be counted before the supervisor has a durable bound past it */
	_Atomic uint64_t allow_bytes, allow_lines;
	_Atomic int waiting;        /* the allowance is used up: the supervisor is asked */
	int allow_fd;               /* eventfd: the allowance grew */
	char buf[1 << 16];
};

int trace_relay_open(struct trace_relay **out, int out_fd, int err_fd,
		     uint64_t max_bytes, uint64_t max_lines, struct common_err *e)
{
	struct trace_relay *r = common_xcalloc(1, sizeof *r);
	int fds[2];

	*out = NULL;
	r->stop_pipe[0] = r->stop_pipe[1] = -1;
	r->wake_fd = r->allow_fd = -1;
	atomic_store(&r->allow_bytes, UINT64_MAX);
	atomic_store(&r->allow_lines, UINT64_MAX);
	for (int i = 0; i < 2; i++)
		r->s[i].rd = r->s[i].wr = -1;
	for (int i = 0; i < 2; i++) {
		if (pipe2(fds, O_CLOEXEC) < 0) {
			common_errno(e, errno, "relay pipe");
			trace_relay_free(r);
			return -1;
		}
		r->s[i].rd = fds[0];
		r->s[i].wr = fds[1];
		r->s[i].out = i == 0 ? out_fd : err_fd;
		r->s[i].open = 1;
	}
	if (pipe2(r->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    (r->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (r->allow_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		common_errno(e, errno, "relay pipe");
		trace_relay_free(r);
		return -1;
	}
	r->max_bytes = max_bytes;
	r->max_lines = max_lines;
	*out = r;
	return 0;
}

void trace_relay_child_fds(const struct trace_relay *r, int *out_w, int *err_w)
{
	*out_w = r->s[0].wr;
	*err_w = r->s[1].wr;
}

void trace_relay_read_fds(const struct trace_relay *r, int *out_r, int *err_r)
{
	*out_r = r->s[0].rd;
	*err_r = r->s[1].rd;
}

static uint64_t count_nl(const char *b, size_t n)
{
	uint64_t c = 0;
	const char *p = b, *end = b + n;

	while ((p = memchr(p, '\n', (size_t)(end - p)))) {
		c++;
		p++;
	}
	return c;
}

/* Deliver up to the bounds: the first byte past a bound is never delivered. */
static void deliver(struct trace_relay *r, int i, const char *buf, size_t n)
{
	struct stream *s = &r->s[i];
	uint64_t before = atomic_load(&r->bytes), lines = atomic_load(&r->lines);
	size_t keep = n;

	if (before + n > r->max_bytes)
		keep = before >= r->max_bytes ? 0 : (size_t)(r->max_bytes - before);
	if (i == 0) {
		/* cut right after the last record within the bound */
		const char *p = buf, *end = buf + keep, *last = buf;
		uint64_t l = lines;
		while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) {
			if (++l > r->max_lines) {
				keep = (size_t)(last - buf);
				break;
			}
			last = ++p;
		}
		l = lines + count_nl(buf, n);
		atomic_store(&r->lines, l > r->max_lines ? r->max_lines + 1 : l);
	}
	atomic_store(&r->bytes, before + n);
	if (atomic_load(&r->bytes) > r->max_bytes || atomic_load(&r->lines) > r->max_lines) {
		uint64_t one = 1;
		atomic_store(&r->over, 1);
		(void)!write(r->wake_fd, &one, sizeof one);
	}
	if (keep && !s->broken && common_write_all(s->out, buf, keep) < 0)
		s->broken = 1;
}

/* How much may be read now: every byte may be a record, and neither count may pass
 * its allowance. */
static size_t room(struct trace_relay *r)
{
	uint64_t b = atomic_load(&r->bytes), l = atomic_load(&r->lines);
	uint64_t ab = atomic_load(&r->allow_bytes), al = atomic_load(&r->allow_lines);
	uint64_t n = sizeof r->buf;

	n = ab <= b ? 0 : ab - b < n ? ab - b : n;
	n = al <= l ? 0 : al - l < n ? al - l : n;
	return (size_t)n;
}

/* Output waits with no allowance: the supervisor is asked, once, through the wake
 * fd (only then: a silent guest's run is charged no output it never made). */
static void ask(struct trace_relay *r)
{
	if (!atomic_exchange(&r->waiting, 1))
		(void)!write(r->wake_fd, &(uint64_t){1}, sizeof(uint64_t));
}

static void *relay_main(void *arg)
{
	struct trace_relay *r = arg;
	int stopping = 0;
	sigset_t all;

	pthread_setname_np(pthread_self(), "sbx-relay");
	/* Signals belong to the tracer thread; a closed stdout shows up as EPIPE here. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	while (r->s[0].open || r->s[1].open) {
		struct pollfd p[4];
		int n = 0, idx[4];
		/* the last drain, the guest gone, is not held: the final observation follows;
		 * only a round that began stopping drains (the stop may come with output
		 * this round only asked an allowance for) */
		int draining = stopping;
		size_t can = draining ? sizeof r->buf : room(r);
		/* with no allowance the streams are watched until one has output, not read */
		int watch = can || !atomic_load(&r->waiting);

		int reading = 0;
		for (int i = 0; i < 2 && !atomic_load(&r->over) && watch; i++)
			if (r->s[i].open) {
				p[n].fd = r->s[i].rd;
				p[n].events = POLLIN;
				idx[n++] = i;
				reading = 1;
			}
		if (!stopping) {
			p[n].fd = r->stop_pipe[0];
			p[n].events = POLLIN;
			idx[n++] = 2;
		}
		if (!can) {
			p[n].fd = r->allow_fd;
			p[n].events = POLLIN;
			idx[n++] = 3;
		}
		if (poll(p, (nfds_t)n, stopping ? 0 : -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		int any = 0;
		for (int k = 0; k < n; k++) {
			int i = idx[k];
			if (!p[k].revents)
				continue;
			if (i == 2) {
				stopping = 1;
				continue;
			}
			if (i == 3) {
				(void)!read(r->allow_fd, &(uint64_t){0}, sizeof(uint64_t));
				continue;
			}
			if (!can && !(p[k].revents & POLLIN)) {
				r->s[i].open = 0; /* closed with nothing in it: no output to ask for */
				continue;
			}
			if (!can) {
				ask(r);
				continue;
			}
			ssize_t got = read(r->s[i].rd, r->buf, can);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				r->s[i].open = 0;
				continue;
			}
			any = 1;
			deliver(r, i, r->buf, (size_t)got);
			if (r->s[i].broken) {
				/* the reader went away: the guest's next write sees EPIPE */
				close(r->s[i].rd);
				r->s[i].rd = -1;
				r->s[i].open = 0;
			}
		}
		/* After the guest is gone, drain what is buffered, then stop even if a
		 * stray holder of the write end remains. */
		if (draining && !any && (reading || atomic_load(&r->over)))
			break;
	}
	return NULL;
}

int trace_relay_start(struct trace_relay *r, struct common_err *e)
{
	int err;

	/* The guest holds the write ends now; ours would keep EOF from ever arriving. */
	for (int i = 0; i < 2; i++) {
		close(r->s[i].wr);
		r->s[i].wr = -1;
	}
	if ((err = pthread_create(&r->thread, NULL, relay_main, r)) != 0)
		return common_errno(e, err, "starting the output relay");
	r->started = 1;
	return 0;
}

void trace_relay_counts(const struct trace_relay *r, uint64_t *bytes, uint64_t *lines)
{
	*bytes = atomic_load(&((struct trace_relay *)r)->bytes);
	*lines = atomic_load(&((struct trace_relay *)r)->lines);
}

int trace_relay_waiting(struct trace_relay *r)
{
	return atomic_load(&r->waiting);
}

void trace_relay_allow(struct trace_relay *r, uint64_t bytes, uint64_t lines)
{
	if (atomic_load(&r->allow_bytes) == bytes && atomic_load(&r->allow_lines) == lines)
		return;
	atomic_store(&r->allow_bytes, bytes);
	atomic_store(&r->allow_lines, lines);
	atomic_store(&r->waiting, 0);
	(void)!write(r->allow_fd, &(uint64_t){1}, sizeof(uint64_t));
}

int trace_relay_wake_fd(const struct trace_relay *r)
{
	return r->wake_fd;
}

int trace_relay_over(const struct trace_relay *r)
{
	return atomic_load(&((struct trace_relay *)r)->over);
}

void trace_relay_finish(struct trace_relay *r)
{
	if (r->started) {
		if (write(r->stop_pipe[1], "x", 1) < 0) {
			/* the thread then stops at EOF of both pipes */
		}
		pthread_join(r->thread, NULL);
		r->started = 0;
	}
}

void trace_relay_free(struct trace_relay *r)
{
	if (!r)
		return;
	trace_relay_finish(r);
	for (int i = 0; i < 2; i++) {
		if (r->s[i].rd >= 0)
			close(r->s[i].rd);
		if (r->s[i].wr >= 0)
			close(r->s[i].wr);
	}
	if (r->stop_pipe[0] >= 0)
		close(r->stop_pipe[0]);
	if (r->stop_pipe[1] >= 0)
		close(r->stop_pipe[1]);
	if (r->wake_fd >= 0)
		close(r->wake_fd);
	if (r->allow_fd >= 0)
		close(r->allow_fd);
	free(r);
}
