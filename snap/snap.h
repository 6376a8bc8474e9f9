/* snap: checkpoint and restore of a stopped tracee process with all its threads,
 * the canonical snapshot encoding and its chunked persistence (SPEC §8). */
#ifndef SBX_SNAP_H
#define SBX_SNAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "libcommon/common.h"
#include "trace/trace.h"

#define SNAP_DOMAIN "LayerX/programs/sandbox/snapshot/v1"
#define SNAP_VERSION 8u          /* 2 and 3 still decode and restore: one process; 4: a tree */
#define SNAP_THREADS_MAX 1024u   /* decoder bound: threads besides the leader */
#define SNAP_PROCS_MAX 256u      /* decoder bound: processes besides the root */
#define SNAP_PIPES_MAX 1024u     /* decoder bound: pipes of the tree */
#define SNAP_PIPE_BYTES_MAX (1u << 20) /* decoder bound: one pipe's capacity */
#define SNAP_DETERM_TAG "determinism/v1" /* the optional record after the cells */
#define SNAP_DETERM_MAX (32u << 20) /* decoder bound: the determinism record */
#define SNAP_CHUNK_MAX 65536u
#define SNAP_MANIFEST_LEN 44u
#define SNAP_NSIG 64
#define SNAP_NRLIMIT 16
#define SNAP_NUSAGE 8            /* LEASE_DIM_COUNT, in SPEC §4.1 order */
#define SNAP_NREGS 27            /* struct user_regs_struct, in its order */
#define SNAP_PAGE 4096u
#define SNAP_MAX_BYTES ((uint64_t)2 << 30) /* decoder bound for one snapshot */
#define SNAP_STR_MAX 4096u       /* paths, keys, names */
#define SNAP_XSTATE_MAX 16384u   /* a host's standard-format XSAVE area, at most */
#define SNAP_XCOMP 19            /* XSAVE components 0..18 (AMX tile data) */
#define SNAP_XKNOWN 0x602ffull   /* x87 SSE AVX MPX AVX-512 PKRU AMX */
#define SNAP_XCANON_SIZE 11008u  /* the canonical layout of every known component */

