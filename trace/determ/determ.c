/* sbx-run --deterministic (SPEC §9): the supervisor answers the guest's
 * sources of nondeterminism from virtual state seeded by the lease.
 *
 *   time        clock_gettime/gettimeofday/time/clock_getres/times/getrusage/
 *               sysinfo/getcpu answered from a virtual clock that starts at
 *               the lease's request time and advances TRACE_DETERM_STEP_NS
 *               per query; sleeps advance it and return at once; the vDSO is
 *               hidden (AT_SYSINFO_EHDR -> AT_IGNORE at every exec stop), so
 *               libc makes real, trapped syscalls
 *   rdtsc       where the host honours PR_SET_TSC (trace/determ/tsc.c): the faulting
 *               rdtsc/rdtscp reads the process's monotonic clock in ns, plus
 *               one per earlier read (strictly increasing, no clock step)
 *   randomness  getrandom, reads of /dev/urandom and /dev/random, the
 *               AT_RANDOM bytes, /proc/sys/kernel/random/{uuid,boot_id}:
 *               SHA-256 counter stream keyed by the seed (the lease id)
 *   CPU count   sched_getaffinity: one CPU; /sys/devices/system/cpu/
 *               {online,possible,present}: "0", and only cpu0 is listed in
 *               /sys/devices/system/cpu; rseq refused (ENOSYS) so the
 *               kernel writes no cpu id into guest memory
 *   directories getdents64 entries sorted by name within each call
 *   files       stat/lstat/fstat/newfstatat/statx and d_ino: device and inode
 *               numbers and the times the run wrote answered from the run
 *               (trace/determ/files.c), a first sight at the task's turn;
 *               objects under /ns and directories report the epoch
 *   /proc       uptime, loadavg and meminfo: the virtual clock and the
 *               figures sysinfo reports
 *   schedule    the tree's tasks run at once; what one can observe of
 *               another (pipes, waits, signals, forks, futexes, changed
 *               paths) happens in an order of what they did, and threads of
 *               a process run one at a time (trace/sv/sched.c): the trace's
 *               order, pids, wait results and pipe read sizes follow
 * What cannot be controlled here is named in the trace header
 * ("determinism"."uncontrolled"), never silently allowed; what a run meets
 * that is not answered (a device read, a peer outside the run) is named at its
 * event ("uncontrolled") and in the result ("determinism"."fell_back"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/determ/determ.h"
#include "trace/determ/determ-internal.h"
#include "trace/tracee/tracee.h"

#define MAX_IO (1u << 20)     /* most bytes one emulated call produces */
#define AUXV_MAX 512          /* auxv entries we walk */
#define STRV_MAX (1u << 20)   /* argv+envp pointers we skip at an exec stop */
#define DETERM_RAM (1ull << 32)       /* sysinfo and /proc/meminfo: 4 GiB of memory */
#define DETERM_FREE_RAM (1ull << 31)  /* of which 2 GiB free */

#define FELL_BACK_MAX 64     /* distinct sources named in the result */


static const char *const uncontrolled[] = {
	"cpuid",                /* no CPUID faulting */
	"timers",               /* alarm/setitimer/timer_* fire in real time */
	"proc and sys files",   /* other than those served above */
	"uname",                /* the host's kernel release and machine */
	"vdso pages",           /* hidden from libc, still mapped (/proc/self/maps) */
};

/* The process's state in its slot, made at its first use. */
static struct proc *proc_at(void **slot, pid_t pid)
{
	struct proc *p = *slot;
	if (p)
		return p;
	*slot = p = common_xcalloc(1, sizeof *p);
	p->nspid = trace_determ_nspid(pid);
	p->blk_used = sizeof p->blk;
	return p;
}

struct proc *trace_determ_proc(struct trace_guest *g)
{
	return proc_at(trace_guest_slot(g, TRACE_LAYER_DETERM), trace_guest_pid(g));
}

static void prng_bytes(struct trace_determ *dd, struct proc *d, uint8_t *out, size_t n)
{
	static const char domain[] = "sbx/determ/v1"; /* hashed with its NUL */
	while (n) {
		if (d->blk_used == sizeof d->blk) {
			struct common_sha256 h;
			uint8_t c[8];
			uint8_t np[4];
			for (int i = 0; i < 8; i++)
				c[i] = (uint8_t)(d->ctr >> (8 * i));
			for (int i = 0; i < 4; i++)
				np[i] = (uint8_t)((uint32_t)d->nspid >> (8 * i));
			d->ctr++;
			common_sha256_init(&h);
			common_sha256_update(&h, domain, sizeof domain);
			common_sha256_update(&h, dd->seed, strlen(dd->seed) + 1);
			common_sha256_update(&h, np, sizeof np);
			common_sha256_update(&h, c, sizeof c);
			common_sha256_final(&h, d->blk);
			d->blk_used = 0;
		}
		size_t k = sizeof d->blk - d->blk_used;
		if (k > n)
			k = n;
		memcpy(out, d->blk + d->blk_used, k);
		d->blk_used += k;
		out += k;
		n -= k;
	}
}

