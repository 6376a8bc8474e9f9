/* Shared file mappings held (trace/meter/mapping.c), at the calls that map, move
 * or protect them and at the faults of stores into them: each run of pages is
 * charged to storage_write before it is made writable. */
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include "lease/lease.h"
#include "trace/meter/meter-internal.h"
#include "trace/tracee/tracee.h"

#define MAP_PIECES 64 /* an mprotect over more held and free stretches is refused (ENOMEM) */

static long nr_of(const char *name)
{
	const struct trace_sysinfo *s = trace_sys_by_name(name);

	return s ? s->nr : -1;
}

/* mprotect(p) in tid at its seccomp stop (at_entry) or at a signal-delivery stop:
 * 0 with *ret the call's result, -1 when the thread cannot be driven. */
static int map_protect_now(pid_t tid, int at_entry, const struct trace_map_piece *p, int64_t *ret)
{
	uint64_t a[6] = { p->lo, p->hi - p->lo, (uint64_t)(unsigned)p->prot, 0, 0, 0 };
	struct user_regs_struct saved;
	struct trace_tracee t;
	int rc = -1;

	if (at_entry)
		return trace_inject_at_entry(tid, nr_of("mprotect"), a, ret) < 0 ? -1 : 0;
	if (trace_regs_get(tid, &saved) < 0 || trace_tracee_open(&t, tid, NULL) < 0)
		return -1;
	if (trace_tracee_find_syscall(&t, NULL) == 0)
		rc = trace_tracee_inject(&t, nr_of("mprotect"), a, ret, NULL);
	trace_tracee_close(&t);
	return trace_regs_set(tid, &saved) < 0 ? -1 : rc;
}

/* Pages of a held mapping about to be stored, charged before the store: -1 when
 * they would take storage_write past its bound (the lease closes). */
static int map_charge(struct trace_metering *mt, uint64_t bytes)
{
	const uint64_t bound = mt->limits[LEASE_DIM_STORAGE_WRITE];
	uint64_t held = mt->base[LEASE_DIM_STORAGE_WRITE] + trace_meter_store_held(mt->meter);

	if (held > bound || bytes > bound - held) {
		trace_meter_store_refused(mt->meter, bytes);
		meter_observe(mt, mt->sv, 1);
		return -1;
	}
	trace_meter_store_charge(mt->meter, bytes);
	return meter_bound_hold(mt, mt->sv, 0);
}

/* A store of g's at addr into a held mapping: its run charged and made writable
 * (*next: the run's end, 0 when none). 1 when done (the store can be made again),
 * 0 when addr is not held or the bound refuses it, -1 when the thread cannot be driven. */
static int map_store(struct trace_metering *mt, struct trace_guest *g, uint64_t addr, int at_entry,
		     uint64_t *next)
{
	struct trace_map_piece p;
	uint64_t charge;
	int64_t r = 0;

	*next = 0;
	if (!trace_maps_store(mt->maps, trace_guest_tid(g), trace_guest_pid(g), addr, &p, &charge))
		return 0;
	*next = p.hi;
	if (charge && map_charge(mt, charge) < 0)
		return 0;
	if (map_protect_now(trace_guest_tid(g), at_entry, &p, &r) < 0)
		return -1;
	return r == 0;
}

/* A store into a held page faults (SEGV_ACCERR): charged, opened, made again. */
int meter_map_fault(void *ctx, struct trace_guest *g, int sig)
{
	struct trace_metering *mt = ctx;
	siginfo_t si;
	uint64_t next;

	if (sig != SIGSEGV || mt->failed || !trace_maps_any(mt->maps, trace_guest_pid(g)) ||
	    trace_siginfo(trace_guest_tid(g), &si) < 0 || si.si_code != SEGV_ACCERR)
		return 0;
	return map_store(mt, g, (uint64_t)(uintptr_t)si.si_addr, 0, &next) > 0;
}

/* A call about to store into [addr, addr+len) (a read into a mapping): each held
 * run of it charged and opened first, as the kernel's store would fail (EFAULT)
 * where the guest's own would fault. */
