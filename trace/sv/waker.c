/* The waker: a helper thread that interrupts the tracer's waitpid every WAKE_MS,
 * or at its next tick, so that the loop looks at its fds, signals and tick. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "trace/sv/sv-internal.h"

__thread volatile sig_atomic_t trace_sv_woken;

static void on_wake(int sig)
{
	(void)sig;
	trace_sv_woken = 1;
}

/* The handler is process-wide: the first of concurrent supervisors installs it,
 * the last puts back what the host had. */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static int wake_users;
static struct sigaction wake_saved;

static int wake_handler_get(int sig)
{
	struct sigaction sa;
	int rc = 0;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_wake; /* no SA_RESTART: it must interrupt waitpid */
	sigemptyset(&sa.sa_mask);
	pthread_mutex_lock(&wake_mu);
	if (wake_users == 0 && sigaction(sig, &sa, &wake_saved) < 0)
		rc = -errno;
	else
		wake_users++;
	pthread_mutex_unlock(&wake_mu);
	return rc;
}

static void wake_handler_put(int sig)
{
	pthread_mutex_lock(&wake_mu);
	if (--wake_users == 0)
		sigaction(sig, &wake_saved, NULL);
	pthread_mutex_unlock(&wake_mu);
}

static void *waker_main(void *arg)
{
	struct trace_waker *w = arg;
	pid_t pid = getpid();
	uint64_t sent = 0; /* the tick already signalled: once each, or a late tracer is flooded */

	struct trace_prio pr; /* its wake-up is on the tracer's path; the guest cannot make it busy */

	pthread_setname_np(pthread_self(), "sbx-waker");
	(void)trace_prio_join(&pr, w->prio);
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		uint64_t at = common_mono_us() + WAKE_MS * 1000;
		int for_tick = w->due_us && w->due_us != sent && w->due_us < at;
		if (for_tick)
			at = w->due_us;
		struct timespec ts = { .tv_sec = (time_t)(at / 1000000),
				       .tv_nsec = (long)(at % 1000000) * 1000 };
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		/* woken early (a sooner tick was set): wait again for the new time */
		if (w->stop || common_mono_us() < at)
			continue;
		if (for_tick)
			sent = at;
		if (atomic_load(&w->in_wait))
			syscall(SYS_tgkill, pid, w->tracer, w->sig);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

void trace_sv_waker_due(struct trace_waker *w, uint64_t due_us)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->due_us = due_us;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int trace_sv_waker_start(struct trace_waker *w)
{
	pthread_condattr_t ca;
	sigset_t all, old, one;
	int err;

	w->sig = SIGRTMIN + 6;
	w->tracer = (pid_t)syscall(SYS_gettid);
	if ((err = wake_handler_get(w->sig)) < 0)
		return err;
	sigemptyset(&one);
	sigaddset(&one, w->sig);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the helper takes no signal */
	err = pthread_create(&w->thread, NULL, waker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		wake_handler_put(w->sig);
		return -err;
	}
	w->started = 1;
	return 0;
}

void trace_sv_waker_stop(struct trace_waker *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	wake_handler_put(w->sig);
	w->started = 0;
}
