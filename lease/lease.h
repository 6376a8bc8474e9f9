/* lease: the store, the lease lifecycle, receipts, limits, usage and fees (SPEC §2–§4). */
#ifndef SBX_LEASE_H
#define SBX_LEASE_H

#include "libcommon/common.h"

/* Metered dimensions, in SPEC §4.1 order. Names are the SPEC's words. */
enum lease_dim {
	LEASE_DIM_FUEL,            /* "fuel": CPU µs */
	LEASE_DIM_MEMORY,          /* "memory": bytes */
	LEASE_DIM_STORAGE_READ,    /* "storage_read" */
	LEASE_DIM_STORAGE_WRITE,   /* "storage_write" */
	LEASE_DIM_OUTPUT_BYTES,    /* "output_bytes" */
	LEASE_DIM_OUTPUT_VALUES,   /* "output_values" */
	LEASE_DIM_TABLE_ELEMENTS,  /* "table_elements" */
	LEASE_DIM_NAMESPACE_BYTES, /* "namespace_bytes" */
	LEASE_DIM_COUNT
};
const char *lease_dim_name(enum lease_dim d);
uint64_t lease_dim_ceiling(enum lease_dim d);
#define LEASE_LIFETIME_CEILING 1000000u
#define LEASE_PRINCIPAL_SLOTS 32

enum lease_state {
	LEASE_REQUESTED, LEASE_FUNDED, LEASE_ACTIVE, LEASE_SETTLING,
	LEASE_EXPIRED, LEASE_DESTROYED, LEASE_STATE_COUNT
};
const char *lease_state_name(enum lease_state s);
int lease_state_parse(const char *s, enum lease_state *out);

enum lease_edge {
	LEASE_EDGE_REQUEST, LEASE_EDGE_FUND, LEASE_EDGE_ACTIVATE, LEASE_EDGE_OBSERVE,
	LEASE_EDGE_SNAPSHOT, LEASE_EDGE_RESTORE, LEASE_EDGE_SETTLE, LEASE_EDGE_EXPIRE,
	LEASE_EDGE_DESTROY, LEASE_EDGE_COUNT
};
const char *lease_edge_name(enum lease_edge e);
int lease_edge_parse(const char *s, enum lease_edge *out);
int lease_dim_parse(const char *s, enum lease_dim *out);
/* The lifecycle table (SPEC §3.1): 1 and *to set when edge is declared from
 * state `from`, else 0. lease_edge_needs names the states an edge needs. */
int lease_edge_next(enum lease_edge e, enum lease_state from, enum lease_state *to);
const char *lease_edge_needs(enum lease_edge e);
/* "L" followed by 16 lowercase hex digits. */
int lease_id_valid(const char *id);

/* An opened store (created on first use with its authority key). */
struct lease_store;
/* dir: a store directory, or etcd://HOST:PORT[,HOST:PORT...]/PREFIX for a store
 * shared by many hosts (this host's part then in $SBX_HOST_DIR, see sbx-lease(1));
 * NULL: $SBX_STORE, else $XDG_STATE_HOME/sbx, else ~/.local/state/sbx. */
int lease_store_open(const char *dir, struct lease_store **out, struct common_err *e);
void lease_store_close(struct lease_store *s);
/* This host's directory of the store (with etcd: its key, namespaces, runs, caches). */
const char *lease_store_dir(const struct lease_store *s);
/* What lease_store_open takes to open the same store again: the directory or the URL. */
const char *lease_store_name(const struct lease_store *s);
/* Sign a DSSE pre-authentication encoding ("DSSEv1 ...", provenance) with the
 * store's Ed25519 authority key, nothing else; and that key's public half. */
int lease_store_sign(const struct lease_store *s, const void *msg, size_t len, uint8_t sig[64],
		     struct common_err *e);
void lease_store_pubkey(const struct lease_store *s, uint8_t pub[32]);
/* Principals (SPEC §3): the caller's key is file (--principal-key) for any
 * principal it acts as, else (file NULL) $XDG_CONFIG_HOME/sbx/principals/NAME
 * (~/.config/...), made at a request's first use of NAME. */
void lease_store_principal_key(struct lease_store *s, const char *file);
/* 0 when the caller holds the key the store recorded for rec's principal (a run of
 * the lease spends its escrow), else -1: "principal NAME: not signed by its key". */
