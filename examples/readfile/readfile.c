/* The formula seed's Readfile demo in C: a formula {source dir, filename,
 * builds} and a build context {metadata, errors}; the callback runs once in a
 * guest that sees SRCDIR read-only at /src, and the host then reads the
 * updated objects.  Build non-PIE:  cc -no-pie readfile.c libsbx.a -l...
 * Usage: readfile SRCDIR [TRACE]   (TRACE: record the call's trace there) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sbx.h"

struct formula {
	const char *source;
	const char *filename;
	int builds;
};
typedef SBX_SLICE_OF(char *) str_slice;
struct context {
	char *metadata;
	str_slice errs;
};
struct build { /* the callback's captures: the formula instance and its context */
	struct formula *self;
	struct context *ctx;
	int guest_pid;
};

static const struct sbx_field formula_f[] = {
	SBX_FIELD_AUTO(struct formula, source),
	SBX_FIELD_AUTO(struct formula, filename),
	SBX_FIELD_AUTO(struct formula, builds),
};
static const struct sbx_type formula_t = SBX_STRUCT("formula", struct formula, formula_f);
static const struct sbx_type formula_p = SBX_PTR("formula*", &formula_t);
static const struct sbx_type str_s = SBX_SLICE("[]string", &sbx_type_string);
static const struct sbx_field context_f[] = {
	SBX_FIELD_AUTO(struct context, metadata),
	SBX_FIELD(struct context, errs, &str_s),
};
static const struct sbx_type context_t = SBX_STRUCT("ctx", struct context, context_f);
static const struct sbx_type context_p = SBX_PTR("ctx*", &context_t);
static const struct sbx_field build_f[] = {
	SBX_FIELD(struct build, self, &formula_p),
	SBX_FIELD(struct build, ctx, &context_p),
	SBX_FIELD_AUTO(struct build, guest_pid),
};
static const struct sbx_type build_t = SBX_STRUCT("build", struct build, build_f);

static void add_error(struct context *ctx, const char *msg)
{
	/* the old backing array belongs to the transferred graph: copy, never realloc */
	char **v = malloc((ctx->errs.len + 1) * sizeof *v);
	if (!v)
		return;
	if (ctx->errs.len)
		memcpy(v, ctx->errs.ptr, ctx->errs.len * sizeof *v);
	v[ctx->errs.len] = strdup(msg);
	ctx->errs.ptr = v;
	ctx->errs.len++;
	ctx->errs.cap = ctx->errs.len;
}

/* onBuild: runs in the guest only. */
static void on_build(void *arg)
{
	struct build *b = arg;
	char path[512], data[4096];

	b->self->builds++;
	b->guest_pid = getpid();
	snprintf(path, sizeof path, "%s/%s", b->self->source, b->self->filename);
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		add_error(b->ctx, strerror(errno));
		return;
	}
	ssize_t n = read(fd, data, sizeof data - 1);
	close(fd);
	if (n < 0) {
		add_error(b->ctx, strerror(errno));
		return;
	}
	data[n] = '\0';
	b->ctx->metadata = strdup(data);
}

/* The host's view of what the guest opened: the build record. */
static int log_open(struct sbx_call *call, void *arg)
{
	(void)arg;
	if (call->path[0] && strncmp(call->path[0], "/src/", 5) == 0)
		fprintf(stderr, "guest %s %s\n", call->name ? call->name : "?", call->path[0]);
	return 0;
}

int main(int argc, char **argv)
{
	struct formula f = { "/src", "hello.txt", 0 };
	struct context ctx = { NULL, { NULL, 0, 0 } };
	struct build b = { &f, &ctx, 0 };
	struct common_err e = {0};

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: readfile SRCDIR [TRACE]\n");
		return 2;
	}
	struct trace_mount m = { .type = TRACE_MOUNT_BIND, .src = argv[1], .dst = "/src" };
	struct sbx_sandbox sb = { .mounts = &m, .nmounts = 1, .inspect = log_open, .err = &e,
				  .trace_path = argc == 3 ? argv[2] : NULL };
	if (sbx_call(&sb, on_build, &build_t, &b) < 0) {
		fprintf(stderr, "readfile: error: %s: %s\n", e.what, e.why);
		return 1;
	}
	printf("builds=%d metadata=%s\n", f.builds, ctx.metadata ? ctx.metadata : "(null)");
	for (size_t i = 0; i < ctx.errs.len; i++)
		printf("error: %s\n", ctx.errs.ptr[i]);
	printf("host pid %d continues; the callback ran as pid %d in the guest\n", (int)getpid(),
	       b.guest_pid);
	return 0;
}