struct trace_determ *trace_determ_new(const char *seed, int64_t epoch, int tsc)
{
	struct trace_determ *d = common_xcalloc(1, sizeof *d);
	d->seed = common_xstrdup(seed ? seed : "");
	d->epoch = epoch;
	d->tsc = tsc;
	d->files = trace_determ_files_new();
	d->named = json_array();
	d->fell_back = json_array();
	return d;
}

int64_t trace_determ_epoch(const json_t *clock, int64_t requested_batch)
{
	json_int_t ms = json_integer_value(json_object_get(clock, "epoch_ms"));
	json_int_t per = json_integer_value(json_object_get(clock, "batch_ms"));
	if (ms < 0 || per <= 0 || requested_batch < 0 ||
	    requested_batch > (INT64_MAX - ms) / per - 1)
		return -1;
	return (ms + (requested_batch + 1) * per + 999) / 1000;
}

void trace_determ_free(struct trace_determ *d)
{
	if (!d)
		return;
	free(d->seed);
	free(d->saved);
	trace_sched_saved_free(d->sched);
	free(d->queued);
	trace_determ_files_free(d->files);
	json_decref(d->named);
	json_decref(d->fell_back);
	free(d);
}

void trace_determ_uncontrolled(struct trace_determ *d, const char *source)
{
	json_array_append_new(d->named, json_string(source));
}

/* A source met at this stop that nothing answers: named at its event and,
 * once, in the result. */
static void fell_back(struct trace_determ *d, struct trace_stop *st, const char *source,
		      const char *detail)
{
	char *s = detail ? common_xasprintf("%s %s", source, detail) : common_xstrdup(source);
	size_t i;
	json_t *v;
	st->uncontrolled = source;
	json_array_foreach(d->fell_back, i, v)
		if (!strcmp(json_string_value(v), s))
			break;
	if (i == json_array_size(d->fell_back) && i < FELL_BACK_MAX)
		json_array_append_new(d->fell_back, json_string(s));
	free(s);
}

json_t *trace_determ_fell_back(const struct trace_determ *d)
{
	json_t *a = json_copy(d->fell_back);
	if (trace_determ_files_full(d->files))
		json_array_append_new(a, json_string("file identities beyond the table"));
	return a;
}

uint64_t trace_determ_emulated(const struct trace_determ *d)
{
	return d->emulated;
}

static void determ_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
			 unsigned long flags)
{
	void **ps = trace_sv_slot(sv, parent, TRACE_LAYER_DETERM);
	void **cs = trace_sv_slot(sv, child, TRACE_LAYER_DETERM);
	struct trace_determ *d = ctx;
	(void)flags;
	trace_determ_nspid_forget(child); /* its host id may be a reaped task's */
	if (!ps || !cs)
		return;
	uint64_t ns = proc_at(ps, parent)->ns;
	struct proc *c = proc_at(cs, child);
	if ((uint32_t)c->nspid > d->last_pid) /* a restore hands out the ids after it */
		d->last_pid = (uint32_t)c->nspid;
	c->parent = parent;
	c->ns = ns;
}

static void determ_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	void **s = trace_sv_slot(sv, tid, TRACE_LAYER_DETERM);
	struct proc *c = s ? *s : NULL;
	(void)ctx;
	(void)wstatus;
	if (!c)
		return;
	*s = NULL;
	void **ps = c->parent ? trace_sv_slot(sv, c->parent, TRACE_LAYER_DETERM) : NULL;
	struct proc *p = ps ? *ps : NULL;
	if (p && p->ns < c->ns)
		p->ns = c->ns;
	free(c);
}

/* what tasks can observe of each other happens in one order (trace/sv/sched.c) */
static int determ_start(void *ctx, struct trace_supervisor *sv)
{
	(void)ctx;
	trace_sv_scheduled(sv, trace_determ_classes() & ~TRACE_FILTER_DETERM);
	return 0;
}

static void determ_slot_free(void *ctx, void *slot)
{
	(void)ctx;
	free(slot);
}

