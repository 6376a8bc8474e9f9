/* The store's front (lease/front/): its files' shared helpers; the rest of the
 * project includes lease/lease.h only. */
#ifndef SBX_LEASE_FRONT_INTERNAL_H
#define SBX_LEASE_FRONT_INTERNAL_H

#include "lease/backend/backend.h"
#include "lease/etcd/etcd.h"
#include "lease/file/file.h"

/* park.c: observes the usage parked on this host while etcd was unreachable */
void lease_parked_replay(struct lease_store *s);

/* Run again a transition that lost a race (s->conflict), after a random pause;
 * 0 when the attempts are spent. */
int lease_retry(struct lease_store *s, unsigned *attempt);

/* store.c */
/* Roll what a crash left forward (the back end's recover), under the lock. */
int lease_recover(struct lease_store *s, struct common_err *e);
int lease_lock(struct lease_store *s, struct common_err *e);
/* The same, but excluding every other process of this host even with etcd
 * (where transitions of one host run side by side): run claims. */
int lease_lock_host(struct lease_store *s, struct common_err *e);
void lease_unlock(struct lease_store *s);
/* leases/ID.json holds {"lease": RECORD, "receipt": HEAD}; *pair NULL when absent. */
int lease_pair_read(struct lease_store *s, const char *id, json_t **pair, struct common_err *e);

/* lease_ns_digest of a namespace being destroyed: what its owner cannot read is
 * opened up first, so no guest can make its namespace undestroyable. */
int lease_ns_destroy_digest(const char *dir, char hex[COMMON_SHA256_HEX], uint64_t *cells,
			    uint64_t *bytes, struct common_err *e);
/* Leases whose run died holding them (claim file left, nobody holds it). */
int lease_run_orphans(struct lease_store *s, char ***ids, size_t *n, struct common_err *e);
/* Remove a dead run's claim file and control socket. */
void lease_run_forget(struct lease_store *s, const char *id);
/* 1 with the newest bound a dead run of id left (lease_run_bound_write), 0 none
 * written, -1 bytes there but no slot whole and its lease's. */
int lease_run_bound_read(struct lease_store *s, const char *id, uint64_t bound[LEASE_DIM_COUNT]);
int lease_slots_read(struct lease_store *s, const char *principal, json_t **slots,
		     struct common_err *e);

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
	int chain;                  /* log --chain: every link back along prev */
	const char *pkey;           /* --principal-key */
	const char *pos[1]; /* the operand after the verb */
	int npos;
	struct lease_store *s;
	struct common_err e;
};
/* argv into c, no output: 0, 1 for --help, or -1 with e. */
int lease_cli_parse(int argc, char **argv, struct lease_cli *c, struct common_err *e);

#endif
