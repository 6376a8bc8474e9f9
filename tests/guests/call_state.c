/* Typed state through sbx-run --state-in/--state-out (SPEC §10):
 *   call_state make FILE    write a state image of a job (host side)
 *   call_state guest        inside sbx-run: load, run one step, store
 *   call_state show FILE    print a state image */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sbx.h"

typedef SBX_SLICE_OF(char *) str_slice;
struct job {
	int runs;
	const char *name;
	str_slice log;
	struct job *self; /* a cycle */
	void (*step)(void);
};
static const struct sbx_type job_t;
static const struct sbx_type job_p = SBX_PTR("job*", &job_t);
static const struct sbx_type str_s = SBX_SLICE("[]string", &sbx_type_string);
static const struct sbx_field job_f[] = {
	SBX_FIELD_AUTO(struct job, runs),
	SBX_FIELD_AUTO(struct job, name),
	SBX_FIELD(struct job, log, &str_s),
	SBX_FIELD(struct job, self, &job_p),
	SBX_FIELD(struct job, step, &sbx_type_fn),
};
static const struct sbx_type job_t = SBX_STRUCT("job", struct job, job_f);

static void step(void) {}

static int only_step(void *arg, uint64_t addr, struct common_err *e)
{
	(void)arg;
	return addr == (uint64_t)(uintptr_t)step ? 0 : common_errf(e, "step", "unknown function");
}

static int fail(const struct common_err *e)
{
	fprintf(stderr, "call_state: error: %s: %s\n", e->what, e->why);
	return 1;
}

int main(int argc, char **argv)
{
	struct common_err e;
	struct codec_graph *g;
	struct codec_opts o = { .check_fn = only_step };
	void *root;

	if (argc == 3 && !strcmp(argv[1], "make")) {
		struct job j = { 0, "build", { NULL, 0, 0 }, NULL, NULL };
		struct codec_buf b;
		j.self = &j;
		codec_buf_init(&b);
		if (codec_encode(&job_t, &j, &o, &b, NULL, &e) < 0 ||
		    common_write_atomic(argv[2], b.p, b.len, 0644, &e) < 0)
			return fail(&e);
		codec_buf_free(&b);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "guest")) {
		if (sbx_state_load(&job_t, &root, &g, &e) < 0)
			return fail(&e);
		struct job *j = root;
		char **v = malloc((j->log.len + 1) * sizeof *v);
		memcpy(v, j->log.ptr, j->log.len * sizeof *v);
		v[j->log.len] = strdup("ran in the guest");
		j->log.ptr = v;
		j->log.cap = ++j->log.len;
		j->runs++;
		j->step = step;
		return sbx_state_store(g, &e) < 0 ? fail(&e) : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "show")) {
		char *buf;
		size_t len;
		if (common_read_file(argv[2], 1u << 30, &buf, &len, &e) < 0 ||
		    codec_decode(&job_t, buf, len, &o, &root, &g, &e) < 0)
			return fail(&e);
		struct job *j = root;
		printf("runs=%d name=%s self=%s step=%s log=%zu", j->runs, j->name,
		       j->self == j ? "cycle" : "other", j->step == step ? "step" : "null", j->log.len);
		for (size_t i = 0; i < j->log.len; i++)
			printf(" [%s]", j->log.ptr[i]);
		printf("\n");
		codec_graph_free(g);
		free(buf);
		return 0;
	}
	fprintf(stderr, "usage: call_state make FILE | guest | show FILE\n");
	return 2;
}
