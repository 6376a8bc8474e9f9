/* lease internals shared by the files of lease/ only (never included elsewhere). */
#ifndef SBX_LEASE_INTERNAL_H
#define SBX_LEASE_INTERNAL_H

#include <sys/stat.h>
#include "lease/lease.h"

/* Bounds on hostile input. */
#define LEASE_RECORD_MAX (64u << 10)   /* one leases/ID.json file */
#define LEASE_LINE_MAX (32u << 10)     /* one journal line */
#define LEASE_JOURNAL_MAX (512u << 20) /* whole journal read by verify/log */
#define LEASE_NAME_MAX 64              /* principal, host program */
#define LEASE_ID_LEN 17                /* "L" + 16 hex */
#define LEASE_AMOUNT_MAX 1000000000000000ull /* escrow, fund amounts */
#define LEASE_FEE_MAX 1000000ull       /* price per unit */
#define LEASE_USAGE_MAX (1ull << 62)   /* an observed total */

/* A receipt or other stored line met in order; name places it in messages. */
typedef int (*lease_line_fn)(void *arg, const char *name, const char *line, size_t len);

/* The shared part of a store (records, receipt chains, slot index, clock): one
 * interface, two implementations: the directory (lease_file_backend) and an
 * etcd cluster (lease_etcd_backend, shared.c). What is per host (key, namespaces, run claims, caches) is in dir. */
struct lease_backend {
	/* {"lease": RECORD, "receipt": HEAD} of id; *pair NULL when absent */
	int (*pair_read)(struct lease_store *s, const char *id, json_t **pair, struct common_err *e);
	/* {principal: [live lease ids]}: all principals, or only principal */
	int (*slots_read)(struct lease_store *s, const char *principal, json_t **slots,
			  struct common_err *e);
	/* Sealed receipts rs of one lease, rec their fold: all of it or nothing; fails
	 * with s->conflict set when what the transition read has changed since */
	int (*commit)(struct lease_store *s, const json_t *rs, const json_t *rec, struct common_err *e);
	int (*clock_read)(struct lease_store *s, json_t **clk, struct common_err *e);
	/* Replace the clock read last (s->conflict when it changed meanwhile) */
	int (*clock_write)(struct lease_store *s, const json_t *clk, struct common_err *e);
	/* Ids with a record, sorted */
	int (*ids)(struct lease_store *s, char ***ids, size_t *n, struct common_err *e);
	/* Receipts, each lease's in chain order: all, or id's with seq > after */
	int (*receipts)(struct lease_store *s, const char *id, int64_t after, lease_line_fn fn,
			void *arg, struct common_err *e);
	/* Snapshot records, PREFIX/snapshot/HEX (the directory store keeps none: its
	 * snapshots directory is the record, so put is 1, get NULL). get: *rec NULL when
	 * absent; put: 1 put, 0 when a record was there already; del: the record gone */
	int (*snap_get)(struct lease_store *s, const char *hex, json_t **rec, struct common_err *e);
	int (*snap_put)(struct lease_store *s, const char *hex, const json_t *rec,
			struct common_err *e);
	int (*snap_del)(struct lease_store *s, const char *hex, struct common_err *e);
	/* Every record, by digest */
	int (*snap_all)(struct lease_store *s, json_t **recs, struct common_err *e);
};
extern const struct lease_backend lease_etcd_backend;

struct lease_store {
	const struct lease_backend *be;
	char *name;     /* how messages name the store: dir, or the etcd URL */
	char *dir;      /* the store directory, or with etcd this host's part */
	char *snapdir;  /* where new snapshots go: $SBX_SNAPSHOT_DIR, else dir/snapshots */
	int snapshared; /* snapdir is $SBX_SNAPSHOT_DIR, shared by hosts */
	struct lease_etcd *etcd;
	json_t *reads;  /* etcd: key -> [mod_revision, value] read by this transition */
	json_t *signers; /* etcd: registered public keys seen */
	int conflict;   /* the last commit lost a race: run the transition again */
	int lockfd;     /* -1 when the store lock is not held */
	int lock_depth; /* nested lock holders in this process */
	struct common_key key;
	int durable;    /* derived files fsynced too: no boot id to tell a crash by */
	int boot_ok;    /* derived files were checked against the journal this boot */
	int jst_ok;     /* jst: the journal as this process's last complete commit left it */
	struct stat jst;
	struct stat cst; /* clock.json behind clk */
	json_t *clk;
	char boot[37];   /* "" unread, "-" unknown */
	char *pkey_file; /* --principal-key FILE, else the principal's own file */
	struct common_key pkey; /* the caller's key for principal pkey_name */
	char pkey_name[LEASE_NAME_MAX + 1];
	int pkey_ok;
};