/* Canonical encoding (all integers little-endian, strings = u32 length + bytes):
 *   str domain, u32 version,
 *   meta: str lease, str principal, str host_program, str ns_prefix, 32 image,
 *         u64 step, 32 trace_head, u64 usage[8],
 *   machine: u64 xfeatures (the XSAVE components in use: bits 0 and 1 always,
 *         others only among SNAP_XKNOWN and only when not at their init value),
 *   u64 regs[27] (orig_rax = -1: never inside a syscall),
 *   xstate: the legacy area's first 416 bytes (x87, MXCSR, SSE; byte 5 zero),
 *         then for each feature bit i >= 2 in ascending order: u32 size (the
 *         component's architectural size) and its bytes; independent of the
 *         host's layout (CPUID leaf 0xD), so a snapshot moves between CPUs,
 *   u64 sigmask, sigaction[64] = {u64 handler, flags, restorer, mask},
 *   altstack {u64 sp, u32 flags, u64 size},
 *   u32 npending, pending[] in queue order, the thread's then the process's =
 *         {u32 signal, u32 shared, 128 siginfo},
 *   rseq registration {u64 area, u32 length, u32 signature} (zeros: none; the
 *         kernel-written cpu/node/cid words of the area are encoded as
 *         0, 0xffffffff, 0, 0),
 *   version 3 only: u32 leader tid, u64 clear_child_tid, u64 robust list head,
 *         u64 robust list length, u32 nthreads, thread[] sorted by tid (every
 *         other thread of the process, tids distinct from the leader's) =
 *         {u32 tid, u64 clear_child_tid, u64 robust head, u64 robust length,
 *          u64 xfeatures, u64 regs[27], xstate as above, u64 sigmask,
 *          altstack {u64 sp, u32 flags, u64 size}, u32 npending, pending[]
 *          (thread-directed only, shared = 0), rseq {u64, u32, u32}},
 *   u64 start_brk, u64 brk, u32 umask,   (the process body runs from xfeatures
 *         to the regions; version 4 repeats it for every other process)
 *   str cwd, rlimit[16] = {u64 cur, max},
 *   u32 nfds, fd[] sorted by number = {u32 fd, u32 kind, u32 flags, u64 pos,
 *         str path, 32 content hash, u64 size (an object's: the fd of its object)},
 *   version 4 and up: the descriptor objects and SysV segments (fdkinds.c;
 *         in version 4 empty in every process but the root; segments always are),
 *   u32 nregions, region[] sorted by start, adjacent compatible ones merged =
 *         {u64 start, u64 end, u32 prot (read 1, write 2, exec 4, and 8 for a
 *          shared read-only file mapping), u32 kind, u64 offset, str path,
 *          content: bitmap of non-zero pages (ceil(pages/8) bytes) + those pages;
 *          none for the vdso, whose address only is recorded, nor for a SysV
 *          segment's attachments after its first, nor for a shared memory
 *          object's (its content is the object's)},
 *   version 4 and up: str exe (the root's program: run afresh on restore when
 *         it is not the image), u32 nprocs, proc[] sorted by pid (every other process of
 *         the guest's tree, pids distinct from every tid) = {u32 pid, u32 ppid
 *         (the root's or an earlier proc's pid), u32 zombie (0 or 1), then a
 *         zombie's u32 wait status, a live one's str exe (its program, run
 *         again on restore when it is not the root's) and process body},
 *         u32 npipes, pipe[] in order of first use (by process, then fd) =
 *         {u32 capacity, u64 len, bytes (len <= capacity)},
 *   version 5 and up: u32 nshms, shm[] in order of first use (by process, its
 *         descriptors then its regions) = {u32 kind, u32 sealable, str name,
 *         u64 size, version 7: u32 mode (a file's permission bits, else
 *         0), content: bitmap + non-zero pages as a region's, of the
 *         pages [0, size rounded up)}; version 5 processes may hold objects
 *         and SysV attachments (the root holds every segment's record, the
 *         first attachment in the tree its content),
 *   version 6 and up: u32 nkobjs, kobj[] in order of first use (by process,
 *         then fd) = an object as in fdkinds.c whose fd is its number (1..n)
 *         and a pair's peer its pair's number, then for an epoll set u32 owner
 *         (0 the root, i + 1 proc[i]: the process whose descriptor numbers its
 *         watches name): the kernel objects held by several processes (and
 *         both ends of a socket pair or pty one of whose ends is), captured
 *         once; descriptors of kind SNAP_FD_SHARED name them,
 *   version 8 and up: u32 ntmps, tmp[] sorted by mount then path (bytewise) =
 *         {u32 mount (0 /tmp, 1 /dev/shm: the run's own tmpfs), str path
 *         (relative, no empty, "." or ".." component; its parent an earlier
 *         directory), u32 kind (snap_tmp_kind), u32 mode (permission bits),
 *         then a file's u64 size and bytes, a symlink's str target}: what the
 *         run's tmpfs holds that no descriptor or mapping does (snap/tmpfs.c),
 *   u32 ncells, cell[] sorted by key = {str key, u64 len, bytes},
 *   optional, only a --deterministic run's snapshot at a deterministic point
 *         (sbx-run --snapshot-at-step): str SNAP_DETERM_TAG, u64 len (at most
 *         SNAP_DETERM_MAX), the determinism record (trace/determ/state.c).
 * The digest is SHA-256 of exactly these bytes. */