unsigned trace_determ_classes(void)
{
	return TRACE_CLASS_TIME | TRACE_CLASS_READ | TRACE_CLASS_FILE | TRACE_FILTER_DETERM;
}

json_t *trace_determ_header(const struct trace_determ *d, const char *ns_dir,
			    struct common_err *e)
{
	json_t *h = json_object(), *u = json_array();
	if (!d->tsc) /* the probe found that PR_SET_TSC does not fault here */
		json_array_append_new(u, json_string("rdtsc"));
	for (size_t i = 0; i < sizeof uncontrolled / sizeof uncontrolled[0]; i++)
		json_array_append_new(u, json_string(uncontrolled[i]));
	json_array_extend(u, d->named);
	json_object_set_new(h, "uncontrolled", u);
	json_object_set_new(h, "rdtsc", json_string(d->tsc ? "controlled" : "uncontrolled"));
	json_object_set_new(h, "refused", json_pack("[s,s]", "rseq", "PR_SET_TSC"));
	json_object_set_new(h, "seed", json_string("lease"));
	json_object_set_new(h, "schedule", json_string("parallel"));
	json_object_set_new(h, "epoch", json_integer((json_int_t)d->epoch));
	json_object_set_new(h, "step_ns", json_integer(TRACE_DETERM_STEP_NS));
	if (ns_dir) {
		char hex[COMMON_SHA256_HEX];
		uint64_t cells, bytes;
		if (lease_ns_digest(ns_dir, hex, &cells, &bytes, e) < 0) {
			json_decref(h);
			return NULL;
		}
		json_object_set_new(h, "ns_sha256", json_string(hex));
	}
	return h;
}

int trace_determ_put(struct trace_guest *g, uint64_t addr, const void *buf, size_t len)
{
	/* the guest's own buffers are writable: process_vm_writev is one call, the
	 * /proc/PID/mem path (open, pwrite, close) the fallback */
	if (trace_mem_write(trace_guest_tid(g), addr, buf, len) == (ssize_t)len)
		return 0;
	return trace_guest_write(g, addr, buf, len) == (ssize_t)len ? 0 : -EFAULT;
}

/* Skip the call: it returns v. */
int trace_determ_skip(struct trace_guest *g, long long v)
{
	struct user_regs_struct r;
	if (trace_guest_get_regs(g, &r) < 0)
		return -1;
	r.orig_rax = (unsigned long long)-1;
	r.rax = (unsigned long long)v;
	return trace_guest_set_regs(g, &r);
}

/* Skip the call and return v (an emulated answer, or -errno). */
static void answer(struct trace_determ *d, struct trace_guest *g, struct trace_stop *st, long long v)
{
	if (trace_determ_skip(g, v) < 0)
		return;
	st->action = TRACE_REWRITTEN;
	d->emulated++;
}

static void set_result(struct trace_guest *g, long long v)
{
	struct user_regs_struct r;
	if (trace_guest_get_regs(g, &r) == 0) {
		r.rax = (unsigned long long)v;
		trace_guest_set_regs(g, &r);
	}
}

static uint64_t tick(struct proc *p)
{
	p->ns += TRACE_DETERM_STEP_NS;
	return p->ns;
}

static uint64_t since_epoch(const struct trace_determ *d, uint64_t ns)
{
	return (uint64_t)d->epoch * 1000000000ull + ns;
}

/* Time of a clock id: wall clocks from the epoch, the others from a boot
 * one second before the run. */
static uint64_t clock_ns(struct trace_determ *d, struct proc *p, long clk)
{
	uint64_t ns = tick(p);
	if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE || clk == CLOCK_TAI ||
	    clk == CLOCK_REALTIME_ALARM)
		return since_epoch(d, ns);
	return 1000000000ull + ns;
}

static int clock_ok(long clk)
{
	return (clk >= 0 && clk <= 11 && clk != 10) || (clk < 0 && clk > -(1l << 30));
}

/* nanosleep, clock_nanosleep: sleeps pass in virtual time only; 0 or -errno */
static long long sleep_virtual(struct trace_determ *d, struct trace_guest *g,
			       const struct trace_stop *st, struct proc *p)
{
	const uint64_t *a = st->args;
	int abs = st->nr == TRACE_SYS_clock_nanosleep && (a[1] & TIMER_ABSTIME);
	uint64_t at = st->nr == TRACE_SYS_nanosleep ? a[0] : a[2];
	int64_t req[2];
	if (trace_guest_read(g, at, req, sizeof req) != (ssize_t)sizeof req)
		return -EFAULT;
	if (req[0] < 0 || req[1] < 0 || req[1] >= 1000000000)
		return -EINVAL;
	uint64_t want = (uint64_t)req[0] * 1000000000ull + (uint64_t)req[1];
	if (abs) {
		uint64_t now = clock_ns(d, p, (long)(int)a[0]), base = now - p->ns;
		if (want > now)
			p->ns = want - base;
	} else {
		p->ns += want;
	}
	return 0;
}

