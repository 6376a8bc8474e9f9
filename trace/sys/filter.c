/* The boundary's verdict on a trapped call and the seccomp program, both walked
 * over the syscall table and its facts (trace/sys/syscalls.def, facts.def). */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/sys/sys.h"

/* setuid/setgid bits on a file the guest creates or changes would outlive the run
 * through a bind (root-owned on the host when root invoked sbx) */
#define ID_BITS (S_ISUID | S_ISGID)

/* The argument positions of the mode a call gives a file and of the open flags
 * that gate it, from the table; -1 where the call has none. */
static void fmode_args(const struct trace_sysinfo *s, int *mode, int *oflags)
{
	*mode = *oflags = -1;
	for (int i = 0; i < 6; i++) {
		if (s->arg[i] == TRACE_ARG_FMODE)
			*mode = i;
		if (s->arg[i] == TRACE_ARG_OFLAGS)
			*oflags = i;
	}
}

int trace_boundary_errno(int arch_ok, long nr, const uint64_t a[6])
{
	if (!arch_ok)
		return ENOSYS;
	const struct trace_sysinfo *s = trace_sys_by_nr(nr);
	if (!s)
		return ENOSYS;
	if (s->classes & TRACE_CLASS_REFUSED)
		return s->refuse_errno;
	if (trace_sys_facts(nr) & TRACE_FACT_UNSUPPORTED)
		return ENOSYS;
	int mode, oflags;
	fmode_args(s, &mode, &oflags);
	if (mode >= 0 && ((uint32_t)a[mode] & ID_BITS) &&
	    (oflags < 0 || ((uint32_t)a[oflags] & TRACE_CREATE_FLAGS)))
		return EPERM;
	/* only one id is mapped: any other is what an ordinary user may not take or
	 * give (EPERM natively; the kernel would say EINVAL for an unmapped one) */
	for (int i = 0; i < 6; i++)
		if (s->arg[i] == TRACE_ARG_ID && (uint32_t)a[i] != (uint32_t)-1 &&
		    (uint32_t)a[i] != TRACE_GUEST_UID)
			return EPERM;
	return trace_sys_rules_errno(nr, a);
}

int trace_boundary_dir_mode(long nr, const uint64_t a[6])
{
	const struct trace_sysinfo *s = trace_sys_by_nr(nr);
	int mode, oflags;
	if (!s || !(trace_sys_facts(nr) & TRACE_FACT_CHMOD))
		return -1;
	fmode_args(s, &mode, &oflags);
	return mode >= 0 && ((uint32_t)a[mode] & ID_BITS) == S_ISGID ? mode : -1;
}

static int rule(scmp_filter_ctx c, uint32_t act, int nr, unsigned n, struct scmp_arg_cmp *cmp,
		const char *name, struct common_err *e)
{
	int rc = seccomp_rule_add_array(c, act, nr, n, cmp);
	if (rc < 0)
		return common_errno(e, -rc, "seccomp rule for %s", name);
	return 0;
}

/* The positions of a call's uid/gid arguments into ids; their count. */
static int id_args(const struct trace_sysinfo *s, int ids[6])
{
	int n = 0;
	for (int i = 0; i < 6; i++)
		if (s->arg[i] == TRACE_ARG_ID)
			ids[n++] = i;
	return n;
}

/* Allowed when every id argument is -1 or the guest's own: one rule per choice
 * (at most 2^3); the rest falls to the default trap and the verdict's EPERM. */
static int allow_own_ids(scmp_filter_ctx c, const struct trace_sysinfo *s, const int ids[6],
			 struct common_err *e)
{
	int n = id_args(s, (int[6]){ 0 });
	for (unsigned pick = 0; pick < (1u << n); pick++) {
		struct scmp_arg_cmp cmp[6];
		for (int k = 0; k < n; k++)
			cmp[k] = SCMP_CMP32((unsigned)ids[k], SCMP_CMP_EQ,
					    (pick >> k) & 1 ? (uint32_t)TRACE_GUEST_UID : (uint32_t)-1);
		if (rule(c, SCMP_ACT_ALLOW, s->nr, (unsigned)n, cmp, s->name, e) < 0)
			return -1;
	}
	return 0;
}

/* Trapped for the storage meter alone: no other class asks for every call. */
static int store_only(const struct trace_sysinfo *s, unsigned classes)
{
	return (s->classes & classes & TRACE_CLASS_STORE) &&
	       !(s->classes & classes & ~TRACE_CLASS_STORE) &&
	       !((classes & TRACE_FILTER_DETERM) && (trace_sys_facts(s->nr) & TRACE_FACT_DETERM));
}

/* Trapped for the read meter alone: only a large read may cross the bound unseen
 * between two samples (trace/meter stops every read near it). */
