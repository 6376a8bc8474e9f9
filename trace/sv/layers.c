/* The supervisor's layers (enum trace_layer_slot), each hook walked over them in
 * their order: the one place the loop calls into metering, recording, inspection,
 * determinism and the run. */
#include "trace/sv/sv.h"
#include "trace/sv/sv-internal.h"

enum stop_hook { HOOK_ENTRY, HOOK_CALL, HOOK_EXIT };

/* A syscall stop through the layers; the first that fails ends the walk. */
static int layers_stop(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st,
		       enum stop_hook k)
{
	EACH_LAYER(sv, l) {
		int (*f)(void *, struct trace_guest *, struct trace_stop *) =
			k == HOOK_ENTRY ? l->on_entry : k == HOOK_CALL ? l->on_call : l->on_exit;
		if (f && f(l->ctx, g, st) < 0)
			return -1;
	}
	return 0;
}

int trace_sv_layers_entry(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st)
{
	return layers_stop(sv, g, st, HOOK_ENTRY);
}

int trace_sv_layers_exit(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st)
{
	return layers_stop(sv, g, st, HOOK_EXIT);
}

int trace_sv_layers_call(struct trace_supervisor *sv, struct trace_guest *g, struct trace_stop *st)
{
	return layers_stop(sv, g, st, HOOK_CALL);
}

int trace_sv_layers_start(struct trace_supervisor *sv)
{
	EACH_LAYER(sv, l)
		if (l->on_start && l->on_start(l->ctx, sv) < 0)
			return -1;
	return 0;
}

int trace_sv_layers_exec(struct trace_supervisor *sv, pid_t pid, pid_t ppid, const char *path)
{
	EACH_LAYER(sv, l)
		if (l->on_exec && l->on_exec(l->ctx, sv, pid, ppid, path) < 0)
			return -1;
	return 0;
}

void trace_sv_layers_spawn(struct trace_supervisor *sv, pid_t parent, pid_t child,
			 unsigned long flags)
{
	EACH_LAYER(sv, l)
		if (l->on_spawn)
			l->on_spawn(l->ctx, sv, parent, child, flags);
}

void trace_sv_layers_order(struct trace_supervisor *sv, pid_t tid)
{
	EACH_LAYER(sv, l)
		if (l->on_order)
			l->on_order(l->ctx, tid);
}

void trace_sv_layers_turn(struct trace_supervisor *sv, pid_t tid)
{
	struct tstate *t = trace_sv_find(sv, tid);
	if (!t)
		return;
	struct trace_guest g = { sv, t };
	EACH_LAYER(sv, l)
		if (l->on_turn)
			l->on_turn(l->ctx, &g);
}

void trace_sv_layers_proc_exit(struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	EACH_LAYER(sv, l)
		if (l->on_proc_exit)
			l->on_proc_exit(l->ctx, sv, tid, wstatus);
}

/* Every layer's periodic work runs; any of them may stop the guest. */
int trace_sv_layers_tick(struct trace_supervisor *sv)
{
	int stop = 0;
	EACH_LAYER(sv, l)
		if (l->on_tick && l->on_tick(l->ctx, sv))
			stop = 1;
	return stop;
}

int trace_sv_layers_fd(struct trace_supervisor *sv, int fd)
{
	int rc = 0;
	EACH_LAYER(sv, l)
		if (l->on_fd && l->on_fd(l->ctx, sv, fd) < 0)
			rc = -1;
	return rc;
}

void trace_sv_layers_signal(struct trace_supervisor *sv, pid_t tid, int sig)
{
	EACH_LAYER(sv, l)
		if (l->on_signal)
			l->on_signal(l->ctx, sv, tid, sig);
}

int trace_sv_layers_fault(struct trace_supervisor *sv, struct trace_guest *g, int sig)
{
	EACH_LAYER(sv, l)
		if (l->on_fault && l->on_fault(l->ctx, g, sig) > 0)
			return 1;
	return 0;
}
