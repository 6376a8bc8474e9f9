/* The syscall table: syscalls.def and facts.def turned into data, lookups,
 * and the argument rules' verdict. */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include "trace/sys/sys.h"

static const struct trace_sysinfo table[] = {
#define SYSCALL(name, nr, cls, err, a0, a1, a2, a3, a4, a5) \
	{ #name, nr, cls, { a0, a1, a2, a3, a4, a5 }, err },
#include "trace/sys/syscalls.def"
#undef SYSCALL
};
#define NSYS (sizeof table / sizeof table[0])

/* Numbers are dense below 512; one index gives O(1) lookups at every stop. */
#define NR_INDEX 512
static const struct trace_sysinfo *by_nr[NR_INDEX];
static pthread_once_t indexed = PTHREAD_ONCE_INIT; /* supervisors may run in several threads */

static void build_index(void)
{
	for (size_t i = 0; i < NSYS; i++)
		if (table[i].nr >= 0 && table[i].nr < NR_INDEX)
			by_nr[table[i].nr] = &table[i];
}

const struct trace_sysinfo *trace_sys_by_nr(long nr)
{
	pthread_once(&indexed, build_index);
	if (nr < 0 || nr >= NR_INDEX)
		return NULL;
	return by_nr[nr];
}

/* In TRACE_CLASS_NAMES order: policy rules and sbx-trace filter --class name them. */
static const struct { const char *name; unsigned bit; } class_names[] = {
	{"file", TRACE_CLASS_FILE}, {"read", TRACE_CLASS_READ}, {"write", TRACE_CLASS_WRITE},
	{"process", TRACE_CLASS_PROCESS}, {"net", TRACE_CLASS_NET},
	{"signal", TRACE_CLASS_SIGNAL}, {"memory", TRACE_CLASS_MEMORY},
	{"time", TRACE_CLASS_TIME}, {"desc", TRACE_CLASS_DESC},
	{"refused", TRACE_CLASS_REFUSED}, {"store", TRACE_CLASS_STORE}, {"load", TRACE_CLASS_LOAD},
};

unsigned trace_class_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof class_names / sizeof class_names[0]; i++)
		if (strcmp(class_names[i].name, name) == 0)
			return class_names[i].bit;
	return 0;
}

const struct trace_sysinfo *trace_sys_by_name(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < NSYS; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

size_t trace_sys_count(void)
{
	return NSYS;
}

const struct trace_sysinfo *trace_sys_at(size_t i)
{
	return i < NSYS ? &table[i] : NULL;
}

int trace_sys_arg(const struct trace_sysinfo *s, enum trace_arg kind)
{
	for (int i = 0; s && i < 6; i++)
		if (s->arg[i] == kind)
			return i;
	return -1;
}

/* FACT rows by number: designated initializers, so a second row for one call
 * is a -Woverride-init error rather than a silent merge. */
static const unsigned facts_by_nr[NR_INDEX] = {
#define FACT(name, f) [TRACE_SYS_##name] = (f),
#define RULE(name, kind, arg, value, and_arg, and_value, err)
#include "trace/sys/facts.def"
#undef FACT
#undef RULE
};

static const struct trace_argrule rules[] = {
#define FACT(name, f)
#define RULE(name, kind, arg, value, and_arg, and_value, err) \
	{ TRACE_SYS_##name, kind, arg, and_arg, value, and_value, err },
#include "trace/sys/facts.def"
#undef FACT
#undef RULE
};
#define NRULES (sizeof rules / sizeof rules[0])

unsigned trace_sys_facts(long nr)
{
	return nr >= 0 && nr < NR_INDEX ? facts_by_nr[nr] : 0;
}

int trace_sys_follows_last(const struct trace_sysinfo *s, const uint64_t a[6], int k)
{
	int of = trace_sys_arg(s, TRACE_ARG_OFLAGS), fl = trace_sys_arg(s, TRACE_ARG_FLAGS);
	uint32_t f = fl >= 0 ? (uint32_t)a[fl] : 0;

	if (s->nr == TRACE_SYS_linkat) /* the old path, with AT_SYMLINK_FOLLOW; never the new */
		return k == 0 && (f & AT_SYMLINK_FOLLOW);
	if (trace_sys_facts(s->nr) & TRACE_FACT_NOFOLLOW)
		return 0;
	if (of >= 0) /* O_CREAT|O_EXCL makes the link itself fail: it is not followed */
		return !((uint32_t)a[of] & O_NOFOLLOW) &&
		       ((uint32_t)a[of] & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
	if (s->nr == TRACE_SYS_inotify_add_watch)
		return !(f & IN_DONT_FOLLOW);
	if (s->nr == TRACE_SYS_fanotify_mark)
		return !(f & FAN_MARK_DONT_FOLLOW);
	/* the *at calls' flags: AT_SYMLINK_NOFOLLOW (AT_EMPTY_PATH paths are empty) */
	return !(fl >= 0 && trace_sys_arg(s, TRACE_ARG_DIRFD) >= 0 && (f & AT_SYMLINK_NOFOLLOW));
}

int trace_sys_notify_arg(const struct trace_sysinfo *s)
{
	int a = trace_sys_arg(s, TRACE_ARG_OFLAGS);
	if (a < 0)
		a = trace_sys_arg(s, TRACE_ARG_FLAGS);
	if (a < 0)
		a = trace_sys_arg(s, TRACE_ARG_MODE);
	return a >= 0 ? a : trace_sys_arg(s, TRACE_ARG_NONE);
}

const struct trace_argrule *trace_sys_rules(long nr, size_t *n)
{
	size_t i = 0, k = 0;
	while (i < NRULES && rules[i].nr != nr)
		i++;
	while (i + k < NRULES && rules[i + k].nr == nr)
		k++;
	*n = k;
	return k ? &rules[i] : NULL;
}

static int rule_holds(const struct trace_argrule *r, const uint64_t a[6])
{
	uint32_t v = (uint32_t)a[r->arg];
	switch (r->kind) {
	case TRACE_RULE_CLEAR:
		return !(v & r->value);
	case TRACE_RULE_NOT:
		return v != r->value;
	default:
		return v == r->value && (r->and_arg < 0 || (uint32_t)a[r->and_arg] == r->and_value);
	}
}

int trace_sys_rules_errno(long nr, const uint64_t a[6])
{
	size_t n;
	const struct trace_argrule *r = trace_sys_rules(nr, &n);
	int one_of = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].kind == TRACE_RULE_ONE_OF && rule_holds(&r[i], a))
			return 0;
		if (r[i].kind == TRACE_RULE_ONE_OF)
			one_of = r[i].err;
		else if (!rule_holds(&r[i], a))
			return r[i].err;
	}
	return one_of;
}
