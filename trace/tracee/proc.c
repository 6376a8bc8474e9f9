/* trace/tracee: a thread's /proc files: status, maps, stat, fdinfo. */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/tracee/tracee.h"

#define STATUS_MAX (1u << 20) /* a Groups line may list 65536 groups */

int trace_fdinfo(pid_t tid, int fd, int64_t *pos, unsigned *flags)
{
	char path[64], buf[256]; /* pos, flags, mnt_id and ino come first */
	snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)tid, fd);
	int d = open(path, O_RDONLY | O_CLOEXEC);
	if (d < 0)
		return -errno;
	ssize_t n = read(d, buf, sizeof buf - 1);
	close(d);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	buf[n] = 0;
	const char *p = strstr(buf, "pos:"), *f = strstr(buf, "flags:");
	if ((pos && !p) || (flags && !f))
		return -ENODATA;
	if (pos)
		*pos = strtoll(p + 4, NULL, 10);
	if (flags)
		*flags = (unsigned)strtoul(f + 6, NULL, 8);
	return 0;
}

int trace_status_read(pid_t tid, struct trace_status *s)
{
	char path[64];
	size_t len;
	struct common_err e;
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	s->text = NULL;
	errno = 0;
	if (common_read_file(path, STATUS_MAX, &s->text, &len, &e) < 0)
		return errno ? -errno : -EIO;
	return 0;
}

void trace_status_free(struct trace_status *s)
{
	free(s->text);
	s->text = NULL;
}

const char *trace_status_field(const struct trace_status *s, const char *key)
{
	size_t n = strlen(key);
	const char *l = s->text;
	while (l && *l) {
		if (!strncmp(l, key, n) && l[n] == ':')
			return l + n + 1 + strspn(l + n + 1, " \t");
		l = strchr(l, '\n');
		if (l)
			l++;
	}
	return NULL;
}

int trace_status_num(const struct trace_status *s, const char *key, int base,
		     unsigned long long *v)
{
	const char *f = trace_status_field(s, key);
	char *end;
	if (!f)
		return -1;
	errno = 0;
	*v = strtoull(f, &end, base);
	return end == f || errno ? -1 : 0;
}

pid_t trace_status_nspid(const struct trace_status *s)
{
	const char *f = trace_status_field(s, "NSpid"), *last = f;
	if (!f)
		return 0;
	/* one id per nested namespace, the innermost last */
	for (const char *p = f; *p && *p != '\n'; p++)
		if (*p == '\t')
			last = p + 1;
	return (pid_t)atoi(last);
}

int trace_proc_maps(pid_t tid, struct trace_map **out, size_t *n, struct common_err *e)
{
	char p[64], line[TRACE_MAP_PATH_MAX + 256];
	snprintf(p, sizeof p, "/proc/%d/maps", (int)tid);
	FILE *f = fopen(p, "re");
	if (!f)
		return common_errno(e, errno, "open %s", p);
	size_t cap = 64, cnt = 0;
	struct trace_map *m = common_xmalloc(cap * sizeof *m);
	while (fgets(line, sizeof line, f)) {
		if (cnt == cap)
			m = common_xrealloc(m, (cap *= 2) * sizeof *m);
		struct trace_map *x = &m[cnt];
		unsigned long long s, en, off, ino;
		unsigned maj, min;
		int pos = 0;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &s, &en, x->perms, &off, &maj, &min,
			   &ino, &pos) < 7) {
			fclose(f);
			free(m);
			return common_errf(e, p, "unparsable line \"%s\"", line);
		}
		x->start = s;
		x->end = en;
		x->offset = off;
		x->dev = makedev(maj, min);
		x->ino = ino;
		snprintf(x->path, sizeof x->path, "%s", pos ? line + pos : "");
		cnt++;
	}
	fclose(f);
	*out = m;
	*n = cnt;
	return 0;
}

int trace_proc_start_brk(pid_t tid, uint64_t *start_brk, struct common_err *e)
{
	char p[64], *buf, *save;
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)tid);
	if (common_read_file(p, 65536, &buf, &len, e) < 0)
		return -1;
	/* fields after the command name, which may hold spaces and ')' */
	char *s = strrchr(buf, ')');
	int field = 2;
	unsigned long long v = 0;
	int ok = 0;
	for (char *tok = s ? strtok_r(s + 1, " ", &save) : NULL; tok;
	     tok = strtok_r(NULL, " ", &save)) {
		if (++field == 47) {
			v = strtoull(tok, NULL, 10);
			ok = 1;
			break;
		}
	}
	free(buf);
	if (!ok)
		return common_errf(e, p, "no start_brk field");
	*start_brk = v;
	return 0;
}

int trace_prlimit(pid_t pid, int resource, const struct rlimit *set, struct rlimit *get)
{
	if (prlimit(pid, resource, set, get) == 0)
		return 0;
	struct trace_status s;
	unsigned long long uid = 0;
	int rc = -errno;
	if (rc != -EPERM || geteuid() != 0 || trace_status_read(pid, &s) < 0)
		return rc;
	if (trace_status_num(&s, "Uid", 10, &uid) < 0)
		uid = 0;
	trace_status_free(&s);
	if (uid < TRACE_HOST_ID_BASE || uid > UINT32_MAX - 1)
		return rc; /* not a run's own uid: never acted as */
	/* a raw syscall: this thread only, not glibc's process-wide setresuid */
	if (syscall(SYS_setresuid, -1, (uid_t)uid, -1) < 0)
		return -errno;
	rc = prlimit(pid, resource, set, get) == 0 ? 0 : -errno;
	if (syscall(SYS_setresuid, -1, 0, -1) < 0)
		abort(); /* never left running as the guest's uid */
	return rc;
}
