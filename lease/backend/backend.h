/* The one interface between the store's front (lease/front/) and its back ends
 * (lease/file/, lease/etcd/): the store's shape, the operations every back end
 * provides, and what both sides share (the record vocabulary, receipts, the fold,
 * this host's paths). Back ends include this header and never the front's. */
#ifndef SBX_LEASE_BACKEND_H
#define SBX_LEASE_BACKEND_H

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
#define LEASE_PKEY_FILE_MAX 4096       /* a principal's key file, or its record */

/* A receipt or other stored line met in order; name places it in messages. */
typedef int (*lease_line_fn)(void *arg, const char *name, const char *line, size_t len);

/* The shared part of a store (records, receipt chains, slot index, clock): one
 * interface, two implementations: the directory (lease_file_backend, lease/file/)
 * and an etcd cluster (lease_etcd_backend, lease/etcd/). What is per host (key,
 * namespaces, run claims, caches) is in dir. */
struct lease_backend {
	/* {"lease": RECORD, "receipt": HEAD} of id; *pair NULL when absent */
	int (*pair_read)(struct lease_store *s, const char *id, json_t **pair, struct common_err *e);
	/* Read at once the records of ids (an array) that the write path's reads one by
	 * one would each fetch (NULL: such reads are cheap) */
	int (*pairs_prefetch)(struct lease_store *s, const json_t *ids, struct common_err *e);
	/* 1 when a commit creating a record checks that its id is still unused: a
	 * fresh random id needs no read */
	int creates_checked;
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
	/* Set up once the store key is loaded (NULL: nothing to set up) */
	int (*open)(struct lease_store *s, struct common_err *e);
	/* Let go of what the back end holds (NULL: nothing) */
	void (*close)(struct lease_store *s);
	/* Drop what the back end keeps in memory of the store: the next reads see it as
	 * it is stored, hand-edits included (NULL: it keeps nothing) */
	void (*forget)(struct lease_store *s);
	/* The first lock of a process with the store key: what the store derives is
	 * checked against its truth after a crash of the machine (NULL: nothing derived) */
	int (*boot_check)(struct lease_store *s, struct common_err *e);
	/* Roll forward what a crash cut short, under the lock (NULL: commits are whole) */
	int (*recover)(struct lease_store *s, struct common_err *e);
	/* 1 when pubhex is a key registered in the store (receipts name their signer;
	 * NULL: only the store key signs) */
	int (*signer_known)(struct lease_store *s, const char *pubhex, struct common_err *e);
	/* The key recorded for principal name: 1 with *key, the record's text (NULL when
	 * it holds none), 0 none recorded; *where names the record in messages either way */
	int (*principal_get)(struct lease_store *s, const char *name, char **key, char **where,
			     struct common_err *e);
	/* Record name's key at its first use: create-only, durable before the edge it
	 * signs (when another caller recorded one first, that one stands) */
	int (*principal_put)(struct lease_store *s, const char *name, const char *hex,
			     struct common_err *e);
	/* 1 when the last request found the store unreachable (NULL: it is always there) */
	int (*unreachable)(const struct lease_store *s);
};

struct lease_etcd;
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
	int kept_ok;    /* the write path: reads may give what this process kept (etcd),
			 * since its commit compares their revisions */
	int kept_used;  /* a read gave a kept value: a refusal is checked again fresh */
	int lockfd;     /* -1 when the store lock is not held */
	int lock_depth; /* nested lock holders in this process */
	unsigned lock_gen; /* times the lock was taken: what one hold checked lasts while it does */
	struct common_key key;
	int durable;    /* derived files fsynced too: no boot id to tell a crash by */
	int boot_ok;    /* derived files were checked against the journal this boot */
	int jst_ok;     /* jst: the journal as this process's last complete commit left it */
	struct stat jst;
	json_t *fcache;  /* what the back end keeps in memory: the directory's derived files
			  * as of jst (lease/file/cache.c), principals' keys */
	struct lease_file_mem *fmem; /* the directory back end's journal descriptor and
				      * the derived files its last commit left unwritten */
	struct stat cst; /* clock.json behind clk */
	json_t *clk;
	char boot[37];   /* "" unread, "-" unknown */
	char *pkey_file; /* --principal-key FILE, else the principal's own file */
	struct common_key pkey; /* the caller's key for principal pkey_name */
	char pkey_name[LEASE_NAME_MAX + 1];
	int pkey_ok;
};

/* host.c: this host's part of the store */
char *lease_path(const struct lease_store *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The canonical form of j and a newline, written atomically. */
int lease_json_write(const char *path, const json_t *j, mode_t mode, struct common_err *e);
/* The host's part of a record's state: the namespace directory exists until Destroyed. */
int lease_ns_effect(struct lease_store *s, const json_t *rec, struct common_err *e);

/* receipt.c */
/* Fill "digest" and "sig" of r with the store key. */
int lease_receipt_seal(struct lease_store *s, json_t *r, struct common_err *e);
/* lease_receipt_check without the digest: for a receipt this process just sealed. */
int lease_receipt_shape(const json_t *r, const char *name, struct common_err *e);
/* Shape + digest + signature against the store key. */
int lease_receipt_verify(struct lease_store *s, const json_t *r, const char *name,
			 struct common_err *e);

/* fold.c: record' = apply(record, receipt); rec NULL for a request. Pure. */
int lease_fold(const json_t *rec, const json_t *receipt, json_t **out, struct common_err *e);
/* The same for a receipt lease_receipt_seal has just digested, unchanged since:
 * its digest is not computed again. */
int lease_fold_sealed(const json_t *rec, const json_t *receipt, json_t **out,
		      struct common_err *e);
/* cost = Σ usage × fee, saturated at INT64_MAX. */
uint64_t lease_cost(const json_t *usage, const json_t *fees);
int lease_usage_get(const json_t *usage, uint64_t out[LEASE_DIM_COUNT]);
json_t *lease_usage_json(const uint64_t v[LEASE_DIM_COUNT]);
int lease_state_live(enum lease_state s);

/* table.c: small json helpers */
int64_t lease_jint(const json_t *o, const char *key); /* -1 when absent / not integer */
const char *lease_jstr(const json_t *o, const char *key); /* NULL when absent */
int lease_hex_valid(const char *s, size_t n);
int lease_name_valid(const char *s);
int lease_json_same(const json_t *a, const json_t *b);

#endif
