/* The build record of a trace (SPEC §7 "sbx-trace files"): what a run read,
 * wrote, probed, listed and executed, per process, from completion events.
 * Read-before-write makes an input; a file written then read (an object file
 * read by the linker) is an output only; written then deleted is a temporary. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/record/reader/reader.h"

#define PROC_FILES_MAX 1000 /* per-process file lists are capped */

enum {
	P_READ = 1u << 0,     /* read before the run wrote it: an input */
	P_WRITTEN = 1u << 1,
	P_CREATED = 1u << 2,
	P_RENAMED = 1u << 3,  /* the destination of a rename */
	P_DELETED = 1u << 4,  /* gone at the end */
	P_PROBED = 1u << 5,   /* looked up and found absent */
	P_DIR = 1u << 6,      /* opened as a directory (listed) */
	P_MKDIR = 1u << 7,
	P_LINKED = 1u << 8,
	P_OK = 1u << 9,       /* some access succeeded */
	P_TOUCHED = 1u << 10, /* the run wrote it at some point */
};

struct fent {
	char *path;
	unsigned flags;
	char sha[COMMON_SHA256_HEX];
	char *from;           /* rename source */
	char err[24];         /* probe errno */
	struct fent *next;
};

struct proc {
	long long pid, ppid, t0, t1;
	int exited, signaled, status, has_t0, has_t1;
	char *exe;
	json_t *argv, *in, *out;
};

struct tool {
	char *path;
	char sha[COMMON_SHA256_HEX];
	long long runs;
};

struct br {
	struct fent *tab[4096];
	size_t nfiles;
	struct proc *procs;
	size_t nprocs, capprocs;
	size_t *ix, icap;     /* pid -> index + 1 of its latest process */
	struct tool *tools;
	size_t ntools;
};

static unsigned long strhash(const char *s)
{
	unsigned long h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

/* "/src/./a//b/." -> "/src/a/b": the same file under one name. ".." stays
 * (lexical removal would be wrong across symlinks). */
static void norm(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	while (*in && n + 1 < cap) {
		if (in[0] == '/' && (in[1] == '/' || (in[1] == '.' && (in[2] == '/' || !in[2])))) {
			in += in[1] == '/' ? 1 : 2;
			continue;
		}
		out[n++] = *in++;
	}
	if (n == 0 && cap > 1)
		out[n++] = '/';
	out[n] = 0;
}

static struct fent *fget(struct br *b, const char *raw)
{
	char path[4096];
	size_t i;
	struct fent *f;

	norm(raw, path, sizeof path);
	i = strhash(path) % 4096;

	for (f = b->tab[i]; f; f = f->next)
		if (!strcmp(f->path, path))
			return f;
	f = common_xcalloc(1, sizeof *f);
	f->path = common_xstrdup(path);
	f->next = b->tab[i];
	b->tab[i] = f;
	b->nfiles++;
	return f;
}

static size_t pslot(const struct br *b, long long pid)
{
	size_t i = ((size_t)pid * 2654435761u) & (b->icap - 1);

	while (b->ix[i] && b->procs[b->ix[i] - 1].pid != pid)
		i = (i + 1) & (b->icap - 1);
	return i;
}

/* The live process with this pid (an exited pid may come back: a new one). */
static struct proc *pget(struct br *b, long long pid)
{
	if (b->icap) {
		size_t i = pslot(b, pid);
		if (b->ix[i] && !b->procs[b->ix[i] - 1].exited)
			return &b->procs[b->ix[i] - 1];
	}
	if (b->nprocs == b->capprocs) {
		b->capprocs = b->capprocs ? 2 * b->capprocs : 64;
		b->procs = common_xrealloc(b->procs, b->capprocs * sizeof *b->procs);
	}
	if (2 * (b->nprocs + 1) > b->icap) {
		size_t old = b->icap, *oix = b->ix;
		b->icap = old ? 2 * old : 128;
		b->ix = common_xcalloc(b->icap, sizeof *b->ix);
		for (size_t k = 0; k < old; k++)
			if (oix[k])
				b->ix[pslot(b, b->procs[oix[k] - 1].pid)] = oix[k];
		free(oix);
	}
	b->ix[pslot(b, pid)] = b->nprocs + 1;
	struct proc *p = &b->procs[b->nprocs++];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	p->in = json_array();
	p->out = json_array();
	return p;
}

static int special(const char *p)
{
	return !strncmp(p, "/proc/", 6) || !strcmp(p, "/proc") || !strncmp(p, "/dev/", 5) ||
	       !strncmp(p, "/sys/", 5);
}

static void plist(json_t *a, const char *raw)
{
	size_t i, n = json_array_size(a);
	char path[4096];

	norm(raw, path, sizeof path);

	if (n >= PROC_FILES_MAX)
		return;
	for (i = 0; i < n; i++)
		if (!strcmp(json_string_value(json_array_get(a, i)), path))
			return;
	json_array_append_new(a, json_string(path));
}

static void on_read(struct br *b, struct proc *p, const char *path, const char *sha)
{
	struct fent *f = fget(b, path);

	f->flags |= P_OK;
	if (!(f->flags & P_TOUCHED) && !(f->flags & P_READ)) {
		f->flags |= P_READ;
		if (sha)
			snprintf(f->sha, sizeof f->sha, "%s", sha);
	}
	if (f->flags & P_DELETED && !(f->flags & P_TOUCHED))
		f->flags &= ~P_DELETED;
	plist(p->in, path);
}

static void on_write(struct br *b, struct proc *p, const char *path, unsigned how)
{
	struct fent *f = fget(b, path);

	f->flags |= P_WRITTEN | P_TOUCHED | P_OK | how;
	f->flags &= ~P_DELETED;
	plist(p->out, path);
}

static int is(const char *n, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(n, *list))
			return 1;
	return 0;
}