enum snap_region_kind {
	SNAP_REGION_ANON = 0, SNAP_REGION_FILE = 1, SNAP_REGION_HEAP = 2,
	SNAP_REGION_STACK = 3, SNAP_REGION_VDSO = 4,
	SNAP_REGION_SYSV = 5, /* v4: an attached SysV segment; offset = id << 32 | page offset */
	SNAP_REGION_SHM = 6,  /* v5: a shared memory object of the tree mapped shared
			       * (writable); offset = object << 32 | byte offset */
};
enum snap_fd_kind {
	SNAP_FD_STREAM = 0, /* a standard stream the supervisor gave (pipe, tty): the
			     * root's own 0-2 (pos 0) kept as is; v4: any other a
			     * copy of stream pos (0-2) */
	SNAP_FD_FILE = 1,   /* regular file: reopened by path, content hash checked */
	SNAP_FD_DIR = 2,
	SNAP_FD_DEV = 3,    /* character device: reopened by path */
	SNAP_FD_PIPE = 4,   /* v4: an end of pipe number pos of the tree (path ""), flags
			     * O_ACCMODE, O_NONBLOCK and O_CLOEXEC; v5: of a named
			     * FIFO, its path and its mode in size */
	SNAP_FD_OBJECT = 5, /* v4: a kernel object of the object table (eventfd, socket…) */
	SNAP_FD_SHM = 6,    /* v5: a memfd's (v7: a deleted file's) descriptor (path ""): size is its object's
			     * number, pos the offset of the one open file every
			     * descriptor of it shares; flags O_CLOEXEC, O_NONBLOCK, O_APPEND */
	SNAP_FD_SHARED = 7, /* v6: a kernel object of the tree's table (path ""): size
			     * is its number; flags O_CLOEXEC, O_NONBLOCK */
};
/* A pipe of the tree: its capacity (F_GETPIPE_SZ) and the bytes queued in it. */
struct snap_pipe {
	uint32_t capacity;
	uint64_t len;
	const uint8_t *bytes;      /* decoded: into the input; captured: owned */
	uint64_t dev, ino;         /* captured only: which pipe or FIFO it is */
};
/* What an object is (version 4); each restored by its own calls. */
enum snap_obj_kind {
	SNAP_OBJ_EVENTFD = 0, SNAP_OBJ_TIMERFD = 1, SNAP_OBJ_SIGNALFD = 2, SNAP_OBJ_EPOLL = 3,
	SNAP_OBJ_UNIX = 4,       /* a Unix socket: unconnected, listening, or one end of a pair */
	SNAP_OBJ_TCP_LISTEN = 5, /* a listening TCP socket (loopback or any address) */
	SNAP_OBJ_PTY_MASTER = 6, SNAP_OBJ_PTY_SLAVE = 7,
};
enum snap_sock_state { SNAP_SOCK_UNCONNECTED = 0, SNAP_SOCK_PAIRED = 1, SNAP_SOCK_LISTENING = 2 };
#define SNAP_OBJ_MAX 4096u          /* decoder bound: objects, watches, segments */
#define SNAP_QUEUE_MAX (64u << 20)  /* decoder bound: bytes queued in one socket */
#define SNAP_MSGS_MAX 65536u        /* decoder bound: datagrams queued in one socket */
#define SNAP_SOCKADDR_MAX 108u      /* sun_path; an inet address is 16 bytes at most */
#define SNAP_TERMIOS 44u            /* struct termios2 */
#define SNAP_PTY_MAX 4096u          /* decoder bound: pty numbers */

/* a region's prot bit: a read-only file mapping shared with the file's page
 * cache; restored shared, once its content is seen to be the recorded one */
#define SNAP_PROT_SHARED 8u

struct snap_region {
	uint64_t start, end;
	uint32_t prot, kind;
	uint64_t offset;
	char *path;                /* file regions only, else NULL */
	/* content, decoded form: bitmap of non-zero pages and the packed pages */
	const uint8_t *bitmap, *packed;
};
/* A shared memory object of the tree (version 5): captured once, mapped shared
 * again by every process that had it, at the same addresses. */
enum snap_shm_kind {
	SNAP_SHM_ANON = 0 /* MAP_SHARED|MAP_ANONYMOUS */, SNAP_SHM_MEMFD = 1,
	SNAP_SHM_FILE = 2,  /* v7: a deleted file on a tmpfs of the run */
	SNAP_SHM_NAMED = 3  /* v7: a file on a tmpfs of the run, mapped shared, still linked */
};
#define SNAP_SHM_NAME_MAX 249u     /* memfd_create's bound on a name */
#define SNAP_SHM_PATH_MAX 4000u    /* a deleted file's path (it fits a scratch page) */
struct snap_shm {
	uint32_t kind, sealable;   /* sealable: a memfd that accepts seals (none set) */
	char *name;                /* a memfd's name, a file's absolute path (a deleted
				    * one's " (deleted)" cut), "" for anonymous memory */
	uint64_t size;             /* a memfd's or file's size; anonymous: its mapped extent */
	uint32_t mode;             /* v7: a file's permission bits, else 0 */
	struct snap_region content; /* [0, size rounded up to pages) */
};
/* An entry of the run's own tmpfs mounts (version 8), recreated before the
 * guest's descriptors are reopened; files mapped shared are shms instead. */
