/* The trace writer (SPEC §7): a header binding the run, then one completion
 * event per recorded step, each chained to the previous by SHA-256. Events are
 * serialized by hand in canonical form (sorted keys, compact, jansson's string
 * escapes) because a stop costs ~20 µs here and building jansson objects per
 * event would add a third to that; test_trace checks the bytes against
 * common_json_canonical. */
#include <errno.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/determ/determ.h"
#include "trace/record/record-internal.h"
#include "trace/record/record.h"
#include "trace/tracee/tracee.h"

#define REC_BUF_FLUSH (32u << 10)   /* flush when this much is buffered */
#define REC_FLUSH_US 50000          /* or when the last flush is this old */
#define REC_HASH_MAX (1ull << 30)   /* larger inputs are not hashed */
#define REC_CMDLINE_MAX (64u << 10)
#define REC_ARGV_MAX (32u << 10)    /* argv bytes recorded per exec */

static int rec_fail(struct trace_rec *r, int err, const char *what)
{
	if (!r->failed)
		common_errno(&r->err, err, "trace: %s", what);
	r->failed = 1;
	return -1;
}

int trace_rec_flush(struct trace_rec *r)
{
	int rc;

	if (r->failed)
		return -1;
	if (r->out.n == 0)
		return 0;
	rc = common_write_all(r->fd, r->out.p, r->out.n);
	if (rc == 0)
		r->bytes += r->out.n;
	r->out.n = 0;
	r->last_flush = common_mono_us();
	if (rc < 0)
		return rec_fail(r, -rc, "write");
	return 0;
}

/* Close the event in r->line: chain it, append ,"h":"..."} and queue it. */
/* The line built (an object without its closing brace) and its chain hash,
 * into the pending output. */
static void rec_append_line(struct trace_rec *r)
{
	char hex[COMMON_SHA256_HEX];

	common_hex(r->h, sizeof r->h, hex);
	sb_raw(&r->out, r->line.p, r->line.n);
	sb_raw(&r->out, ",\"h\":\"", 6);
	sb_raw(&r->out, hex, 64);
	sb_raw(&r->out, "\"}\n", 3);
}

/* The event in r->line chained and appended, now. */
static int rec_chain(struct trace_rec *r)
{
	uint64_t now;
	unsigned int hl = 0;

	if (r->failed)
		return -1;
	sb_raw(&r->line, "}", 1);
	if (!EVP_DigestInit_ex(r->md, common_sha256_md(), NULL) ||
	    !EVP_DigestUpdate(r->md, r->h, sizeof r->h) ||
	    !EVP_DigestUpdate(r->md, r->line.p, r->line.n) || !EVP_DigestFinal_ex(r->md, r->h, &hl))
		abort();
	r->line.n--; /* drop the "}" again */
	rec_append_line(r);
	r->seq++;
	now = common_mono_us();
	if (r->out.n >= REC_BUF_FLUSH || now - r->last_flush >= REC_FLUSH_US)
		return trace_rec_flush(r);
	return 0;
}

/* The "seq" key; its value now, or where it goes once the event is ordered. */
static void kv_seq(struct trace_rec *r, struct sb *b)
{
	trace_sb_key(b, "seq");
	if (r->defer)
		r->seq_at = b->n;
	else
		trace_sb_int(b, (long long)r->seq);
}

/* The event in r->line: chained now, or queued as its task's. */
static int rec_emit(struct trace_rec *r)
{
	if (!r->defer)
		return rec_chain(r);
	if (r->failed)
		return -1;
	trace_rq_push(&r->q, r->cur, &r->line, r->seq_at);
	return 0;
}

/* The queue at i chained in its order, and dropped. */
static void rq_chain(struct trace_rec *r, size_t i)
{
	struct sb q = trace_rq_remove(&r->q, i);
	for (size_t at = 0; at + 2 * sizeof(size_t) <= q.n;) {
		size_t hdr[2];
		memcpy(hdr, q.p + at, sizeof hdr);
		const char *line = q.p + at + sizeof hdr;
		sb_begin(&r->line);
		sb_raw(&r->line, line, hdr[1]);
		trace_sb_int(&r->line, (long long)r->seq);
		sb_raw(&r->line, line + hdr[1], hdr[0] - hdr[1]);
		rec_chain(r);
		at += sizeof hdr + hdr[0];
	}
	free(q.p);
}

