/* trace/sys/facts.def: the seccomp program, run here on made-up calls, and the
 * boundary's verdict give the same answer for every fact and argument rule. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include "trace/box/box.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"
#include "tests/unit/unit.h"

#define ACT(r) ((r) & SECCOMP_RET_ACTION_FULL)
#define TAG(r) ((r) & SECCOMP_RET_DATA)
#define RET_BAD 0xdeadbeefu /* an instruction libseccomp does not emit: fails every check */

/* The classic-BPF subset libseccomp emits, on one seccomp_data. */
static uint32_t run_bpf(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t acc = 0;
	for (unsigned pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->filter[pc];
		uint32_t k = f->k;
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (k > sizeof *d - 4)
				return RET_BAD;
			memcpy(&acc, (const char *)d + k, 4);
			break;
		case BPF_ALU | BPF_AND | BPF_K: acc &= k; break;
		case BPF_JMP | BPF_JA: pc += k; break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += acc == k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGT | BPF_K: pc += acc > k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += acc >= k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (acc & k) ? f->jt : f->jf; break;
		case BPF_RET | BPF_K: return k;
		default: return RET_BAD;
		}
	}
	return RET_BAD;
}

static uint32_t filter_says(const struct sock_fprog *p, long nr, const uint64_t a[6])
{
	struct seccomp_data d = { .nr = (int)nr, .arch = AUDIT_ARCH_X86_64 };
	memcpy(d.args, a, sizeof d.args);
	return run_bpf(p, &d);
}

static struct sock_fprog build(unsigned classes)
{
	struct sock_fprog p = { 0 };
	struct common_err e = { 0 };
	CHECK(trace_filter_build(classes, &p, &e) == 0);
	return p;
}

static int high_bits(const uint64_t a[6])
{
	for (int i = 0; i < 6; i++)
		if (a[i] >> 32)
			return 1;
	return 0;
}

static int one_of(long nr)
{
	size_t n;
	const struct trace_argrule *r = trace_sys_rules(nr, &n);
	return n > 0 && r[0].kind == TRACE_RULE_ONE_OF;
}

/* What the program answers must be what the verdict answers at the stop. */
static int agree(uint32_t ret, const struct trace_sysinfo *s, const uint64_t a[6])
{
	int v = trace_boundary_errno(1, s->nr, a);
	if (ACT(ret) == SECCOMP_RET_ALLOW)
		return v == 0;
	if (ACT(ret) == SECCOMP_RET_ERRNO)
		return (int)TAG(ret) == v;
	if (ACT(ret) != SECCOMP_RET_TRACE)
		return 0;
	if (TAG(ret) == TRACE_TAG_REFUSED) /* refused by class, or unsupported: ENOSYS */
		return v != 0 && (v == s->refuse_errno ||
				  ((trace_sys_facts(s->nr) & TRACE_FACT_UNSUPPORTED) && v == ENOSYS));
	/* the default trap: an argument broke a rule; or high bits the kernel ignores
	 * are set, which libseccomp's EQ (ONE_OF) compares, and the stop allows */
	if (TAG(ret) == TRACE_TAG_UNKNOWN)
		return v != 0 || (high_bits(a) && one_of(s->nr));
	return v == 0; /* exec and at-exit stops are looked at, not refused */
}

/* Values either side of a rule's edge: the value, each bit of it and around it,
 * with and without high bits the kernel ignores. */
static size_t samples(uint32_t value, uint64_t out[80])
{
	size_t n = 0;
	out[n++] = 0;
	out[n++] = ~0ull;
	out[n++] = value;
	out[n++] = (1ull << 32) | value;
	out[n++] = value + 1;
	for (unsigned b = 0; b < 32; b++) {
		out[n++] = value ^ (1u << b);
		out[n++] = (1ull << 32) | (1u << b);
	}
	return n;
}

static void check_call(const struct sock_fprog *p, const struct trace_sysinfo *s,
		       const uint64_t a[6])
{
	uint32_t ret = filter_says(p, s->nr, a);
	if (!agree(ret, s, a))
		fprintf(stderr, "%s(%#llx, %#llx, %#llx): filter %#x, verdict %d\n", s->name,
			(unsigned long long)a[0], (unsigned long long)a[1], (unsigned long long)a[2],
			ret, trace_boundary_errno(1, s->nr, a));
	CHECK(agree(ret, s, a));
}

