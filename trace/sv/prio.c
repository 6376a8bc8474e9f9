/* The tracer's scheduling (sbx-run(1) Scheduling): where the invoker may (root,
 * CAP_SYS_NICE, or an RLIMIT_RTPRIO), the tracer thread, its waker and the observation
 * writer run SCHED_FIFO at the lowest real-time priority, so a tick is taken when it
 * is due even on a host whose CPUs are all busy, and the bounds it samples are made
 * durable on time. Every other thread and process is born SCHED_OTHER
 * (SCHED_RESET_ON_FORK): the guest, the relay and any process never run real-time,
 * whatever the invoker ran. A guest must not turn them into real-time CPU hogs: each
 * raised thread pays its real-time CPU from a budget that grows by 1/PRIO_DUTY of the
 * time passed (at most PRIO_BURST_US) and runs SCHED_OTHER once it is spent, until it
 * has some again; long host-side work (a snapshot) runs SCHED_OTHER. An invoker that
 * chose its own scheduling (a policy, or a positive nice the guest would lose) keeps it. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "trace/sv/sv.h"

#define PRIO_CHECK_US 10000  /* the budget is settled this often: the most it is overdrawn */
#define PRIO_BURST_US 25000  /* the budget's ceiling: a burst of stops is taken at once */
#define PRIO_DUTY 4          /* real-time for at most 1/PRIO_DUTY of a CPU in the long run */

static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int set(int policy, int prio)
{
	struct sched_param sp = { .sched_priority = prio };

	return sched_setscheduler(0, policy | SCHED_RESET_ON_FORK, &sp) < 0 ? -errno : 0;
}

static int fifo(void)
{
	return set(SCHED_FIFO, sched_get_priority_min(SCHED_FIFO));
}

/* The invoker's own real-time policy is kept, but not for what the tracer creates. */
static int keep(struct trace_prio *pr)
{
	int policy = pr->policy & ~SCHED_RESET_ON_FORK;

	if (policy == SCHED_FIFO || policy == SCHED_RR)
		pr->kept = set(policy, pr->param.sched_priority) == 0;
	return -EEXIST;
}

static void budget_start(struct trace_prio *pr)
{
	pr->raised = pr->rt = 1;
	pr->credit_us = PRIO_BURST_US;
	pr->at_us = common_mono_us();
	pr->at_cpu_us = thread_cpu_us();
}

int trace_prio_raise(struct trace_prio *pr)
{
	memset(pr, 0, sizeof *pr);
	pr->policy = sched_getscheduler(0);
	if (pr->policy < 0 || sched_getparam(0, &pr->param) < 0)
		return -errno;
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, 0);
	if (nice == -1 && errno)
		return -errno;
	/* a real-time parent's children are born at nice 0: a niced invoker is kept */
	if ((pr->policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER || nice > 0)
		return keep(pr);
	int rc = fifo();
	if (rc < 0)
		return rc;
	budget_start(pr);
	return 0;
}

int trace_prio_join(struct trace_prio *pr, const struct trace_prio *tracer)
{
	memset(pr, 0, sizeof *pr);
	if (!tracer || !tracer->raised)
		return -EPERM;
	int rc = fifo();
	if (rc == 0)
		budget_start(pr);
	return rc;
}

/* The budget brought up to now: real-time CPU spent, 1/PRIO_DUTY of the time gained. */
static void settle(struct trace_prio *pr, uint64_t now_us)
{
	uint64_t cpu = thread_cpu_us();

	if (pr->rt)
		pr->credit_us -= (int64_t)(cpu - pr->at_cpu_us);
	pr->credit_us += (int64_t)(now_us - pr->at_us) / PRIO_DUTY;
	if (pr->credit_us > PRIO_BURST_US)
		pr->credit_us = PRIO_BURST_US;
	pr->at_us = now_us;
	pr->at_cpu_us = cpu;
}

/* Real-time while the budget lasts and no long work runs; a refused change is
 * tried again at the next check. */
static void apply(struct trace_prio *pr)
{
	int want = pr->credit_us >= 0 && !pr->unhurried;

	if (want && !pr->rt)
		pr->rt = fifo() == 0;
	else if (!want && pr->rt)
		pr->rt = set(SCHED_OTHER, 0) < 0;
}

void trace_prio_duty(struct trace_prio *pr, uint64_t now_us)
{
	if (!pr || !pr->raised || now_us - pr->at_us < PRIO_CHECK_US)
		return;
	settle(pr, now_us);
	apply(pr);
}

void trace_prio_unhurried(struct trace_prio *pr, int on)
{
	if (!pr || !pr->raised)
		return;
	settle(pr, common_mono_us());
	pr->unhurried = on;
	apply(pr);
}

void trace_prio_restore(struct trace_prio *pr)
{
	if (pr->raised || pr->kept)
		(void)sched_setscheduler(0, pr->policy, &pr->param);
	pr->raised = pr->kept = 0;
}
