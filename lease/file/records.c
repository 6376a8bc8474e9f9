/* The directory back end: records, the slot index, the clock file and the journal
 * append of a commit (SPEC §2). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

#define CLOCK_MAX 4096

/* Records, the slot index and caches: temp + rename, fsynced only when s->durable. */
static int lease_write_derived(struct lease_store *s, const char *path, const char *buf, size_t len,
			struct common_err *e)
{
	char *tmp;
	int fd, r;

	if (s->durable)
		return common_write_atomic(path, buf, len, 0600, e);
	tmp = common_xasprintf("%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = common_errno(e, errno, "%s", tmp);
		free(tmp);
		return r;
	}
	r = common_write_all(fd, buf, len);
	close(fd);
	if (r < 0) {
		common_errno(e, -r, "write %s", tmp);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	common_fault_point("atomic-before-rename");
	/* An exchange, unlike a rename over the old file, does not make ext4 allocate
	 * and start writing the new blocks now (auto_da_alloc): ~0.5 ms per record. */
	r = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE);
	if (r < 0 && (errno == ENOENT || errno == EINVAL || errno == ENOSYS))
		r = rename(tmp, path);
	else if (r == 0)
		r = unlink(tmp) < 0 && errno != ENOENT ? -1 : 0;
	if (r < 0) {
		common_errno(e, errno, "rename %s", path);
		unlink(tmp);
	}
	free(tmp);
	return r < 0 ? -1 : 0;
}

static int write_derived_json(struct lease_store *s, const char *path, const json_t *j,
			      struct common_err *e)
{
	char *c = common_json_canonical(j), *line = common_xasprintf("%s\n", c);
	int r = lease_write_derived(s, path, line, strlen(line), e);

	free(line);
	free(c);
	return r;
}

static int file_clock_read(struct lease_store *s, json_t **out, struct common_err *e)
{
	char *p = lease_path(s, "clock.json");

	*out = common_json_load_file(p, CLOCK_MAX, e);
	free(p);
	return *out ? 0 : -1;
}

static int file_clock_write(struct lease_store *s, const json_t *clk, struct common_err *e)
{
	char *p = lease_path(s, "clock.json");
	int r = lease_json_write(p, clk, 0600, e);

	free(p);
	return r;
}

int lease_file_pair_read(struct lease_store *s, const char *id, json_t **pair,
			  struct common_err *e)
{
	char *p, *buf, key[LEASE_ID_LEN + 8];
	int fresh = lease_id_valid(id) && lease_file_cache_fresh(s);
	size_t len;
	json_t *j;

	snprintf(key, sizeof key, "lease/%s", id);
	if (fresh && (*pair = lease_file_cache_get(s, key)))
		return 0;
	*pair = NULL;
	p = lease_path(s, "leases/%s.json", id);
	if (access(p, F_OK) < 0 && errno == ENOENT) {
		free(p);
		return 0;
	}
	if (common_read_file(p, LEASE_RECORD_MAX, &buf, &len, e) < 0) {
		free(p);
		return -1;
	}
	j = common_json_load(buf, len, p, e);
	free(buf);
	if (!j) {
		free(p);
		return -1;
	}
	if (!json_is_object(j) || !json_is_object(json_object_get(j, "receipt")) ||
	    !json_is_object(json_object_get(j, "lease"))) {
		common_errf(e, p, "expected {\"lease\": RECORD, \"receipt\": RECEIPT}");
		json_decref(j);
		free(p);
		return -1;
	}
	if (lease_record_check(json_object_get(j, "lease"), p, e) < 0) {
		json_decref(j);
		free(p);
		return -1;
	}
	free(p);
	if (fresh)
		lease_file_cache_put(s, key, j);
	*pair = j;
	return 0;
}

int lease_file_pair_write(struct lease_store *s, const char *id, const json_t *pair,
		     struct common_err *e)
{
	char *p = lease_path(s, "leases/%s.json", id);
	int r = write_derived_json(s, p, pair, e);

	free(p);
	return r;
}

int lease_file_slots_read(struct lease_store *s, const char *principal, json_t **slots,
			   struct common_err *e)
{
	int fresh = lease_file_cache_fresh(s);
	char *p;
	json_t *j;