/* Every rule of a call, tried at its edges in its own argument and the and_arg. */
static void check_rules(const struct sock_fprog *p, const struct trace_sysinfo *s)
{
	size_t n;
	const struct trace_argrule *r = trace_sys_rules(s->nr, &n);
	uint64_t v[80];
	for (size_t i = 0; i < n; i++) {
		size_t m = samples(r[i].value, v);
		for (size_t j = 0; j < m; j++) {
			uint64_t a[6] = { 0 };
			a[r[i].arg] = v[j];
			check_call(p, s, a);
			if (r[i].and_arg < 0)
				continue;
			a[r[i].and_arg] = r[i].and_value;
			check_call(p, s, a);
			a[r[i].and_arg] = r[i].and_value + 1;
			check_call(p, s, a);
			a[r[i].and_arg] = (1ull << 32) | r[i].and_value;
			check_call(p, s, a);
		}
	}
}

/* The default plan: every call, with no arguments and at its rules' edges. */
static void test_filter_is_verdict(void)
{
	struct sock_fprog p = build(0);
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		uint64_t zero[6] = { 0 }, own[6] = { TRACE_GUEST_UID, TRACE_GUEST_UID, TRACE_GUEST_UID, 0, 0, 0 };
		uint64_t other[6] = { 65534, 65534, 65534, 0, 0, 0 }, setid[6] = { 0, 04755, 04755, O_CREAT, 04755, 0 };
		check_call(&p, s, zero);
		check_call(&p, s, own);
		check_call(&p, s, other);
		check_call(&p, s, setid);
		check_rules(&p, s);
	}
	uint64_t tiocsti_high[6] = { 0, (1ull << 32) | TIOCSTI, 0, 0, 0, 0 };
	CHECK(ACT(filter_says(&p, TRACE_SYS_ioctl, tiocsti_high)) == SECCOMP_RET_TRACE);
	uint64_t newuser[6] = { CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0, 0 };
	CHECK(ACT(filter_says(&p, TRACE_SYS_clone, newuser)) == SECCOMP_RET_TRACE);
	/* the facts the default plan stands on, whatever the table says */
	uint64_t zero[6] = { 0 };
	/* refused at a stop, so each attempt is counted and recorded */
	CHECK(filter_says(&p, TRACE_SYS_clone3, zero) == (SECCOMP_RET_TRACE | TRACE_TAG_REFUSED));
	CHECK(filter_says(&p, TRACE_SYS_openat2, zero) == (SECCOMP_RET_TRACE | TRACE_TAG_REFUSED));
	CHECK(filter_says(&p, TRACE_SYS_connect, zero) == (SECCOMP_RET_TRACE | TRACE_TAG_CLASS));
	CHECK(filter_says(&p, TRACE_SYS_execve, zero) == (SECCOMP_RET_TRACE | TRACE_TAG_EXEC));
	CHECK(filter_says(&p, TRACE_SYS_execveat, zero) == (SECCOMP_RET_TRACE | TRACE_TAG_EXEC));
	CHECK(filter_says(&p, TRACE_SYS_exit_group, zero) == SECCOMP_RET_ALLOW);
	free(p.filter);
}

/* The calls a plan traps as a class, with no arguments. */
static void class_stops(unsigned classes, unsigned char stops[512])
{
	struct sock_fprog p = build(classes);
	uint64_t zero[6] = { 0 };
	memset(stops, 0, 512);
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		uint32_t r = filter_says(&p, s->nr, zero);
		stops[s->nr] = ACT(r) == SECCOMP_RET_TRACE && TAG(r) == TRACE_TAG_CLASS &&
			       !(trace_sys_facts(s->nr) & TRACE_FACT_AT_EXIT);
	}
	free(p.filter);
}

/* Each modifier changes exactly the calls marked for it; never-trapped calls
 * run under every plan. */
