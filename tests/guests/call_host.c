/* sbx_call beside a busy host: call_host MODE SRCDIR [N]
 * pair     two threads each make N calls at once; every result is right and
 *          the host's own SIGRTMIN+6 handler is still installed afterwards
 * system   one thread's callback waits on the FIFO SRCDIR/go while the host runs
 *          system("true") N times: every one returns 0
 * child    the calling thread's own child is neither reaped nor waited for
 * pending  a SIGTERM pending for the host before the call is still its own after
 * sigpipe  an inspector co-process that closes its input: the call fails, SIGPIPE
 *          keeps the host's disposition and none is left pending
 * nostdin  a host whose fd 0 is closed (the call's memfd takes it, the image fd
 *          then 3, where the guest's state fd goes): the call still runs this image
 * A watchdog turns a hang into exit 3 ("watchdog: MODE hung"). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sbx.h"

#define WATCHDOG_S 120

struct job { long in, out; char *text; };
static const struct sbx_field job_f[] = {
	SBX_FIELD_AUTO(struct job, in),
	SBX_FIELD_AUTO(struct job, out),
	SBX_FIELD_AUTO(struct job, text),
};
static const struct sbx_type job_t = SBX_STRUCT("job", struct job, job_f);

static const char *src;
static const char *mode;

static void on_watchdog(int sig)
{
	static const char msg[] = "watchdog: call_host hung\n";
	(void)sig;
	(void)!write(2, msg, sizeof msg - 1);
	_exit(3);
}

static char *slurp(const char *path)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return strdup(buf);
}

/* In the guest: the answer depends on the input, the text on the bind. */
static void compute(void *arg)
{
	struct job *j = arg;
	j->out = 2 * j->in + 1;
	j->text = slurp("/src/hello.txt");
}

/* In the guest: hold the call open until the host writes to the FIFO. */
static void wait_go(void *arg)
{
	struct job *j = arg;
	char c = 0;
	int fd = open("/src/go", O_RDONLY);
	if (fd >= 0 && read(fd, &c, 1) == 1)
		j->out = c;
	if (fd >= 0)
		close(fd);
	j->text = slurp("/src/hello.txt");
}

static int call(void (*fn)(void *), struct job *j, const char *inspect_exec)
{
	struct trace_mount m = { .type = TRACE_MOUNT_BIND, .src = src, .dst = "/src" };
	struct common_err e = {0};
	struct sbx_sandbox sb = { .mounts = &m, .nmounts = 1, .err = &e,
				  .inspect_exec = inspect_exec };
	if (sbx_call(&sb, fn, &job_t, j) < 0) {
		fprintf(stderr, "call_host: sbx_call: %s: %s\n", e.what, e.why);
		return -1;
	}
	return 0;
}

struct worker {
	pthread_t t;
	int id, rounds, right;
	pthread_barrier_t *bar;
};

static void *pair_worker(void *arg)
{
	struct worker *w = arg;
	for (int r = 0; r < w->rounds; r++) {
		struct job j = { .in = w->id * 1000 + r };
		pthread_barrier_wait(w->bar); /* both calls start together */
		if (call(compute, &j, NULL) == 0 && j.out == 2 * j.in + 1 && j.text &&
		    strcmp(j.text, "hello") == 0)
			w->right++;
	}
	return NULL;
}

static void host_rt(int sig)
{
	(void)sig;
}

static int mode_pair(int rounds)
{
	pthread_barrier_t bar;
	struct worker w[2];
	struct sigaction sa, now;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = host_rt;
	sigaction(SIGRTMIN + 6, &sa, NULL);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ .id = i + 1, .rounds = rounds, .bar = &bar };
		pthread_create(&w[i].t, NULL, pair_worker, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].t, NULL);
	sigaction(SIGRTMIN + 6, NULL, &now);
	printf("pair: %d of %d calls right; host handler %s\n", w[0].right + w[1].right,
	       2 * rounds, now.sa_handler == host_rt ? "kept" : "lost");
	return w[0].right + w[1].right == 2 * rounds && now.sa_handler == host_rt ? 0 : 1;
}

static void *system_caller(void *arg)
{
	struct job *j = arg;
	if (call(wait_go, j, NULL) < 0)
		j->out = -1;
	return NULL;
}

