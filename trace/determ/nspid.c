/* sbx-run --deterministic (SPEC §9): the ids of the run's tasks inside its PID
 * namespace, which deterministic traces record instead of host ids. The
 * recorder asks for three at every event: a cache answers, /proc only at a
 * task's first look (reading /proc/PID/status took a fifth of the
 * supervisor's time in make -j2). */
#include <pthread.h>
#include "trace/determ/determ.h"
#include "trace/tracee/tracee.h"

#define NSPID_CACHE 65536 /* direct-mapped by host id: 512 KiB */

static struct { pid_t host, ns; } nspid_cache[NSPID_CACHE];
static pthread_mutex_t nspid_lock = PTHREAD_MUTEX_INITIALIZER; /* runs in threads at once */

static size_t slot_of(pid_t host)
{
	return (size_t)(uint32_t)host % NSPID_CACHE;
}

pid_t trace_determ_nspid(pid_t host)
{
	size_t i = slot_of(host);
	pid_t ns = 0;
	pthread_mutex_lock(&nspid_lock);
	if (host && nspid_cache[i].host == host)
		ns = nspid_cache[i].ns;
	pthread_mutex_unlock(&nspid_lock);
	if (ns)
		return ns;
	/* an entry lives until a task of that id is made (trace_determ_nspid_forget),
	 * so a process already reaped is still answered */
	struct trace_status s;
	if (host <= 0 || trace_status_read(host, &s) != 0)
		return 0;
	ns = trace_status_nspid(&s);
	trace_status_free(&s);
	if (ns) {
		pthread_mutex_lock(&nspid_lock);
		nspid_cache[i].host = host;
		nspid_cache[i].ns = ns;
		pthread_mutex_unlock(&nspid_lock);
	}
	return ns;
}

void trace_determ_nspid_forget(pid_t host)
{
	size_t i = slot_of(host);
	pthread_mutex_lock(&nspid_lock);
	if (nspid_cache[i].host == host)
		nspid_cache[i].host = 0;
	pthread_mutex_unlock(&nspid_lock);
}
