/* trace/inspect: what inspect.c shares with its neighbours in the folder. */
#ifndef SBX_TRACE_INSPECT_INTERNAL_H
#define SBX_TRACE_INSPECT_INTERNAL_H

#include <limits.h>
#include "trace/inspect/inspect.h"

/* Sealed pages (pathpage.c): a decided path string in a memfd sealed against
 * every write and mapped shared and read-only into the guest, so no thread of
 * it can change the bytes before the kernel reads them; while one is live, a
 * call that would unmap or replace it is refused. */
struct inspect_pages;
struct inspect_pages *inspect_pages_new(void);
void inspect_pages_free(struct inspect_pages *r);
/* At tid's seccomp stop: s in a fresh sealed page of its memory, at *addr.
 * name_addr: guest bytes memfd_create may take as a name (a NUL, ideally).
 * 0; -ESRCH (the thread died); -EAGAIN (the guest raced for the page: a
 * descriptor swapped, a writable mapping made); or -errno. */
int inspect_page_place(struct inspect_pages *r, pid_t tid, uint64_t name_addr, const char *s,
		       uint64_t *addr);
/* The k-th path argument of call nr at st pointed at s in a sealed page
 * (inspect_page_place): 0 with args updated, or -errno. */
int inspect_path_arg(struct inspect_pages *r, const struct trace_stop *st, long nr, int k,
		     const char *s, uint64_t args[6]);
/* Each path argument of st resolved inside the guest's root as the kernel
 * will (trace_path_real, the last component followed as the call follows it);
 * "" where there is none or it cannot be resolved. ENOTDIR when the kernel
 * would stop at a component that is no directory, else 0. */
int inspect_real_paths(const struct trace_stop *st, char real[2][PATH_MAX]);
/* What the k-th path's sealed page holds: its resolved form, so the call runs on
 * exactly what was decided, or the guest's own spelling where that form is not
 * the same file (an exec's, a /proc/PID path, one through a deleted directory). */
const char *inspect_page_form(const struct trace_stop *st, int k, const char real[2][PATH_MAX]);
/* tid's live pages unmapped (at its seccomp stop, or at_exit at its exit stop). */
void inspect_pages_drop(struct inspect_pages *r, pid_t tid, int at_exit);
/* tid left: its pages are forgotten (what shares its memory may still map them). */
void inspect_pages_forget(struct inspect_pages *r, pid_t tid);
/* The errno a call at its stop gets because it would unmap, move or replace a
 * live page of its own memory (munmap, mremap, mmap MAP_FIXED, shmat, remap_file_pages),
 * or 0 (*flight: the call is in flight until inspect_pages_call_done). */
int inspect_pages_remap_errno(struct inspect_pages *r, const struct trace_stop *st, int *flight);
/* The call stopped at its entry has run: its range no longer threatens a page. */
void inspect_pages_call_done(struct inspect_pages *r, pid_t tid);

#endif
