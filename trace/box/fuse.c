/* The fuel fuse (sbx-run(1) Metering and automatic closure): no CFS setting holds a
 * total (a quota is a rate: it refills every period, at most 1 s long, however late
 * the supervisor is), and the kernel's CPU-time limits (RLIMIT_CPU in whole seconds,
 * itimers, POSIX CPU timers) are per process and signal only the process that set
 * them. So the run's fuel is held by a process of its own: forked when the tree
 * enters its cgroup, out of the tree and of sbx-run's process group, real-time where
 * the invoker may, it sleeps until the tree, burning on every CPU, could reach the
 * ceiling the supervisor last set in the cgroup's own CPU count, reads the count, and
 * kills every process of the cgroup once the count passes it. It needs the supervisor
 * for nothing: a supervisor that is stopped or starved for any time finds the tree
 * ended at its ceiling. It only sleeps, reads one file and kills, in a forked child
 * of a threaded process: async-signal-safe calls only. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "trace/box/box-internal.h"

#define FUSE_STEP_US 1000        /* the shortest sleep: what the tree may pass its ceiling by, per CPU */
#define FUSE_BACKOFF_MAX_US 1000000 /* once fired, the cgroup is swept again at most this far apart */
#define FUSE_TASKS 8192          /* processes one sweep kills (a run's default RLIMIT_NPROC: 512) */

struct trace_fuse_shared {
	_Atomic uint64_t ceiling_us; /* 0: not armed */
};

static int read_u64(int fd, const char *key, uint64_t *v)
{
	char buf[512], *p = buf;
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (key && !(p = strstr(buf, key)))
		return -1;
	*v = strtoull(p + (key ? strlen(key) : 0), NULL, 10);
	return 0;
}

/* The CPU the guest's tasks burnt in the cgroup, µs (v2 cpu.stat's usage_usec, v1
 * cpuacct.usage's ns), without what init burnt since it entered (the meter's fuel is
 * the guest's alone), or -1. */
int64_t trace_fuse_count_us(const struct trace_fuse *f)
{
	uint64_t all, init_ns = 0;

	if (read_u64(f->count_fd, f->v2 ? "usage_usec " : NULL, &all) < 0 ||
	    (f->init_fd >= 0 && read_u64(f->init_fd, NULL, &init_ns) < 0))
		return -1;
	all = f->v2 ? all : all / 1000;
	init_ns = init_ns > f->init_base_ns ? (init_ns - f->init_base_ns) / 1000 : 0;
	return (int64_t)(all > init_ns ? all - init_ns : 0);
}

/* The pids listed in a cgroup.procs, at most cap. */
static size_t procs(int fd, pid_t *out, size_t cap)
{
	static char buf[FUSE_TASKS * 8];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	size_t k = 0;

	buf[n > 0 ? n : 0] = 0;
	for (char *p = buf, *end; *p && k < cap; p = end) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (v > 0)
			out[k++] = (pid_t)v;
	}
	return k;
}

/* SIGKILL to each process of the cgroup but init (it only reaps, and ends when the
 * guest does). A pid is signalled through a pidfd opened before a second listing
 * still shows it: a listed process reaped meanwhile, its pid reused by a host
 * process, is never the one signalled. */
static void sweep_kill(int procs_fd, pid_t init)
{
	static pid_t before[FUSE_TASKS], after[FUSE_TASKS];
	static int pfd[FUSE_TASKS];
	size_t nb = procs(procs_fd, before, FUSE_TASKS);

	for (size_t i = 0; i < nb; i++)
		pfd[i] = before[i] == init ? -1 : (int)syscall(SYS_pidfd_open, before[i], 0);
	size_t na = procs(procs_fd, after, FUSE_TASKS);
	for (size_t i = 0; i < nb; i++) {
		if (pfd[i] < 0)
			continue;
		for (size_t j = 0; j < na; j++)
			if (after[j] == before[i]) {
				syscall(SYS_pidfd_send_signal, pfd[i], SIGKILL, NULL, 0);
				break;
			}
		close(pfd[i]);
	}
}