/* etcd.c: a v3 client through the HTTP/JSON gateway; keys below the URL's prefix. */
struct lease_etcd;
int lease_etcd_url(const char *url); /* 1 for etcd://… and etcds://… */
int lease_etcd_open(const char *url, struct lease_etcd **out, struct common_err *e);
void lease_etcd_close(struct lease_etcd *c);
int lease_etcd_unreachable(const struct lease_etcd *c); /* the last request timed out */
/* park.c: observes the usage parked on this host while etcd was unreachable */
void lease_parked_replay(struct lease_store *s);
/* [[key, value, mod_revision], …] of the keys under prefix (from `from` when given) */
int lease_etcd_range(struct lease_etcd *c, const char *prefix, const char *from, json_t **kvs,
		     struct common_err *e);
/* One gateway reply as a range answer: 0 with *kvs, 1 when another member or try
 * may answer, -1 refused with e (what range decodes; for the fuzz target) */
int lease_etcd_decode(struct lease_etcd *c, long status, const char *body, size_t len,
		      json_t **kvs, struct common_err *e);
/* *val NULL and *rev 0 when key is absent */
int lease_etcd_get(struct lease_etcd *c, const char *key, char **val, int64_t *rev,
		   struct common_err *e);
/* Puts [[key, value], …] (a null value deletes key) when every [[key, mod_revision], …]
 * of cmp still holds (mod_revision 0: key absent):
 * 1 applied (at *rev), 0 not (nothing written), -1 error */
int lease_etcd_txn(struct lease_etcd *c, const json_t *cmp, const json_t *puts, int64_t *rev,
		   struct common_err *e);

/* shared.c: the etcd back end's store set-up (host key registered, clock created) */
int lease_shared_open(struct lease_store *s, struct common_err *e);
/* 1 when pub is a key registered in the store (receipts name their signer) */
int lease_signer_known(struct lease_store *s, const char *pubhex, struct common_err *e);

/* Run again a transition that lost a race (s->conflict), after a random pause;
 * 0 when the attempts are spent. */
int lease_retry(struct lease_store *s, unsigned *attempt);

/* store.c */
char *lease_path(const struct lease_store *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int lease_lock(struct lease_store *s, struct common_err *e);
/* The same, but excluding every other process of this host even with etcd
 * (where transitions of one host run side by side): run claims. */
int lease_lock_host(struct lease_store *s, struct common_err *e);
void lease_unlock(struct lease_store *s);
/* Roll the last journal receipt forward into its record (under the lock). */
int lease_recover(struct lease_store *s, struct common_err *e);
/* leases/ID.json holds {"lease": RECORD, "receipt": HEAD}; *pair NULL when absent. */
int lease_pair_read(struct lease_store *s, const char *id, json_t **pair, struct common_err *e);
/* Call fn for every journal line (1-based lineno); stops when fn returns < 0. */
int lease_journal_each(struct lease_store *s, int (*fn)(void *, size_t, const char *, size_t),
		       void *arg, struct common_err *e);

/* rebuild.c: after a crash of the machine (another boot id), rewrite every record
 * and the slot index from the journal, durably. */
int lease_rebuild(struct lease_store *s, struct common_err *e);
/* lease_ns_digest of a namespace being destroyed: what its owner cannot read is
 * opened up first, so no guest can make its namespace undestroyable. */
int lease_ns_destroy_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
			    uint64_t *bytes, struct common_err *e);
/* The host's part of them: the namespace directory exists until Destroyed. */
int lease_ns_effect(struct lease_store *s, const json_t *rec, struct common_err *e);
/* The directory back end's pieces */
int lease_file_ids(struct lease_store *s, char ***ids, size_t *n, struct common_err *e);
int lease_file_receipts(struct lease_store *s, const char *id, int64_t after, lease_line_fn fn,
			void *arg, struct common_err *e);
/* snapshot.c: the directory back end's snapshot records (none: see lease_backend) */
int lease_file_snap_get(struct lease_store *s, const char *hex, json_t **rec, struct common_err *e);
int lease_file_snap_put(struct lease_store *s, const char *hex, const json_t *rec,
			struct common_err *e);