enum snap_tmp_kind { SNAP_TMP_DIR = 0, SNAP_TMP_FILE = 1, SNAP_TMP_SYMLINK = 2, SNAP_TMP_FIFO = 3 };
#define SNAP_TMP_MOUNTS 2u          /* /tmp, /dev/shm */
#define SNAP_TMP_MAX 65536u         /* decoder bound: entries */
#define SNAP_TMP_BYTES_MAX (256u << 20) /* decoder bound: Σ file sizes */
#define SNAP_TMP_DEPTH 128u         /* capture bound: directory levels */
struct snap_tmp {
	uint32_t mount, kind, mode;
	char *path;                /* relative to the mount */
	char *target;              /* a symlink's, else NULL */
	uint64_t size;             /* a file's */
	const uint8_t *bytes;      /* decoded: into the input; captured: into tmp_data */
};
struct snap_fd {
	uint32_t fd, kind, flags;
	uint64_t pos, size;
	char *path;                /* "" for streams */
	uint8_t hash[32];          /* SHA-256 of a regular file's content, else zero */
};
/* A watch of an epoll set: the descriptor, its events and data. */
struct snap_watch { uint32_t fd, events; uint64_t data; };
/* Bytes queued for reading in a socket: one run for a stream, one per datagram. */
struct snap_msg { uint32_t len; uint8_t *data; };
/* A kernel object behind one or more descriptors (version 4). */
struct snap_object {
	uint32_t kind, fd;           /* fd: the lowest descriptor holding it */
	uint64_t count;              /* eventfd counter */
	uint32_t semaphore;          /* eventfd EFD_SEMAPHORE */
	uint32_t clock;              /* timerfd clock */
	uint64_t ticks, value[2], interval[2]; /* timerfd: expirations unread, time left */
	uint64_t mask;               /* signalfd */
	struct snap_watch *watch;    /* epoll set, sorted by fd */
	size_t nwatch;
	uint32_t type, state, peer, backlog, reuse; /* sockets; peer: its pair's fd */
	uint32_t family, addrlen;    /* family: AF_UNIX, AF_INET, AF_INET6 */
	uint8_t addr[SNAP_SOCKADDR_MAX]; /* sun_path or the inet address; port below */
	uint32_t port;
	struct snap_msg *msgs;
	size_t nmsgs;
	uint32_t index, locked;      /* pty number, ptmx lock */
	uint8_t termios[2][SNAP_TERMIOS]; /* pty: master's then slave's */
	uint16_t winsize[4];
	uint32_t owner;              /* v6 tree epoll set: the process its watches name */
	/* captured only: the socket's and its peer's inodes; a watch not open
	 * in this process (a tfd + 1); an end whose pair or master is elsewhere */
	uint32_t ino, peer_ino, stale, remote;
};
/* A SysV shared memory segment attached by the run (version 4). */
struct snap_segment { uint32_t id, key, mode, removed, uid, gid; uint64_t size; };

struct snap_cell {
	char *key;                 /* relative path in the namespace */
	const uint8_t *val;
	uint64_t len;
};
struct snap_sigact { uint64_t handler, flags, restorer, mask; };
#define SNAP_PENDING_MAX 4096
struct snap_sigpend { uint32_t sig, shared; uint8_t info[128]; };

/* A thread besides the leader: its own CPU state, mask, queued signals and
 * kernel registrations; everything else it shares with the leader. */
