/* snap: helpers shared by capture and restore (never included outside snap/). */
#ifndef SBX_SNAP_INTERNAL_H
#define SBX_SNAP_INTERNAL_H

#include <archive.h>
#include <archive_entry.h>
#include "snap/snap.h"
#include "trace/tracee/tracee.h"

/* Fill dst with the raw bytes of pages [first, first + n) of region r. */
typedef int (*snap_fill_fn)(void *ctx, const struct snap_region *r, uint64_t first,
			    uint64_t n, uint8_t *dst, struct common_err *e);
/* The one encoder: regions without a decoded bitmap get their content from fill.
 * In memory: */
int snap_encode_with(const struct snap_state *st, snap_fill_fn fill, void *ctx,
		     struct snap_image *out, struct common_err *e);
/* Restore's re-check: the verified image (bytes, decoded into st) the encoding
 * must equal; differs is set to the first byte where it does not (where the
 * shorter ends when only the lengths differ), or UINT64_MAX. */
struct snap_expect {
	const struct snap_state *st;
	const uint8_t *bytes;
	uint64_t len;
	uint64_t differs;
};
/* Where a streamed encoding reads region contents: fill as above; read the
 * same for pages known to be held (pagemap is not asked); held, when not
 * NULL, sets in bm (zeroed) the pages the kernel holds, which include every
 * non-zero page, and returns how many (-1: it cannot tell). */
struct snap_source {
	snap_fill_fn fill, read;
	int64_t (*held)(void *ctx, const struct snap_region *r, uint8_t *bm);
	void *ctx;
};
/* Streamed, hashed on a second thread as read into reused buffers. A region
 * whose held pages src tells is read once: taken as its bitmap, they are
 * streamed and checked non-zero; on a zero one the hash and the chunks go
 * back to the region's start and it is streamed again with its exact bitmap.
 * Other regions are read twice (which pages are non-zero, then those pages).
 * admit (may be NULL) sees the length before any byte goes out and may
 * refuse (an upper bound it admits is told the exact length at the end). With
 * dir, the chunks and the manifest go into dir (created, must not exist;
 * removed on failure), synced once; without it only *m's digest and length
 * are made. With x (and no dir), compared with x's bytes instead of hashed:
 * pages x's bitmaps hold are read once, in the second pass, and must not be
 * zero; the first pass reads only the others. */
int snap_encode_stream(const struct snap_state *st, const struct snap_source *src,
		       struct snap_expect *x, const char *dir, snap_admit_fn admit, void *actx,
		       struct snap_manifest *m, struct common_err *e);
/* The chunk sink (store.c): consecutive files of SNAP_CHUNK_MAX bytes in a
 * directory, made durable together with the manifest (one syncfs, not one
 * fsync per chunk); rewound to a byte of the stream, the chunks after it are
 * removed and its own is cut there. */
struct snap_chunk_sink {
	const char *dir;
	int fd;
	uint32_t index;
	size_t fill;
};
int snap_chunk_write(void *sink, const uint8_t *p, size_t n, struct common_err *e);
int snap_chunk_rewind(void *sink, uint64_t at, struct common_err *e);
int snap_manifest_write(const char *dir, const struct snap_manifest *m, struct common_err *e);
/* Pages [first, first + pages) of region r of process st into dst, through
 * t; with held 0, pagemap's absent pages read as zero without being touched
 * (pages.c). The pages of r pagemap says are held set in bm; -1 where it
 * cannot tell (a file, a SysV segment). */
int snap_pages_read(struct trace_tracee *t, int pagemap, const struct snap_state *st,
		    const struct snap_region *r, uint64_t first, uint64_t pages, uint8_t *dst,
		    int held, struct common_err *e);
int64_t snap_pages_held(int pagemap, const struct snap_region *r, uint8_t *bm);

/* Bytes of a region's page bitmap; of a decoded region's packed pages. */
size_t snap_bitmap_len(const struct snap_region *r);
size_t snap_packed_len(const struct snap_region *r);
/* Whether region i of process p of root's tree carries its content: not the
 * vdso, nor a SysV segment's attachment after its first in the tree (the
 * segment's pages are shared), nor a shared memory object's mapping. */
int snap_region_has_content(const struct snap_state *root, const struct snap_state *p, size_t i);

/* Canonical region kind of a mapping; -1 for mappings never captured (vvar…). */
int snap_map_kind(const struct trace_map *m);

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