int lease_file_snap_del(struct lease_store *s, const char *hex, struct common_err *e);
int lease_file_snap_all(struct lease_store *s, json_t **recs, struct common_err *e);
/* Leases whose run died holding them (claim file left, nobody holds it). */
int lease_run_orphans(struct lease_store *s, char ***ids, size_t *n, struct common_err *e);
/* Remove a dead run's claim file and control socket. */
void lease_run_forget(struct lease_store *s, const char *id);
/* 1 with the newest bound a dead run of id left (lease_run_bound_write), 0 none
 * written, -1 bytes there but no slot whole and its lease's. */
int lease_run_bound_read(struct lease_store *s, const char *id, uint64_t bound[LEASE_DIM_COUNT]);
int lease_slots_read(struct lease_store *s, const char *principal, json_t **slots,
		     struct common_err *e);

/* receipt.c */
/* Fill "digest" and "sig" of r with the store key. */
int lease_receipt_seal(struct lease_store *s, json_t *r, struct common_err *e);
/* Shape + digest + signature against the store key. */
int lease_receipt_verify(struct lease_store *s, const json_t *r, const char *name,
			 struct common_err *e);

/* fold.c: record' = apply(record, receipt); rec NULL for a request. Pure. */
int lease_fold(const json_t *rec, const json_t *receipt, json_t **out, struct common_err *e);
/* cost = Σ usage × fee, saturated at INT64_MAX. */
uint64_t lease_cost(const json_t *usage, const json_t *fees);
int lease_usage_get(const json_t *usage, uint64_t out[LEASE_DIM_COUNT]);
json_t *lease_usage_json(const uint64_t v[LEASE_DIM_COUNT]);
int lease_state_live(enum lease_state s);

/* lifecycle.c, for repair.c and query.c, under the store lock: */
/* 1 when rec is a one-shot lease (sbx-run --ephemeral) whose run is this host's. */
int lease_ephemeral_here(const struct lease_store *s, const json_t *rec);
/* Close what a dead run left of *rec (replaced): Active is settled from the run's
 * durable bound; a one-shot lease of this host is also expired and destroyed.
 * *out the committed pair, NULL when nothing was to do. */
int lease_close_left(struct lease_store *s, json_t **rec, uint64_t batch, json_t **out,
		     struct common_err *e);
/* lease_close_left for every lease whose run died on this host (claim unheld). */
int lease_dead_runs_close(struct lease_store *s, uint64_t batch, struct common_err *e);
/* Expire *rec (replaced) when its deadline has passed and no run of this host holds
 * it: 1 expired, 0 not overdue. */
int lease_expire_overdue(struct lease_store *s, json_t **rec, uint64_t batch,
			 struct common_err *e);

/* principal.c: sign the edge of receipt r (not sealed yet) as its renter, principal
 * (rec: the lease before the edge, NULL for a request), and check that signature
 * against the key the store knows principal by (recorded now at its first use):
 * r gets "renter" and "renter_sig", or the edge is refused. args may carry a
 * signature made by the caller of another tool ("renter", "renter_sig"). */
int lease_renter_sign(struct lease_store *s, const json_t *rec, const char *principal,
		      json_t *r, const json_t *args, struct common_err *e);
/* verify: receipt r's renter signature (rec: the lease before r, NULL for a request)
 * is by the key recorded for its principal, over what the edge consumed. */
int lease_renter_check(struct lease_store *s, const json_t *rec, const json_t *r,
		       struct common_err *e);
/* The store's and the caller's private keys wiped (the store is closing). */
void lease_keys_forget(struct lease_store *s);

/* small json helpers */
int64_t lease_jint(const json_t *o, const char *key); /* -1 when absent / not integer */
const char *lease_jstr(const json_t *o, const char *key); /* NULL when absent */
int lease_hex_valid(const char *s, size_t n);
int lease_name_valid(const char *s);

int lease_json_same(const json_t *a, const json_t *b);

/* sbx-lease's command line, parsed (lease_cli.c). */
struct lease_cli {
	const struct common_verb *verb;
	const char *store;
	enum common_format fmt;
	struct lease_request req;   /* request's options */
	const char *evidence;
	uint64_t amount;            /* fund's */
	uint64_t usage[LEASE_DIM_COUNT]; /* observe's, where usage_given */
	int usage_given[LEASE_DIM_COUNT];
	int state;                  /* list --state, -1: any */
	const char *pkey;           /* --principal-key */
	const char *pos[1]; /* the operand after the verb */
	int npos;
	struct lease_store *s;
	struct common_err e;
};
/* argv into c, no output: 0, 1 for --help, or -1 with e. */
int lease_cli_parse(int argc, char **argv, struct lease_cli *c, struct common_err *e);

#endif