int meter_map_store_range(struct trace_metering *mt, struct trace_guest *g, uint64_t addr,
			  uint64_t len)
{
	uint64_t end = addr + len, at = addr & ~4095ull, next;

	if (!len || end < addr)
		return 0;
	while ((at = trace_maps_next(mt->maps, trace_guest_pid(g), at, end)) < end) {
		if (map_store(mt, g, at, 1, &next) < 0)
			return meter_failf(mt, "storage_write", "could not open a shared mapping for a call");
		at = next > at ? next : at + 4096;
	}
	return 0;
}

/* A plain read's buffer, at its seccomp stop (an injection needs one): its held runs
 * opened. In every-call mode a read into the window stops there too. */
int meter_map_read(struct trace_metering *mt, struct trace_guest *g, const struct trace_stop *st)
{
	int buf = trace_sys_arg(st->sys, TRACE_ARG_PTR), count = trace_sys_arg(st->sys, TRACE_ARG_COUNT);

	if (buf < 0 || count < 0 || trace_sys_arg(st->sys, TRACE_ARG_OUTFD) >= 0 ||
	    !trace_maps_any(mt->maps, st->pid))
		return 0;
	return meter_map_store_range(mt, g, st->args[buf], st->args[count]);
}

/* Before g's process first holds a mapping: the held-mapping filter added to all its
 * threads (TSYNC), so that a protection change without PROT_WRITE, which the base
 * filter lets run, stops there too and the table keeps what the guest asked for. The
 * bound does not rest on it (a change asking for PROT_WRITE always stops): where the
 * filter cannot be added (threads with filters of their own) the process goes on
 * without. -1 when the thread cannot be driven. */
static int map_filter(struct trace_metering *mt, struct trace_guest *g)
{
	struct sock_filter f[16];
	size_t n = trace_filter_held(f, sizeof f / sizeof f[0]);
	pid_t tid = trace_guest_tid(g);
	uint64_t a[6] = { 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0 };
	int64_t page, r = -1;

	if (trace_maps_filtered(mt->maps, trace_guest_pid(g)) || !n)
		return 0;
	trace_maps_filter_set(mt->maps, trace_guest_pid(g)); /* tried once per process */
	/* the program and its header on a page of the guest's own, for the call */
	if (trace_inject_at_entry(tid, nr_of("mmap"), a, &page) < 0)
		return -1;
	if (page < 0 && page > -4096)
		return 0;
	struct sock_fprog p = { (unsigned short)n, (struct sock_filter *)(uintptr_t)(page + 16) };
	if (trace_mem_write(tid, (uint64_t)page, &p, sizeof p) == (ssize_t)sizeof p &&
	    trace_mem_write(tid, (uint64_t)page + 16, f, n * sizeof f[0]) == (ssize_t)(n * sizeof f[0])) {
		uint64_t s[6] = { SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, (uint64_t)page, 0, 0, 0 };
		if (trace_inject_at_entry(tid, nr_of("seccomp"), s, &r) < 0)
			return -1;
	}
	uint64_t u[6] = { (uint64_t)page, 4096, 0, 0, 0, 0 };
	return trace_inject_at_entry(tid, nr_of("munmap"), u, &r) < 0 ? -1 : 0;
}

/* mmap of a shared file mapping that can store: mapped without PROT_WRITE, held at its exit. */
static int map_hold(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		    const struct trace_store_call *c)
{
	int prot = trace_sys_arg(st->sys, TRACE_ARG_PROT), len = trace_sys_arg(st->sys, TRACE_ARG_LEN);
	struct trace_map_call mc = { TRACE_MAP_MMAP, (int)st->args[prot], c->dev, c->ino, 0,
				     st->args[len], 0, 0 };

	int fl = trace_sys_arg(st->sys, TRACE_ARG_MFLAGS), at = trace_sys_arg(st->sys, TRACE_ARG_PTR);
	uint64_t place = trace_maps_place(mt->maps, st->args[len]);

	if (map_filter(mt, g) < 0)
		return meter_failf(mt, "storage_write", "could not hold a shared mapping's protection");
	/* in the window where reads stop, unless the guest chose its address */
	if (at >= 0 && place && !(st->args[fl] & (MAP_FIXED | MAP_FIXED_NOREPLACE)))
		st->args[at] = place;
	st->args[prot] &= ~(uint64_t)PROT_WRITE;
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return meter_failf(mt, "storage_write", "could not hold a shared mapping");
	trace_maps_pending(mt->maps, st->tid, &mc);
	st->want_exit = 1;
	return 0;
}

