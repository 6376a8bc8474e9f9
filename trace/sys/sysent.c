/* The syscall table: trace/sys/syscalls.def turned into data, and lookups. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
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

/* The calls the determinism filter (TRACE_FILTER_DETERM) traps beyond its classes. */
int trace_determ_traps(long nr)
{
	switch (nr) {
	case TRACE_SYS_fstat:
	case TRACE_SYS_getdents64:
	case TRACE_SYS_sched_getaffinity:
	case TRACE_SYS_getrusage:
	case TRACE_SYS_rseq:
	case TRACE_SYS_clone:
	case TRACE_SYS_prctl:
		return 1;
	default:
		return 0;
	}
}