struct codec_buf;
struct codec_rd;
/* An XSAVE area in the canonical encoding (legacy area, used components). */
void snap_put_xstate(struct codec_buf *b, uint64_t features, const uint8_t *xstate);
int snap_get_xstate(struct codec_rd *r, uint64_t features, uint8_t *xstate);
/* Version 3's thread section (threads.c), from the leader's tid on. */
void snap_threads_put(struct codec_buf *b, const struct snap_state *st);
int snap_threads_get(struct codec_rd *r, struct snap_state *st);

/* Registers of a stopped thread in canonical form (capture.c). */
int snap_canon_regs(pid_t tid, struct user_regs_struct *r, struct common_err *e);
/* Every thread of pid but pid, ascending (malloc'd). */
int snap_thread_ids(pid_t pid, pid_t **out, size_t *n, struct common_err *e);
/* Capture: the leader's clear_child_tid and robust list, then every other
 * thread's state, each by injection through t (the leader's, at insn) with
 * scratch (64 bytes, saved and put back). Threads are left as they were. */
int snap_threads_capture(struct trace_tracee *t, uint64_t scratch, struct snap_state *st,
			 struct common_err *e);
/* Restore: the leader's registrations, then each thread created by an
 * injected clone from the leader (t) and set to its state; scratch is a page
 * of the leader's. New threads are left in a ptrace stop. */
int snap_threads_restore(struct trace_tracee *t, uint64_t scratch, const struct snap_state *st,
			 const struct snap_xlayout *xl, const pid_t *made, struct common_err *e);
/* made: the host tids of st's threads already created (snap_thread_create),
 * or NULL to create them here. A thread of lead's process with th's tid,
 * ids below it used up (host tid, left in a ptrace stop): */
pid_t snap_thread_create(struct trace_tracee *lead, const struct snap_thread *th,
			 struct common_err *e);
/* One id of the run's PID namespace used up by a thread of lead's that exits at
 * once: *got is the id. */
int snap_thread_burn(struct trace_tracee *lead, int64_t *got, struct common_err *e);

/* Version 4's process tree (tree.c). A process of the guest's tree besides
 * the root: host pid, namespace pid and parent's, zombie with its wait status. */
struct snap_task {
	pid_t host;
	uint32_t ns, ns_ppid;
	int zombie;
	uint32_t wstatus;
};
/* Every process below root, breadth first through each thread's children,
 * sorted by namespace pid (malloc'd). */
int snap_tree_list(pid_t root, struct snap_task **out, size_t *n, struct common_err *e);
/* Refused: a process the run's init adopted (its parent exited), outside the tree. */
int snap_tree_orphans(pid_t root, struct common_err *e);
/* Number the pipe ends of every process (pos: inode -> index in order of first
 * use) and read each pipe's capacity and queued bytes without consuming them;
 * hosts[k] is process k's host pid (0: the root). */
int snap_pipes_capture(struct snap_state *st, const pid_t *hosts, struct common_err *e);
void snap_pipes_free(struct snap_state *st);

/* Where the skeleton of a restored tree put things (skeleton.c). */
struct snap_hosts {
	uint32_t base;     /* holders: pipe i's read end at base + 2i, its write end
			    * at base + 2i + 1, the root's fd k at base + 2 npipes + k */
	size_t nprocs;
	pid_t *proc;       /* host pid of procs[i] (0: a zombie) */
	pid_t **threads;   /* host tids of the threads: [0] the root's, [i + 1] procs[i]'s */
	uint32_t shm_fd;   /* memfd j's holder at shm_fd + j (after the standard ones) */
	uint32_t kobj_fd;  /* v6: kernel object number n's holder at kobj_fd + n - 1 */
	uint64_t shm_at, shm_len; /* the root's mapping holding the anonymous objects */
};
/* Pipes filled, then every process and thread of st (the root's threads
 * too) created in id order from root, at a fresh namespace where the root's
 * pid was the last id handed out; processes whose program is not the root's
 * run it afresh. Created tasks are left in ptrace stops. */
int snap_tree_skeleton(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		       struct snap_hosts *h, struct common_err *e);
void snap_hosts_free(struct snap_hosts *h);
/* t runs path afresh (execve injected, path and argv written at scratch; at
 * the exec's syscall-exit stop afterwards; t's memory must be opened again). */
int snap_exec_program(struct trace_tracee *t, uint64_t scratch, const char *path,
		      struct common_err *e);

/* Version 5's shared memory objects (shmem.c). A shared mapping of anonymous
 * memory, of a memfd or (version 7) of a deleted file, by its maps name: */