void trace_rec_order(struct trace_rec *r, pid_t tid)
{
	size_t i = trace_rq_find(&r->q, tid);
	if (i < r->q.n)
		rq_chain(r, i);
}

/* Queues no turn took (a run cut short), in the order they were made. */
static void rq_chain_all(struct trace_rec *r)
{
	while (r->q.n)
		rq_chain(r, 0);
	r->defer = 0;
}

static void rec_time(struct trace_rec *r, struct sb *b, const char *k, uint64_t us)
{
	if (!r->deterministic)
		trace_kv_int(b, k, (long long)us);
}

uint64_t trace_rec_bytes(const struct trace_rec *r)
{
	return r->bytes;
}

uint64_t trace_rec_events(const struct trace_rec *r)
{
	return r->seq;
}

void trace_rec_head(const struct trace_rec *r, uint8_t head[32])
{
	memcpy(head, r->h, 32);
}

/* Deterministic traces record ids inside the run's PID namespace (SPEC §9). */
static long long rpid(const struct trace_rec *r, pid_t p)
{
	return r->deterministic && p > 0 ? (long long)trace_determ_nspid(p) : (long long)p;
}

static uint64_t rec_now(const struct trace_rec *r)
{
	return common_mono_us() - r->t_start;
}

int trace_level_parse(const char *s, enum trace_level *out, struct common_err *e)
{
	if (!strcmp(s, "exec"))
		*out = TRACE_LEVEL_EXEC;
	else if (!strcmp(s, "file"))
		*out = TRACE_LEVEL_FILE;
	else if (!strcmp(s, "all"))
		*out = TRACE_LEVEL_ALL;
	else
		return common_errf(e, "--trace-level", "unknown level \"%s\" (exec, file or all)", s);
	return 0;
}

static const char *trace_level_name(enum trace_level l)
{
	return l == TRACE_LEVEL_EXEC ? "exec" : l == TRACE_LEVEL_FILE ? "file" : "all";
}

unsigned trace_classes(enum trace_level l)
{
	if (l == TRACE_LEVEL_EXEC)
		return 0;
	if (l == TRACE_LEVEL_FILE)
		return TRACE_CLASS_FILE;
	return ~0u & ~TRACE_FILTER_NO_READLINK;
}

/* Open family: their results (fd, errno) make inputs, outputs and probes. */
static int is_open(const char *n)
{
	return !strcmp(n, "open") || !strcmp(n, "openat") || !strcmp(n, "creat") ||
	       !strcmp(n, "openat2");
}

/* At level file, results are fetched (a second stop each) only where the
 * build record depends on them: opens (input/output/probe), stats and access
 * checks (probes), mutations (outputs), chdir (cwd) and exec (PATH probes).
 * readlink, ~69% of gcc's path calls, is recorded at entry only. */
static const char *const file_results[] = {
	"open", "openat", "openat2", "creat", "execve", "execveat", "chdir", "mkdir",
	"mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"link", "linkat", "symlink", "symlinkat", "truncate", "mknod", "mknodat",
	"chmod", "fchmodat", "utime", "utimes", "utimensat", "futimesat", NULL,
};

/* Lookups whose only build-record meaning is "is it there": at level file the
 * recorder looks the path up itself in the guest's root (one openat2, a few
 * µs) instead of a second stop (~25 µs here), and records "exists". */
static const char *const lookups[] = {
	"stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", NULL,
};

static int name_in(const char *n, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(n, *list))
			return 1;
	return 0;
}

static int recorded(const struct trace_rec *r, const struct trace_stop *s)
{
	if (s->action != TRACE_ALLOWED || s->uncontrolled)
		return 1; /* refusals, rewrites and what determinism cannot answer: always */
	if (r->level == TRACE_LEVEL_ALL)
		return 1;
	if (r->level == TRACE_LEVEL_FILE)
		return s->sys && (s->sys->classes & TRACE_CLASS_FILE);
	return 0;
}

int trace_rec_at_entry(struct trace_rec *r, const struct trace_stop *s)
{
	return recorded(r, s) && s->action != TRACE_DENIED && !trace_rec_want_exit(r, s);
}