static void test_marked_sets(void)
{
	unsigned char none[512], determ[512], file[512], noreadlink[512];
	class_stops(0, none);
	class_stops(TRACE_FILTER_DETERM, determ);
	class_stops(TRACE_CLASS_FILE, file);
	class_stops(TRACE_CLASS_FILE | TRACE_FILTER_NO_READLINK, noreadlink);
	int ndeterm = 0, nlink = 0;
	for (size_t i = 0; i < trace_sys_count(); i++) {
		int nr = trace_sys_at(i)->nr;
		unsigned f = trace_sys_facts(nr);
		CHECK(!none[nr]);
		CHECK(determ[nr] == !!(f & TRACE_FACT_DETERM));
		CHECK(file[nr] - noreadlink[nr] == !!(f & TRACE_FACT_LINK_READ));
		ndeterm += determ[nr];
		nlink += file[nr] - noreadlink[nr];
	}
	/* 7 answered, 30 the schedule asks about or orders */
	CHECK(ndeterm == 37 && nlink == 2);
	/* TRACE_FILTER_REMAP: what can unmap or replace a page stops; mmap only at a fixed address */
	struct sock_fprog rp = build(TRACE_CLASS_STORE | TRACE_FILTER_REMAP);
	uint64_t fixed[6] = { 0x10000, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1ull, 0 };
	uint64_t anon[6] = { 0, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1ull, 0 };
	CHECK(ACT(filter_says(&rp, TRACE_SYS_mmap, fixed)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&rp, TRACE_SYS_mmap, anon)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&rp, TRACE_SYS_munmap, anon)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&rp, TRACE_SYS_shmat, anon)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&rp, TRACE_SYS_remap_file_pages, anon)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&rp, TRACE_SYS_mremap, anon)) == SECCOMP_RET_TRACE);
	free(rp.filter);
	struct sock_fprog st = build(TRACE_CLASS_STORE);
	CHECK(ACT(filter_says(&st, TRACE_SYS_mmap, fixed)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&st, TRACE_SYS_munmap, anon)) == SECCOMP_RET_ALLOW);
	free(st.filter);
	struct sock_fprog all = build(trace_classes(TRACE_LEVEL_ALL) | trace_determ_classes());
	uint64_t any[6] = { ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull };
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		int allowed = ACT(filter_says(&all, s->nr, any)) == SECCOMP_RET_ALLOW;
		if (s->classes)
			CHECK(allowed == !!(trace_sys_facts(s->nr) & TRACE_FACT_NEVER_TRAPPED));
	}
	/* an orphan must always be able to die */
	CHECK(ACT(filter_says(&all, TRACE_SYS_exit, any)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&all, TRACE_SYS_exit_group, any)) == SECCOMP_RET_ALLOW);
	free(all.filter);
}

/* The shape the filter builder and the verdict rely on. */
static void test_table_shape(void)
{
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		size_t n;
		const struct trace_argrule *r = trace_sys_rules(s->nr, &n);
		for (size_t j = 0; j < n; j++) {
			CHECK(r[j].nr == s->nr && r[j].arg < 6 && r[j].and_arg < 6 && r[j].err > 0);
			CHECK(n == 1 || (r[j].kind == TRACE_RULE_ONE_OF && r[j].err == r[0].err));
		}
		unsigned f = trace_sys_facts(s->nr);
		if (f & TRACE_FACT_NEVER_TRAPPED)
			CHECK(n == 0 && !(s->classes & TRACE_CLASS_REFUSED));
	}
	size_t n;
	CHECK(trace_sys_rules(TRACE_SYS_socket, &n) && n == 4);
	CHECK(trace_sys_rules(TRACE_SYS_getpid, &n) == NULL && n == 0);
	CHECK(trace_sys_facts(-1) == 0 && trace_sys_facts(1 << 20) == 0);
}

/* Where a datagram goes is judged: connect, sendmsg and sendmmsg always stop,
 * sendto only with an address, a pointer above 4 GiB included. */
static void test_addressed_sends(void)
{
	struct sock_fprog p = build(0);
	uint64_t none[6] = { 3, 0x1000, 1, 0, 0, 0 }, low[6] = { 3, 0x1000, 1, 0, 0x2000, 110 },
		 high[6] = { 3, 0x1000, 1, 0, 1ull << 32, 110 };
	CHECK(ACT(filter_says(&p, TRACE_SYS_sendto, none)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&p, TRACE_SYS_sendto, low)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&p, TRACE_SYS_sendto, high)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&p, TRACE_SYS_sendmsg, none)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&p, TRACE_SYS_sendmmsg, none)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&p, TRACE_SYS_connect, none)) == SECCOMP_RET_TRACE);
	free(p.filter);
}

/* The storage meter alone: a protection change stops only when it asks for
 * PROT_WRITE; the held-mapping filter a process gets with its first held mapping
 * stops every one, on x86-64, and leaves every other call to the base. */
