/* snap: helpers shared by capture and restore (never included outside snap/). */
#ifndef SBX_SNAP_INTERNAL_H
#define SBX_SNAP_INTERNAL_H

#include "snap/snap.h"

/* Fill dst with the raw bytes of pages [first, first + n) of region r. */
typedef int (*snap_fill_fn)(void *ctx, const struct snap_region *r, uint64_t first,
			    uint64_t n, uint8_t *dst, struct common_err *e);
/* The one encoder: regions without a decoded bitmap get their content from fill.
 * In memory: */
int snap_encode_with(const struct snap_state *st, snap_fill_fn fill, void *ctx,
		     struct snap_image *out, struct common_err *e);
/* Streamed: every region read through fill twice (which pages are non-zero,
 * then those pages, straight into reused buffers) and hashed on a second
 * thread. The exact length is known before any byte goes out: admit (may be
 * NULL) sees it first and may refuse. With dir, the chunks and the manifest go
 * into dir (created, must not exist; removed on failure), synced once; without
 * it only *m's digest and length are made. */
int snap_encode_stream(const struct snap_state *st, snap_fill_fn fill, void *ctx,
		       const char *dir, snap_admit_fn admit, void *actx,
		       struct snap_manifest *m, struct common_err *e);

/* A syscall run inside a stopped tracee from a `syscall` instruction at insn. */
struct snap_tracee {
	pid_t pid;
	int memfd;          /* /proc/pid/mem, O_RDWR */
	uint64_t insn;      /* address of a 0f 05 */
};
int snap_tracee_open(struct snap_tracee *t, pid_t pid, struct common_err *e);
void snap_tracee_close(struct snap_tracee *t);
/* Find a syscall instruction: in [vdso] first, else in any executable mapping. */
int snap_find_syscall(struct snap_tracee *t, struct common_err *e);
/* Run syscall nr with args; *ret gets rax. Registers are left as the syscall
 * left them: callers save and restore them. */
int snap_inject(struct snap_tracee *t, long nr, const uint64_t a[6], int64_t *ret,
		struct common_err *e);
int snap_mem_read(struct snap_tracee *t, uint64_t addr, void *buf, size_t len,
		  struct common_err *e);
int snap_mem_write(struct snap_tracee *t, uint64_t addr, const void *buf, size_t len,
		   struct common_err *e);

/* One line of /proc/pid/maps. */
struct snap_map {
	uint64_t start, end, offset;
	char perms[5];
	char path[SNAP_STR_MAX];
};
/* All mappings of pid (malloc'd array). */
int snap_read_maps(pid_t pid, struct snap_map **out, size_t *n, struct common_err *e);
/* start_brk from /proc/pid/stat. */
int snap_read_start_brk(pid_t pid, uint64_t *start_brk, struct common_err *e);
/* Canonical region kind of a mapping; -1 for mappings never captured (vvar…). */
int snap_map_kind(const struct snap_map *m);

/* A standard-format XSAVE layout: each enabled component's offset and size. */
struct snap_xlayout {
	uint64_t xcr0;
	uint32_t size;
	uint32_t off[SNAP_XCOMP], len[SNAP_XCOMP];
};
int snap_xlayout_host(struct snap_xlayout *l, struct common_err *e);
int snap_xlayout_check(const struct snap_xlayout *l, struct common_err *e);
/* host buffer -> used components (features) in the canonical layout */
int snap_xstate_from_host(const struct snap_xlayout *l, const uint8_t *buf, size_t len,
			  uint64_t *features, uint8_t *out, struct common_err *e);
/* refuse, naming it, a used component the layout lacks; drop a default PKRU */
int snap_xstate_fit(const struct snap_xlayout *l, uint64_t *features, const uint8_t *st,
		    struct common_err *e);
/* canonical -> host buffer (its bytes 464..511 kept), XSTATE_BV = features */
int snap_xstate_to_host(const struct snap_xlayout *l, uint64_t features, const uint8_t *st,
			uint8_t *buf, size_t len, struct common_err *e);
/* the feature needing arch_prctl(ARCH_REQ_XCOMP_PERM) first, or 0 */
uint64_t snap_xstate_perm(uint64_t features);
uint32_t snap_xcomp_len(int i);
uint32_t snap_xcomp_off(int i);
#define SNAP_XLEGACY 416u /* x87, MXCSR, SSE; the rest of the legacy area is reserved */
const char *snap_xcomp_name(int i);

int snap_valid_key(const char *k);

/* The signal mask while syscalls are injected: everything blocked but SIGTRAP
 * (the kernel resets the action of a blocked SIGTRAP it forces). */
#define SNAP_INJECT_MASK (~0ull & ~(1ull << 4))
#endif