	(void)principal;
	if (fresh && (*slots = lease_file_cache_get(s, "slots")))
		return 0;
	p = lease_path(s, "slots.json");
	if (access(p, F_OK) < 0 && errno == ENOENT) {
		j = json_object();
	} else {
		j = common_json_load_file(p, COMMON_JSON_MAX, e);
		if (j && !json_is_object(j)) {
			json_decref(j);
			j = NULL;
			common_errf(e, p, "expected an object of principal: [lease ids]");
		}
	}
	free(p);
	if (!j)
		return -1;
	if (fresh)
		lease_file_cache_put(s, "slots", j);
	*slots = j;
	return 0;
}

/* Make the slot index agree with the record: id listed under its principal iff live.
 * 1 when slots changed. */
static int slots_apply(json_t *slots, const char *principal, const char *id, int live)
{
	json_t *list = json_object_get(slots, principal);
	size_t i, found = (size_t)-1;

	if (!json_is_array(list)) {
		list = json_array();
		json_object_set_new(slots, principal, list);
	}
	for (i = 0; i < json_array_size(list); i++) {
		const char *v = json_string_value(json_array_get(list, i));
		if (v && strcmp(v, id) == 0)
			found = i;
	}
	if (live && found == (size_t)-1)
		json_array_append_new(list, json_string(id));
	else if (!live && found != (size_t)-1)
		json_array_remove(list, found);
	if (json_array_size(list) == 0)
		json_object_del(slots, principal);
	return (live && found == (size_t)-1) || (!live && found != (size_t)-1);
}

static int slots_write(struct lease_store *s, const json_t *slots, struct common_err *e)
{
	char *p = lease_path(s, "slots.json");
	int r = write_derived_json(s, p, slots, e);

	free(p);
	return r;
}

/* The effects with the slot index as *slots says (NULL: read it), left in *slots:
 * 1 when the index changed and is not written yet (defer), else written. */
static int effects_with(struct lease_store *s, const json_t *rec, json_t **slots, int defer,
			struct common_err *e)
{
	enum lease_state state;
	int changed;

	if (lease_ns_effect(s, rec, e) < 0)
		return -1;
	if (!*slots && lease_file_slots_read(s, NULL, slots, e) < 0)
		return -1;
	lease_state_parse(lease_jstr(rec, "state"), &state);
	changed = slots_apply(*slots, lease_jstr(rec, "principal"), lease_jstr(rec, "id"),
			      lease_state_live(state));
	if (!changed || defer)
		return changed;
	return slots_write(s, *slots, e);
}

int lease_file_effects(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	json_t *slots = NULL;
	int r = effects_with(s, rec, &slots, 0, e);

	json_decref(slots);
	return r;
}

/* Remember the journal as a complete commit left it (lease_file_recover skips then). */
void lease_file_journal_note(struct lease_store *s)
{
	struct lease_file_mem *m = lease_file_pending(s);
	char *p;

	if (m->jfd >= 0) {
		s->jst_ok = fstat(m->jfd, &s->jst) == 0;
	} else {
		p = lease_path(s, "journal.jsonl");
		s->jst_ok = stat(p, &s->jst) == 0;
		free(p);
	}
	m->gen = s->jst_ok && s->lockfd >= 0 ? s->lock_gen : 0;
}

int lease_file_flush(struct lease_store *s, struct common_err *e)
{
	struct lease_file_mem *m = lease_file_pending(s);
	const char *id = lease_jstr(json_object_get(m->pair, "lease"), "id");

	if (!m->pair || !lease_file_cache_fresh(s))
		return 0;
	if (lease_file_pair_write(s, id, m->pair, e) < 0)
		return -1;
	common_fault_point("lease-flush-after-record");
	if (m->slots && slots_write(s, m->slots, e) < 0)
		return -1;
	lease_file_pending_drop(s);
	common_fault_point("lease-after-flush");
	return 0;
}

void lease_file_flush_at_close(struct lease_store *s)
{
	char *p;
	int fd;

	if (!s->fmem || !s->fmem->pair)
		return;
	p = lease_path(s, "lock");
	/* never waits: another holder (another handle of this process too) would
	 * block us, and whoever locks next rolls the record forward anyway */
	fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	free(p);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		s->lockfd = fd;
		s->lock_gen++;
		lease_file_flush(s, NULL);
		s->lockfd = -1;
	}
	close(fd);
}

/* Append buf to the journal and make it durable: one write and one fsync, through
 * the descriptor kept while the journal is as this process's last commit left it. */