static int load_only(const struct trace_sysinfo *s, unsigned classes)
{
	return (s->classes & classes & TRACE_CLASS_LOAD) &&
	       !(s->classes & classes & ~TRACE_CLASS_LOAD) &&
	       !((classes & TRACE_FILTER_DETERM) && (trace_sys_facts(s->nr) & TRACE_FACT_DETERM));
}

/* The action a call gets whatever its arguments, by its facts; 0: none such. */
static int fixed_action(const struct trace_sysinfo *s, unsigned facts, unsigned classes, uint32_t *act)
{
	if (facts & TRACE_FACT_NEVER_TRAPPED)
		*act = SCMP_ACT_ALLOW;
	else if (s->classes & TRACE_CLASS_REFUSED) /* stops, so each attempt is counted */
		*act = SCMP_ACT_TRACE(TRACE_TAG_REFUSED);
	else if (facts & TRACE_FACT_AT_EXIT)
		*act = SCMP_ACT_TRACE(TRACE_TAG_CLASS);
	else if ((facts & TRACE_FACT_EXEC) && (classes & TRACE_FILTER_EXEC_EVENT))
		return 0; /* by its classes, as any other call */
	else if (facts & TRACE_FACT_EXEC)
		*act = SCMP_ACT_TRACE(TRACE_TAG_EXEC);
	else if (facts & TRACE_FACT_UNSUPPORTED) /* the verdict says ENOSYS, at a stop */
		*act = SCMP_ACT_TRACE(TRACE_TAG_REFUSED);
	else
		return 0;
	return 1;
}

/* Trapped for a class the plan asks for, unless a filter modifier spares it. */
static int class_trapped(const struct trace_sysinfo *s, unsigned facts, unsigned classes)
{
	return ((s->classes & classes) || ((classes & TRACE_FILTER_DETERM) && (facts & TRACE_FACT_DETERM))) &&
	       !((classes & TRACE_FILTER_NO_READLINK) && (facts & TRACE_FACT_LINK_READ));
}

/* One argument rule as allow rules: the call is allowed when one of them matches. */
static int allow_rule(scmp_filter_ctx c, const struct trace_sysinfo *s, const struct trace_argrule *r,
		      struct common_err *e)
{
	struct scmp_arg_cmp cmp[2] = { SCMP_CMP32(r->arg, SCMP_CMP_EQ, r->value) };
	if (r->kind == TRACE_RULE_CLEAR) {
		cmp[0] = SCMP_CMP32(r->arg, SCMP_CMP_MASKED_EQ, r->value, 0);
		return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
	}
	if (r->kind == TRACE_RULE_ONE_OF) {
		if (r->and_arg >= 0)
			cmp[1] = SCMP_CMP32((unsigned)r->and_arg, SCMP_CMP_EQ, r->and_value);
		return rule(c, SCMP_ACT_ALLOW, s->nr, r->and_arg >= 0 ? 2 : 1, cmp, s->name, e);
	}
	/* "low 32 bits != value" as one rule per bit that differs (libseccomp has
	 * no masked not-equal; its NE would also compare the high bits) */
	for (unsigned b = 0; b < 32; b++) {
		cmp[0] = SCMP_CMP32(r->arg, SCMP_CMP_MASKED_EQ, 1u << b, ~r->value & (1u << b));
		if (rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e) < 0)
			return -1;
	}
	return 0;
}

/* A call's argument rules; the rest falls to the default trap and the verdict.
 * Allow rules only join by "or": a call has one CLEAR or NOT rule, or ONE_OFs. */
static int allow_by_rules(scmp_filter_ctx c, const struct trace_sysinfo *s,
			  const struct trace_argrule *r, size_t n, struct common_err *e)
{
	for (size_t i = 0; i < n; i++) {
		if (n > 1 && r[i].kind != TRACE_RULE_ONE_OF)
			return common_errf(e, "seccomp", "%s: argument rules the filter cannot join",
					   s->name);
		if (allow_rule(c, s, &r[i], e) < 0)
			return -1;
	}
	return 0;
}

/* Calls whose arguments decide: a file's mode, the ids, or the call's rules. */
static int allow_by_args(scmp_filter_ctx c, const struct trace_sysinfo *s, struct common_err *e)
{
	struct scmp_arg_cmp cmp[1];
	int mode, oflags, ids[6];
	size_t n;
	const struct trace_argrule *r = trace_sys_rules(s->nr, &n);
	fmode_args(s, &mode, &oflags);
	if (n > 0)
		return allow_by_rules(c, s, r, n, e);
	if (id_args(s, ids) > 0)
		return allow_own_ids(c, s, ids, e);
	if (mode < 0) /* argument-free: the kernel's per-syscall allow cache applies */
		return rule(c, SCMP_ACT_ALLOW, s->nr, 0, NULL, s->name, e);
	/* allowed without setuid/setgid bits (or, for open, without creating);
	 * the rest falls to the default trap and the verdict */
	cmp[0] = SCMP_CMP32((unsigned)mode, SCMP_CMP_MASKED_EQ, ID_BITS, 0);
	if (rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e) < 0 || oflags < 0)
		return oflags < 0 ? 0 : -1;
	cmp[0] = SCMP_CMP32((unsigned)oflags, SCMP_CMP_MASKED_EQ, TRACE_CREATE_FLAGS, 0);
	return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
}