/* struct sysinfo: uptime, loads[3], totalram, freeram, sharedram, bufferram,
 * totalswap, freeswap, procs (u16), pad, totalhigh, freehigh, mem_unit (u32):
 * 112 bytes, from the virtual clock and fixed figures */
static int sysinfo_virtual(struct trace_guest *g, uint64_t addr, struct proc *p)
{
	uint8_t si[112];
	uint64_t v;
	uint16_t procs = 1;
	uint32_t unit = 1;
	memset(si, 0, sizeof si);
	v = 1 + tick(p) / 1000000000ull;
	memcpy(si, &v, 8);
	v = DETERM_RAM;
	memcpy(si + 32, &v, 8);
	v = DETERM_FREE_RAM;
	memcpy(si + 40, &v, 8);
	memcpy(si + 80, &procs, 2);
	memcpy(si + 104, &unit, 4);
	return trace_determ_put(g, addr, si, sizeof si);
}

static int do_time(struct trace_determ *d, struct trace_guest *g, struct trace_stop *st)
{
	const uint64_t *a = st->args;
	struct proc *p = trace_determ_proc(g);
	switch (st->nr) {
	case TRACE_SYS_clock_gettime: {
		if (!clock_ok((long)(int)a[0])) {
			answer(d, g, st, -EINVAL);
			return 1;
		}
		uint64_t ns = clock_ns(d, p, (long)(int)a[0]);
		int64_t ts[2] = { (int64_t)(ns / 1000000000ull), (int64_t)(ns % 1000000000ull) };
		answer(d, g, st, trace_determ_put(g, a[1], ts, sizeof ts));
		return 1;
	}
	case TRACE_SYS_clock_getres: {
		int64_t ts[2] = { 0, 1 };
		if (!clock_ok((long)(int)a[0]))
			answer(d, g, st, -EINVAL);
		else
			answer(d, g, st, a[1] ? trace_determ_put(g, a[1], ts, sizeof ts) : 0);
		return 1;
	}
	case TRACE_SYS_gettimeofday: {
		uint64_t ns = clock_ns(d, p, CLOCK_REALTIME);
		int64_t tv[2] = { (int64_t)(ns / 1000000000ull), (int64_t)(ns % 1000000000ull / 1000) };
		int32_t tz[2] = { 0, 0 };
		int rc = a[0] ? trace_determ_put(g, a[0], tv, sizeof tv) : 0;
		if (rc == 0 && a[1])
			rc = trace_determ_put(g, a[1], tz, sizeof tz);
		answer(d, g, st, rc);
		return 1;
	}
	case TRACE_SYS_time: {
		int64_t s = (int64_t)(clock_ns(d, p, CLOCK_REALTIME) / 1000000000ull);
		if (a[0] && trace_determ_put(g, a[0], &s, sizeof s) < 0)
			answer(d, g, st, -EFAULT);
		else
			answer(d, g, st, s);
		return 1;
	}
	case TRACE_SYS_nanosleep:
	case TRACE_SYS_clock_nanosleep:
		answer(d, g, st, sleep_virtual(d, g, st, p));
		return 1;
	case TRACE_SYS_times: {
		uint64_t ns = tick(p);
		int64_t tms[4] = { 0, 0, 0, 0 };
		if (a[0] && trace_determ_put(g, a[0], tms, sizeof tms) < 0)
			answer(d, g, st, -EFAULT);
		else
			answer(d, g, st, (long long)(100 + ns / 10000000ull)); /* 100 Hz since boot */
		return 1;
	}
	case TRACE_SYS_getrusage: {
		uint8_t ru[144];
		memset(ru, 0, sizeof ru);
		answer(d, g, st, trace_determ_put(g, a[1], ru, sizeof ru));
		return 1;
	}
	case TRACE_SYS_sysinfo:
		answer(d, g, st, sysinfo_virtual(g, a[0], p));
		return 1;
	case TRACE_SYS_getcpu: {
		uint32_t z = 0;
		int rc = a[0] ? trace_determ_put(g, a[0], &z, 4) : 0;
		if (rc == 0 && a[1])
			rc = trace_determ_put(g, a[1], &z, 4);
		answer(d, g, st, rc);
		return 1;
	}
	case TRACE_SYS_getrandom: {
		size_t n = a[1] > MAX_IO ? MAX_IO : (size_t)a[1];
		uint8_t *buf = common_xmalloc(n ? n : 1);
		prng_bytes(d, p, buf, n);
		int rc = n ? trace_determ_put(g, a[0], buf, n) : 0;
		free(buf);
		answer(d, g, st, rc < 0 ? rc : (long long)n);
		return 1;
	}
	default:
		return 0;
	}
}