int trace_rec_want_exit(struct trace_rec *r, const struct trace_stop *s)
{
	if (!recorded(r, s) || s->action == TRACE_DENIED)
		return 0;
	if (s->sys && (!strcmp(s->sys->name, "exit") || !strcmp(s->sys->name, "exit_group")))
		return 0;
	if (r->level == TRACE_LEVEL_ALL || s->record)
		return 1; /* a policy "record" rule asks for the result */
	if (!s->sys)
		return 0;
	/* fstat-like calls on an fd (AT_EMPTY_PATH) decide nothing here */
	if ((!s->path[0] || !*s->path[0]) &&
	    (!strcmp(s->sys->name, "newfstatat") || !strcmp(s->sys->name, "statx")))
		return 0;
	return name_in(s->sys->name, file_results);
}

/* SHA-256 of the file behind a /proc magic link, or 0 when not a regular
 * file within the size cap. */
static int hash_proc_file(struct trace_rec *r, const char *proc_path, char hex[COMMON_SHA256_HEX])
{
	struct stat st, st2;
	uint8_t d[32];
	int fd;

	if (stat(proc_path, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > REC_HASH_MAX)
		return 0;
	if (common_hashcache_get(r->hc, &st, hex))
		return 1;
	fd = open(proc_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
		close(fd);
		return 0;
	}
	{
		struct common_sha256 c;
		char *buf = common_xmalloc(1u << 20);
		ssize_t n;
		common_sha256_init(&c);
		while ((n = read(fd, buf, 1u << 20)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			common_sha256_update(&c, buf, (size_t)n);
		}
		common_sha256_final(&c, d);
		free(buf);
		close(fd);
		if (n < 0)
			return 0;
	}
	common_hex(d, 32, hex);
	common_hashcache_put(r->hc, &st, hex);
	return 1;
}

/* Whether PATH exists in the guest's view (its root, its symlinks): 1, 0, or
 * -1 when unknown. Every guest process shares one root (no chroot, no mount
 * namespace of its own), so its fd is opened once. */
static int guest_exists(struct trace_rec *r, pid_t tid, const char *path, int nofollow)
{
	char root[64];
	struct open_how how = { .flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
				.resolve = RESOLVE_IN_ROOT };
	int fd;

	if (r->rootfd < 0) {
		snprintf(root, sizeof root, "/proc/%d/root", (int)tid);
		r->rootfd = open(root, O_PATH | O_CLOEXEC | O_DIRECTORY);
		if (r->rootfd < 0)
			return -1;
	}
	/* a ".." step fails with EAGAIN when any rename or mount on the host races
	 * it (openat2(2)): tried again, or the answer would follow the host's load */
	for (int i = 0; i < 1000; i++) {
		fd = (int)syscall(SYS_openat2, r->rootfd, path, &how, sizeof how);
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

static int open_flags(const struct trace_stop *s, uint64_t *flags)
{
	const char *n = s->sys->name;

	if (!strcmp(n, "open"))
		*flags = s->args[1];
	else if (!strcmp(n, "openat"))
		*flags = s->args[2];
	else if (!strcmp(n, "creat"))
		*flags = O_CREAT | O_WRONLY | O_TRUNC;
	else
		return 0; /* openat2's flags sit in guest memory */
	return 1;
}

static char *read_small(const char *path, size_t max, size_t *len);

static struct pend *pend_find(struct trace_rec *r, pid_t tid)
{
	for (size_t i = 0; i < r->npend; i++)
		if (r->pend[i].tid == tid)
			return &r->pend[i];
	return NULL;
}

static void pend_drop(struct trace_rec *r, struct pend *p)
{
	for (int i = 0; i < 2; i++) {
		free(p->path[i]);
		free(p->rewrite[i]);
	}
	*p = r->pend[--r->npend];
}

static const char *action_name(enum trace_action a)
{
	return a == TRACE_DENIED ? "denied" : a == TRACE_REWRITTEN ? "rewritten" : "allowed";
}

static int nargs(const struct trace_sysinfo *sys)
{
	int n = 6;

	if (!sys)
		return 6;
	while (n > 0 && sys->arg[n - 1] == TRACE_ARG_NONE)
		n--;
	return n;
}

/* A child whose parent was killed at its fork runs without a fork event; the
 * supervisor then knows no parent (0). Ask /proc once (host pid namespace). */
static pid_t real_ppid(struct trace_rec *r, pid_t pid, pid_t ppid)
{
	struct trace_status s;
	unsigned long long v = 0;

	if (ppid > 0)
		return ppid;
	for (size_t i = 0; i < r->npar; i++)
		if (r->par[i].pid == pid)
			return r->par[i].ppid;
	if (trace_status_read(pid, &s) < 0)
		return ppid;
	trace_status_num(&s, "PPid", 10, &v);
	trace_status_free(&s);
	if (v == 0 || v > INT_MAX)
		return ppid;
	if (r->npar == r->cappar) {
		r->cappar = r->cappar ? 2 * r->cappar : 16;
		r->par = common_xrealloc(r->par, r->cappar * sizeof *r->par);
	}
	r->par[r->npar].pid = pid;
	r->par[r->npar++].ppid = (pid_t)v;
	return (pid_t)v;
}

/* One syscall event; has_result says whether result is known. Keys are
 * written in sorted order (canonical form). */
static int emit_sys(struct trace_rec *r, const struct trace_stop *s, int has_result,
		    int64_t result, int existed, uint64_t t0, uint64_t t1, int exists)
{
	struct sb *b = &r->line;
	char hex[COMMON_SHA256_HEX], name[32];
	int ok = has_result && result >= 0;
	int opened = ok && s->sys && is_open(s->sys->name);
	int hashed = 0;

	/* deterministic: /proc and /sys contents are volatile (see "uncontrolled") */
	if (opened && r->level != TRACE_LEVEL_EXEC &&
	    !(r->deterministic && s->path[0] &&
	      (!strncmp(s->path[0], "/proc/", 6) || !strncmp(s->path[0], "/sys/", 5)))) {
		uint64_t fl = 0;
		int have = open_flags(s, &fl);
		if (!have || (fl & O_ACCMODE) != O_WRONLY) {
			char proc[64];
			/* a file the supervisor opened for the guest is hashed as opened */
			if (s->host_fd > 0)
				snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->host_fd);
			else
				snprintf(proc, sizeof proc, "/proc/%d/fd/%lld", (int)s->tid, (long long)result);
			hashed = hash_proc_file(r, proc, hex);
		}
	}
	r->cur = s->tid;
	sb_begin(b);
	trace_kv_str(b, "action", action_name(s->action));
	trace_sb_key(b, "args");
	sb_raw(b, "[", 1);
	for (int i = 0; i < nargs(s->sys); i++) {
		if (i)
			sb_raw(b, ",", 1);
		trace_sb_int(b, (long long)s->args[i]);
	}
	sb_raw(b, "]", 1);
	if (opened && existed == 0)
		sb_cstr(b, ",\"created\":true");
	if (has_result && !r->deterministic)
		trace_kv_int(b, "dt", (long long)(t1 - t0));
	if (has_result && result < 0 && result > -4096) {
		const char *en = strerrorname_np((int)-result);
		if (!en) {
			snprintf(name, sizeof name, "E%lld", (long long)-result);
			en = name;
		}
		trace_kv_str(b, "errno", en);
	}
	trace_kv_str(b, "ev", "sys");
	if (exists >= 0)
		sb_cstr(b, exists ? ",\"exists\":true" : ",\"exists\":false");
	if (opened)
		trace_kv_int(b, "fd", (long long)result);
	trace_kv_str(b, "name", s->sys ? s->sys->name : "unknown");
	trace_kv_int(b, "nr", s->nr);
	if (s->path[0] && *s->path[0]) /* "" is an fd operation (AT_EMPTY_PATH) */
		trace_kv_str(b, "path", s->path[0]);
	if (s->path[1] && *s->path[1])
		trace_kv_str(b, "path2", s->path[1]);
	trace_kv_int(b, "pid", rpid(r, s->pid));
	trace_kv_int(b, "ppid", rpid(r, real_ppid(r, s->pid, s->ppid)));
	if (has_result)
		trace_kv_int(b, "result", (long long)result);
	if (s->action == TRACE_REWRITTEN && s->rewrite[0])
		trace_kv_str(b, "rewrite", s->rewrite[0]);
	if (s->action == TRACE_REWRITTEN && s->rewrite[1])
		trace_kv_str(b, "rewrite2", s->rewrite[1]);
	kv_seq(r, b);
	if (hashed)
		trace_kv_str(b, "sha256", hex);
	rec_time(r, b, "t", t0);
	trace_kv_int(b, "tid", rpid(r, s->tid));
	if (s->uncontrolled)
		trace_kv_str(b, "uncontrolled", s->uncontrolled);
	return rec_emit(r);
}

int trace_rec_syscall(struct trace_rec *r, const struct trace_stop *s)
{
	struct pend *p;

	if (r->failed)
		return -1;
	if (s->has_result) {
		p = pend_find(r, s->tid);
		if (!p)
			return 0; /* an exit we did not ask for (another hook did) */
		struct trace_stop st = p->s;
		int existed = p->existed, rc;
		uint64_t t0 = p->t0;
		for (int i = 0; i < 2; i++) {
			st.path[i] = p->path[i];
			st.rewrite[i] = p->rewrite[i];
		}
		rc = emit_sys(r, &st, 1, s->result, existed, t0, rec_now(r), -1);
		pend_drop(r, p);
		return rc;
	}
	if (!recorded(r, s))
		return 0;
	if (s->action == TRACE_DENIED)
		return emit_sys(r, s, 1, -(int64_t)s->deny_errno, -1, rec_now(r), rec_now(r), -1);
	if (!trace_rec_want_exit(r, s)) {
		int ex = -1;
		if (r->level == TRACE_LEVEL_FILE && s->sys && s->path[0] && *s->path[0] &&
		    name_in(s->sys->name, lookups)) {
			int nofollow = !strcmp(s->sys->name, "lstat") ||
				       (!strcmp(s->sys->name, "newfstatat") && (s->args[3] & AT_SYMLINK_NOFOLLOW)) ||
				       (!strcmp(s->sys->name, "statx") && (s->args[2] & AT_SYMLINK_NOFOLLOW));
			/* a lookup the supervisor made for the guest has its answer */
			ex = s->exists ? s->exists == 1 : guest_exists(r, s->tid, s->path[0], nofollow);
		}
		return emit_sys(r, s, 0, 0, -1, rec_now(r), 0, ex);
	}
	p = pend_find(r, s->tid);
	if (p) /* a stale entry (the thread's syscall never completed) */
		pend_drop(r, p);
	if (r->npend == r->cappend) {
		r->cappend = r->cappend ? 2 * r->cappend : 16;
		r->pend = common_xrealloc(r->pend, r->cappend * sizeof *r->pend);
	}
	p = &r->pend[r->npend++];
	memset(p, 0, sizeof *p);
	p->tid = s->tid;
	p->s = *s;
	for (int i = 0; i < 2; i++) {
		p->path[i] = s->path[i] ? common_xstrdup(s->path[i]) : NULL;
		p->rewrite[i] = s->rewrite[i] ? common_xstrdup(s->rewrite[i]) : NULL;
	}
	p->existed = -1;
	uint64_t fl;
	if (s->sys && is_open(s->sys->name) && s->path[0] && open_flags(s, &fl) && (fl & O_CREAT))
		p->existed = (fl & O_EXCL) ? 0 : guest_exists(r, s->tid, s->path[0], 0);
	p->t0 = rec_now(r);
	return 0;
}

static char *read_small(const char *path, size_t max, size_t *len)
{
	char *buf;
	struct common_err e;

	if (common_read_file(path, max, &buf, len, &e) < 0)
		return NULL;
	return buf;
}

int trace_rec_exec(struct trace_rec *r, pid_t pid, pid_t ppid, const char *path,
		   char *const *argv)
{
	struct sb *b = &r->line;
	char proc[64], exe[4096], hex[COMMON_SHA256_HEX];
	ssize_t n;
	size_t len = 0;
	char *cmd = NULL;
	int hashed;

	if (r->failed)
		return -1;
	snprintf(proc, sizeof proc, "/proc/%d/exe", (int)pid);
	if (!path) {
		n = readlink(proc, exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = 0;
		path = exe;
	}
	hashed = hash_proc_file(r, proc, hex);
	if (!argv) {
		snprintf(proc, sizeof proc, "/proc/%d/cmdline", (int)pid);
		cmd = read_small(proc, REC_CMDLINE_MAX, &len);
	}
	sb_begin(b);
	trace_sb_key(b, "argv");
	sb_raw(b, "[", 1);
	/* bounded, so the line stays under TRACE_LINE_MAX even when every byte
	 * needs a 6-byte escape */
	size_t used = 0;
	for (size_t i = 0; argv && argv[i]; i++) {
		if (i)
			sb_raw(b, ",", 1);
		if ((used += strlen(argv[i]) + 3) > REC_ARGV_MAX) {
			trace_sb_str(b, "[argv truncated]");
			break;
		}
		trace_sb_str(b, argv[i]);
	}
	for (size_t i = 0; cmd && i < len;) {
		if (i)
			sb_raw(b, ",", 1);
		if ((used += strlen(cmd + i) + 3) > REC_ARGV_MAX) {
			trace_sb_str(b, "[argv truncated]");
			break;
		}
		trace_sb_str(b, cmd + i);
		i += strlen(cmd + i) + 1;
	}
	sb_raw(b, "]", 1);
	free(cmd);
	r->cur = pid;
	trace_kv_str(b, "ev", "exec");
	trace_kv_str(b, "path", path);
	trace_kv_int(b, "pid", rpid(r, pid));
	trace_kv_int(b, "ppid", rpid(r, real_ppid(r, pid, ppid)));
	kv_seq(r, b);
	if (hashed)
		trace_kv_str(b, "sha256", hex);
	rec_time(r, b, "t", rec_now(r));
	trace_kv_int(b, "tid", rpid(r, pid));
	if (rec_emit(r) < 0)
		return -1;
	return trace_rec_flush(r); /* process events are few: a killed run keeps them */
}

int trace_rec_spawn(struct trace_rec *r, pid_t parent, pid_t child, const char *kind)
{
	struct sb *b = &r->line;

	if (r->failed)
		return -1;
	r->cur = parent;
	sb_begin(b);
	trace_kv_int(b, "child", rpid(r, child));
	trace_kv_str(b, "ev", "spawn");
	trace_kv_str(b, "kind", kind);
	trace_kv_int(b, "pid", rpid(r, parent));
	kv_seq(r, b);
	rec_time(r, b, "t", rec_now(r));
	return rec_emit(r);
}

static void kv_status(struct sb *b, int ws, int before_seq)
{
	/* "exit" sorts before "seq", "signal" after it */
	if (before_seq && WIFEXITED(ws))
		trace_kv_int(b, "exit", WEXITSTATUS(ws));
	if (!before_seq && WIFSIGNALED(ws))
		trace_kv_int(b, "signal", WTERMSIG(ws));
}

int trace_rec_exit(struct trace_rec *r, pid_t tid, pid_t pid, int wstatus)
{
	struct sb *b = &r->line;
	struct pend *p = pend_find(r, tid);
	uint64_t now = rec_now(r);

	if (r->failed)
		return -1;
	if (tid == pid)
		for (size_t i = 0; i < r->npar; i++)
			if (r->par[i].pid == pid) {
				r->par[i] = r->par[--r->npar];
				break;
			}
	if (p) { /* died inside a recorded syscall: record it without a result */
		struct trace_stop st = p->s;
		for (int i = 0; i < 2; i++) {
			st.path[i] = p->path[i];
			st.rewrite[i] = p->rewrite[i];
		}
		if (emit_sys(r, &st, 0, 0, -1, p->t0, now, -1) < 0)
			return -1;
		pend_drop(r, p);
	}
	r->cur = tid;
	sb_begin(b);
	trace_kv_str(b, "ev", "exit");
	kv_status(b, wstatus, 1);
	trace_kv_int(b, "pid", rpid(r, pid));
	kv_seq(r, b);
	kv_status(b, wstatus, 0);
	rec_time(r, b, "t", now);
	trace_kv_int(b, "tid", rpid(r, tid));
	if (rec_emit(r) < 0)
		return -1;
	return trace_rec_flush(r);
}

static void free_rec(struct trace_rec *r)
{
	while (r->npend)
		pend_drop(r, &r->pend[0]);
	free(r->pend);
	free(r->thr);
	free(r->par);
	free(r->skip);
	EVP_MD_CTX_free(r->md);
	common_hashcache_close(r->hc);
	if (r->own_fd)
		close(r->fd);
	if (r->rootfd >= 0)
		close(r->rootfd);
	trace_rq_free(&r->q);
	free(r->out.p);
	free(r->line.p);
	free(r);
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();
	size_t used = 0;

	for (; v && *v; v++) {
		if ((used += strlen(*v) + 3) > REC_ARGV_MAX) { /* the header is one line too */
			json_array_append_new(a, json_string("[argv truncated]"));
			break;
		}
		char *u = trace_utf8_lossy(*v);
		json_array_append_new(a, json_string(u));
		free(u);
	}
	return a;
}

static json_t *header_json(const struct trace_rec_info *in)
{
	json_t *h = json_object(), *img = json_object();
	struct common_sha256 c;
	uint8_t d[32];
	char hex[COMMON_SHA256_HEX];

	json_object_set_new(h, "sbx_trace", json_integer(TRACE_FORMAT));
	json_object_set_new(h, "lease", in->lease ? json_string(in->lease) : json_null());
	if (in->image_path) {
		char *u = trace_utf8_lossy(in->image_path);
		json_object_set_new(img, "path", json_string(u));
		free(u);
	} else {
		json_object_set_new(img, "path", json_null());
	}
	json_object_set_new(img, "sha256", in->image_sha256 ? json_string(in->image_sha256) : json_null());
	json_object_set_new(h, "image", img);
	json_object_set_new(h, "argv", strv_json(in->argv));
	json_object_set_new(h, "mounts", in->mounts ? json_deep_copy(in->mounts) : json_array());
	common_sha256_init(&c);
	for (char *const *v = in->envp; v && *v; v++)
		common_sha256_update(&c, *v, strlen(*v) + 1);
	common_sha256_final(&c, d);
	common_hex(d, 32, hex);
	json_object_set_new(h, "env_sha256", json_string(hex));
	json_object_set_new(h, "start_batch", json_integer((json_int_t)in->start_batch));
	json_object_set_new(h, "level", json_string(trace_level_name(in->level)));
	json_object_set_new(h, "deterministic", json_boolean(in->deterministic));
	if (!in->deterministic)
		json_object_set_new(h, "start_ms", json_integer((json_int_t)common_now_ms()));
	if (in->determinism)
		json_object_set_new(h, "determinism", json_deep_copy(in->determinism));
	return h;
}

struct trace_rec *trace_rec_open(const char *path, int fd, const struct trace_rec_info *info,
				 struct common_err *e)
{
	struct trace_rec *r;
	json_t *hj;
	char *canon;
	struct common_sha256 c;
	static const char domain[] = TRACE_DOMAIN;

	if (path && strcmp(path, "-") != 0) {
		/* opened before the guest starts; a symlink there (a guest's, from an
		 * earlier run in a bind) is refused, not followed */
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0) {
			common_errno(e, errno, "--trace %s", path);
			return NULL;
		}
	} else if (path) {
		fd = 1;
	} else if (fd < 0) {
		common_errf(e, "trace", "no output given");
		return NULL;
	}
	r = common_xcalloc(1, sizeof *r);
	r->fd = fd;
	r->rootfd = -1;
	r->own_fd = path && strcmp(path, "-") != 0;
	r->md = EVP_MD_CTX_new();
	if (!r->md)
		abort();
	r->level = info->level;
	r->deterministic = info->deterministic;
	r->defer = info->deterministic; /* its schedule orders the events (on_order) */
	r->t_start = r->last_flush = common_mono_us();
	/* persisted in the store when given, else for this run only */
	r->hc = common_hashcache_open(info->hash_cache, "exec-hashes");
	if (info->resume_text) {
		sb_raw(&r->out, info->resume_text, info->resume_len);
		memcpy(r->h, info->resume_head, 32);
		r->seq = info->resume_seq;
		r->restoring = 1;
	} else {
		hj = header_json(info);
		canon = common_json_canonical(hj);
		json_decref(hj);
		common_sha256_init(&c);
		common_sha256_update(&c, domain, sizeof domain);
		common_sha256_update(&c, canon, strlen(canon));
		common_sha256_final(&c, r->h);
		sb_begin(&r->line);
		sb_cstr(&r->line, canon);
		free(canon);
		r->line.n--; /* reopen the object to append h */
		rec_append_line(r);
	}
	if (trace_rec_flush(r) < 0) {
		if (e)
			*e = r->err;
		free_rec(r);
		return NULL;
	}
	return r;
}

int trace_rec_close(struct trace_rec *r, int wstatus, uint8_t head[32], struct common_err *e)
{
	struct sb *b = &r->line;
	int rc;

	if (!r->failed) {
		rq_chain_all(r);
		while (r->npend) { /* syscalls whose exit never came */
			struct pend *p = &r->pend[0];
			struct trace_stop st = p->s;
			for (int i = 0; i < 2; i++) {
				st.path[i] = p->path[i];
				st.rewrite[i] = p->rewrite[i];
			}
			emit_sys(r, &st, 0, 0, -1, p->t0, 0, -1);
			pend_drop(r, p);
		}
		sb_begin(b);
		trace_kv_str(b, "ev", "end");
		trace_kv_int(b, "events", (long long)r->seq);
		kv_status(b, wstatus, 1);
		trace_kv_int(b, "seq", (long long)r->seq);
		kv_status(b, wstatus, 0);
		rec_time(r, b, "t", rec_now(r));
		rec_emit(r);
		trace_rec_flush(r);
	}
	if (!r->failed && r->own_fd && fsync(r->fd) < 0 && errno != EINVAL)
		rec_fail(r, errno, "fsync");
	rc = r->failed ? -1 : 0;
	if (rc < 0 && e)
		*e = r->err;
	if (head)
		memcpy(head, r->h, 32);
	free_rec(r);
	return rc;
}

static pid_t tgid_of(struct trace_rec *r, pid_t tid)
{
	for (size_t i = 0; i < r->nthr; i++)
		if (r->thr[i].tid == tid)
			return r->thr[i].tgid;
	return tid;
}

static int rec_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_rec *r = ctx;

	(void)g;
	if (r->restoring || (r->nskip && trace_rec_skipped(r, st->tid)))
		return 0; /* a restored task's call made again: its event is in the chain */
	if (trace_rec_want_exit(r, st))
		st->want_exit = 1;
	trace_rec_syscall(r, st);
	return 0; /* a write error must not kill the build; sbx-run reports it */
}

static int rec_exit(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	(void)g;
	if (!((struct trace_rec *)ctx)->restoring)
		trace_rec_syscall(ctx, st);
	return 0;
}

static int rec_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
		    const char *path)
{
	struct pend *p = pend_find(ctx, pid);
	struct trace_rec *r = ctx;
	(void)sv;
	if (r->restoring) { /* the restore's fresh exec: the guest goes on from here */
		r->restoring = 0;
		return 0;
	}
	if (p) /* the exec event stands for the exec call that made it, whose exit never comes */
		pend_drop(ctx, p);
	trace_rec_exec(ctx, pid, ppid, *path ? path : NULL, NULL);
	return 0; /* a write error must not kill the build; sbx-run reports it */
}

static void rec_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
		      unsigned long flags)
{
	struct trace_rec *r = ctx;

	(void)sv;
	if (r->restoring)
		return;
	const char *kind = flags & CLONE_THREAD ? "thread" : flags & CLONE_VFORK ? "vfork" :
			   (flags & ~0xffUL) == 0 ? "fork" : "clone";

	if (flags & CLONE_THREAD) {
		if (r->nthr == r->capthr) {
			r->capthr = r->capthr ? 2 * r->capthr : 16;
			r->thr = common_xrealloc(r->thr, r->capthr * sizeof *r->thr);
		}
		r->thr[r->nthr].tid = child;
		r->thr[r->nthr++].tgid = tgid_of(r, parent);
	}
	trace_rec_spawn(r, parent, child, kind);
}

