/* A host program embedding libsbx's supervisor with one test layer in every slot:
 * each hook point's walk order and the per-task slots' lifecycle, for the tests.
 * usage: layer_host MODE PROGRAM [ARG...]
 * MODE: walk (every layer passes), refuse (the determ slot fails its first entry) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/sv/sv.h"

extern char **environ;

static const char names[TRACE_LAYERS + 1] = "CIMDSRA"; /* one letter per slot */
static const char *mode;
static char seen[8][TRACE_LAYERS + 1]; /* per hook point: the slots of its first walk */
static int closed[8];                 /* that walk is over: the control layer came again */
static int slot_mismatch, slots_set, freed_at_exit, freed_by_sv;

enum { P_START, P_ENTRY, P_EXEC, P_SPAWN, P_EXIT, P_TICK, P_COUNT };
static const char *const point[P_COUNT] = { "start", "entry", "exec", "spawn", "proc_exit",
					    "tick" };

struct lay {
	enum trace_layer_slot slot;
};
static struct lay lays[TRACE_LAYERS];

/* Appends this layer's letter to the point's first walk, which the control
 * layer opens and its next call closes. */
static void saw(struct lay *l, int p)
{
	size_t n = strlen(seen[p]);
	if (l->slot == TRACE_LAYER_CONTROL && n)
		closed[p] = 1;
	if (!closed[p] && n < TRACE_LAYERS)
		seen[p][n] = names[l->slot];
}

static int on_start(void *ctx, struct trace_supervisor *sv)
{
	(void)sv;
	saw(ctx, P_START);
	return 0;
}

static int on_entry(void *ctx, struct trace_guest *g, struct trace_stop *st)
{
	struct lay *l = ctx;
	(void)st;
	saw(l, P_ENTRY);
	/* each layer's slot is its own: one tag per layer, never another's */
	void **s = trace_guest_slot(g, l->slot);
	if (*s && *(int *)*s != (int)l->slot)
		slot_mismatch++;
	if (strcmp(mode, "refuse") == 0 && l->slot == TRACE_LAYER_DETERM)
		return -1;
	return 0;
}

static int on_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid, const char *path)
{
	(void)sv;
	(void)pid;
	(void)ppid;
	(void)path;
	saw(ctx, P_EXEC);
	return 0;
}

static void on_spawn(void *ctx, struct trace_supervisor *sv, pid_t parent, pid_t child,
		     unsigned long flags)
{
	struct lay *l = ctx;
	void **s = trace_sv_slot(sv, child, l->slot);
	(void)parent;
	(void)flags;
	saw(l, P_SPAWN);
	if (s && !*s) {
		*s = malloc(sizeof(int));
		*(int *)*s = (int)l->slot;
		slots_set++;
	}
}

/* The even slots free theirs at the task's exit; the supervisor frees the rest. */
static void on_proc_exit(void *ctx, struct trace_supervisor *sv, pid_t tid, int wstatus)
{
	struct lay *l = ctx;
	void **s = trace_sv_slot(sv, tid, l->slot);
	(void)wstatus;
	saw(l, P_EXIT);
	if (s && *s && l->slot % 2 == 0) {
		if (*(int *)*s != (int)l->slot)
			slot_mismatch++;
		free(*s);
		*s = NULL;
		freed_at_exit++;
	}
}

static int on_tick(void *ctx, struct trace_supervisor *sv)
{
	(void)sv;
	saw(ctx, P_TICK);
	return 0;
}

static void slot_free(void *ctx, void *slot)
{
	(void)ctx;
	free(slot);
	freed_by_sv++;
}

int main(int argc, char **argv)
{
	struct trace_layer layers[TRACE_LAYERS];
	struct trace_result res;
	struct common_err e = {0};
	char ns[] = "/tmp/layer_host.XXXXXX";

	common_set_progname("layer_host");
	if (argc < 3 || argv[2][0] != '/') {
		fprintf(stderr, "usage: layer_host walk|refuse /PROGRAM [ARG...]\n");
		return 2;
	}
	mode = argv[1];
	for (int i = 0; i < TRACE_LAYERS; i++) {
		lays[i].slot = (enum trace_layer_slot)i;
		layers[i] = (struct trace_layer){
			.ctx = &lays[i], .on_start = on_start, .on_entry = on_entry, .on_exec = on_exec,
			.on_spawn = on_spawn, .on_proc_exit = on_proc_exit, .on_tick = on_tick,
			.slot_free = slot_free,
		};
	}
	struct trace_config cfg = {
		.argv = (const char *const *)argv + 2, .envp = (const char *const *)environ,
		.image = argv[2], .ns_dir = mkdtemp(ns), .trace_classes = TRACE_CLASS_FILE,
		.state_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .layers = layers,
	};
	if (!cfg.ns_dir || trace_run(&cfg, &res, &e) < 0)
		common_die(SBX_EXIT_SBX, &e);
	for (int p = 0; p < P_COUNT; p++)
		printf("%s: %s\n", point[p], seen[p]);
	printf("slots: set %d, freed at exit %d, freed by the supervisor %d, mismatched %d\n",
	       slots_set, freed_at_exit, freed_by_sv, slot_mismatch);
	printf("stopped: %s\n", res.stop_reason[0] ? res.stop_reason : "no");
	common_rm_rf(ns, NULL);
	return 0;
}