void trace_determ_want(struct trace_guest *g, struct trace_stop *st, enum pend_kind k,
		       uint64_t buf, int fd)
{
	struct pend *p = &trace_determ_proc(g)->pend;
	p->kind = k;
	p->buf = buf;
	p->fd = fd;
	p->in_ns = 0;
	st->want_exit = 1;
}

/* What a guest fd reads from, for the files served here. */
static enum pend_kind served(pid_t tid, int fd)
{
	char link[64], target[PATH_MAX];
	struct stat sb;
	snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, fd);
	if (stat(link, &sb) < 0)
		return P_NONE;
	if (S_ISCHR(sb.st_mode) && major(sb.st_rdev) == 1 &&
	    (minor(sb.st_rdev) == 8 || minor(sb.st_rdev) == 9))
		return P_RANDDEV;
	/* null, zero and full read the same everywhere; any other device is the host's */
	if ((S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) &&
	    !(S_ISCHR(sb.st_mode) && major(sb.st_rdev) == 1 &&
	      (minor(sb.st_rdev) == 3 || minor(sb.st_rdev) == 5 || minor(sb.st_rdev) == 7)))
		return P_DEVICE;
	if (!S_ISREG(sb.st_mode) || sb.st_size > 4096)
		return P_NONE; /* proc and sys files report size 0 or 4096 */
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n < 0)
		return P_NONE;
	target[n] = 0;
	if (!strcmp(target, "/proc/sys/kernel/random/uuid"))
		return P_UUID;
	if (!strcmp(target, "/proc/sys/kernel/random/boot_id"))
		return P_BOOTID;
	if (!strcmp(target, "/sys/devices/system/cpu/online") ||
	    !strcmp(target, "/sys/devices/system/cpu/possible") ||
	    !strcmp(target, "/sys/devices/system/cpu/present"))
		return P_CPULIST;
	if (!strcmp(target, "/proc/uptime"))
		return P_UPTIME;
	if (!strcmp(target, "/proc/loadavg"))
		return P_LOADAVG;
	if (!strcmp(target, "/proc/meminfo"))
		return P_MEMINFO;
	return P_NONE;
}

/* What fd names (for the result), or NULL; static storage, valid until the next call. */
static const char *fd_target(pid_t tid, int fd)
{
	static char target[PATH_MAX];
	char link[64];
	snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n < 0)
		return NULL;
	target[n] = 0;
	return target;
}

/* A connect the supervisor makes to a host socket named with --socket: what
 * the peer says is not the run's to answer. Named with its path. */
static void outside_peer(struct trace_determ *d, struct trace_guest *g, struct trace_stop *st)
{
	char a[2 + 108 + 1] = { 0 };
	size_t n = st->args[2] < sizeof a - 1 ? (size_t)st->args[2] : sizeof a - 1;
	if (n <= 2 || trace_guest_read(g, st->args[1], a, n) != (ssize_t)n)
		a[2] = 0;
	fell_back(d, st, "socket to a peer outside the run", a[2] ? a + 2 : NULL);
}