static void rec_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	struct trace_rec *r = ctx;
	pid_t pid = tgid_of(r, tid);

	(void)sv;
	if (r->restoring)
		return;
	for (size_t i = 0; i < r->nthr; i++)
		if (r->thr[i].tid == tid) {
			r->thr[i] = r->thr[--r->nthr];
			break;
		}
	trace_rec_exit(r, tid, pid, wstatus);
}

/* A quiet guest's last events reach the file. */
static void rec_order(void *ctx, pid_t tid)
{
	trace_rec_order(ctx, tid);
}

static int rec_tick(void *ctx, struct trace_supervisor *sv)
{
	(void)sv;
	trace_rec_flush(ctx);
	return 0;
}

struct trace_layer trace_rec_layer(struct trace_rec *r)
{
	if (!r)
		return (struct trace_layer){ 0 };
	return (struct trace_layer){
		.ctx = r, .on_entry = rec_entry, .on_exit = rec_exit, .on_exec = rec_exec,
		.on_spawn = rec_spawn, .on_proc_exit = rec_proc_exit, .on_tick = rec_tick,
		.on_order = rec_order,
	};
}

void trace_rec_abort(struct trace_rec *r)
{
	if (!r)
		return;
	rq_chain_all(r);
	trace_rec_flush(r);
	free_rec(r);
}
