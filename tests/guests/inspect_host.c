/* A host program embedding libsbx's C inspection API (sbx_inspect_fn) for the tests
 * and the benchmark. usage: inspect_host MODE PROGRAM [ARG...]
 * MODE: count deny rewrite mem short writev threads fail */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/inspect/inspect.h"
#include "trace/meter/meter.h"

extern char **environ;

static const char *mode;
static unsigned long calls;
static pid_t tids[64];
static int ntids;
static void *stale_view;

static void saw_tid(pid_t t)
{
	for (int i = 0; i < ntids; i++)
		if (tids[i] == t)
			return;
	if (ntids < 64)
		tids[ntids++] = t;
}

static int inspect(struct sbx_call *c, void *arg)
{
	struct sbx_mem m;
	int r;

	(void)arg;
	calls++;
	saw_tid(c->tid);
	if (strcmp(mode, "count") == 0)
		return 0;
	if (strcmp(mode, "fail") == 0)
		return -1;
	if ((strcmp(mode, "deny") == 0 || strcmp(mode, "threads") == 0) && c->path[0] &&
	    strncmp(c->path[0], "/deny/", 6) == 0)
		return EACCES;
	if (strcmp(mode, "rewrite") == 0 && c->path[0] && strcmp(c->path[0], "/tmp/hello.txt") == 0) {
		if ((r = sbx_call_map(c, 0, sizeof "/tmp/other.txt", &m)) < 0)
			return -1;
		memcpy(m.data, "/tmp/other.txt", sizeof "/tmp/other.txt");
		c->args[1] = m.addr;
	}
	if (strcmp(mode, "mem") == 0 && c->path[0] && strcmp(c->path[0], "/tmp/f") == 0 &&
	    c->name && strcmp(c->name, "openat") == 0) {
		if ((r = sbx_call_map(c, c->args[1], 7, &m)) < 0)
			return -1;
		((char *)m.data)[5] = 'g'; /* the copy says /tmp/g; the guest's bytes stay /tmp/f */
		c->args[1] = m.addr;
		stale_view = m.data;
	}
	if (strcmp(mode, "short") == 0 && c->path[0] && strcmp(c->path[0], "/x") == 0) {
		r = sbx_call_map(c, c->args[1], 4096, &m);
		fprintf(stderr, "inspect_host: short map: size=%zu rc=%s\n", m.size,
			r < 0 ? strerrorname_np(-r) : "0");
	}
	if (strcmp(mode, "writev") == 0 && c->name && strcmp(c->name, "writev") == 0 &&
	    c->args[0] == 1) {
		struct iovec iov;
		if ((r = sbx_call_map(c, 0, 128, &m)) < 0)
			return -1;
		memcpy((char *)m.data + 64, "HIJACKED\n", 9);
		iov.iov_base = (void *)(uintptr_t)(m.addr + 64);
		iov.iov_len = 9;
		memcpy(m.data, &iov, sizeof iov);
		c->args[1] = m.addr;
		c->args[2] = 1;
	}
	return 0;
}

static const char *find_image(const char *prog, char *buf, size_t cap)
{
	const char *path = getenv("PATH");

	if (strchr(prog, '/'))
		return prog;
	while (path && *path) {
		const char *colon = strchr(path, ':');
		size_t l = colon ? (size_t)(colon - path) : strlen(path);
		snprintf(buf, cap, "%.*s/%s", (int)l, path, prog);
		if (access(buf, X_OK) == 0)
			return buf;
		path = colon ? colon + 1 : NULL;
	}
	return prog;
}

int main(int argc, char **argv)
{
	struct trace_inspector_opts o = {0};
	struct trace_inspector *in;
	struct trace_metering_opts mo = {0};
	struct trace_metering *mt = trace_metering_new(&mo);
	struct trace_result res;
	struct common_err e = {0};
	char ns[] = "/tmp/inspect_host.XXXXXX", img[4096];
	int code;

	common_set_progname("inspect_host");
	if (argc < 3) {
		fprintf(stderr, "usage: inspect_host MODE PROGRAM [ARG...]\n");
		return 2;
	}
	mode = argv[1];
	o.fn = inspect;
	o.fn_classes = strcmp(mode, "writev") == 0 ? TRACE_CLASS_WRITE : TRACE_CLASS_FILE;
	if (!mkdtemp(ns) || trace_inspector_new(&o, &in, &e) < 0)
		common_die(SBX_EXIT_SBX, &e);
	struct trace_layer layers[TRACE_LAYERS] = {
		[TRACE_LAYER_INSPECT] = trace_inspector_layer(in),
		[TRACE_LAYER_METER] = trace_meter_layer(mt),
	};
	struct trace_config cfg = {
		.argv = (const char *const *)argv + 2, .envp = (const char *const *)environ,
		.image = find_image(argv[2], img, sizeof img), .ns_dir = ns,
		.trace_classes = trace_inspector_classes(in) | trace_metering_classes(mt), .state_fd = -1,
		.stdout_fd = -1, .stderr_fd = -1, .layers = layers,
	};
	if (trace_run(&cfg, &res, &e) < 0)
		common_die(SBX_EXIT_SBX, &e);
	if (trace_metering_finish(mt, &e) < 0)
		common_report(&e);
	code = trace_result_exit_code(&res);
	const struct common_err *f = trace_inspector_failure(in);
	if (f || (f = trace_metering_failure(mt))) {
		common_report(f);
		code = SBX_EXIT_SBX;
	}
	fprintf(stderr, "inspect_host: calls=%lu threads=%d\n", calls, ntids);
	if (stale_view) {
		pid_t p = fork();
		int st;
		if (p == 0) {
			*(volatile char *)stale_view = 'Z';
			_exit(0);
		}
		waitpid(p, &st, 0);
		fprintf(stderr, "inspect_host: stale view %s\n",
			WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? "faults" : "did not fault");
	}
	trace_inspector_free(in);
	trace_metering_free(mt);
	common_rm_rf(ns, NULL);
	return code;
}