static int determ_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_determ *d = ctx;
	const uint64_t *a = st->args;
	if (!st->arch_ok || !st->sys || st->action == TRACE_DENIED)
		return 0;
	if (st->sys->classes & TRACE_CLASS_TIME) {
		do_time(d, g, st);
		return 0;
	}
	switch (st->nr) {
	case TRACE_SYS_getrusage:
		do_time(d, g, st);
		break;
	case TRACE_SYS_sched_getaffinity: {
		uint64_t one = 1;
		if (a[1] < sizeof one || (a[1] & 7))
			answer(d, g, st, -EINVAL);
		else
			answer(d, g, st, trace_determ_put(g, a[2], &one, sizeof one) < 0 ? -EFAULT : (long long)sizeof one);
		break;
	}
	case TRACE_SYS_rseq:
		answer(d, g, st, -ENOSYS);
		break;
	case TRACE_SYS_prctl:
		if (a[0] == PR_SET_TSC) /* the TSC mode is the supervisor's */
			answer(d, g, st, -EPERM);
		break;
	case TRACE_SYS_read:
	case TRACE_SYS_pread64: {
		enum pend_kind k = served(st->tid, (int)a[0]);
		if (k == P_DEVICE)
			fell_back(d, st, "device", fd_target(st->tid, (int)a[0]));
		else if (k != P_NONE)
			trace_determ_want(g, st, k, a[1], (int)a[0]);
		break;
	}
	case TRACE_SYS_readv:
	case TRACE_SYS_preadv:
	case TRACE_SYS_preadv2: {
		enum pend_kind k = served(st->tid, (int)a[0]);
		if (k == P_DEVICE)
			fell_back(d, st, "device", fd_target(st->tid, (int)a[0]));
		else if (k != P_NONE) /* vectored reads of a served file are not emulated: refused, not leaked */
			answer(d, g, st, -EINVAL);
		break;
	}
	case TRACE_SYS_connect:
		if (st->outside)
			outside_peer(d, g, st);
		break;
	case TRACE_SYS_getdents64: {
		char link[64], target[64];
		snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)st->tid, (int)a[0]);
		ssize_t n = readlink(link, target, sizeof target - 1);
		int cpudir = n == 23 && !memcmp(target, "/sys/devices/system/cpu", 23);
		trace_determ_want(g, st, cpudir ? P_CPUDIR : P_DENTS, a[1], (int)a[0]);
		break;
	}
	case TRACE_SYS_close:
	case TRACE_SYS_dup2:
	case TRACE_SYS_dup3: {
		/* descriptors 0 to 2 are the tree's: others may write them meanwhile
		 * (a redirection the shell undoes), their times are no one writer's */
		int fd = (int)a[st->nr != TRACE_SYS_close];
		struct trace_determ_view v = { d->epoch, &trace_determ_proc(g)->ns, 0 };
		if (fd > 2)
			trace_determ_files_written(d->files, &v, st->tid, fd);
		break;
	}
	case TRACE_SYS_fstat:
	case TRACE_SYS_stat:
	case TRACE_SYS_lstat:
	case TRACE_SYS_newfstatat:
	case TRACE_SYS_statx:
		trace_determ_stat_entry(d, g, st);
		break;
	default:
		break;
	}
	return 0;
}

static void fmt_uuid(const uint8_t b[16], char out[38])
{
	static const char hx[] = "0123456789abcdef";
	size_t o = 0;
	for (int i = 0; i < 16; i++) {
		uint8_t v = b[i];
		if (i == 6)
			v = (uint8_t)((v & 0x0f) | 0x40); /* version 4 */
		if (i == 8)
			v = (uint8_t)((v & 0x3f) | 0x80); /* variant 1 */
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hx[v >> 4];
		out[o++] = hx[v & 15];
	}
	out[o++] = '\n';
	out[o] = 0;
}

/* The file position before this read of fd (read: from fdinfo after it). */
static int64_t pos_before(pid_t tid, const struct trace_stop *st, int64_t n)
{
	if (st->nr == TRACE_SYS_pread64)
		return (int64_t)st->args[3];
	int64_t pos;
	return trace_fdinfo(tid, (int)st->args[0], &pos, NULL) < 0 ? -1 : pos - n;
}

/* Serve a small text file in place of one at least as long: text from the
 * read's position, no more than the host's file gave (so the descriptor's
 * position and the text's agree), then EOF. */
static void serve_text(struct trace_guest *g, const struct trace_stop *st, uint64_t buf,
		       const char *text)
{
	int64_t pos = pos_before(trace_guest_tid(g), st, st->result);
	size_t len = strlen(text), cnt = (size_t)st->result;
	if (pos < 0 || (uint64_t)pos >= len) {
		set_result(g, 0);
		return;
	}
	len -= (size_t)pos;
	if (cnt < len)
		len = cnt;
	set_result(g, trace_determ_put(g, buf, text + pos, len) < 0 ? -EFAULT : (long long)len);
}

/* /proc/uptime, /proc/loadavg, /proc/meminfo: the virtual clock since its boot
 * (1 s before the run) and the figures sysinfo reports */
