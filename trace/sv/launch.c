/* trace_run: one guest spawned in its sandbox, seized and supervised, from the
 * calling thread or a private tracer thread. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include "trace/sv/sv.h"

/* Spawn, seize, release and supervise, all from the calling thread: the tracer
 * of every guest task and the parent of the sandbox's init. */
static int run_here(const struct trace_config *cfg, struct trace_result *res,
		    struct common_err *e)
{
	struct trace_plan p;
	struct trace_prio pr;
	if (trace_plan_build(cfg, &p, e) < 0)
		return -1;
	/* before the sandbox is cloned: it is born SCHED_OTHER all the same */
	int raised = trace_prio_raise(&pr);
	res->priority = raised == 0 ? TRACE_PRIO_REALTIME : raised == -EEXIST ? TRACE_PRIO_INVOKER :
			TRACE_PRIO_NORMAL;
	pid_t pid = trace_sandbox_spawn(&p, e);
	if (pid < 0) {
		trace_prio_restore(&pr);
		trace_plan_free(&p);
		return -1;
	}
	/* the child waits on the sync pipe: it is held before it runs a thing */
	long opts = PTRACE_O_EXITKILL | PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEEXEC |
		    PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
		    PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD;
	if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)opts) < 0) {
		common_errno(e, errno, "ptrace (PTRACE_SEIZE; kernel.yama.ptrace_scope=3 or a "
			     "seccomp policy forbids it)");
	} else if (trace_sandbox_release(&p, pid, e) == 0) {
		int rc = trace_supervise(&p, pid, res, &pr, e); /* it reaps every task it traced */
		trace_prio_restore(&pr);
		trace_plan_free(&p);
		return rc;
	}
	/* nothing ran: init never forked, so it is the only task to reap */
	trace_sandbox_kill(&p);
	waitpid(pid, NULL, __WALL | __WNOTHREAD);
	trace_prio_restore(&pr);
	trace_plan_free(&p);
	return -1;
}

#define RUN_STACK (8u << 20) /* the same whatever RLIMIT_STACK the host runs with */

struct run_job {
	const struct trace_config *cfg;
	struct trace_result *res;
	struct common_err *e;
	int rc;
};

static void *run_thread(void *arg)
{
	struct run_job *j = arg;
	j->rc = run_here(j->cfg, j->res, j->e);
	return NULL;
}

int trace_run(const struct trace_config *cfg, struct trace_result *res, struct common_err *e)
{
	memset(res, 0, sizeof *res);
	if (cfg->host_signals)
		return run_here(cfg, res, e);
	/* a library caller's thread may have children and signals of its own: a
	 * private tracer thread with no other child and every signal blocked waits
	 * for this run's tasks only (__WNOTHREAD) and takes none of the host's */
	struct run_job j = { cfg, res, e, -1 };
	pthread_attr_t a;
	pthread_t t;
	sigset_t all;
	sigfillset(&all);
	int err = pthread_attr_init(&a);
	if (!err)
		err = pthread_attr_setsigmask_np(&a, &all);
	if (!err) /* the plan and the supervisor keep path buffers on the stack */
		err = pthread_attr_setstacksize(&a, RUN_STACK);
	if (!err)
		err = pthread_create(&t, &a, run_thread, &j);
	pthread_attr_destroy(&a);
	if (err)
		return common_errno(e, err, "starting the supervisor thread");
	pthread_join(t, NULL);
	return j.rc;
}

int trace_result_exit_code(const struct trace_result *res)
{
	if (res->exec_failed)
		return res->exec_failed == ENOENT ? SBX_EXIT_NOTFOUND : SBX_EXIT_NOEXEC;
	if (res->host_signal) /* sbx-run itself was told to end, as a shell reports it */
		return 128 + res->host_signal;
	if (res->signal)
		return 128 + res->signal;
	if (res->exited)
		return res->status;
	return SBX_EXIT_SBX;
}
