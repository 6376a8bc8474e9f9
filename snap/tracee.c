/* snap: talking to a stopped tracee: /proc readers, memory, injected syscalls. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "snap/snap-internal.h"

int snap_tracee_open(struct snap_tracee *t, pid_t pid, struct common_err *e)
{
	char p[64];
	t->pid = pid;
	t->insn = 0;
	snprintf(p, sizeof p, "/proc/%d/mem", (int)pid);
	t->memfd = open(p, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0)
		return common_errno(e, errno, "open %s", p);
	return 0;
}

void snap_tracee_close(struct snap_tracee *t)
{
	if (t->memfd >= 0)
		close(t->memfd);
	t->memfd = -1;
}

int snap_mem_read(struct snap_tracee *t, uint64_t addr, void *buf, size_t len,
		  struct common_err *e)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(t->memfd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return common_errno(e, n < 0 ? errno : EIO, "read guest memory at %#" PRIx64,
					    addr + done);
		done += (size_t)n;
	}
	return 0;
}

int snap_mem_write(struct snap_tracee *t, uint64_t addr, const void *buf, size_t len,
		   struct common_err *e)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(t->memfd, (const char *)buf + done, len - done,
				   (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return common_errno(e, n < 0 ? errno : EIO, "write guest memory at %#" PRIx64,
					    addr + done);
		done += (size_t)n;
	}
	return 0;
}

int snap_read_maps(pid_t pid, struct snap_map **out, size_t *n, struct common_err *e)
{
	char p[64], line[SNAP_STR_MAX + 256];
	snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return common_errno(e, errno, "open %s", p);
	size_t cap = 64, cnt = 0;
	struct snap_map *m = common_xmalloc(cap * sizeof *m);
	while (fgets(line, sizeof line, f)) {
		if (cnt == cap)
			m = common_xrealloc(m, (cap *= 2) * sizeof *m);
		struct snap_map *x = &m[cnt];
		unsigned long long s, en, off;
		int pos = 0;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%llx-%llx %4s %llx %*s %*s %n", &s, &en, x->perms, &off, &pos) < 4) {
			fclose(f);
			free(m);
			return common_errf(e, p, "unparsable line \"%s\"", line);
		}
		x->start = s;
		x->end = en;
		x->offset = off;
		snprintf(x->path, sizeof x->path, "%s", pos ? line + pos : "");
		cnt++;
	}
	fclose(f);
	*out = m;
	*n = cnt;
	return 0;
}

int snap_map_kind(const struct snap_map *m)
{
	if (!strcmp(m->path, "[vvar]") || !strcmp(m->path, "[vvar_vclock]") ||
	    !strcmp(m->path, "[vsyscall]"))
		return -1;
	if (!strcmp(m->path, "[vdso]"))
		return SNAP_REGION_VDSO;
	if (!strcmp(m->path, "[heap]"))
		return SNAP_REGION_HEAP;
	if (!strcmp(m->path, "[stack]"))
		return SNAP_REGION_STACK;
	if (m->path[0] == '/')
		return SNAP_REGION_FILE;
	return SNAP_REGION_ANON;
}

int snap_read_start_brk(pid_t pid, uint64_t *start_brk, struct common_err *e)
{
	char p[64], *buf;
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	if (common_read_file(p, 65536, &buf, &len, e) < 0)
		return -1;
	/* fields after the command name, which may hold spaces and ')' */
	char *s = strrchr(buf, ')');
	int field = 2;
	unsigned long long v = 0;
	int ok = 0;
	for (char *tok = s ? strtok(s + 1, " ") : NULL; tok; tok = strtok(NULL, " ")) {
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

int snap_find_syscall(struct snap_tracee *t, struct common_err *e)
{
	struct snap_map *m;
	size_t n;
	if (snap_read_maps(t->pid, &m, &n, e) < 0)
		return -1;
	/* the vdso first: it is never part of the snapshot and never moves */
	for (int pass = 0; pass < 2 && !t->insn; pass++) {
		for (size_t i = 0; i < n && !t->insn; i++) {
			int vdso = !strcmp(m[i].path, "[vdso]");
			if (pass == 0 ? !vdso : (vdso || m[i].perms[2] != 'x'))
				continue;
			size_t len = (size_t)(m[i].end - m[i].start);
			if (len > (64u << 20))
				len = 64u << 20;
			uint8_t *buf = common_xmalloc(len);
			if (snap_mem_read(t, m[i].start, buf, len, NULL) == 0) {
				for (size_t k = 0; k + 1 < len; k++)
					if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
						t->insn = m[i].start + k;
						break;
					}
			}
			free(buf);
		}
	}
	free(m);
	if (!t->insn)
		return common_errf(e, "inject syscall", "no syscall instruction in the tracee's text");
	return 0;
}

static void set_call(struct user_regs_struct *r, uint64_t insn, long nr, const uint64_t a[6])
{
	r->rip = insn;
	r->rax = (uint64_t)nr;
	r->orig_rax = (uint64_t)-1;
	r->rdi = a[0];
	r->rsi = a[1];
	r->rdx = a[2];
	r->r10 = a[3];
	r->r8 = a[4];
	r->r9 = a[5];
}

int snap_inject(struct snap_tracee *t, long nr, const uint64_t a[6], int64_t *ret,
		struct common_err *e)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, t->pid, 0, &r) < 0)
		return common_errno(e, errno, "inject syscall %ld: PTRACE_GETREGS", nr);
	for (int tries = 0; tries < 16; tries++) {
		set_call(&r, t->insn, nr, a);
		if (ptrace(PTRACE_SETREGS, t->pid, 0, &r) < 0)
			return common_errno(e, errno, "inject syscall %ld: PTRACE_SETREGS", nr);
		int st;
		for (;;) {
			if (ptrace(PTRACE_SINGLESTEP, t->pid, 0, 0) < 0)
				return common_errno(e, errno, "inject syscall %ld: PTRACE_SINGLESTEP", nr);
			if (waitpid(t->pid, &st, __WALL | __WNOTHREAD) < 0)
				return common_errno(e, errno, "inject syscall %ld: waitpid", nr);
			if (!WIFSTOPPED(st))
				return common_errf(e, "inject syscall", "tracee ended (status %#x)", st);
			/* a seccomp or other event stop of our own syscall: step on */
			if (WSTOPSIG(st) == SIGTRAP && (st >> 16))
				continue;
			break;
		}
		if (WSTOPSIG(st) != SIGTRAP)
			return common_errf(e, "inject syscall", "signal %d arrived during injection",
					   WSTOPSIG(st));
		if (ptrace(PTRACE_GETREGS, t->pid, 0, &r) < 0)
			return common_errno(e, errno, "inject syscall %ld: PTRACE_GETREGS", nr);
		if (r.rip == t->insn + 2) {
			*ret = (int64_t)r.rax;
			return 0;
		}
		/* the trap reported the end of the syscall the tracee was stopped in:
		 * our instruction has not run yet */
		if (r.rip != t->insn)
			return common_errf(e, "inject syscall", "tracee stepped to %#llx",
					   (unsigned long long)r.rip);
	}
	return common_errf(e, "inject syscall", "syscall %ld never ran", nr);
}