static int journal_append(struct lease_store *s, const char *buf, size_t len,
			  struct common_err *e)
{
	struct lease_file_mem *m = lease_file_pending(s);
	char *p = NULL;
	int r;

	if (m->jfd < 0) {
		p = lease_path(s, "journal.jsonl");
		m->jfd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (m->jfd < 0) {
			r = common_errno(e, errno, "%s", p);
			free(p);
			return r;
		}
		free(p);
	}
	r = common_write_all(m->jfd, buf, len);
	if (r < 0 || fsync(m->jfd) < 0) {
		r = r < 0 ? -r : errno;
		close(m->jfd);
		m->jfd = -1;
		p = lease_path(s, "journal.jsonl");
		common_errno(e, r, "append %s", p);
		free(p);
		return -1;
	}
	return 0;
}

/* Commit sealed receipts of one lease (rec folds them all). The journal is the truth
 * and is written first, in one append, its only fsync; a kill after it is rolled
 * forward by lease_file_recover, a kill before it leaves nothing, a kill within it
 * whole receipts up to a torn line that recovery cuts. The record and the slot index
 * stay in memory (the journal's last lease may lag, LEASE_LAG_MAX) while no other
 * process appends: the record of another lease the last commit left is written
 * before this append, so that only the journal's last lease ever lags. */
static int file_commit(struct lease_store *s, const json_t *rs, const json_t *rec,
		       struct common_err *e)
{
	struct lease_file_mem *m = lease_file_pending(s);
	char *c, *buf = NULL, key[LEASE_ID_LEN + 8];
	size_t len = 0, i, n = json_array_size(rs), lag = 0;
	const char *id = lease_jstr(json_array_get(rs, 0), "lease");
	json_t *pair = NULL, *r, *slots = NULL;
	int rc = -1, dirty = 0, keep;

	/* under the store lock: what the cache says is on disk stays so until we write */
	if (lease_file_cache_fresh(s)) {
		const char *pid = lease_jstr(json_object_get(m->pair, "lease"), "id");
		if (pid && strcmp(pid, id) == 0 && m->lag + n <= LEASE_LAG_MAX && !m->others) {
			lag = m->lag;
			dirty = m->slots != NULL;
		} else if (lease_file_flush(s, e) < 0) {
			return -1;
		}
		slots = lease_file_cache_get(s, "slots");
	}
	keep = !m->others;
	json_array_foreach(rs, i, r) {
		c = common_json_canonical(r);
		buf = common_xrealloc(buf, len + strlen(c) + 2);
		len += (size_t)sprintf(buf + len, "%s\n", c);
		free(c);
	}
	lease_file_journal_forget(s);
	rc = journal_append(s, buf, len, e);
	free(buf);
	if (rc < 0)
		goto out;
	common_fault_point("lease-after-journal");
	r = json_array_get(rs, n - 1);
	pair = json_pack("{s:O, s:O}", "lease", rec, "receipt", r);
	if (!keep && (rc = lease_file_pair_write(s, id, pair, e)) < 0)
		goto out;
	common_fault_point("lease-after-record");
	if ((rc = effects_with(s, rec, &slots, keep, e)) < 0)
		goto out;
	dirty |= rc;
	rc = 0;
	common_fault_point("lease-after-effects");
	lease_file_journal_note(s);
	snprintf(key, sizeof key, "lease/%s", id);
	lease_file_cache_put(s, key, pair);
	lease_file_cache_put(s, "slots", slots);
	if (s->jst_ok && keep)
		lease_file_pending_set(s, pair, dirty ? slots : NULL, lag + n);
out:
	json_decref(slots);
	json_decref(pair);
	return rc < 0 ? -1 : 0;
}

const struct lease_backend lease_file_backend = {
	.pair_read = lease_file_pair_read,
	.slots_read = lease_file_slots_read,
	.commit = file_commit,
	.clock_read = file_clock_read,
	.clock_write = file_clock_write,
	.ids = lease_file_ids,
	.receipts = lease_file_receipts,
	.snap_get = lease_file_snap_get,
	.snap_put = lease_file_snap_put,
	.snap_del = lease_file_snap_del,
	.snap_all = lease_file_snap_all,
	.boot_check = lease_file_boot_check,
	.recover = lease_file_recover,
	.principal_get = lease_file_principal_get,
	.principal_put = lease_file_principal_put,
	.close = lease_file_close,
	.forget = lease_file_forget,
};