int lease_renter_holds(struct lease_store *s, const json_t *rec, struct common_err *e);
/* The caller's signature (hex) authorizing edge on lease record rec, for a tool that
 * asks another process to make the edge (sbx-snap take): args "renter", "renter_sig". */
int lease_renter_presign(struct lease_store *s, const json_t *rec, enum lease_edge edge,
			 char pub[65], char sig[129], struct common_err *e);
/* Current batch of the store clock. */
int lease_store_batch(struct lease_store *s, uint64_t *batch, struct common_err *e);
/* Directory of the lease's namespace storage (mounted at /ns in the guest). */
char *lease_ns_dir(const struct lease_store *s, const char *id);
/* Hold this host's store lock alone across several store calls (they nest in it):
 * no other process of this host sees what they do half done. */
int lease_store_lock_host(struct lease_store *s, struct common_err *e);
void lease_store_unlock(struct lease_store *s);
/* Claim lease id for one run (a lease is one sandbox): a descriptor to keep
 * open while the run lives, or -1 when another live process holds it. */
int lease_run_claim(struct lease_store *s, const char *id, struct common_err *e);
/* 1 when a live process holds id's run claim. */
int lease_run_held(const struct lease_store *s, const char *id);
/* The run ended: drop its claim (the descriptor lease_run_claim gave). */
void lease_run_release(struct lease_store *s, const char *id, int fd);
/* The most the run's guest may have used by now (SPEC §4.2), made durable in its
 * claim before the guest can use more: a run that dies is charged it, capped at
 * the lease's limits. seq orders writes; the newest whole one counts. Not durable
 * (no fdatasync) when the journal already holds that usage: a later bound lost to
 * a crash leaves an earlier, higher one standing. */
int lease_run_bound_write(int run_fd, const char *id, uint64_t seq,
			  const uint64_t bound[LEASE_DIM_COUNT], int durable, struct common_err *e);
#define LEASE_RUN_BOUND_SLOT 256
/* One slot's bytes (hostile): 0 with *seq and bound[] when it is a whole bound of
 * lease id, -1 otherwise. */
int lease_run_bound_decode(const uint8_t *buf, size_t len, const char *id, uint64_t *seq,
			   uint64_t bound[LEASE_DIM_COUNT]);

/* The store clock (SPEC §2): {"mode", "batch", "batch_ms", "epoch_ms"}.
 * Switching modes keeps the batch monotonic; tick works in manual mode only. */
int lease_clock_get(struct lease_store *s, json_t **out, struct common_err *e);
int lease_clock_set_mode(struct lease_store *s, const char *mode, json_t **out,
			 struct common_err *e);
int lease_clock_tick(struct lease_store *s, uint64_t n, json_t **out, struct common_err *e);

/* Namespace bytes now: Σ(key length + value length) over the cells (regular files
 * under ns/ID, key = relative path; a symlink's value is its target). A walk enters
 * directories at most LEASE_NS_DEPTH_MAX below the root and takes at most
 * LEASE_NS_CELLS_MAX cells: a namespace beyond either, or with an entry it cannot
 * read, fails the walk. An entry that vanishes mid-walk is skipped. */
#define LEASE_NS_DEPTH_MAX 64
#define LEASE_NS_CELLS_MAX (1u << 20)
int lease_ns_bytes(struct lease_store *s, const char *id, uint64_t *bytes, struct common_err *e);
/* The same for the namespace directory dir (the meter's last measurement). */
int lease_ns_measure(const char *dir, uint64_t *bytes, struct common_err *e);
/* Digest of the namespace cells in key order, with their count and bytes: any
 * depth or size (no bound; the walk holds one directory's names per level). */
int lease_ns_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
		    uint64_t *bytes, struct common_err *e);
/* 1 when a walk's errno means the entry was removed, or replaced by a non-directory,
 * between its listing and its opening: a race the walk skips, not a failure. */
int lease_ns_vanished(int err);

