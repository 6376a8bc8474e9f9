/* sbx_call test program: call_modes MODE SRCDIR [TRACE]
 * MODE: readfile | abort | exit | evilfn | noresult | garbage | rewrite | badfn | trace | empty | entry | lease | policy | list | swap (TRACE is then
 * a file renamed over this executable first; for lease, a lease ID; for policy,
 * a --policy file; for list, a node count).
 * Prints "builds=N metadata=M errors=K" afterwards, in every mode. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sbx.h"

struct formula { const char *source, *filename; int builds; };
typedef SBX_SLICE_OF(char *) str_slice;
struct context { char *metadata; str_slice errs; };
struct build {
	struct formula *self;
	struct context *ctx;
	int mode;
	void (*hook)(void);
	int saw_ctor, saw_main; /* what the guest's callback observed */
};
enum { M_NONE, M_ABORT, M_EXIT, M_EVILFN, M_NORESULT, M_GARBAGE };

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
	SBX_FIELD_AUTO(struct build, mode),
	SBX_FIELD(struct build, hook, &sbx_type_fn),
	SBX_FIELD_AUTO(struct build, saw_ctor),
	SBX_FIELD_AUTO(struct build, saw_main),
};

struct lnode { long v; struct lnode *next; };
static const struct sbx_type lnode_t;
static const struct sbx_type lnode_p = SBX_PTR("lnode*", &lnode_t);
static const struct sbx_field lnode_f[] = {
	SBX_FIELD_AUTO(struct lnode, v),
	SBX_FIELD(struct lnode, next, &lnode_p),
};
static const struct sbx_type lnode_t = SBX_STRUCT("lnode", struct lnode, lnode_f);

/* Every node +1, and a new node appended: the whole list crosses twice. */
static void bump_list(void *arg)
{
	struct lnode *n = arg, *last = NULL;
	for (; n; n = n->next) {
		n->v++;
		last = n;
	}
	last->next = calloc(1, sizeof *last->next);
	last->next->v = -1;
}

/* The guest runs constructors but never main. */
static int ctor_ran, main_ran;
__attribute__((constructor)) static void ctor(void)
{
	ctor_ran = 1;
}
static const struct sbx_type build_t = SBX_STRUCT("build", struct build, build_f);

static int accept_any(void *arg, uint64_t addr, struct common_err *e)
{
	(void)arg, (void)addr, (void)e;
	return 0;
}

/* A hostile guest: writes its own result with a function pointer into the
 * middle of the text, bypassing the guest entry's checks, and exits 0. */
static void forge(struct build *b)
{
	struct codec_opts o = { .check_fn = accept_any };
	struct codec_buf out;
	struct common_err e;

	b->hook = (void (*)(void))(uintptr_t)0x401001;
	codec_buf_init(&out);
	if (codec_encode(&build_t, b, &o, &out, NULL, &e) < 0 ||
	    sbx_state_write_result(out.p, out.len) < 0)
		_exit(4);
	_exit(0);
}

static void on_build(void *arg)
{
	struct build *b = arg;
	char path[512], data[4096];

	b->self->builds++;
	snprintf(path, sizeof path, "%s/%s", b->self->source, b->self->filename);
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		char **v = malloc(sizeof *v);
		v[0] = strdup(strerror(errno));
		b->ctx->errs.ptr = v;
		b->ctx->errs.len = b->ctx->errs.cap = 1;
		return;
	}
	ssize_t n = read(fd, data, sizeof data - 1);
	close(fd);
	data[n < 0 ? 0 : n] = '\0';
	b->ctx->metadata = strdup(data);
	/* after changing everything: none of it may reach the host */
	if (b->mode == M_ABORT)
		abort();
	if (b->mode == M_EXIT)
		exit(3);
	if (b->mode == M_EVILFN)
		forge(b);
	if (b->mode == M_NORESULT)
		_exit(0); /* a clean exit that never wrote a result */
	if (b->mode == M_GARBAGE) {
		static const char junk[] = "SBXG\001 not really an image, long enough to carry a digest";
		sbx_state_write_result(junk, sizeof junk);
		_exit(0);
	}
}

static void on_empty(void *arg)
{
	(void)arg;
}

static void on_entry_probe(void *arg)
{
	struct build *b = arg;
	b->saw_ctor = ctor_ran;
	b->saw_main = main_ran;
}