/* The rules for one call of the table, by its facts and the plan's classes. */
static int add_call(scmp_filter_ctx c, const struct trace_sysinfo *s, unsigned classes,
		    struct common_err *e)
{
	struct scmp_arg_cmp cmp[2];
	unsigned facts = trace_sys_facts(s->nr);
	int oflags = trace_sys_arg(s, TRACE_ARG_OFLAGS), mflags = trace_sys_arg(s, TRACE_ARG_MFLAGS);
	int prot = trace_sys_arg(s, TRACE_ARG_PROT);
	uint32_t act, fixed = (classes & TRACE_FILTER_REMAP) && (facts & TRACE_FACT_REMAP) ? MAP_FIXED : 0;
	if (fixed_action(s, facts, classes, &act))
		return rule(c, act, s->nr, 0, NULL, s->name, e);
	if (store_only(s, classes) && (oflags >= 0 || mflags >= 0 || prot >= 0)) {
		/* only a creating open, a shared mapping or a protection that lets a
		 * held mapping be written may store: the rest runs, these fall to the
		 * default trap and the storage meter (a protection without write over a
		 * held mapping stops by the meter's own filter, trace_filter_held) */
		cmp[0] = oflags >= 0 ? SCMP_CMP32((unsigned)oflags, SCMP_CMP_MASKED_EQ, TRACE_CREATE_FLAGS, 0)
			 : mflags >= 0 ? SCMP_CMP32((unsigned)mflags, SCMP_CMP_MASKED_EQ, MAP_SHARED | fixed, 0)
				       : SCMP_CMP32((unsigned)prot, SCMP_CMP_MASKED_EQ, PROT_WRITE, 0);
		return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
	}
	if (load_only(s, classes)) {
		/* a read of at most TRACE_LOAD_SMALL runs; an iovec's sum is out of
		 * BPF's reach: those fall to the default trap */
		int count = trace_sys_arg(s, TRACE_ARG_COUNT), buf = trace_sys_arg(s, TRACE_ARG_PTR);
		if (count < 0)
			return 0;
		cmp[0] = SCMP_CMP64((unsigned)count, SCMP_CMP_LE, TRACE_LOAD_SMALL);
		if (buf < 0 || trace_sys_arg(s, TRACE_ARG_OUTFD) >= 0)
			return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
		/* a small read into the held mappings' window stops too */
		cmp[1] = SCMP_CMP64((unsigned)buf, SCMP_CMP_LT, TRACE_MAP_WINDOW_LO);
		if (rule(c, SCMP_ACT_ALLOW, s->nr, 2, cmp, s->name, e) < 0)
			return -1;
		cmp[1] = SCMP_CMP64((unsigned)buf, SCMP_CMP_GE, TRACE_MAP_WINDOW_HI);
		return rule(c, SCMP_ACT_ALLOW, s->nr, 2, cmp, s->name, e);
	}
	if (class_trapped(s, facts, classes) || (fixed && mflags < 0))
		return rule(c, SCMP_ACT_TRACE(TRACE_TAG_CLASS), s->nr, 0, NULL, s->name, e);
	if (facts & TRACE_FACT_ADDRESSED) {
		/* all 64 bits: a pointer above 4 GiB must stop too */
		cmp[0] = SCMP_CMP64(4, SCMP_CMP_NE, 0);
		if (rule(c, SCMP_ACT_TRACE(TRACE_TAG_CLASS), s->nr, 1, cmp, s->name, e) < 0)
			return -1;
		cmp[0] = SCMP_CMP64(4, SCMP_CMP_EQ, 0);
		return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
	}
	if (fixed) { /* TRACE_FILTER_REMAP: a mapping at a fixed address stops */
		cmp[0] = SCMP_CMP32((unsigned)mflags, SCMP_CMP_MASKED_EQ, MAP_FIXED, 0);
		return rule(c, SCMP_ACT_ALLOW, s->nr, 1, cmp, s->name, e);
	}
	return allow_by_args(c, s, e);
}