static void test_held_protection(void)
{
	struct sock_fprog st = build(TRACE_CLASS_STORE), mem = build(TRACE_CLASS_STORE | TRACE_CLASS_MEMORY);
	uint64_t ro[6] = { 0x10000, 4096, PROT_READ, 0, 0, 0 }, rw[6] = { 0x10000, 4096, PROT_READ | PROT_WRITE, 0, 0, 0 };
	uint64_t wo[6] = { 0x10000, 4096, PROT_WRITE | (1ull << 32), 0, 0, 0 }, hi[6] = { 0x10000, 4096, 1ull << 33, 0, 0, 0 };
	CHECK(ACT(filter_says(&st, TRACE_SYS_mprotect, ro)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&st, TRACE_SYS_pkey_mprotect, ro)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&st, TRACE_SYS_mprotect, hi)) == SECCOMP_RET_ALLOW);
	CHECK(ACT(filter_says(&st, TRACE_SYS_mprotect, rw)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&st, TRACE_SYS_mprotect, wo)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&st, TRACE_SYS_pkey_mprotect, rw)) == SECCOMP_RET_TRACE);
	CHECK(ACT(filter_says(&mem, TRACE_SYS_mprotect, ro)) == SECCOMP_RET_TRACE);
	free(st.filter);
	free(mem.filter);
	struct sock_filter f[16];
	struct sock_fprog held = { (unsigned short)trace_filter_held(f, 16), f };
	CHECK(held.len > 0 && trace_filter_held(f, 4) == 0);
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		uint32_t r = filter_says(&held, s->nr, ro);
		int protects = s->nr == TRACE_SYS_mprotect || s->nr == TRACE_SYS_pkey_mprotect;
		CHECK(r == (protects ? SECCOMP_RET_TRACE | TRACE_TAG_CLASS : SECCOMP_RET_ALLOW));
	}
	struct seccomp_data d = { .nr = TRACE_SYS_mprotect, .arch = AUDIT_ARCH_I386 };
	CHECK(run_bpf(&held, &d) == SECCOMP_RET_ALLOW); /* the base traps every other architecture */
}

/* The listener's program (TRACE_FILTER_NOTIFY_PROG): a read-only open and every
 * stat and access check go to the listener, unless marked; a creating, truncating
 * or writing open and every other call are the boundary's program's to judge. */
static void test_notify_prog(void)
{
	struct sock_fprog p = build(TRACE_FILTER_NOTIFY_PROG);
	uint64_t a[6] = { (uint64_t)AT_FDCWD, 0x1000, O_RDONLY | O_CLOEXEC, 0 };
	CHECK(ACT(filter_says(&p, TRACE_SYS_openat, a)) == SECCOMP_RET_USER_NOTIF);
	a[2] = O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK;
	CHECK(ACT(filter_says(&p, TRACE_SYS_openat, a)) == SECCOMP_RET_USER_NOTIF);
	const uint64_t kept[] = { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_TMPFILE, O_PATH,
				  O_RDONLY | TRACE_NOTIFY_MARK };
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
		a[2] = kept[i];
		CHECK(ACT(filter_says(&p, TRACE_SYS_openat, a)) == SECCOMP_RET_ALLOW);
	}
	uint64_t o[6] = { 0x1000, O_RDONLY };
	CHECK(ACT(filter_says(&p, TRACE_SYS_open, o)) == SECCOMP_RET_USER_NOTIF);
	o[1] = O_WRONLY | O_CREAT;
	CHECK(ACT(filter_says(&p, TRACE_SYS_open, o)) == SECCOMP_RET_ALLOW);
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		uint64_t z[6] = { 0 }, m[6] = { 0 };
		int notified = !!(trace_sys_facts(s->nr) & TRACE_FACT_NOTIFY);
		m[trace_sys_notify_arg(s) >= 0 ? trace_sys_notify_arg(s) : 0] = TRACE_NOTIFY_MARK;
		CHECK(ACT(filter_says(&p, s->nr, z)) == (notified ? SECCOMP_RET_USER_NOTIF : SECCOMP_RET_ALLOW));
		CHECK(ACT(filter_says(&p, s->nr, m)) == SECCOMP_RET_ALLOW);
	}
	/* the table's notified calls: lookups only, each with a place for the mark */
	CHECK(trace_sys_facts(TRACE_SYS_newfstatat) & TRACE_FACT_NOTIFY);
	CHECK(!(trace_sys_facts(TRACE_SYS_execve) & TRACE_FACT_NOTIFY));
	CHECK(!(trace_sys_facts(TRACE_SYS_openat2) & TRACE_FACT_NOTIFY));
	free(p.filter);
}

int main(void)
{
	test_notify_prog();
	test_filter_is_verdict();
	test_held_protection();
	test_marked_sets();
	test_addressed_sends();
	test_table_shape();
	return unit_finish("test_sysfacts");
}