/* The declared bounds of a request. */
struct lease_request {
	const char *principal;      /* NULL: current user name */
	const char *host_program;   /* NULL: "sbx" */
	const char *image;          /* path to the guest ELF (validated, hashed) */
	const char *image_sha256;   /* NULL, or the hash the caller took of the open image */
	const char *script;         /* NULL, or the #! script image interprets (named beside it) */
	const char *script_sha256;  /* with script: NULL, or the hash the caller took of it */
	uint64_t limits[LEASE_DIM_COUNT];
	int has_limit[LEASE_DIM_COUNT]; /* undeclared limits default to the ceiling */
	uint64_t lifetime;          /* batches; 0 = default */
	uint64_t escrow;
	uint64_t fees[LEASE_DIM_COUNT]; /* price per unit */
	int ephemeral;              /* one-shot (sbx-run --ephemeral): recover closes it here */
	const char *prev;           /* NULL, or the lease this one continues (sbx-run --chain):
				     * the same principal's, named in the request and record */
};
/* Parse "dim=N,dim=N" for --limits / --fees into req (suffixes allowed for limits). */
int lease_parse_limits(const char *s, struct lease_request *req, struct common_err *e);
int lease_parse_fees(const char *s, struct lease_request *req, struct common_err *e);
/* "dim=N,..." usage totals for observe; given[d] set for the named dimensions. */
int lease_parse_usage(const char *s, uint64_t usage[LEASE_DIM_COUNT], int given[LEASE_DIM_COUNT],
		      struct common_err *e);
/* A plain non-negative integer amount (escrow, fund). */
int lease_parse_amount(const char *what, const char *s, uint64_t *out, struct common_err *e);

/* Every transition returns {"lease": RECORD, "receipt": RECEIPT} in *out (caller frees). */
int lease_request(struct lease_store *s, const struct lease_request *req, json_t **out,
		  struct common_err *e);
/* Edge-specific arguments go in args (may be NULL):
 * fund: {"amount": N}; observe: {"usage": {dim: N,...}};
 * snapshot: {"snapshot": HEX, "bytes": N}; restore: {"snapshot": HEX, "source": ID}.
 * evidence: the receipt (or {"lease","receipt"} object) the caller holds; it must be
 * the lease's head. id may be NULL when the evidence names the lease. */
int lease_transition(struct lease_store *s, const char *id, enum lease_edge edge,
		     const json_t *evidence, const json_t *args, json_t **out,
		     struct common_err *e);
/* Several edges under one lock, each with its own sealed receipt, journaled by one
 * append and one fsync, the record written once: what a runtime does around one
 * run. req != NULL: a new lease, its request first (id, evidence ignored); else id
 * names the lease and evidence, when given, must be its head (NULL: the runtime that
 * holds the lease, as for lease_observe_usage). An optional step is skipped when its
 * edge is not allowed from the state reached. *receipts: the new receipts in order. */
struct lease_step {
	enum lease_edge edge;
	const json_t *args; /* as for lease_transition */
	int optional;
};
#define LEASE_STEPS_MAX 8
int lease_steps(struct lease_store *s, const struct lease_request *req, const char *id,
		const json_t *evidence, const struct lease_step *steps, size_t n,
		json_t **receipts, struct common_err *e);
/* The current record and head receipt of a lease (internal callers: sbx-run etc.). */
int lease_load(struct lease_store *s, const char *id, json_t **record, struct common_err *e);
int lease_head(struct lease_store *s, const char *id, json_t **receipt, struct common_err *e);

/* Record a usage observation taken by the runtime (monotonic). If usage first
 * exceeds a bound, the lifetime or escrow, the lease is closed Active → Settling
 * and *closed names the dimension ("fuel", …, "lifetime", "escrow"), else NULL.
 * *receipts is a JSON array: one "observe" receipt, or one "settle" receipt with
 * "reason" when the observation closes the lease, or empty when no total changed
 * and nothing closed (so calling it every 250 ms costs no journal growth).
 * Cost: one locked, durable transition (3 fsyncs) when something changed. */
int lease_observe_usage(struct lease_store *s, const char *id,
			const uint64_t usage[LEASE_DIM_COUNT], const char **closed,
			json_t **receipts, struct common_err *e);
/* 1 when the store is etcd and its last request found no member in time. */
int lease_store_unreachable(const struct lease_store *s);
/* Keep usage durable on this host (raised to what is parked already) until the
 * store answers: the next opening of the store here observes it. */
int lease_observe_park(struct lease_store *s, const char *id,
		       const uint64_t usage[LEASE_DIM_COUNT], struct common_err *e);

int lease_list(struct lease_store *s, const char *principal, int state /* -1 any */,
	       json_t **out, struct common_err *e);
int lease_log(struct lease_store *s, const char *id, json_t **receipts, struct common_err *e);
/* The lease's receipts with seq > after, oldest first, read backwards from the
 * journal's end: the cost follows what was journaled since, not the whole journal. */
int lease_log_since(struct lease_store *s, const char *id, int64_t after, json_t **receipts,
		    struct common_err *e);