static void serve_proc(struct trace_determ *d, struct trace_guest *g, const struct trace_stop *st,
		       struct proc *p, enum pend_kind k, uint64_t buf)
{
	char text[512];
	uint64_t up = 1000000000ull + p->ns;
	if (k == P_UPTIME)
		snprintf(text, sizeof text, "%llu.%02llu 0.00\n", (unsigned long long)(up / 1000000000ull),
			 (unsigned long long)(up % 1000000000ull / 10000000ull));
	else if (k == P_LOADAVG)
		snprintf(text, sizeof text, "0.00 0.00 0.00 1/1 %d\n", (int)p->nspid);
	else
		snprintf(text, sizeof text, "MemTotal:       %8llu kB\nMemFree:        %8llu kB\n"
			 "MemAvailable:   %8llu kB\nBuffers:               0 kB\n"
			 "Cached:                0 kB\nSwapTotal:             0 kB\n"
			 "SwapFree:              0 kB\n", (unsigned long long)(DETERM_RAM >> 10),
			 (unsigned long long)(DETERM_FREE_RAM >> 10),
			 (unsigned long long)(DETERM_FREE_RAM >> 10));
	serve_text(g, st, buf, text);
	d->emulated++;
}

/* A stat's result as the run tells it (trace/determ/files.c). */
static void answer_stat(struct trace_determ *d, struct trace_guest *g, struct proc *pr,
			const struct pend *p)
{
	uint8_t b[256];
	size_t n = p->kind == P_STATX ? 256 : 144;
	struct trace_determ_view v = { d->epoch, &pr->ns, p->in_ns };
	if (trace_guest_read(g, p->buf, b, n) != (ssize_t)n)
		return;
	if (p->kind == P_STATX)
		trace_determ_files_statx(d->files, &v, b);
	else
		trace_determ_files_stat(d->files, &v, b);
	trace_determ_put(g, p->buf, b, n);
}

/* What the file table tells of a stat or getdents64 (result n bytes). */
static void answer_files(struct trace_determ *d, struct trace_guest *g, struct proc *pr,
			 const struct pend *p, size_t n)
{
	if (p->kind == P_DENTS) {
		trace_determ_files_getdents(d->files, g, p->buf, n, 0, p->fd);
	} else if (p->kind == P_CPUDIR) {
		size_t k = trace_determ_files_getdents(d->files, g, p->buf, n, 1, p->fd);
		if (k != n) {
			set_result(g, (long long)k);
			d->emulated++;
		}
	} else if (n == 0) {
		answer_stat(d, g, pr, p);
	}
}

/* Whether that answer needs a first sight (trace_determ_files_probe): one
 * numbers identities and times, so it waits for the task's turn. Any other
 * answer goes on at once: what the table holds was put there at a turn of a
 * lesser key than the asker's, as it would have been had it waited. */
static int needs_turn(struct trace_determ *d, struct trace_guest *g, struct proc *pr,
		      const struct pend *p, size_t n)
{
	struct proc scratch = *pr; /* a probe raises no clock */
	trace_determ_files_probe(d->files);
	if (p->kind == P_STAT || p->kind == P_STATX) {
		uint8_t b[256];
		size_t len = p->kind == P_STATX ? 256 : 144;
		struct trace_determ_view v = { d->epoch, &scratch.ns, p->in_ns };
		if (n == 0 && trace_guest_read(g, p->buf, b, len) == (ssize_t)len) {
			if (p->kind == P_STATX)
				trace_determ_files_statx(d->files, &v, b);
			else
				trace_determ_files_stat(d->files, &v, b);
		}
	} else {
		trace_determ_files_getdents(d->files, g, p->buf, n, p->kind == P_CPUDIR, p->fd);
	}
	return trace_determ_files_probe_end(d->files);
}

/* The answer put off at the exit: the task's turn has come. */
static void determ_turn(void *ctx, struct trace_guest *g)
{
	struct proc *pr = *trace_guest_slot(g, TRACE_LAYER_DETERM);
	if (!pr || pr->pend.kind == P_NONE)
		return;
	struct pend p = pr->pend;
	pr->pend.kind = P_NONE;
	answer_files(ctx, g, pr, &p, p.n);
}