struct snap_thread {
	uint32_t tid;
	uint64_t ctid;             /* clear_child_tid (set_tid_address), 0: none */
	uint64_t robust, robust_len; /* set_robust_list */
	uint64_t xfeatures;
	uint64_t regs[SNAP_NREGS];
	uint8_t *xstate;           /* SNAP_XCANON_SIZE bytes */
	uint64_t sigmask;
	uint64_t ss_sp, ss_size;
	uint32_t ss_flags;
	struct snap_sigpend *pending;
	size_t npending;
	uint64_t rseq_ptr;
	uint32_t rseq_len, rseq_sig;
};

struct snap_meta {
	char *lease, *principal, *host_program, *ns_prefix;
	uint8_t image[32];
	uint64_t step;             /* trace seq: events the run's recorder wrote so far */
	uint8_t trace_head[32];    /* the recorder's chain head then (zeros: no trace) */
	uint64_t usage[SNAP_NUSAGE];
};

/* A decoded snapshot. Region contents and cell values point into the bytes it
 * was decoded from, which must outlive it. */
struct snap_state {
	struct snap_meta meta;
	uint64_t xfeatures;        /* XSAVE components in use (x87 and SSE always) */
	uint64_t regs[SNAP_NREGS];
	uint8_t *xstate;           /* SNAP_XCANON_SIZE bytes, canonical layout */
	uint64_t sigmask;
	struct snap_sigact sigact[SNAP_NSIG];
	uint64_t ss_sp, ss_size;
	uint32_t ss_flags;
	struct snap_sigpend *pending; /* queued signals, re-queued on restore */
	size_t npending;
	uint64_t rseq_ptr;            /* rseq registration, re-registered on restore */
	uint32_t rseq_len, rseq_sig;
	uint32_t version;             /* 2 or 3: what the bytes were (encode writes it) */
	uint32_t tid;                 /* v3: the leader's tid, clear_child_tid, robust list */
	uint64_t ctid, robust, robust_len;
	struct snap_thread *threads;  /* v3: the other threads, by tid */
	size_t nthreads;
	uint64_t start_brk, brk;
	uint32_t umask;
	char *cwd;
	uint64_t rlim[SNAP_NRLIMIT][2];
	struct snap_fd *fds;
	size_t nfds;
	struct snap_object *objects;  /* v4: sorted by fd */
	size_t nobjects;
	struct snap_segment *segments; /* v4: sorted by id */
	size_t nsegments;
	struct snap_region *regions;
	size_t nregions;
	struct snap_cell *cells;
	size_t ncells;
	/* v4: the other processes of the tree (meta, cells, pipes unused in them) */
	struct snap_state *procs;
	size_t nprocs;
	uint32_t pid, ppid;           /* a proc's namespace pid (the root's: tid) */
	char *exe;                    /* v4: a live process's program (/proc/PID/exe) */
	uint32_t zombie, wstatus;     /* an exited proc its parent has not waited for */
	struct snap_pipe *pipes;
	size_t npipes;
	struct snap_shm *shms;        /* v5: the tree's shared memory objects (the root's) */
	size_t nshms;
	struct snap_object *kobjs;    /* v6: kernel objects several processes hold (the root's) */
	size_t nkobjs;
	struct snap_tmp *tmps;        /* v8: the run's tmpfs entries (the root's) */
	size_t ntmps;
	uint8_t *tmp_data;            /* captured only: the files' bytes */
	/* the determinism record, or NULL: decoded, into the input; captured, the
	 * options' (never freed with the state) */
	const uint8_t *determ;
	size_t determ_len;
};

/* An encoded snapshot: the canonical bytes and their digest. */
struct snap_image {
	uint8_t *bytes;
	size_t len;
	uint8_t digest[32];
};
void snap_image_free(struct snap_image *im);

/* Decode (hostile input: every length and order checked; name names the input). */
int snap_decode(const uint8_t *buf, size_t len, const char *name, struct snap_state *st,
		struct common_err *e);
void snap_state_free(struct snap_state *st);
/* What descriptor f of st is: "stream", "file", "directory", "device", or its
 * object's kind ("eventfd", "unix-socket", "pty-master", …). */
