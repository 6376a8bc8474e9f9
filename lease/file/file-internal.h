/* The directory back end's files (lease/file/) share these; the front sees file.h. */
#ifndef SBX_LEASE_FILE_INTERNAL_H
#define SBX_LEASE_FILE_INTERNAL_H

#include "lease/file/file.h"

/* records.c */
/* leases/ID.json holds {"lease": RECORD, "receipt": HEAD}; *pair NULL when absent. */
int lease_file_pair_read(struct lease_store *s, const char *id, json_t **pair,
			 struct common_err *e);
int lease_file_pair_write(struct lease_store *s, const char *id, const json_t *pair,
			  struct common_err *e);
int lease_file_slots_read(struct lease_store *s, const char *principal, json_t **slots,
			  struct common_err *e);
/* The idempotent side effects of a record's state: ns dir, slot index. */
int lease_file_effects(struct lease_store *s, const json_t *rec, struct common_err *e);
/* Remember the journal as a complete commit left it (lease_file_recover skips then). */
void lease_file_journal_note(struct lease_store *s);
/* Write what the last commit left in memory (under the lock, the journal as it left
 * it; else nothing: whoever changed the journal rolled them forward). */
int lease_file_flush(struct lease_store *s, struct common_err *e);
/* The same at the store's close, when the lock is free: else the next locker's
 * recovery writes them. */
void lease_file_flush_at_close(struct lease_store *s);

/* A commit leaves the record of its lease (and the slot index) in memory; the next
 * commit of another lease, a listing or the close writes them. Only the journal's
 * last lease may lag its record, by at most this many receipts: recovery
 * (recover.c) walks back that far from the journal's end to roll it forward. */
#define LEASE_LAG_MAX (LEASE_STEPS_MAX + 1)

/* The directory back end's memory of its journal (cache.c). */
struct lease_file_mem {
	int jfd;        /* the journal, open for appends while jst holds; -1 */
	unsigned gen;   /* s->lock_gen when jst was last checked (0: not under a lock) */
	json_t *pair;   /* {"lease", "receipt"} of the journal's last lease, not yet written */
	json_t *slots;  /* the slot index, not yet written (NULL: as on disk) */
	size_t lag;     /* receipts of pair journaled after the record on disk */
	int others;     /* the journal was last found changed by another process: it
			 * would roll a kept record forward at each turn, so none is kept */
};

/* cache.c: the derived files as this process last wrote or read them, kept while
 * the journal is as s->jst says (no other process has committed since) */
/* 1 when the cache holds (stat of the journal); else it is emptied. */
int lease_file_cache_fresh(struct lease_store *s);
/* A copy of key's content ("lease/ID", "slots"), NULL when not kept. */
json_t *lease_file_cache_get(struct lease_store *s, const char *key);
/* Keep v (copied) as key's content on disk: written or read while the journal was
 * as s->jst says (ignored between a forget and the next note). */
void lease_file_cache_put(struct lease_store *s, const char *key, const json_t *v);
/* The journal may change under this process (a commit starts, a recovery runs):
 * the derived files kept go. */
void lease_file_journal_forget(struct lease_store *s);
/* Everything kept goes, unwritten files too (verify reads the store as stored:
 * its recovery rolls them forward from the journal). */
void lease_file_forget(struct lease_store *s);
/* The unwritten derived files (pair NULL when none), the descriptor of the journal. */
struct lease_file_mem *lease_file_pending(struct lease_store *s);
/* Keep pair (and slots, unless NULL) as the last commit's unwritten files; called
 * right after lease_file_cache_put of the same values, it shares the cache's copies. */
void lease_file_pending_set(struct lease_store *s, const json_t *pair, const json_t *slots,
			    size_t lag);
void lease_file_pending_drop(struct lease_store *s);
/* A principal's recorded key, written once and never changed: NULL when not kept. */
const char *lease_file_cache_principal(struct lease_store *s, const char *name);
void lease_file_cache_principal_put(struct lease_store *s, const char *name, const char *hex);
void lease_file_close(struct lease_store *s);

/* recover.c */
int lease_file_boot_check(struct lease_store *s, struct common_err *e);
/* Roll the last journal receipt forward into its record (under the lock). */
int lease_file_recover(struct lease_store *s, struct common_err *e);

/* rebuild.c: after a crash of the machine (another boot id), rewrite every record
 * and the slot index from the journal, durably. */
int lease_file_rebuild(struct lease_store *s, struct common_err *e);

/* journal.c */
/* Call fn for every journal line (1-based lineno); stops when fn returns < 0. */
int lease_file_journal_each(struct lease_store *s,
			    int (*fn)(void *, size_t, const char *, size_t), void *arg,
			    struct common_err *e);
int lease_file_ids(struct lease_store *s, char ***ids, size_t *n, struct common_err *e);
int lease_file_receipts(struct lease_store *s, const char *id, int64_t after, lease_line_fn fn,
			void *arg, struct common_err *e);

/* principal.c */
int lease_file_principal_get(struct lease_store *s, const char *name, char **key, char **where,
			     struct common_err *e);
int lease_file_principal_put(struct lease_store *s, const char *name, const char *hex,
			     struct common_err *e);

/* snapshot.c: no snapshot records (see lease_backend) */
int lease_file_snap_get(struct lease_store *s, const char *hex, json_t **rec, struct common_err *e);
int lease_file_snap_put(struct lease_store *s, const char *hex, const json_t *rec,
			struct common_err *e);
int lease_file_snap_del(struct lease_store *s, const char *hex, struct common_err *e);
int lease_file_snap_all(struct lease_store *s, json_t **recs, struct common_err *e);

#endif
