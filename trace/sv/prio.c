/* The tracer's scheduling (sbx-run(1) SCHEDULING): where the invoker may (root,
 * CAP_SYS_NICE, or an RLIMIT_RTPRIO), the tracer thread and its waker run SCHED_FIFO
 * at the lowest real-time priority, so a tick is taken when it is due even on a host
 * whose CPUs are all busy; the bounds it samples are held on time. Every thread and
 * process either creates is born SCHED_OTHER (SCHED_RESET_ON_FORK): the guest, the
 * observation writer and the relay never run real-time. A busy tracer (a guest
 * stopping it without pause) is not late, and a guest must not turn its tracer into
 * a real-time CPU hog: past PRIO_DUTY of a CPU over a window it runs SCHED_OTHER
 * until a window shows it idle again. Where the invoker may not, it stays as it was. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "trace/sv/sv.h"

#define PRIO_WINDOW_US 100000 /* the tracer's CPU share is looked at this often */
#define PRIO_DUTY 4           /* at most 1/PRIO_DUTY of a CPU at real-time priority */

static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int fifo(void)
{
	struct sched_param sp = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };

	return sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0 ? -errno : 0;
}

int trace_prio_raise(struct trace_prio *pr)
{
	memset(pr, 0, sizeof *pr);
	pr->policy = sched_getscheduler(0);
	if (pr->policy < 0 || sched_getparam(0, &pr->param) < 0)
		return -errno;
	if ((pr->policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) /* the invoker chose one: kept */
		return -EEXIST;
	int rc = fifo();
	if (rc < 0)
		return rc;
	pr->raised = 1;
	pr->win_us = common_mono_us();
	pr->win_cpu_us = thread_cpu_us();
	return 0;
}

void trace_prio_follow(const struct trace_prio *pr)
{
	if (pr && pr->raised)
		(void)fifo(); /* as the tracer was: the waker's wake-up is on its path */
}

void trace_prio_duty(struct trace_prio *pr, uint64_t now_us)
{
	if (!pr || !pr->raised || now_us - pr->win_us < PRIO_WINDOW_US)
		return;
	uint64_t cpu = thread_cpu_us();
	int busy = (cpu - pr->win_cpu_us) * PRIO_DUTY > now_us - pr->win_us;
	struct sched_param sp = { .sched_priority = 0 };

	if (busy && !pr->demoted)
		pr->demoted = sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) == 0;
	else if (!busy && pr->demoted)
		pr->demoted = fifo() < 0;
	pr->win_us = now_us;
	pr->win_cpu_us = cpu;
}

void trace_prio_restore(struct trace_prio *pr)
{
	if (pr->raised)
		(void)sched_setscheduler(0, pr->policy, &pr->param);
	pr->raised = 0;
}
