/* The lease's side of metering: its limits and recorded usage, and the thread that
 * makes observations and the run's bound durable there (SPEC §4.2, §4.3). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/meter/meter-internal.h"

int trace_metering_lease_bounds(struct lease_store *s, const char *id,
				uint64_t limits[TRACE_DIMS], uint64_t base[TRACE_DIMS],
				struct common_err *e)
{
	json_t *rec = NULL, *lim, *use;

	if (lease_load(s, id, &rec, e) < 0)
		return -1;
	lim = json_object_get(rec, "limits");
	use = json_object_get(rec, "usage");
	for (int d = 0; d < TRACE_DIMS; d++) {
		const char *n = lease_dim_name((enum lease_dim)d);
		json_t *l = json_object_get(lim, n), *u = json_object_get(use, n);
		limits[d] = json_is_integer(l) && json_integer_value(l) >= 0 ?
			    (uint64_t)json_integer_value(l) : lease_dim_ceiling((enum lease_dim)d);
		base[d] = json_is_integer(u) && json_integer_value(u) >= 0 ?
			  (uint64_t)json_integer_value(u) : 0;
	}
	json_decref(rec);
	return 0;
}

int meter_obs_write(struct lease_store *s, const char *id, uint64_t u[TRACE_DIMS],
		    char closed[32], struct common_err *e)
{
	uint64_t lim[TRACE_DIMS], rec_u[TRACE_DIMS];
	const char *why = NULL;
	json_t *rec = NULL;
	int r = lease_observe_usage(s, id, u, &why, &rec, e);

	if (r < 0 && lease_store_unreachable(s)) {
		/* kept on this host until the store answers; the meter still bounds the guest */
		why = NULL;
		r = lease_observe_park(s, id, u, e);
	} else if (r < 0 && trace_metering_lease_bounds(s, id, lim, rec_u, NULL) == 0) {
		/* someone else recorded more meanwhile (a concurrent run): never lower */
		for (int d = 0; d < TRACE_DIMS; d++)
			if (rec_u[d] > u[d])
				u[d] = rec_u[d];
		json_decref(rec);
		rec = NULL;
		r = lease_observe_usage(s, id, u, &why, &rec, e);
	}
	json_decref(rec);
	if (r < 0) {
		common_err_context(e, "recording usage");
		return -1;
	}
	snprintf(closed, 32, "%s", why ? why : "");
	return 0;
}

/* With w->mu held: the newest bound posted, made durable in the run's claim first:
 * a guest may be waiting in a stop for it. */
static void writer_bound(struct trace_metering *mt, struct obs_writer *w)
{
	uint64_t gen = w->bound_posted, b[TRACE_DIMS];
	struct common_err e;
	int rc = 0;

	memcpy(b, w->bound, sizeof b);
	if (!w->failed) {
		pthread_mutex_unlock(&w->mu);
		rc = lease_run_bound_write(*mt->o.run_claim, w->lease, gen, b, !w->bound_journaled, &e);
		pthread_mutex_lock(&w->mu);
		if (rc < 0 && !w->failed) {
			w->failed = 1;
			w->err = e;
			if (w->efd >= 0)
				(void)!write(w->efd, &(uint64_t){1}, sizeof(uint64_t));
		}
	}
	if (rc == 0)
		memcpy(w->bound_durable, b, sizeof b);
	w->bound_written = gen;
	pthread_cond_broadcast(&w->done_cv);
}

static void *writer_main(void *arg)
{
	struct trace_metering *mt = arg;
	struct obs_writer *w = &mt->w;
	struct lease_store *s = NULL;
	struct common_err e;

	struct trace_prio pr;

	pthread_setname_np(pthread_self(), "sbx-observe");
	(void)trace_prio_join(&pr, w->tracer);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && w->written == w->posted && w->bound_written == w->bound_posted)
			pthread_cond_wait(&w->post_cv, &w->mu);
		trace_prio_duty(&pr, common_mono_us());
		if (w->bound_written != w->bound_posted) {
			writer_bound(mt, w);
			continue;
		}
		if (w->written == w->posted)
			break;
		uint64_t gen = w->posted, u[TRACE_DIMS];
		char closed[32] = "";
		int rc = 0;
		memcpy(u, w->u, sizeof u);
		/* a closed lease takes no more observations; a failure is reported once */
		if (!w->failed && !w->closed[0]) {
			pthread_mutex_unlock(&w->mu);
			/* opened at the first observation: a short run may make none */
			if (!s && lease_store_open(lease_store_name(mt->o.store), &s, &e) < 0) {
				s = NULL;
				common_err_context(&e, "recording usage");
				rc = -1;
			} else {
				rc = meter_obs_write(s, w->lease, u, closed, &e);
			}
			pthread_mutex_lock(&w->mu);
			if (rc < 0 && !w->failed) {
				w->failed = 1;
				w->err = e;
			}
			if (closed[0])
				memcpy(w->closed, closed, sizeof closed);
			if ((rc < 0 || closed[0]) && w->efd >= 0)
				(void)!write(w->efd, &(uint64_t){1}, sizeof(uint64_t));
		}
		w->written = gen;
		pthread_cond_broadcast(&w->done_cv);
	}
	pthread_mutex_unlock(&w->mu);
	lease_store_close(s);
	return NULL;
}

void meter_writer_start(struct trace_metering *mt)
{
	struct obs_writer *w = &mt->w;
	sigset_t all, old;

	w->lease = mt->o.lease;
	w->efd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->post_cv, NULL);
	pthread_cond_init(&w->done_cv, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* signals are the tracer's */
	w->started = pthread_create(&w->thread, NULL, writer_main, mt) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!w->started) {
		pthread_cond_destroy(&w->done_cv);
		pthread_cond_destroy(&w->post_cv);
		pthread_mutex_destroy(&w->mu);
	}
}

void meter_writer_stop(struct obs_writer *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->post_cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->done_cv);
	pthread_cond_destroy(&w->post_cv);
	pthread_mutex_destroy(&w->mu);
	if (w->efd >= 0)
		close(w->efd);
	w->efd = -1;
	w->started = 0;
}

int meter_writer_result(struct obs_writer *w, char closed[32], struct common_err *e)
{
	int failed;

	if (w->started)
		pthread_mutex_lock(&w->mu);
	failed = w->failed;
	if (failed)
		*e = w->err;
	memcpy(closed, w->closed, sizeof w->closed);
	if (w->started)
		pthread_mutex_unlock(&w->mu);
	return failed ? -1 : 0;
}

void meter_writer_post(struct obs_writer *w, const uint64_t u[TRACE_DIMS], int wait)
{
	uint64_t gen;

	pthread_mutex_lock(&w->mu);
	memcpy(w->u, u, sizeof w->u);
	gen = ++w->posted;
	pthread_cond_signal(&w->post_cv);
	while (wait && w->written < gen)
		pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

void meter_writer_post_bound(struct obs_writer *w, const uint64_t b[TRACE_DIMS],
			     const uint64_t most[TRACE_DIMS], int journaled)
{
	pthread_mutex_lock(&w->mu);
	if (b) {
		w->bound_journaled = journaled;
		memcpy(w->bound, b, sizeof w->bound);
		w->bound_posted++;
		pthread_cond_signal(&w->post_cv);
	}
	for (int d = 0; d < TRACE_DIMS; d++)
		while (!w->failed && most[d] > w->bound_durable[d] && w->bound_written < w->bound_posted)
			pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}