int snap_shm_mapping(const char *path);
/* Whether a maps name or /proc link names a deleted file (not a memfd); */
int snap_shm_deleted(const char *path);
/* and whether that file lies in a tmpfs directory of pid's view with the
 * file's device dev (where restore creates it again). */
int snap_shm_on_tmpfs(pid_t pid, const char *path, dev_t dev);
/* Whether pid's shared mapping m is of a file still linked on a tmpfs of the
 * run (a named semaphore, shm_open's memory): at its path in pid's view, one
 * link (version 7 holds it, made again at its path). */
int snap_shm_named(pid_t pid, const struct trace_map *m);
/* A deleted name of a file linked again under one other name in the same
 * directory (glibc's sem_open links its temporary file to the semaphore's
 * name): m->path becomes that name, 1; else 0. */
int snap_shm_relinked(pid_t pid, struct trace_map *m);
/* A descriptor of pid (its /proc link and stat) held as a shared memory
 * object: a memfd, or since version 7 a deleted file on a tmpfs of the run. */
struct stat;
int snap_shm_fd(pid_t pid, const char *link, const struct stat *sb, uint32_t version);
/* Capture, every process captured (its SHM regions' offsets the inode << 32,
 * paths their maps names; its SHM descriptors' size the inode): the objects
 * numbered in order of first use into st->shms, regions and descriptors
 * renumbered; what cannot be held refused. hosts[k], t[k]: process k's host
 * pid and opened tracee (0: the root). *src says where contents are read. */
struct snap_shm_src;
int snap_shm_capture(struct snap_state *st, const pid_t *hosts, struct trace_tracee *const *t,
		     struct snap_shm_src **src, struct common_err *e);
/* Pages [first, first + n) of object j's content. */
int snap_shm_fill(struct snap_shm_src *src, size_t j, uint64_t first, uint64_t n, uint8_t *dst,
		  struct common_err *e);
void snap_shm_src_free(struct snap_shm_src *src, size_t n);
void snap_shms_free(struct snap_state *st);
/* Restore, in the root before the tree is forked: every object made and
 * filled (memfds at h->shm_fd + j, anonymous memory in one mapping at h->shm_at). */
int snap_shm_holders(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		     struct snap_hosts *h, struct common_err *e);
/* Restore: SHM region r of t's process mapped again from its holder. */
int snap_shm_map(struct trace_tracee *t, const struct snap_region *r, const struct snap_state *root,
		 const struct snap_hosts *h, struct common_err *e);

/* The run's standard streams (stdstream.c; st_ino 0: none): held by the
 * capturing process at fd[k] (pipe[k]: the read end of the pipe the guest
 * writes, the output relay), or -1: the root's own fd k. */
struct snap_std { pid_t root; int fd[3], pipe[3]; dev_t dev[3]; ino_t ino[3]; };
/* The streams held here at std_fds (NULL: the root pid's own 0-2). */
void snap_std_read(pid_t root, const int *std_fds, struct snap_std *sd);
/* Descriptor f of process pid (the root: root != 0; sb its stat, f->flags
 * its fdinfo's) as a standard stream: 1 when it is one (f filled), 0 when not,
 * -1 with e when it is one that cannot be held. sd NULL: the root's 0-2 only. */
int snap_std_fd(const struct snap_std *sd, pid_t pid, int root, struct snap_fd *f,
		const struct stat *sb, struct common_err *e);
/* Copies here of pid's descriptors 0-2 (-1: not open), for the caller to close. */
void snap_std_hold(pid_t pid, int fds[3]);

/* Version 4's descriptor objects and SysV segments (fdkinds.c, fdrestore.c). */
struct stat;
struct snap_fdctx {
	pid_t pid;
	int pidfd, diag;              /* opened when first needed */
	const struct snap_state *expect; /* restore's re-check: timers as restored */
	/* version 6: the tree, its processes' host pids and this one's place (0:
	 * the root), whose earlier processes' objects are not read again; NULL:
	 * every object read here */
	const struct snap_state *tree;
	const pid_t *hosts;
	size_t k;
	uint64_t objects_read, bytes_read; /* what was read of the guest's objects */
};
void snap_fdctx_init(struct snap_fdctx *c, pid_t pid);
void snap_fdctx_close(struct snap_fdctx *c);
/* 1 when a descriptor of this kind is held as an object (socket, anon inode, pty). */
int snap_fd_is_object(const struct stat *sb);
/* A copy of the tracee's descriptor in this process: fd or -1 with e. */
int snap_fd_copy(struct snap_fdctx *c, uint32_t fd, struct common_err *e);
/* Capture the object behind f (link: its /proc/PID/fd link), or find the one an
 * earlier descriptor holds; f->size becomes the object's fd. */