const char *snap_fd_kind_name(const struct snap_state *st, const struct snap_fd *f);
/* Encode a decoded state again (encode(decode(x)) == x). */
int snap_encode(const struct snap_state *st, struct snap_image *out, struct common_err *e);

/* Told a streamed snapshot's exact length before anything is written; a
 * negative return refuses it (e says why). */
typedef int (*snap_admit_fn)(void *ctx, uint64_t len, struct common_err *e);
struct snap_capture_opts {
	struct snap_meta meta;     /* copied into the snapshot (strings may be NULL = "") */
	const char *ns_dir;        /* host directory of the namespace cells, or NULL */
	snap_admit_fn admit;       /* streamed captures only; NULL admits everything */
	void *admit_ctx;
	/* rlimits recorded from rlim instead of the process (bit i: rlimit i):
	 * restore's re-check, where the target's bounds replace the snapshot's */
	uint32_t rlim_mask;
	const uint64_t (*rlim)[2];
	/* the encoding to write: 0 for SNAP_VERSION; 2 for restore's re-check of
	 * a version 2 image (a process with threads is then refused) */
	uint32_t version;
	/* restore's re-check: the state restored, whose timers' time left and
	 * expirations stand in for the live ones (they move with the clock) */
	const struct snap_state *expect;
	/* a --deterministic run's record (trace_determ_save), or NULL */
	const uint8_t *determ;
	size_t determ_len;
	/* the protection the guest asked for of a shared mapping the storage
	 * meter holds without PROT_WRITE (trace_metering_held_prot), or NULL */
	int (*held_prot)(void *ctx, pid_t tgid, uint64_t addr, uint64_t len, int *prot);
	void *held_ctx;
	/* the run's standard streams as the capturing process holds them: the
	 * open file the guest was handed as fd k, or the read end of the pipe
	 * whose write end it was (the output relay). The root's fds 0-2 are they
	 * only when they still hold them; NULL or -1: the root's own fd k is. */
	const int *std_fds;
};
/* Capture the tracee pid (a thread-group leader) and every other thread of
 * its process, and (version 4) every process below it with its threads, each
 * task in a ptrace stop. What cannot be held is refused before any task is
 * touched. Injected syscalls (brk, rt_sigaction, sigaltstack) run from a
 * `syscall` instruction already in its text; guest memory is left unchanged.
 * Afterwards the tracee is in a SIGTRAP signal-delivery stop with its registers
 * in canonical form: when it was stopped at a syscall entry, it now stands just
 * before that syscall instruction, which runs (and stops) again when it is
 * resumed with PTRACE_CONT/PTRACE_SYSCALL and signal 0. */
int snap_capture(pid_t pid, const struct snap_capture_opts *o, struct snap_image *out,
		 struct common_err *e);

struct snap_manifest;
/* The same, streamed straight into a snapshot directory (created; must not
 * exist): chunks and the 44-byte manifest, synced; *m describes it. dir is
 * removed again on failure and never created when o->admit refuses. Memory is
 * read into a few reused buffers and hashed on a second thread. */
int snap_capture_store(pid_t pid, const struct snap_capture_opts *o, const char *dir,
		       struct snap_manifest *m, struct common_err *e);
/* The same without persistence: only the digest and length (*m). */
int snap_capture_digest(pid_t pid, const struct snap_capture_opts *o, struct snap_manifest *m,
			struct common_err *e);
/* Restore's re-check: the same, compared byte for byte with im (verified
 * against its digest; o->expect decoded from it) instead of hashed, each page
 * read once; *differs is the first byte of the encoding that is not im's (where
 * the shorter ends when only the lengths differ), or UINT64_MAX when they are
 * the same. 0, or -1 with e when the capture fails. */
int snap_capture_compare(pid_t pid, const struct snap_capture_opts *o, const struct snap_image *im,
			 uint64_t *differs, struct common_err *e);