/* sbx-lease recover: leases whose run died are settled from their durable bound, a
 * one-shot lease of this host's runs no live run holds is closed and destroyed, and
 * a lease past its deadline expires, each through its ordinary edges with receipts.
 * *report: {"store", "batch", "recovered": [{"lease", "from", "to"}, ...]}. */
int lease_repair(struct lease_store *s, json_t **report, struct common_err *e);
/* Re-check chains, signatures, states, slot counts; problems go into *report. */
int lease_verify(struct lease_store *s, const char *id, json_t **report, struct common_err *e);

/* Image identity: is fd (path names it in messages) an ELF64 x86-64 executable
 * we will run (libelf)? Checked on the descriptor the caller then executes. */
int lease_image_validate_fd(int fd, const char *path, struct common_err *e);
/* The same check on path, then the image's SHA-256. */
int lease_image_check(const char *path, char hex[COMMON_SHA256_HEX], struct common_err *e);
/* The same, remembering hashes in the store's image-hashes file, keyed by file
 * identity (device, inode, size, mtime, ctime) and boot id, block devices only;
 * anything different, damaged or unknown is checked and hashed again. */
int lease_image_check_cached(struct lease_store *s, const char *path,
			     char hex[COMMON_SHA256_HEX], struct common_err *e);
/* A "#!" script on fd runs as the kernel runs it: its interpreter (an ELF) is
 * the image and the script is named beside it. 1 with interp and arg ("" when
 * none) from the first line, 0 when fd is no script, -1 for a malformed line. */
#define LEASE_INTERP_MAX 256 /* the kernel reads this much of a script */
int lease_image_interp(int fd, const char *path, char interp[LEASE_INTERP_MAX],
		       char arg[LEASE_INTERP_MAX], struct common_err *e);
/* The same on an open descriptor: the file hashed is the one then executed. */
int lease_image_check_cached_fd(struct lease_store *s, int fd, const char *path,
				char hex[COMMON_SHA256_HEX], struct common_err *e);

/* {"lease": RECORD, "receipt": HEAD} of one lease (what `sbx-lease show` prints). */
int lease_show(struct lease_store *s, const char *id, json_t **out, struct common_err *e);

/* Hostile-input readers (also the fuzz entry points). */
/* Evidence: a bare receipt or a {"lease", "receipt"} object; *receipt is a new ref. */
int lease_evidence_parse(const char *buf, size_t len, const char *name, json_t **receipt,
			 struct common_err *e);
/* Shape and digest of a receipt (not the signature: that needs the store key). */
int lease_receipt_check(const json_t *r, const char *name, struct common_err *e);
/* Shape of a lease record (the "lease" member of leases/ID.json). */
int lease_record_check(const json_t *rec, const char *name, struct common_err *e);

/* Snapshots (SPEC §8.3): where their chunks go and are found, and the record the
 * store keeps of each (with etcd every host finds it there). */
/* Where new snapshots go: $SBX_SNAPSHOT_DIR (a directory hosts share), else this host's. */
const char *lease_snapshot_top(const struct lease_store *s);
/* Register snapshot rec {"digest", "manifest" (88 hex), "bytes", "chunks",
 * "persisted_bytes", "lease", "principal", "host_program", "image", "batch"}; the
 * store adds "signer", "host" and "location" ("shared" or "host"). 1 registered
 * now, 0 when the same manifest was already; another manifest is refused. */
int lease_snapshot_register(struct lease_store *s, const json_t *rec, struct common_err *e);
int lease_snapshot_unregister(struct lease_store *s, const char *hex, struct common_err *e);
/* The record of hex, checked; *rec NULL when the store keeps none. */
int lease_snapshot_lookup(struct lease_store *s, const char *hex, json_t **rec,
			  struct common_err *e);
/* Every record, checked, by digest. */
int lease_snapshot_records(struct lease_store *s, json_t **recs, struct common_err *e);
/* The directory holding hex's chunks (malloc'd): the shared one, else this host's;
 * when neither does, an error saying where rec (may be NULL) puts them. */
char *lease_snapshot_chunks(struct lease_store *s, const char *hex, const json_t *rec,
			    struct common_err *e);
/* Shape of a snapshot record (hex NULL: any digest); also a fuzz entry point. */
int lease_snapshot_record_check(const json_t *rec, const char *hex, const char *name,
				struct common_err *e);

/* The sbx-lease tool: parses argv, runs one command, returns the exit code. */
int lease_cli_main(int argc, char **argv);

#endif