int snap_fd_object(struct snap_fdctx *c, struct snap_fd *f, const char *link,
		   const struct stat *sb, struct snap_state *st, struct common_err *e);
/* Once all descriptors are captured: pair ends, masters, watches tied up
 * (version 6: those another process holds left to snap_kobjs_capture). */
int snap_objects_link(struct snap_state *st, struct common_err *e);
/* Refused: epoll set o watches a descriptor not open (o->stale) where it is held. */
int snap_epoll_stale(const struct snap_object *o, struct common_err *e);
const char *snap_obj_name(uint32_t kind);
/* One object's encoding: kind and fd, then its body; get reads the body. */
void snap_object_put(struct codec_buf *b, const struct snap_object *o);
int snap_object_get(struct codec_rd *r, struct snap_object *o);
/* Version 5: refuse an object of one process that another process holds too
 * (hosts[k]: process k's host pid; 0 the root). */
int snap_objects_unshared(const struct snap_state *st, const pid_t *hosts, struct common_err *e);
void snap_object_clear(struct snap_object *o);
/* Version 6's kernel objects held by several processes (kshared.c). Capture,
 * every process's descriptors captured: each object another process holds
 * too (by its open file, kcmp), and both ends of a pair or pty one of whose
 * ends is, moved once into root->kobjs, its descriptors made SNAP_FD_SHARED;
 * what cannot be restored so refused by name. expect: restore's re-check. */
int snap_kobjs_capture(struct snap_state *root, const pid_t *hosts,
		       const struct snap_state *expect, struct common_err *e);
void snap_kobjs_put(struct codec_buf *b, const struct snap_state *root);
/* Decode: the table, then every descriptor naming it and every tie checked. */
int snap_kobjs_get(struct codec_rd *r, struct snap_state *root);
void snap_kobjs_free(struct snap_state *root);
/* Restore, in the root before the tree is forked: every object made at its
 * holder h->kobj_fd + number - 1, epoll sets empty. */
int snap_kobjs_holders(struct trace_tracee *root, uint64_t scratch, const struct snap_state *st,
		       struct snap_hosts *h, struct common_err *e);
/* Restore, process k's descriptors in place: the watches of the sets it owns. */
int snap_kobjs_watch(struct trace_tracee *t, uint64_t scratch, const struct snap_state *p,
		     const struct snap_state *root, size_t k, struct common_err *e);
void snap_objects_put(struct codec_buf *b, const struct snap_state *st);
int snap_objects_get(struct codec_rd *r, struct snap_state *st);
int snap_objects_check(struct codec_rd *r, const struct snap_state *st);
void snap_objects_free(struct snap_state *st);
/* Restore every object at its descriptors (after the files), epoll watches last. */
int snap_objects_restore(struct trace_tracee *t, uint64_t scratch, const struct snap_state *st,
			 struct common_err *e);

/* SysV segments (sysv.c). A mapping named /SYSVkey (deleted) is one. */
int snap_sysv_mapping(const char *path);
/* The segment id of pid's SysV mapping starting at start (its maps inode). */
int snap_sysv_id(pid_t pid, uint64_t start, uint32_t *id, struct common_err *e);
/* Capture: each attached segment's key, size, mode, removal, by injected
 * shmctl(IPC_STAT) through scratch (put back); partial attachments refused. */
int snap_segments_capture(struct trace_tracee *t, uint64_t scratch, struct snap_state *st,
			  struct common_err *e);
/* Capture, every process's segments read: all of them in the root's list. */
int snap_segments_gather(struct snap_state *st, struct common_err *e);
/* Capture: refuse a segment of pid's IPC namespace that st does not hold
 * (when pid has a namespace of its own, as every sbx-run guest). */
int snap_segments_unattached(pid_t pid, const struct snap_state *st, struct common_err *e);
/* Restore: every segment made again under its id in pid's IPC namespace. */
int snap_segments_create(pid_t pid, const struct snap_state *st, struct common_err *e);
/* Restore: the segment of region r attached at r's address (at its offset 0). */
int snap_segment_attach(struct trace_tracee *t, const struct snap_region *r, struct common_err *e);
/* Restore, once attached and filled: removed segments marked for removal again. */
int snap_segments_finish(struct trace_tracee *t, const struct snap_state *st,
			 struct common_err *e);