/* mremap of a held mapping: what it grows or copies takes the protection of the
 * mapping at old, so that is made unwritable first; the range moves at its exit. */
static int map_remap(struct trace_metering *mt, struct trace_stop *st)
{
	const struct trace_sysinfo *s = st->sys;
	uint64_t old = st->args[trace_sys_arg(s, TRACE_ARG_MAPADDR)];
	uint64_t oldlen = st->args[trace_sys_arg(s, TRACE_ARG_MAPLEN)];
	uint64_t newlen = st->args[trace_sys_arg(s, TRACE_ARG_LEN)];
	int fl = trace_sys_arg(s, TRACE_ARG_FLAGS), prot;
	struct trace_map_call mc = { TRACE_MAP_MOVE, 0, 0, 0, old, oldlen, newlen,
				     fl >= 0 && (st->args[fl] & MREMAP_DONTUNMAP) };
	int64_t r;

	if (!trace_maps_held_prot(mt->maps, st->pid, old, oldlen ? oldlen : 1, &prot))
		return 0;
	if (newlen > oldlen) {
		struct trace_map_piece p = { old & ~4095ull, (old & ~4095ull) + (oldlen ? oldlen : 4096),
					     prot & ~PROT_WRITE };
		if (map_protect_now(st->tid, 1, &p, &r) < 0)
			return meter_failf(mt, "storage_write", "could not hold a shared mapping's growth");
	}
	mc.prot = prot;
	trace_maps_pending(mt->maps, st->tid, &mc);
	st->want_exit = 1;
	return 0;
}

/* mprotect over held ranges: with PROT_WRITE it runs here piece by piece, the held
 * ones without it (writable run by run at their stores), and the call itself
 * changes nothing; without, it runs and the ranges take prot at its exit. */
static int map_protect(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st, int protk)
{
	struct trace_map_piece p[MAP_PIECES];
	uint64_t addr = st->args[0], len = (st->args[1] + 4095) & ~4095ull;
	int prot = (int)st->args[protk], n, held;
	int64_t r = 0, one;

	if ((addr & 4095) || !len || addr + len < addr || !trace_maps_held_prot(mt->maps, st->pid, addr, len, &held))
		return 0;
	if (!(prot & PROT_WRITE)) {
		struct trace_map_call mc = { TRACE_MAP_PROTECT, prot, 0, 0, addr, len, 0, 0 };
		trace_maps_pending(mt->maps, st->tid, &mc);
		st->want_exit = 1;
		return 0;
	}
	if ((n = trace_maps_pieces(mt->maps, st->pid, addr, len, prot, p, MAP_PIECES)) < 0) {
		st->action = TRACE_DENIED;
		st->deny_errno = ENOMEM;
		return 0;
	}
	for (int i = 0; i < n; i++) {
		if (map_protect_now(st->tid, 1, &p[i], &one) < 0)
			return meter_failf(mt, "storage_write", "could not hold an mprotect of a shared mapping");
		if (one < 0 && r == 0)
			r = one;
	}
	trace_maps_protect(mt->maps, st->pid, addr, len, prot);
	st->args[1] = 0; /* done: the call itself is mprotect(addr, 0), then its result */
	if (trace_guest_set_syscall(g, st->nr, st->args) < 0)
		return meter_failf(mt, "storage_write", "could not hold an mprotect of a shared mapping");
	trace_meter_vector_set(mt->meter, st->tid, TRACE_VECTOR_RESULT, r);
	st->want_exit = 1;
	return 0;
}