static const char *const probe_calls[] = {
	"open", "openat", "openat2", "creat", "stat", "lstat", "newfstatat", "statx", "access",
	"faccessat", "faccessat2", "readlink", "readlinkat", "execve", "execveat", "chdir",
	"statfs", "getxattr", "lgetxattr", "listxattr", "llistxattr", "truncate", NULL,
};
static const char *const write_calls[] = {
	"truncate", "chmod", "fchmodat", "chown", "lchown", "fchownat", "utime", "utimes",
	"utimensat", "futimesat", "mknod", "mknodat", "setxattr", "lsetxattr", "removexattr",
	"lremovexattr", NULL,
};

/* A successful open of path by its flags: a read, a write, both, or a lookup. */
static void on_open(struct br *b, struct proc *p, const json_t *o, const char *n,
		    const char *path)
{
	json_t *args = json_object_get(o, "args");
	long long fl = 0;

	if (!strcmp(n, "open"))
		fl = json_integer_value(json_array_get(args, 1));
	else if (!strcmp(n, "openat"))
		fl = json_integer_value(json_array_get(args, 2));
	else if (!strcmp(n, "creat"))
		fl = O_WRONLY | O_CREAT | O_TRUNC;
	if (fl & O_PATH) {
		fget(b, path)->flags |= P_OK;
		return;
	}
	if (fl & O_DIRECTORY) {
		fget(b, path)->flags |= P_DIR | P_OK;
		return;
	}
	int created = json_is_true(json_object_get(o, "created")) ||
		      (fl & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	/* O_RDWR of a file the call creates or truncates reads nothing old */
	if ((fl & O_ACCMODE) != O_WRONLY && !(fl & O_TRUNC) && !created)
		on_read(b, p, path, common_jstr(o, "sha256", NULL));
	if ((fl & O_ACCMODE) != O_RDONLY || (fl & O_TRUNC) || created)
		on_write(b, p, path, created ? P_CREATED : 0);
}

static void on_rename(struct br *b, struct proc *p, const char *p1, const char *p2)
{
	struct fent *src = fget(b, p1);
	int was_ours = (src->flags & P_TOUCHED) != 0;
	char *from = common_xstrdup(src->from ? src->from : p1);

	src->flags |= P_DELETED | P_OK;
	on_write(b, p, p2, P_RENAMED);
	struct fent *dst = fget(b, p2);
	free(dst->from);
	dst->from = from;
	if (!was_ours)
		src->flags |= P_TOUCHED; /* moving a pre-existing file away changes it */
	plist(p->out, p1);
}

static void on_sys(struct br *b, const json_t *o)
{
	const char *n = common_jstr(o, "name", NULL), *p1 = common_jstr(o, "path", NULL);
	const char *p2 = common_jstr(o, "path2", NULL);
	json_t *res = json_object_get(o, "result");
	long long r = json_integer_value(res);
	struct proc *p = pget(b, common_jint(o, "pid", 0));

	if (p1 && json_is_false(json_object_get(o, "exists")) && is(n, probe_calls)) {
		struct fent *f = fget(b, p1); /* looked up by the recorder: absent */
		f->flags |= P_PROBED;
		if (!f->err[0])
			snprintf(f->err, sizeof f->err, "ENOENT");
		return;
	}
	if (p1 && json_is_true(json_object_get(o, "exists")))
		fget(b, p1)->flags |= P_OK;
	if (!res || !p1)
		return; /* no completion recorded: nothing is known about its effect */
	if (!p->ppid)
		p->ppid = common_jint(o, "ppid", 0);
	if (r < 0) {
		const char *en = common_jstr(o, "errno", NULL);
		if (en && (!strcmp(en, "ENOENT") || !strcmp(en, "ENOTDIR")) && is(n, probe_calls)) {
			struct fent *f = fget(b, p1);
			f->flags |= P_PROBED;
			if (!f->err[0])
				snprintf(f->err, sizeof f->err, "%s", en);
		}
		return;
	}
	if (!strcmp(n, "open") || !strcmp(n, "openat") || !strcmp(n, "creat") ||
	    !strcmp(n, "openat2")) {
		on_open(b, p, o, n, p1);
		return;
	}
	if (!strcmp(n, "rename") || !strcmp(n, "renameat") || !strcmp(n, "renameat2")) {
		if (p2)
			on_rename(b, p, p1, p2);
		return;
	}
	if (!strcmp(n, "unlink") || !strcmp(n, "unlinkat") || !strcmp(n, "rmdir")) {
		struct fent *f = fget(b, p1); /* ours: a temporary; pre-existing: deleted */
		f->flags |= P_DELETED | P_OK;
		plist(p->out, p1);
		return;
	}
	if (!strcmp(n, "mkdir") || !strcmp(n, "mkdirat")) {
		on_write(b, p, p1, P_MKDIR | P_CREATED);
		return;
	}
	if (!strcmp(n, "link") || !strcmp(n, "linkat") || !strcmp(n, "symlink") ||
	    !strcmp(n, "symlinkat")) {
		if (p2)
			on_write(b, p, p2, P_LINKED | P_CREATED);
		return;
	}
	if (is(n, write_calls)) {
		on_write(b, p, p1, 0);
		return;
	}
	fget(b, p1)->flags |= P_OK;
}

static void on_exec(struct br *b, const json_t *o)
{
	struct proc *p = pget(b, common_jint(o, "pid", 0));
	const char *path = common_jstr(o, "path", NULL), *sha = common_jstr(o, "sha256", NULL);
	struct tool *t = NULL;

	if (!p->ppid)
		p->ppid = common_jint(o, "ppid", 0);
	free(p->exe);
	p->exe = common_xstrdup(path);
	json_decref(p->argv);
	p->argv = json_incref(json_object_get(o, "argv"));
	if (json_object_get(o, "t") && !p->has_t0) {
		p->t0 = common_jint(o, "t", 0);
		p->has_t0 = 1;
	}
	for (size_t i = 0; i < b->ntools; i++)
		if (!strcmp(b->tools[i].path, path) && !strcmp(b->tools[i].sha, sha ? sha : ""))
			t = &b->tools[i];
	if (!t && b->ntools >= 4096) /* a hostile trace: keep the first tools only */
		return;
	if (!t) {
		b->tools = common_xrealloc(b->tools, (b->ntools + 1) * sizeof *b->tools);
		t = &b->tools[b->ntools++];
		memset(t, 0, sizeof *t);
		t->path = common_xstrdup(path);
		snprintf(t->sha, sizeof t->sha, "%s", sha ? sha : "");
	}
	t->runs++;
}

static int cmp_fent(const void *a, const void *b)
{
	return strcmp((*(struct fent *const *)a)->path, (*(struct fent *const *)b)->path);
}

static int cmp_tool(const void *a, const void *b)
{
	return strcmp(((const struct tool *)a)->path, ((const struct tool *)b)->path);
}

static json_t *assemble(struct br *b, int hash_inputs)
{
	struct fent **all = common_xmalloc((b->nfiles + 1) * sizeof *all);
	size_t n = 0;
	json_t *in = json_array(), *out = json_array(), *del = json_array(), *tmp = json_array(),
	       *probes = json_array(), *dirs = json_array(), *tools = json_array(),
	       *procs = json_array(), *o = json_object();

	for (size_t i = 0; i < 4096; i++)
		for (struct fent *f = b->tab[i]; f; f = f->next)
			all[n++] = f;
	qsort(all, n, sizeof *all, cmp_fent);
	for (size_t i = 0; i < n; i++) {
		struct fent *f = all[i];
		unsigned fl = f->flags;
		if (special(f->path))
			continue;
		if (fl & P_READ && !(fl & P_DIR)) {
			json_t *x = json_pack("{s:s}", "path", f->path);
			if (hash_inputs)
				json_object_set_new(x, "sha256", f->sha[0] ? json_string(f->sha) : json_null());
			json_array_append_new(in, x);
		}
		if (fl & P_DELETED) {
			if (fl & P_WRITTEN)
				json_array_append_new(tmp, json_pack("{s:s}", "path", f->path));
			else
				json_array_append_new(del, json_pack("{s:s}", "path", f->path));
		} else if (fl & P_WRITTEN) {
			const char *how = fl & P_MKDIR ? "mkdir" : fl & P_RENAMED ? "renamed" :
					  fl & P_LINKED ? "linked" : fl & P_CREATED ? "created" : "written";
			json_t *x = json_pack("{s:s, s:s}", "path", f->path, "how", how);
			if (f->from)
				json_object_set_new(x, "from", json_string(f->from));
			json_array_append_new(out, x);
		}
		if (fl & P_PROBED && !(fl & P_OK))
			json_array_append_new(probes, json_pack("{s:s, s:s}", "path", f->path, "errno",
								f->err));
		if (fl & P_DIR)
			json_array_append_new(dirs, json_pack("{s:s}", "path", f->path));
	}
	free(all);
	if (b->ntools) /* qsort of NULL is undefined even for 0 items */
		qsort(b->tools, b->ntools, sizeof *b->tools, cmp_tool);
	for (size_t i = 0; i < b->ntools; i++)
		json_array_append_new(tools, json_pack("{s:s, s:s?, s:I}", "path", b->tools[i].path,
						       "sha256", b->tools[i].sha[0] ? b->tools[i].sha : NULL,
						       "runs", (json_int_t)b->tools[i].runs));
	for (size_t i = 0; i < b->nprocs; i++) {
		struct proc *p = &b->procs[i];
		json_t *x = json_pack("{s:I, s:I, s:s?, s:O, s:O, s:O}", "pid", (json_int_t)p->pid,
				      "ppid", (json_int_t)p->ppid, "exe", p->exe, "argv",
				      p->argv ? p->argv : json_null(), "inputs", p->in, "outputs", p->out);
		if (p->exited)
			json_object_set_new(x, p->signaled ? "signal" : "exit", json_integer(p->status));
		if (p->has_t0)
			json_object_set_new(x, "t_start", json_integer(p->t0));
		if (p->has_t1)
			json_object_set_new(x, "t_end", json_integer(p->t1));
		json_array_append_new(procs, x);
	}
	json_object_set_new(o, "inputs", in);
	json_object_set_new(o, "outputs", out);
	json_object_set_new(o, "deleted", del);
	json_object_set_new(o, "temporaries", tmp);
	json_object_set_new(o, "probes", probes);
	json_object_set_new(o, "dirs", dirs);
	json_object_set_new(o, "tools", tools);
	json_object_set_new(o, "processes", procs);
	return o;
}

static void br_free(struct br *b)
{
	for (size_t i = 0; i < 4096; i++)
		while (b->tab[i]) {
			struct fent *n = b->tab[i]->next;
			free(b->tab[i]->path);
			free(b->tab[i]->from);
			free(b->tab[i]);
			b->tab[i] = n;
		}
	for (size_t i = 0; i < b->nprocs; i++) {
		free(b->procs[i].exe);
		json_decref(b->procs[i].argv);
		json_decref(b->procs[i].in);
		json_decref(b->procs[i].out);
	}
	free(b->procs);
	free(b->ix);
	for (size_t i = 0; i < b->ntools; i++)
		free(b->tools[i].path);
	free(b->tools);
	free(b);
}

json_t *trace_buildrec(const char *path, int hash_inputs, struct common_err *e)
{
	struct trace_reader *t = trace_reader_open(path, e);
	struct trace_event ev;
	struct br *b;
	json_t *o = NULL, *run;
	long long last_t = 0;
	int r;

	if (!t)
		return NULL;
	b = common_xcalloc(1, sizeof *b);
	while ((r = trace_reader_next(t, &ev, e)) > 0) {
		const json_t *x = ev.ev;
		if (json_object_get(x, "t"))
			last_t = common_jint(x, "t", 0);
		if (!strcmp(ev.kind, "sys")) {
			on_sys(b, x);
		} else if (!strcmp(ev.kind, "exec")) {
			on_exec(b, x);
		} else if (!strcmp(ev.kind, "spawn")) {
			struct proc *c = pget(b, common_jint(x, "child", 0));
			c->ppid = common_jint(x, "pid", 0);
			if (json_object_get(x, "t")) {
				c->t0 = common_jint(x, "t", 0);
				c->has_t0 = 1;
			}
			pget(b, common_jint(x, "pid", 0));
		} else if (!strcmp(ev.kind, "exit") && common_jint(x, "pid", 0) == common_jint(x, "tid", 0)) {
			struct proc *p = pget(b, common_jint(x, "pid", 0));
			p->signaled = json_object_get(x, "signal") != NULL;
			p->status = (int)common_jint(x, p->signaled ? "signal" : "exit", 0);
			if (json_object_get(x, "t")) {
				p->t1 = common_jint(x, "t", 0);
				p->has_t1 = 1;
			}
			p->exited = 1;
		}
	}
	if (r == 0) {
		const json_t *h = trace_reader_header(t);
		o = assemble(b, hash_inputs);
		run = json_pack("{s:s, s:b, s:O?, s:O?, s:O?, s:O?, s:I}", "trace",
				strcmp(path, "-") ? path : "<stdin>", "complete", trace_reader_complete(t),
				"level", json_object_get(h, "level"), "lease", json_object_get(h, "lease"),
				"image", json_object_get(h, "image"), "argv", json_object_get(h, "argv"),
				"duration_us", (json_int_t)last_t);
		json_object_set_new(o, "run", run);
	}
	br_free(b);
	trace_reader_close(t);
	return o;
}