/* The signal mask while syscalls are injected: everything blocked but SIGTRAP
 * (the kernel resets the action of a blocked SIGTRAP it forces). */
#define SNAP_INJECT_MASK (~0ull & ~(1ull << 4))
/* A restore into a Funded lease (sbx-restore, a chain's next link), prepared. */
struct snap_restore_ctx {
	struct snap_image im;      /* the state points into these bytes */
	struct snap_state st;
	uint8_t digest[32];
	char *ns;
	const char *store, *target, *hex;
	uint64_t charge;           /* namespace bytes the restore receipt charges */
};
/* Every precondition before anything changes (SPEC §8.4): the snapshot hex loaded
 * and decoded, target Funded with the same principal, host program and image, the
 * state within its bounds; *image its image path (malloc'd). r->store is the caller's. */
int snap_restore_prepare(struct lease_store *s, const char *hex, const char *target,
			 struct snap_restore_ctx *r, char **image, struct common_err *e);
/* trace_run_opts.restore_exec: all or nothing, the cells, the guest, the receipt. */
int snap_restore_at_exec(void *ctx, pid_t pid, struct common_err *e);
/* The same prepared state, released. */
void snap_restore_ctx_free(struct snap_restore_ctx *r);
/* The stored snapshot hex, found where the store says, verified against its
 * registered manifest (meta: its meta.json, may be NULL) (snap/cli.c). */
int snap_load(struct lease_store *s, const char *hex, struct snap_image *im, json_t **meta,
	      struct common_err *e);

/* A restored --deterministic run's PID namespace hands out next the id the run's
 * did: ids up to its record's last are used up by threads of pid that exit at
 * once (snap/determ.c). */
int snap_determ_ids(pid_t pid, const struct snap_state *st, struct common_err *e);

/* sbx-run --chain N (snap/chain.c): trace_snap_ops.chain. */
int snap_chain_run(struct trace_run_opts *o);

int snap_inject(struct trace_tracee *t, const char *what, long nr, uint64_t a0, uint64_t a1,
		uint64_t a2, uint64_t a3, int64_t *ret, struct common_err *e);

/* tarlib.c: libarchive's functions that export and import call, resolved by
 * snap_tar_load (0, or -1 with e when libarchive cannot be loaded). */
struct snap_tar_api {
	__typeof__(archive_error_string) *error_string;
	__typeof__(archive_entry_new) *entry_new;
	__typeof__(archive_entry_free) *entry_free;
	__typeof__(archive_entry_set_pathname) *entry_set_pathname;
	__typeof__(archive_entry_set_filetype) *entry_set_filetype;
	__typeof__(archive_entry_set_perm) *entry_set_perm;
	__typeof__(archive_entry_set_size) *entry_set_size;
	__typeof__(archive_entry_pathname) *entry_pathname;
	__typeof__(archive_entry_filetype) *entry_filetype;
	__typeof__(archive_entry_hardlink) *entry_hardlink;
	__typeof__(archive_entry_symlink) *entry_symlink;
	__typeof__(archive_entry_size) *entry_size;
	__typeof__(archive_write_new) *write_new;
	__typeof__(archive_write_set_format_pax_restricted) *write_set_format_pax_restricted;
	__typeof__(archive_write_open_filename) *write_open_filename;
	__typeof__(archive_write_header) *write_header;
	__typeof__(archive_write_data) *write_data;
	__typeof__(archive_write_close) *write_close;
	__typeof__(archive_write_free) *write_free;
	__typeof__(archive_read_new) *read_new;
	__typeof__(archive_read_support_format_tar) *read_support_format_tar;
	__typeof__(archive_read_support_format_gnutar) *read_support_format_gnutar;
	__typeof__(archive_read_open_filename) *read_open_filename;
	__typeof__(archive_read_next_header) *read_next_header;
	__typeof__(archive_read_data) *read_data;
	__typeof__(archive_read_free) *read_free;
};
extern struct snap_tar_api snap_tar;
int snap_tar_load(struct common_err *e);

/* Version 8's tmpfs entries (tmpfs.c): pid's view of the run's own /tmp and
 * /dev/shm walked without following a symlink, into root (files mapped shared,
 * root->shms' named ones, left out); decoded bounded; recreated in pid's. */
int snap_tmps_capture(struct snap_state *root, pid_t pid, struct common_err *e);
int snap_tmps_get(struct codec_rd *r, struct snap_state *root);
int snap_tmps_write(pid_t pid, const struct snap_state *root, struct common_err *e);
void snap_tmps_free(struct snap_state *root);

#endif