/* The program of filter context c, exported into prog; c is released. */
static int filter_export(scmp_filter_ctx c, struct sock_fprog *prog, struct common_err *e)
{
	int fd = memfd_create("sbx-bpf", MFD_CLOEXEC);
	if (fd < 0) {
		seccomp_release(c);
		return common_errno(e, errno, "seccomp: memfd");
	}
	int rc = seccomp_export_bpf(c, fd);
	seccomp_release(c);
	if (rc < 0) {
		close(fd);
		return common_errno(e, -rc, "seccomp: exporting the filter");
	}
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter) ||
	    len > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter))) {
		close(fd);
		return common_errf(e, "seccomp", "filter has a bad size (%lld bytes)", (long long)len);
	}
	struct sock_filter *f = common_xmalloc((size_t)len);
	if (pread(fd, f, (size_t)len, 0) != len) {
		close(fd);
		free(f);
		return common_errno(e, errno, "seccomp: reading the filter back");
	}
	close(fd);
	prog->len = (unsigned short)(len / sizeof(struct sock_filter));
	prog->filter = f;
	return 0;
}

/* A protection change of existing pages (mprotect), not a new mapping. */
static int protects(const struct trace_sysinfo *s)
{
	return trace_sys_arg(s, TRACE_ARG_PROT) >= 0 && trace_sys_arg(s, TRACE_ARG_MFLAGS) < 0;
}

size_t trace_filter_held(struct sock_filter *f, size_t max)
{
	size_t k = 0, n = 0;

	for (size_t i = 0; i < trace_sys_count(); i++)
		k += (size_t)protects(trace_sys_at(i));
	if (k + 5 > max || k > 250)
		return 0;
	/* another architecture, or another call: the base filter decides */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, (uint8_t)(k + 1));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (size_t i = 0, j = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		if (protects(s))
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)s->nr,
							      (uint8_t)(k - j++), 0);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | TRACE_TAG_CLASS);
	return n;
}

/* The second program (TRACE_FILTER_NOTIFY_PROG): the TRACE_FACT_NOTIFY calls go to
 * the listener, a read-only open only (a creating, truncating, writing or O_PATH
 * one, and one the supervisor marked, meet the first program), everything else is the
 * first program's to judge. Precedence: the listener's answer beats a TRACE. */
static int notify_build(struct sock_fprog *prog, struct common_err *e)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
	if (!c)
		return common_errf(e, "seccomp", "libseccomp cannot create a filter");
	if (seccomp_attr_set(c, SCMP_FLTATR_API_SYSRAWRC, 1) < 0 ||
	    seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0) < 0 ||
	    seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW) < 0) {
		seccomp_release(c);
		return common_errf(e, "seccomp", "libseccomp refuses the filter attributes");
	}
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		int m = trace_sys_notify_arg(s);
		if (!(trace_sys_facts(s->nr) & TRACE_FACT_NOTIFY) || m < 0)
			continue;
		uint64_t mask = ~0xffffffffull;
		if (trace_sys_arg(s, TRACE_ARG_OFLAGS) == m) /* ADDFD cannot pass an O_PATH file */
			mask |= O_ACCMODE | TRACE_CREATE_FLAGS | O_TRUNC | O_PATH;
		struct scmp_arg_cmp cmp[1] = { SCMP_CMP64((unsigned)m, SCMP_CMP_MASKED_EQ, mask, 0) };
		if (rule(c, SCMP_ACT_NOTIFY, s->nr, 1, cmp, s->name, e) < 0) {
			seccomp_release(c);
			return -1;
		}
	}
	return filter_export(c, prog, e);
}

int trace_filter_build(unsigned classes, struct sock_fprog *prog, struct common_err *e)
{
	if (classes == TRACE_FILTER_NOTIFY_PROG) /* alone: level all's classes hold every bit */
		return notify_build(prog, e);
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_TRACE(TRACE_TAG_UNKNOWN));
	if (!c)
		return common_errf(e, "seccomp", "libseccomp cannot create a filter");
	int rc = 0;
	/* real kernel errnos instead of -ECANCELED; we set no_new_privs ourselves;
	 * a binary tree keeps the hot path short; i386 and x32 reach the supervisor */
	if (seccomp_attr_set(c, SCMP_FLTATR_API_SYSRAWRC, 1) < 0 ||
	    seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0) < 0 ||
	    seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0 ||
	    seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_TRACE(TRACE_TAG_BADARCH)) < 0) {
		seccomp_release(c);
		return common_errf(e, "seccomp", "libseccomp refuses the filter attributes");
	}
	for (size_t i = 0; i < trace_sys_count() && rc == 0; i++)
		rc = add_call(c, trace_sys_at(i), classes, e);
	if (rc < 0) {
		seccomp_release(c);
		return -1;
	}
	return filter_export(c, prog, e);
}

int trace_filter_export(unsigned classes, int fd, struct common_err *e)
{
	struct sock_fprog p;
	if (trace_filter_build(classes, &p, e) < 0)
		return -1;
	int rc = common_write_all(fd, p.filter, p.len * sizeof(struct sock_filter));
	free(p.filter);
	return rc < 0 ? common_errno(e, -rc, "writing the filter") : 0;
}