static int determ_exit(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct trace_determ *d = ctx;
	struct proc *pr = *trace_guest_slot(g, TRACE_LAYER_DETERM);
	if (!pr || pr->pend.kind == P_NONE)
		return 0;
	struct pend p = pr->pend;
	pr->pend.kind = P_NONE;
	if (!st->has_result || st->result < 0)
		return 0;
	size_t n = (size_t)st->result;
	switch (p.kind) {
	case P_RANDDEV: {
		if (n > MAX_IO)
			n = MAX_IO;
		uint8_t *b = common_xmalloc(n ? n : 1);
		prng_bytes(d, pr, b, n);
		if (n && trace_determ_put(g, p.buf, b, n) == 0)
			set_result(g, (long long)n);
		free(b);
		d->emulated++;
		break;
	}
	case P_UUID:
	case P_BOOTID: {
		uint8_t b[16];
		char text[38];
		if (p.kind == P_UUID) {
			prng_bytes(d, pr, b, sizeof b);
		} else {
			uint8_t h[32];
			char *s = common_xasprintf("sbx/determ/boot_id\n%s", d->seed);
			common_sha256(s, strlen(s), h);
			free(s);
			memcpy(b, h, sizeof b);
		}
		fmt_uuid(b, text);
		serve_text(g, st, p.buf, text);
		d->emulated++;
		break;
	}
	case P_CPULIST:
		serve_text(g, st, p.buf, "0\n");
		d->emulated++;
		break;
	case P_UPTIME:
	case P_LOADAVG:
	case P_MEMINFO:
		serve_proc(d, g, st, pr, p.kind, p.buf);
		break;
	case P_DENTS:
	case P_CPUDIR:
	case P_STAT:
	case P_STATX:
		if (!needs_turn(d, g, pr, &p, n)) {
			answer_files(d, g, pr, &p, n);
		} else {
			pr->pend = p;
			pr->pend.n = n;
			st->answer_at_turn = 1;
		}
		break;
	default:
		break;
	}
	return 0;
}

static int determ_fault(void *ctx, struct trace_guest *g, int sig)
{
	struct trace_determ *d = ctx;
	struct user_regs_struct r;
	size_t len;
	if (!d->tsc || sig != SIGSEGV)
		return 0;
	int insn = trace_tsc_fault(trace_guest_tid(g), &r, &len);
	if (insn <= 0)
		return 0; /* another fault: the guest gets its SIGSEGV */
	struct proc *p = trace_determ_proc(g);
	uint64_t tsc = 1000000000ull + p->ns + ++p->tsc_reads;
	if (trace_tsc_answer(trace_guest_tid(g), &r, insn, len, tsc) < 0)
		return 0;
	d->emulated++;
	return 1;
}

static int auxv_fix(struct trace_determ *d, struct proc *p, struct trace_tracee *t, uint64_t sp)
{
	uint64_t w, aux[2];
	size_t i;
	if (trace_tracee_read(t, sp, &w, 8, NULL) < 0 || w > STRV_MAX)
		return -EFAULT;
	sp += 8 * (w + 2);
	for (i = 0; i < STRV_MAX; i++, sp += 8) {
		if (trace_tracee_read(t, sp, &w, 8, NULL) < 0)
			return -EFAULT;
		if (!w)
			break;
	}
	sp += 8;
	for (i = 0; i < AUXV_MAX; i++, sp += 16) {
		if (trace_tracee_read(t, sp, aux, 16, NULL) < 0)
			return -EFAULT;
		if (aux[0] == 0) /* AT_NULL */
			break;
		if (aux[0] == 33) { /* AT_SYSINFO_EHDR -> AT_IGNORE */
			uint64_t ign = 1;
			if (trace_tracee_write(t, sp, &ign, 8, NULL) < 0)
				return -EFAULT;
		} else if (aux[0] == 25 && aux[1]) { /* AT_RANDOM: 16 bytes */
			uint8_t b[16];
			prng_bytes(d, p, b, sizeof b);
			if (trace_tracee_write(t, aux[1], b, sizeof b, NULL) < 0)
				return -EFAULT;
		}
	}
	return 0;
}

static int determ_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid,
		       const char *path)
{
	struct user_regs_struct r;
	struct trace_tracee t;
	void **slot = trace_sv_slot(sv, pid, TRACE_LAYER_DETERM);
	(void)ppid;
	(void)path;
	/* regs belong to the new image: rsp is its initial stack
	 * [argc][argv...][0][envp...][0][auxv pairs...][AT_NULL] */
	int rc = slot ? trace_regs_get(pid, &r) : -ESRCH;
	if (rc == 0 && trace_tracee_open(&t, pid, NULL) < 0)
		rc = -errno;
	if (rc == 0) {
		rc = auxv_fix(ctx, proc_at(slot, pid), &t, r.rsp);
		trace_tracee_close(&t);
	}
	if (rc < 0)
		trace_sv_stop(sv, "determinism: cannot rewrite the auxiliary vector");
	return rc;
}

struct trace_layer trace_determ_layer(struct trace_determ *d)
{
	if (!d)
		return (struct trace_layer){ 0 };
	return (struct trace_layer){
		.ctx = d, .on_start = determ_start, .on_entry = determ_entry, .on_exit = determ_exit, .on_exec = determ_exec,
		.on_spawn = determ_spawn, .on_proc_exit = determ_proc_exit, .on_fault = determ_fault,
		.slot_free = determ_slot_free, .on_turn = determ_turn,
	};
}
