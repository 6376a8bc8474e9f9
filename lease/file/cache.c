/* What this process last wrote or read of the directory store's derived files
 * (records, the slot index), kept in memory while the journal is exactly as this
 * process's last complete commit left it (s->jst): every commit appends to the
 * journal before it touches a derived file, so an unchanged journal means no other
 * process has changed one since. A transition then reads nothing back from disk. */
#include <stdlib.h>
#include <sys/stat.h>
#include "lease/file/file-internal.h"

int lease_file_cache_fresh(struct lease_store *s)
{
	struct stat st;
	char *p;
	int same;

	if (!s->fcache)
		s->fcache = json_object();
	if (!s->jst_ok)
		return 0;
	p = lease_path(s, "journal.jsonl");
	same = stat(p, &st) == 0 && common_same_file(&st, &s->jst);
	free(p);
	if (!same)
		lease_file_journal_forget(s);
	return same;
}

json_t *lease_file_cache_get(struct lease_store *s, const char *key)
{
	json_t *v = s->fcache ? json_object_get(s->fcache, key) : NULL;

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

/* The derived files go; principals' keys (written once, never changed) stay. */
void lease_file_journal_forget(struct lease_store *s)
{
	s->jst_ok = 0;
	cache_drop(s);
}

void lease_file_forget(struct lease_store *s)
{
	s->jst_ok = 0;
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
	json_decref(s->fcache);
	s->fcache = NULL;
}