/* The fuse's loop (fd 4 the wake pipe, 5 cgroup.procs); never returns. */
static void fuse_loop(const struct trace_fuse *f)
{
	struct trace_fuse_shared *sh = f->sh;
	uint64_t backoff_us = FUSE_STEP_US;
	char drain[64];

	for (;;) {
		uint64_t ceiling = atomic_load(&sh->ceiling_us);
		int64_t now = ceiling ? trace_fuse_count_us(f) : -1;
		struct timespec ts, *timeout = NULL;
		uint64_t sleep_us = 0;

		if (now >= 0 && (uint64_t)now < ceiling) {
			/* half the time the tree needs on every CPU: a late wake still comes first */
			sleep_us = (ceiling - (uint64_t)now) / f->ncpu / 2;
			sleep_us = sleep_us < FUSE_STEP_US ? FUSE_STEP_US : sleep_us;
			backoff_us = FUSE_STEP_US;
		} else if (ceiling) {
			if (now >= 0)
				sweep_kill(5, f->init);
			/* swept again (a stopped task may be resumed), or the count looked at
			 * again (init gone: the run ends), less and less often */
			sleep_us = backoff_us;
			backoff_us = backoff_us * 2 > FUSE_BACKOFF_MAX_US ? FUSE_BACKOFF_MAX_US : backoff_us * 2;
		}
		if (ceiling) {
			ts.tv_sec = (time_t)(sleep_us / 1000000);
			ts.tv_nsec = (long)(sleep_us % 1000000) * 1000;
			timeout = &ts;
		}
		struct pollfd p = { .fd = 4, .events = POLLIN };
		if (ppoll(&p, 1, timeout, NULL) > 0 && read(4, drain, sizeof drain) == 0)
			_exit(0); /* EOF: sbx-run is done with the run, or gone */
	}
}

/* In the fork's grandchild (no child of sbx-run: its waits for any child are the
 * guest's): out of sbx-run's way, then the loop. */
static void fuse_child(struct trace_fuse *f, const char *procs_path)
{
	struct sched_param sp = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };
	int count = fcntl(f->count_fd, F_DUPFD_CLOEXEC, 10), wake = fcntl(f->wake_rd, F_DUPFD_CLOEXEC, 10);
	int init = fcntl(f->init_fd, F_DUPFD_CLOEXEC, 10), pr = open(procs_path, O_RDONLY | O_CLOEXEC);

	if (count < 0 || wake < 0 || init < 0 || pr < 0 || (pr = fcntl(pr, F_DUPFD_CLOEXEC, 10)) < 0)
		_exit(1);
	prctl(PR_SET_NAME, "sbx-fuse", 0, 0, 0);
	/* the invoker's terminal stops or interrupts a job, not the fuse */
	setpgid(0, 0);
	signal(SIGTSTP, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	/* a starved fuse would be a late one: real-time where the invoker may (it runs a
	 * few µs per wake, and at most every FUSE_STEP_US) */
	(void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp);
	if (dup2(count, 3) != 3 || dup2(wake, 4) != 4 || dup2(pr, 5) != 5 || dup2(init, 6) != 6)
		_exit(1);
	syscall(SYS_close_range, 0, 2, 0); /* nobody waits for sbx-run's output on the fuse */
	syscall(SYS_close_range, 7, ~0U, 0);
	f->count_fd = 3;
	f->init_fd = 6;
	fuse_loop(f);
}

int trace_fuse_open(struct trace_fuse *f)
{
	f->sh = mmap(NULL, sizeof *f->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->sh == MAP_FAILED) {
		f->sh = NULL;
		return -1;
	}
	f->wake_rd = f->wake_wr = f->init_fd = -1;
	return 0;
}

int trace_fuse_start(struct trace_fuse *f, const char *procs_path, pid_t init)
{
	char path[64];
	int p[2], st = 0;
	pid_t mid;

	if (!f->sh || f->wake_wr >= 0)
		return f->sh ? 0 : -1;
	snprintf(path, sizeof path, "/proc/%d/schedstat", (int)init);
	if ((f->init_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 ||
	    read_u64(f->init_fd, NULL, &f->init_base_ns) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	f->init = init;
	f->ncpu = (unsigned)(get_nprocs_conf() > 0 ? get_nprocs_conf() : 1);
	f->wake_rd = p[0];
	if ((mid = fork()) == 0) {
		close(p[1]); /* the fuse's EOF is sbx-run's copy closing */
		pid_t fuse = fork();
		if (fuse == 0)
			fuse_child(f, procs_path);
		_exit(fuse < 0);
	}
	while (mid > 0 && waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	close(p[0]);
	f->wake_rd = -1;
	if (mid < 0 || (WIFEXITED(st) && WEXITSTATUS(st) != 0)) {
		close(p[1]);
		return -1;
	}
	f->wake_wr = p[1];
	return 0;
}

void trace_fuse_arm(struct trace_fuse *f, uint64_t ceiling_us)
{
	uint64_t was = atomic_exchange(&f->sh->ceiling_us, ceiling_us ? ceiling_us : 1);

	/* a later ceiling waits for the fuse's next look; an earlier one cannot */
	if (f->wake_wr >= 0 && (was == 0 || ceiling_us < was))
		(void)!write(f->wake_wr, "", 1);
}

/* The fuse ends at the EOF, on its own. */
void trace_fuse_close(struct trace_fuse *f)
{
	if (f->wake_wr >= 0)
		close(f->wake_wr);
	if (f->init_fd >= 0)
		close(f->init_fd);
	if (f->sh)
		munmap(f->sh, sizeof *f->sh);
	f->sh = NULL;
	f->wake_wr = f->init_fd = -1;
}