/* Rebuild pid, a fresh exec of the same image (ADDR_NO_RANDOMIZE, same rlimits)
 * stopped by ptrace before its first instruction, into st: address space by
 * injected syscalls, memory, brk, signal actions, altstack, files, the other
 * threads (injected clones, each with the tid it had: tids the process had let
 * go of are used up by threads that exit at once), cwd, umask, rlimits,
 * sigmask, XSAVE and registers; version 4: first the program the root ran,
 * then after its memory is emptied the tree's pipes and every other process
 * and thread in id order (snap_tree_skeleton), each process rebuilt the same
 * way after the root. Namespace cells must already be in place
 * (snap_cells_write). Afterwards pid and its new threads are in ptrace stops
 * nobody has waited for (the supervisor adopts them: trace_sv_adopt_tree);
 * resume them with signal 0. */
int snap_restore(pid_t pid, const struct snap_state *st, struct common_err *e);
/* snap_restore, then capture pid again and require the same encoding as im,
 * the verified image st was decoded from, byte for byte (so its digest). The
 * rlimits sbx-run derives from the target lease (RLIMIT_AS, RLIMIT_NOFILE,
 * RLIMIT_NPROC), which pid already has, are kept instead of the snapshot's: a
 * state that does not fit them is refused first, naming the dimension, and the
 * re-check encodes the snapshot's values in their place. */
int snap_restore_checked(pid_t pid, const struct snap_state *st, const char *ns_dir,
			 const struct snap_image *im, struct common_err *e);
/* Write the snapshot's namespace cells under dir (created; existing files with
 * the same keys are replaced). Keys were checked by snap_decode. */
int snap_cells_write(const struct snap_state *st, const char *dir, struct common_err *e);
void snap_cells_remove(const struct snap_state *st, const char *dir);
/* Σ(key length + value length) of the cells. */
uint64_t snap_cells_bytes(const struct snap_state *st);

/* Persistence: 44-byte manifest + chunks of ≤ 65,536 bytes. */
struct snap_manifest {
	uint8_t digest[32];
	uint64_t len;
	uint32_t chunks;
};
void snap_manifest_encode(const struct snap_manifest *m, uint8_t out[SNAP_MANIFEST_LEN]);
int snap_manifest_decode(const uint8_t *buf, size_t len, struct snap_manifest *m,
			 struct common_err *e);
/* Metered bytes of a persisted snapshot: Σ(key length + value length) over
 * its manifest and chunk cells (keys "snapshot/HEX/manifest", "snapshot/HEX/NNNNNN"). */
uint64_t snap_persist_bytes(uint64_t len);
/* Write the manifest and chunks into dir (must not exist; built in a temporary
 * sibling and renamed, so a crash leaves nothing half-written). */
int snap_store_write(const char *dir, const struct snap_image *im, struct common_err *e);
/* Read dir back, re-hashing every chunk against the manifest. */
int snap_store_read(const char *dir, struct snap_image *out, struct common_err *e);


struct lease_store;
/* What sbx-run and sbx-restore plug into trace_run_opts.snap: taking a snapshot
 * of a run's guest, and telling a fatal signal. */
extern const struct trace_snap_ops snap_ops;
/* sbx-trace adjudicate's snapshots (snap/adjudicate.c). */
extern const struct trace_adj_snap snap_adj_ops;
/* A fresh name under top for a snapshot being written: unique across the hosts
 * that may share top (host name, pid, random). */
char *snap_tmp_name(const char *top, const char *what);
/* Register the stored snapshot m (meta: its meta.json) with the store, as
 * lease_snapshot_register: 1 now, 0 already, -1 refused. */
int snap_register(struct lease_store *s, const json_t *meta, const struct snap_manifest *m,
		  struct common_err *e);
/* sbx-snap's command line, parsed. */
struct snap_cli {
	const struct common_verb *verb;
	const char *store, *out, *principal;
	const char *principal_key; /* --principal-key FILE */
	enum common_format fmt;
	int stop;
	const char *pos[1];
	int npos;
	struct lease_store *s;  /* opened by snap_cli_main */
	struct common_err e;
};
/* argv into c, no output: 0, 1 for --help, or -1 with e. */
int snap_cli_parse(int argc, char **argv, struct snap_cli *c, struct common_err *e);
/* sbx-snap and sbx-restore: whole command lines, returning the exit status. */
int snap_cli_main(int argc, char **argv);
int snap_restore_main(int argc, char **argv);

#endif