static int mode_system(int n)
{
	char fifo[4096];
	struct job j = { .in = 0 };
	pthread_t t;
	int zero = 0;

	snprintf(fifo, sizeof fifo, "%s/go", src);
	pthread_create(&t, NULL, system_caller, &j);
	/* returns once the callback opened its end: the call is running */
	int fd = open(fifo, O_WRONLY);
	if (fd < 0) {
		perror("call_host: open FIFO");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		int st = system("true");
		if (st == 0)
			zero++;
		else
			fprintf(stderr, "call_host: system(\"true\") returned %d (%s)\n", st,
				st < 0 ? strerror(errno) : "status");
	}
	(void)!write(fd, "G", 1);
	close(fd);
	pthread_join(t, NULL);
	printf("system: %d of %d returned 0; call %s\n", zero, n,
	       j.out == 'G' && j.text && strcmp(j.text, "hello") == 0 ? "right" : "wrong");
	return zero == n && j.out == 'G' ? 0 : 1;
}

static int mode_child(void)
{
	int pp[2];
	char c;
	struct job j = { .in = 20 };

	if (pipe(pp) < 0)
		return 1;
	pid_t kid = fork();
	if (kid == 0) {
		close(pp[1]);
		_exit(read(pp[0], &c, 1) == 0 ? 7 : 8); /* until the host closes the pipe */
	}
	close(pp[0]);
	int rc = call(compute, &j, NULL);
	close(pp[1]);
	int st = 0;
	pid_t w = waitpid(kid, &st, 0);
	printf("child: call %s; own child %s status %d\n",
	       rc == 0 && j.out == 41 ? "right" : "wrong", w == kid ? "reaped by us," : "lost,",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return rc == 0 && j.out == 41 && w == kid && WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 1;
}

static int mode_pending(void)
{
	sigset_t term, pend;
	struct job j = { .in = 5 };

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	kill(getpid(), SIGTERM);
	int rc = call(compute, &j, NULL);
	sigpending(&pend);
	int kept = sigismember(&pend, SIGTERM) == 1;
	printf("pending: call %s; SIGTERM %s\n", rc == 0 && j.out == 11 ? "right" : "wrong",
	       kept ? "still pending" : "taken");
	return rc == 0 && j.out == 11 && kept ? 0 : 1;
}

static int mode_sigpipe(void)
{
	sigset_t pend;
	struct sigaction now;
	struct job j = { .in = 1 };

	int rc = call(compute, &j, "exec 0<&-; exit 0");
	sigaction(SIGPIPE, NULL, &now);
	sigpending(&pend);
	printf("sigpipe: call %s; SIGPIPE %s, %s\n", rc < 0 ? "failed" : "succeeded",
	       now.sa_handler == SIG_DFL ? "default" : "changed",
	       sigismember(&pend, SIGPIPE) == 1 ? "pending" : "not pending");
	return rc < 0 && now.sa_handler == SIG_DFL && sigismember(&pend, SIGPIPE) != 1 ? 0 : 1;
}

static int mode_nostdin(void)
{
	struct job j = { .in = 7 };

	close(0);
	int rc = call(compute, &j, NULL);
	printf("nostdin: call %s\n", rc == 0 && j.out == 15 ? "right" : "wrong");
	return rc == 0 && j.out == 15 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: call_host pair|system|child|pending|sigpipe|nostdin SRCDIR [N]\n");
		return 2;
	}
	mode = argv[1];
	src = argv[2];
	int n = argc > 3 ? atoi(argv[3]) : 20;
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGALRM, on_watchdog);
	alarm(WATCHDOG_S);
	if (!strcmp(mode, "pair"))
		return mode_pair(n);
	if (!strcmp(mode, "system"))
		return mode_system(n);
	if (!strcmp(mode, "child"))
		return mode_child();
	if (!strcmp(mode, "pending"))
		return mode_pending();
	if (!strcmp(mode, "sigpipe"))
		return mode_sigpipe();
	if (!strcmp(mode, "nostdin"))
		return mode_nostdin();
	fprintf(stderr, "call_host: unknown mode %s\n", mode);
	return 2;
}