/* The mapping calls, at their seccomp stop (trace/meter/mapping.c). */
int meter_map_entry(struct trace_metering *mt, struct trace_guest *g, struct trace_stop *st,
		    const struct trace_store_call *c)
{
	const struct trace_sysinfo *s = st->sys;
	int prot = trace_sys_arg(s, TRACE_ARG_PROT);

	if (c->hold)
		return map_hold(mt, g, st, c);
	if (trace_sys_arg(s, TRACE_ARG_MAPLEN) >= 0)
		return map_remap(mt, st);
	if (prot >= 0 && trace_sys_arg(s, TRACE_ARG_MFLAGS) < 0 && trace_maps_any(mt->maps, st->pid))
		return map_protect(mt, g, st, prot);
	return 0;
}

/* A mapping call's exit: what it did, in the table. */
void meter_map_exit(struct trace_metering *mt, const struct trace_stop *st)
{
	struct trace_map_call mc;

	if (!trace_maps_take(mt->maps, st->tid, &mc) || (st->result < 0 && st->result > -4096))
		return;
	if (mc.kind == TRACE_MAP_MMAP)
		trace_maps_add(mt->maps, st->pid, (uint64_t)st->result, mc.len, &mc);
	else if (mc.kind == TRACE_MAP_MOVE)
		trace_maps_move(mt->maps, st->pid, mc.addr, mc.len, (uint64_t)st->result, mc.newlen, mc.keep);
	else if (mc.kind == TRACE_MAP_PROTECT)
		trace_maps_protect(mt->maps, st->pid, mc.addr, mc.len, mc.prot);
}

int trace_metering_held_prot(void *mt, pid_t tgid, uint64_t addr, uint64_t len, int *prot)
{
	const struct trace_metering *m = mt;
	return m && m->maps && trace_maps_held_prot(m->maps, tgid, addr, len, prot);
}

/* Process pid's shared file mappings it may store through, held (see below). */
static int hold_process(struct trace_metering *mt, pid_t pid, struct common_err *e)
{
	struct trace_map *m;
	size_t n;
	int rc = 0;

	if (trace_proc_maps(pid, &m, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		/* shared anonymous memory and SysV segments are no file's */
		if (m[i].perms[3] != 's' || m[i].perms[1] != 'w' || m[i].path[0] != '/' ||
		    !strcmp(m[i].path, "/dev/zero (deleted)") || !strncmp(m[i].path, "/SYSV", 5))
			continue;
		struct trace_map_piece p = { m[i].start, m[i].end,
					     (m[i].perms[0] == 'r' ? PROT_READ : 0) |
					     (m[i].perms[2] == 'x' ? PROT_EXEC : 0) };
		struct trace_map_call mc = { TRACE_MAP_MMAP, p.prot | PROT_WRITE, m[i].dev,
					     (ino_t)m[i].ino, 0, m[i].end - m[i].start, 0, 0 };
		int64_t ret;
		if (map_protect_now(pid, 0, &p, &ret) < 0 || ret < 0)
			rc = common_errf(e, "storage_write", "could not hold the shared mapping %#llx of "
					 "%s in process %d", (unsigned long long)m[i].start, m[i].path, (int)pid);
		else
			trace_maps_add(mt->maps, pid, m[i].start, m[i].end - m[i].start, &mc);
	}
	free(m);
	return rc;
}

int trace_metering_hold_restored(struct trace_metering *mt, pid_t root, struct common_err *e)
{
	char p[96];
	int rc;

	if (!mt || !mt->maps)
		return 0;
	if ((rc = hold_process(mt, root, e)) < 0)
		return -1;
	/* the children of every thread, each process once (a child has one parent thread) */
	snprintf(p, sizeof p, "/proc/%d/task", (int)root);
	DIR *d = opendir(p);
	struct dirent *de;
	while (rc == 0 && d && (de = readdir(d))) {
		char *kids;
		size_t len;
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/%d/task/%s/children", (int)root, de->d_name);
		if (common_read_file(p, 1 << 20, &kids, &len, NULL) < 0)
			continue;
		for (char *s = kids, *end; rc == 0 && *s; s = end) {
			long kid = strtol(s, &end, 10);
			if (end == s)
				break;
			rc = kid > 0 ? trace_metering_hold_restored(mt, (pid_t)kid, e) : 0;
		}
		free(kids);
	}
	if (d)
		closedir(d);
	return rc;
}
