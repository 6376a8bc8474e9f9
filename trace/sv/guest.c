/* What a layer asks of a guest at its stop: its ids, its memory, its registers,
 * its call rewritten, and the layer's own slot of it. */
#include <sys/user.h>
#include "trace/sv/sv-internal.h"
#include "trace/tracee/tracee.h"

pid_t trace_guest_tid(const struct trace_guest *g)
{
	return g->ts->tid;
}

pid_t trace_guest_pid(const struct trace_guest *g)
{
	return trace_sv_tgid(g->ts);
}

ssize_t trace_guest_read(struct trace_guest *g, uint64_t addr, void *buf, size_t len)
{
	return trace_mem_read(g->ts->tid, addr, buf, len);
}

ssize_t trace_guest_write(struct trace_guest *g, uint64_t addr, const void *buf, size_t len)
{
	/* through page protections: scratch pages the guest cannot touch */
	return trace_mem_poke(g->ts->tid, addr, buf, len);
}

int trace_guest_get_regs(struct trace_guest *g, struct user_regs_struct *r)
{
	return trace_regs_get(g->ts->tid, r);
}

int trace_guest_set_regs(struct trace_guest *g, const struct user_regs_struct *r)
{
	return trace_regs_set(g->ts->tid, r);
}

void **trace_guest_slot(struct trace_guest *g, enum trace_layer_slot l)
{
	return &g->ts->slot[l];
}

void **trace_sv_slot(struct trace_supervisor *sv, pid_t tid, enum trace_layer_slot l)
{
	struct tstate *t = trace_sv_find(sv, tid);
	return t ? &t->slot[l] : NULL;
}

int trace_guest_set_syscall(struct trace_guest *g, long nr, const uint64_t a[6])
{
	struct user_regs_struct r;
	int rc = trace_guest_get_regs(g, &r);
	if (rc < 0)
		return rc;
	r.orig_rax = (unsigned long long)nr;
	trace_regs_set_args(&r, a);
	return trace_guest_set_regs(g, &r);
}

int trace_guest_alone(struct trace_guest *g)
{
	return g->sv->sched && trace_sched_alone(g->sv->sched, g->ts->tid, g->ts->st.nr);
}