/* Rewrite the path of an open of /src/hello.txt to /src/other.txt in temporary guest memory. */
static int rewrite(struct sbx_call *call, void *arg)
{
	static const char other[] = "/src/other.txt";
	struct sbx_mem m;
	int *count = arg;

	if (!call->path[0] || strcmp(call->path[0], "/src/hello.txt") != 0 || !call->name)
		return 0;
	int argi = strcmp(call->name, "openat") == 0 ? 1 : strcmp(call->name, "open") == 0 ? 0 : -1;
	if (argi < 0)
		return 0;
	if (sbx_call_map(call, 0, sizeof other, &m) < 0)
		return -1;
	memcpy(m.data, other, sizeof other);
	call->args[argi] = m.addr;
	++*count;
	return 0;
}

int main(int argc, char **argv)
{
	struct formula f = { "/src", "hello.txt", 0 };
	struct context ctx = { NULL, { NULL, 0, 0 } };
	struct build b = { &f, &ctx, M_NONE, NULL, 0, 0 };
	struct common_err e = {0};
	void (*fn)(void *) = on_build;
	int rewrites = 0, rc = 0;

	main_ran = 1;
	if (argc < 3) {
		fprintf(stderr, "usage: call_modes MODE SRCDIR [TRACE]\n");
		return 2;
	}
	const char *mode = argv[1];
	if (!strcmp(mode, "list") && argc > 3) {
		long n = atol(argv[3]), sum = 0, count = 0;
		struct lnode *head = NULL;
		for (long i = 0; i < n; i++) {
			struct lnode *x = malloc(sizeof *x);
			x->v = i;
			x->next = head;
			head = x;
		}
		struct trace_mount lm = { .type = TRACE_MOUNT_BIND, .src = argv[2], .dst = "/src" };
		struct sbx_sandbox lsb = { .mounts = &lm, .nmounts = 1, .err = &e };
		if (sbx_call(&lsb, bump_list, &lnode_t, head) < 0) {
			fprintf(stderr, "call_modes: error: %s: %s\n", e.what, e.why);
			return 1;
		}
		for (struct lnode *x = head; x; x = x->next, count++)
			sum += x->v;
		printf("nodes=%ld sum=%ld\n", count, sum);
		return 0;
	}
	struct trace_mount m = { .type = TRACE_MOUNT_BIND, .src = argv[2], .dst = "/src" };
	struct sbx_sandbox sb = { .mounts = &m, .nmounts = 1, .err = &e };
	if (!strcmp(mode, "abort"))
		b.mode = M_ABORT;
	else if (!strcmp(mode, "exit"))
		b.mode = M_EXIT;
	else if (!strcmp(mode, "evilfn"))
		b.mode = M_EVILFN;
	else if (!strcmp(mode, "noresult"))
		b.mode = M_NORESULT;
	else if (!strcmp(mode, "garbage"))
		b.mode = M_GARBAGE;
	else if (!strcmp(mode, "rewrite")) {
		sb.inspect = rewrite;
		sb.inspect_arg = &rewrites;
	} else if (!strcmp(mode, "badfn"))
		fn = (void (*)(void *))((uintptr_t)on_build + 1);
	else if (!strcmp(mode, "trace") && argc > 3)
		sb.trace_path = argv[3];
	else if (!strcmp(mode, "empty"))
		fn = on_empty;
	else if (!strcmp(mode, "entry"))
		fn = on_entry_probe;
	else if (!strcmp(mode, "lease") && argc > 3)
		sb.lease = argv[3]; /* the store: $SBX_STORE */
	else if (!strcmp(mode, "policy") && argc > 3)
		sb.policy = argv[3];
	else if (!strcmp(mode, "swap") && argc > 3) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		if (n <= 0 || (self[n] = '\0', rename(argv[3], self) < 0)) {
			perror("swap");
			return 2;
		}
	}
	if (sbx_call(&sb, fn, &build_t, &b) < 0) {
		fprintf(stderr, "call_modes: error: %s: %s\n", e.what, e.why);
		rc = 1;
	}
	printf("builds=%d metadata=%s errors=%zu\n", f.builds, ctx.metadata ? ctx.metadata : "(null)",
	       ctx.errs.len);
	if (sb.inspect)
		printf("rewrites=%d\n", rewrites);
	if (fn == on_entry_probe)
		printf("guest: constructors=%d main=%d\n", b.saw_ctor, b.saw_main);
	return rc;
}
