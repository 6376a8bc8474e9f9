/* What this process last wrote or read of the directory store's derived files
 * (records, the slot index), kept in memory while the journal is exactly as this
 * process's last complete commit left it (s->jst): every commit appends to the
 * journal before it touches a derived file, so an unchanged journal means no other
 * process has changed one since. A transition then reads nothing back from disk.
 * Also kept: the journal's descriptor, and what the last commit left unwritten (the
 * record of the journal's last lease, the slot index), which any other process's
 * recovery rolls forward from the journal before it reads them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

static struct lease_file_mem *mem(struct lease_store *s)
{
	if (!s->fmem) {
		s->fmem = common_xcalloc(1, sizeof *s->fmem);
		s->fmem->jfd = -1;
	}
	return s->fmem;
}

static void journal_close(struct lease_store *s)
{
	struct lease_file_mem *m = mem(s);

	if (m->jfd >= 0)
		close(m->jfd);
	m->jfd = -1;
}

int lease_file_cache_fresh(struct lease_store *s)
{
	struct lease_file_mem *m = mem(s);
	struct stat st;
	char *p;
	int same;

	if (!s->fcache)
		s->fcache = json_object();
	if (!s->jst_ok) {
		journal_close(s);
		return 0;
	}
	/* checked under the lock still held: no other process can have appended since */
	if (s->lockfd >= 0 && m->gen == s->lock_gen)
		return 1;
	p = lease_path(s, "journal.jsonl");
	same = stat(p, &st) == 0 && common_same_file(&st, &s->jst);
	free(p);
	m->others = !same;
	if (!same) {
		journal_close(s);
		lease_file_journal_forget(s);
	} else if (s->lockfd >= 0) {
		m->gen = s->lock_gen;
	}
	return same;
}

/* What the last commit left unwritten under key, NULL when nothing. */
static json_t *pending(struct lease_store *s, const char *key)
{
	struct lease_file_mem *m = mem(s);
	const char *id;

	if (strcmp(key, "slots") == 0)
		return m->slots;
	id = lease_jstr(json_object_get(m->pair, "lease"), "id");
	return id && strncmp(key, "lease/", 6) == 0 && strcmp(key + 6, id) == 0 ? m->pair : NULL;
}

json_t *lease_file_cache_get(struct lease_store *s, const char *key)
{
	json_t *v = pending(s, key);

	if (!v)
		v = s->fcache ? json_object_get(s->fcache, key) : NULL;
	return v ? json_deep_copy(v) : NULL;
}

#define CACHE_MAX 64 /* records kept: a process that touches more starts over */

/* Drop every kept derived file, principals' keys aside. */
static void cache_drop(struct lease_store *s)
{
	json_t *keys = json_incref(json_object_get(s->fcache, "principals"));

	json_object_clear(s->fcache);
	if (json_object_size(keys) <= CACHE_MAX * 4)
		json_object_set(s->fcache, "principals", keys);
	json_decref(keys);
}

void lease_file_cache_put(struct lease_store *s, const char *key, const json_t *v)
{
	if (!s->jst_ok || !s->fcache)
		return;
	if (json_object_size(s->fcache) > CACHE_MAX)
		cache_drop(s);
	json_object_set_new(s->fcache, key, json_deep_copy(v));
}

/* v as the cache keeps it under key (kept values are never changed: readers get
 * copies), else a copy of v */
static json_t *kept_or_copy(struct lease_store *s, const char *key, const json_t *v)
{
	json_t *k = s->fcache ? json_object_get(s->fcache, key) : NULL;

	return k ? json_incref(k) : json_deep_copy(v);
}

void lease_file_pending_set(struct lease_store *s, const json_t *pair, const json_t *slots,
			    size_t lag)
{
	struct lease_file_mem *m = mem(s);
	char key[LEASE_ID_LEN + 8];
	const char *id = lease_jstr(json_object_get(pair, "lease"), "id");

	lease_file_pending_drop(s);
	snprintf(key, sizeof key, "lease/%s", id ? id : "");
	m->pair = id ? kept_or_copy(s, key, pair) : json_deep_copy(pair);
	m->slots = slots ? kept_or_copy(s, "slots", slots) : NULL;
	m->lag = lag;
}

struct lease_file_mem *lease_file_pending(struct lease_store *s)
{
	return mem(s);
}

void lease_file_pending_drop(struct lease_store *s)
{
	struct lease_file_mem *m = mem(s);

	json_decref(m->pair);
	json_decref(m->slots);
	m->pair = m->slots = NULL;
	m->lag = 0;
}

/* The derived files go, the unwritten ones too (whoever changed the journal rolled
 * them forward first); principals' keys (written once, never changed) stay. */
void lease_file_journal_forget(struct lease_store *s)
{
	s->jst_ok = 0;
	mem(s)->gen = 0;
	lease_file_pending_drop(s);
	cache_drop(s);
}

void lease_file_forget(struct lease_store *s)
{
	lease_file_journal_forget(s);
	journal_close(s);
	json_object_clear(s->fcache);
}

const char *lease_file_cache_principal(struct lease_store *s, const char *name)
{
	return json_string_value(json_object_get(json_object_get(s->fcache, "principals"), name));
}

void lease_file_cache_principal_put(struct lease_store *s, const char *name, const char *hex)
{
	json_t *keys;

	if (!s->fcache)
		s->fcache = json_object();
	if (!(keys = json_object_get(s->fcache, "principals")))
		json_object_set_new(s->fcache, "principals", keys = json_object());
	json_object_set_new(keys, name, json_string(hex));
}

void lease_file_close(struct lease_store *s)
{
	lease_file_flush_at_close(s);
	if (s->fmem) {
		lease_file_pending_drop(s);
		journal_close(s);
		free(s->fmem);
		s->fmem = NULL;
	}
	json_decref(s->fcache);
	s->fcache = NULL;
}
