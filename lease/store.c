/* The store directory: creation, key, lock, clock, record files, crash recovery (SPEC §2). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/lease-internal.h"

#define CLOCK_MAX 4096
#define KEY_HEX 128

char *lease_path(const struct lease_store *s, const char *fmt, ...)
{
	char *rel, *full;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&rel, fmt, ap) < 0)
		abort();
	va_end(ap);
	full = common_xasprintf("%s/%s", s->dir, rel);
	free(rel);
	return full;
}

/* The kernel's boot id, NULL when unknown. */
static const char *lease_boot_id(struct lease_store *s)
{
	if (s->boot[0] == '\0' && common_boot_id(s->boot) < 0)
		snprintf(s->boot, sizeof s->boot, "-");
	return strlen(s->boot) == 36 ? s->boot : NULL;
}

/* Derived files (records, slot index) are written without fsync; "boot" names the
 * boot whose page cache holds them. Any other boot may have lost some to a crash,
 * so its first locker rebuilds them from the journal before anyone reads them. */
static int boot_check(struct lease_store *s, struct common_err *e)
{
	const char *now = lease_boot_id(s);
	char line[38], *p, *buf = NULL;
	size_t len = 0;
	int r = 0;

	if (!now) {
		s->durable = 1;
		s->boot_ok = 1;
		return 0;
	}
	p = lease_path(s, "boot");
	snprintf(line, sizeof line, "%s\n", now);
	if (common_read_file(p, 64, &buf, &len, NULL) < 0 || len != 37 || memcmp(buf, line, 37) != 0) {
		r = lease_rebuild(s, e);
		if (r == 0)
			r = common_write_atomic(p, line, 37, 0600, e);
	}
	free(buf);
	free(p);
	if (r == 0)
		s->boot_ok = 1;
	return r;
}

/* With etcd the store is shared through transactions: the host lock is shared by
 * this host's transitions and taken alone only for run claims (excl). */
static int lock_mode(struct lease_store *s, int excl, struct common_err *e)
{
	char *p;

	if (s->lock_depth++ > 0)
		return 0;
	p = lease_path(s, "lock");
	s->lockfd = s->etcd && !excl ? common_lock_shared(p, e) : common_lock(p, e);
	free(p);
	json_object_clear(s->reads);
	if (s->lockfd < 0) {
		s->lock_depth = 0;
		return -1;
	}
	if (!s->etcd && s->key.has_priv && !s->boot_ok && boot_check(s, e) < 0) {
		lease_unlock(s);
		return -1;
	}
	return 0;
}

int lease_lock(struct lease_store *s, struct common_err *e)
{
	return lock_mode(s, 0, e);
}

int lease_lock_host(struct lease_store *s, struct common_err *e)
{
	return lock_mode(s, 1, e);
}

void lease_unlock(struct lease_store *s)
{
	if (s->lock_depth == 0 || --s->lock_depth > 0)
		return;
	common_unlock(s->lockfd);
	s->lockfd = -1;
	json_object_clear(s->reads);
}

/* $XDG_STATE_HOME/LEAF, else ~/.local/state/LEAF */
static char *state_dir(const char *leaf)
{
	const char *v = getenv("XDG_STATE_HOME");

	if (v && *v)
		return common_xasprintf("%s/%s", v, leaf);
	v = getenv("HOME");
	if (!v || !*v) {
		struct passwd *pw = getpwuid(getuid());
		v = pw ? pw->pw_dir : "/";
	}
	return common_xasprintf("%s/.local/state/%s", v, leaf);
}

static char *default_store(void)
{
	const char *v = getenv("SBX_STORE");

	return v && *v ? common_xstrdup(v) : state_dir("sbx");
}

/* With etcd, this host's part of the store: $SBX_HOST_DIR, else STATE/sbx-host. */
static char *host_dir(void)
{
	const char *v = getenv("SBX_HOST_DIR");

	return v && *v ? common_xstrdup(v) : state_dir("sbx-host");
}

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

static int write_json(const char *path, const json_t *j, mode_t mode, struct common_err *e)
{
	char *c = common_json_canonical(j), *line;
	int r;

	line = common_xasprintf("%s\n", c);
	r = common_write_atomic(path, line, strlen(line), mode, e);
	free(line);
	free(c);
	return r;
}

/* Only an empty directory (or one left by an interrupted creation) becomes a store:
 * never chmod or fill a directory that holds something else. */
static int looks_new(const char *dir)
{
	static const char *const ours[] = { ".", "..", "lock", "clock.json", "leases", "ns",
					    "snapshots", "authority.pub" };
	struct dirent *de;
	DIR *d = opendir(dir);
	int ok = 1;

	if (!d)
		return 0;
	while (ok && (de = readdir(d))) {
		int known = strstr(de->d_name, ".tmp.") != NULL;
		for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
			known |= strcmp(de->d_name, ours[i]) == 0;
		ok = known;
	}
	closedir(d);
	return ok;
}

/* First use: directories, clock, then the key files (authority.key last marks "created"). */
static int store_create(struct lease_store *s, struct common_err *e)
{
	static const char *const sub[] = { "leases", "ns", "snapshots" };
	char hex[KEY_HEX + 2], *p;
	json_t *clk;
	int r;

	if (!looks_new(s->dir))
		return common_errf(e, "not an sbx store", "directory is not empty and has no authority.key");
	if (chmod(s->dir, 0700) < 0)
		return common_errno(e, errno, "store %s", s->dir);
	for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
		p = lease_path(s, "%s", sub[i]);
		r = common_mkdir_p(p, 0700, e);
		free(p);
		if (r < 0)
			return -1;
	}
	p = lease_path(s, "clock.json");
	if (!s->etcd && access(p, F_OK) < 0) {
		clk = json_pack("{s:s, s:I, s:I, s:I}", "mode", "wall", "epoch_ms",
				(json_int_t)common_now_ms(), "batch_ms", (json_int_t)1000, "batch",
				(json_int_t)0);
		r = write_json(p, clk, 0600, e);
		json_decref(clk);
		if (r < 0) {
			free(p);
			return -1;
		}
	}
	free(p);
	if (common_key_generate(&s->key, e) < 0)
		return -1;
	common_hex(s->key.pub, 32, hex);
	strcat(hex, "\n");
	p = lease_path(s, "authority.pub");
	r = common_write_atomic(p, hex, strlen(hex), 0644, e);
	free(p);
	if (r < 0)
		return -1;
	common_hex(s->key.priv, 32, hex);
	common_hex(s->key.pub, 32, hex + 64);
	strcat(hex, "\n");
	p = lease_path(s, "authority.key");
	r = common_write_atomic(p, hex, strlen(hex), 0600, e);
	free(p);
	return r;
}

static int load_key(struct lease_store *s, const char *p, struct common_err *e)
{
	char *buf;
	size_t len;

	if (common_read_file(p, 4096, &buf, &len, e) < 0)
		return -1;
	if (len < KEY_HEX || (len > KEY_HEX && buf[KEY_HEX] != '\n'))
		len = 0;
	else
		buf[KEY_HEX] = '\0';
	if (len == 0 || common_unhex(buf + 64, s->key.pub, 32) < 0 ||
	    (buf[64] = '\0', common_unhex(buf, s->key.priv, 32)) < 0) {
		free(buf);
		return common_errf(e, p, "malformed authority key (expected 128 hex digits)");
	}
	free(buf);
	s->key.has_priv = 1;
	return 0;
}

static const struct lease_backend lease_file_backend; /* the directory's, below */

int lease_store_open(const char *dir, struct lease_store **out, struct common_err *e)
{
	struct lease_store *s = common_xcalloc(1, sizeof *s);
	char *kp;
	int r = 0;

	s->name = dir ? common_xstrdup(dir) : default_store();
	s->be = &lease_file_backend;
	s->reads = json_object();
	s->lockfd = -1;
	if (lease_etcd_url(s->name)) {
		s->be = &lease_etcd_backend;
		s->dir = host_dir();
		if (lease_etcd_open(s->name, &s->etcd, e) < 0)
			goto fail;
	} else {
		s->dir = common_xstrdup(s->name);
	}
	if (common_mkdir_p(s->dir, 0700, e) < 0)
		goto fail;
	s->snapshared = getenv("SBX_SNAPSHOT_DIR") && *getenv("SBX_SNAPSHOT_DIR");
	s->snapdir = s->snapshared ? common_xstrdup(getenv("SBX_SNAPSHOT_DIR"))
				   : lease_path(s, "snapshots");
	kp = lease_path(s, "authority.key");
	if (access(kp, F_OK) < 0) {
		/* Re-check the key: a concurrent first use may have just created the store. */
		if (!looks_new(s->dir) && access(kp, F_OK) < 0) {
			free(kp);
			common_errf(e, "not an sbx store", "directory is not empty and has no authority.key");
			goto fail;
		}
		/* alone even with etcd, where this host's transitions share the lock */
		if (lease_lock_host(s, e) < 0) {
			free(kp);
			goto fail;
		}
		if (access(kp, F_OK) < 0)
			r = store_create(s, e);
		lease_unlock(s);
	}
	if (r == 0)
		r = load_key(s, kp, e);
	free(kp);
	if (r == 0 && s->etcd)
		r = lease_shared_open(s, e);
	if (r < 0)
		goto fail;
	lease_parked_replay(s);
	*out = s;
	return 0;
fail:
	/* an etcd error names the store already; the directory is this host's part */
	if (!(s->be == &lease_etcd_backend && e && strcmp(e->what, "store") == 0))
		common_err_context(e, "store %s", s->dir ? s->dir : s->name);
	lease_store_close(s);
	return -1;
}

void lease_store_close(struct lease_store *s)
{
	if (!s)
		return;
	while (s->lock_depth > 0)
		lease_unlock(s);
	json_decref(s->clk);
	json_decref(s->reads);
	json_decref(s->signers);
	lease_etcd_close(s->etcd);
	lease_keys_forget(s);
	free(s->dir);
	free(s->snapdir);
	free(s->name);
	free(s);
}

const char *lease_store_dir(const struct lease_store *s)
{
	return s->dir;
}

const char *lease_store_name(const struct lease_store *s)
{
	return s->name;
}

char *lease_ns_dir(const struct lease_store *s, const char *id)
{
	return lease_path(s, "ns/%s", id);
}

static int file_clock_read(struct lease_store *s, json_t **out, struct common_err *e)
{
	char *p = lease_path(s, "clock.json");

	*out = common_json_load_file(p, CLOCK_MAX, e);
	free(p);
	return *out ? 0 : -1;
}

/* The clock: {"mode": "wall"|"manual", "epoch_ms", "batch_ms", "batch"}. */
static int clock_read(struct lease_store *s, json_t **out, struct common_err *e)
{
	json_t *j;
	const char *mode;

	if (s->be->clock_read(s, &j, e) < 0)
		return -1;
	mode = lease_jstr(j, "mode");
	if (!json_is_object(j) || !mode || (strcmp(mode, "wall") && strcmp(mode, "manual")) ||
	    lease_jint(j, "epoch_ms") < 0 || lease_jint(j, "batch_ms") <= 0 ||
	    lease_jint(j, "batch") < 0) {
		json_decref(j);
		return common_errf(e, "clock", "malformed clock in store %s (expected mode, epoch_ms, batch_ms, batch)",
				   s->name);
	}
	*out = j;
	return 0;
}

static uint64_t clock_batch(const json_t *clk)
{
	uint64_t now = common_now_ms(), epoch = (uint64_t)lease_jint(clk, "epoch_ms");

	if (strcmp(lease_jstr(clk, "mode"), "manual") == 0)
		return (uint64_t)lease_jint(clk, "batch");
	return now > epoch ? (now - epoch) / (uint64_t)lease_jint(clk, "batch_ms") : 0;
}

/* The clock is read at every transition but written only by set-mode and tick
 * (by rename): its parsed form is kept while the file stays the same. */
int lease_store_batch(struct lease_store *s, uint64_t *batch, struct common_err *e)
{
	char *p = lease_path(s, "clock.json");
	struct stat before, after;
	json_t *clk;
	int known = stat(p, &before) == 0;

	free(p);
	if (s->etcd) {
		if (clock_read(s, &clk, e) < 0)
			return -1;
		*batch = clock_batch(clk);
		json_decref(clk);
		return 0;
	}
	if (!(known && s->clk && common_same_file(&before, &s->cst))) {
		if (clock_read(s, &clk, e) < 0)
			return -1;
		json_decref(s->clk);
		s->clk = NULL;
		p = lease_path(s, "clock.json");
		if (known && stat(p, &after) == 0 && common_same_file(&before, &after)) {
			s->clk = clk;
			s->cst = after;
		}
		free(p);
		*batch = clock_batch(clk);
		if (!s->clk)
			json_decref(clk);
		return 0;
	}
	*batch = clock_batch(s->clk);
	return 0;
}

static json_t *clock_view(const json_t *clk)
{
	json_t *v = json_deep_copy(clk);

	json_object_set_new(v, "batch", json_integer((json_int_t)clock_batch(clk)));
	return v;
}

int lease_clock_get(struct lease_store *s, json_t **out, struct common_err *e)
{
	json_t *clk;

	if (clock_read(s, &clk, e) < 0)
		return -1;
	*out = clock_view(clk);
	json_decref(clk);
	return 0;
}

static int file_clock_write(struct lease_store *s, const json_t *clk, struct common_err *e)
{
	char *p = lease_path(s, "clock.json");
	int r = write_json(p, clk, 0600, e);

	free(p);
	return r;
}

static int set_mode(struct lease_store *s, const char *mode, json_t **out, struct common_err *e)
{
	json_t *clk = NULL;
	uint64_t b, ms;
	int r = -1;

	if (lease_lock(s, e) < 0)
		return -1;
	if (clock_read(s, &clk, e) < 0)
		goto out;
	if (strcmp(lease_jstr(clk, "mode"), mode) != 0) {
		/* Either way the batch continues from where it is: the clock stays monotonic. */
		b = clock_batch(clk);
		ms = (uint64_t)lease_jint(clk, "batch_ms");
		json_object_set_new(clk, "mode", json_string(mode));
		json_object_set_new(clk, "batch", json_integer((json_int_t)b));
		if (strcmp(mode, "wall") == 0)
			json_object_set_new(clk, "epoch_ms",
					    json_integer((json_int_t)(common_now_ms() - b * ms)));
		if (s->be->clock_write(s, clk, e) < 0)
			goto out;
	}
	*out = clock_view(clk);
	r = 0;
out:
	json_decref(clk);
	lease_unlock(s);
	return r;
}

int lease_clock_set_mode(struct lease_store *s, const char *mode, json_t **out,
			 struct common_err *e)
{
	unsigned attempt = 0;
	int r;

	if (strcmp(mode, "wall") && strcmp(mode, "manual"))
		return common_errf(e, "clock", "unknown mode \"%s\" (expected wall or manual)", mode);
	while ((r = set_mode(s, mode, out, e)) < 0 && lease_retry(s, &attempt))
		;
	return r;
}

static int tick(struct lease_store *s, uint64_t n, json_t **out, struct common_err *e)
{
	json_t *clk = NULL;
	uint64_t b;
	int r = -1;

	if (lease_lock(s, e) < 0)
		return -1;
	if (clock_read(s, &clk, e) < 0)
		goto out;
	if (strcmp(lease_jstr(clk, "mode"), "manual") != 0) {
		common_errf(e, "tick", "the store clock is in wall mode (run `sbx-lease clock manual` first)");
		goto out;
	}
	b = (uint64_t)lease_jint(clk, "batch");
	if (n > (uint64_t)INT64_MAX - b) {
		common_errf(e, "tick", "batch counter would overflow");
		goto out;
	}
	json_object_set_new(clk, "batch", json_integer((json_int_t)(b + n)));
	if (s->be->clock_write(s, clk, e) < 0)
		goto out;
	*out = clock_view(clk);
	r = 0;
out:
	json_decref(clk);
	lease_unlock(s);
	return r;
}

int lease_clock_tick(struct lease_store *s, uint64_t n, json_t **out, struct common_err *e)
{
	unsigned attempt = 0;
	int r;

	while ((r = tick(s, n, out, e)) < 0 && lease_retry(s, &attempt))
		;
	return r;
}

int lease_pair_read(struct lease_store *s, const char *id, json_t **pair, struct common_err *e)
{
	return s->be->pair_read(s, id, pair, e);
}

static int file_pair_read(struct lease_store *s, const char *id, json_t **pair,
			  struct common_err *e)
{
	char *p = lease_path(s, "leases/%s.json", id), *buf;
	size_t len;
	json_t *j;

	*pair = NULL;
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
	*pair = j;
	return 0;
}

static int lease_pair_write(struct lease_store *s, const char *id, const json_t *pair,
		     struct common_err *e)
{
	char *p = lease_path(s, "leases/%s.json", id);
	int r = write_derived_json(s, p, pair, e);

	free(p);
	return r;
}

int lease_slots_read(struct lease_store *s, const char *principal, json_t **slots,
		     struct common_err *e)
{
	return s->be->slots_read(s, principal, slots, e);
}

static int file_slots_read(struct lease_store *s, const char *principal, json_t **slots,
			   struct common_err *e)
{
	char *p = lease_path(s, "slots.json");

	(void)principal;
	json_t *j;

	if (access(p, F_OK) < 0 && errno == ENOENT) {
		free(p);
		*slots = json_object();
		return 0;
	}
	j = common_json_load_file(p, COMMON_JSON_MAX, e);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
		common_errf(e, p, "expected an object of principal: [lease ids]");
	}
	free(p);
	if (!j)
		return -1;
	*slots = j;
	return 0;
}

/* Make the slot index agree with the record: id listed under its principal iff live. */
static int slots_sync(struct lease_store *s, const char *principal, const char *id, int live,
		      struct common_err *e)
{
	json_t *slots, *list;
	size_t i, found = (size_t)-1;
	char *p;
	int r = 0;

	if (file_slots_read(s, NULL, &slots, e) < 0)
		return -1;
	list = json_object_get(slots, principal);
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
	else
		goto out;
	if (json_array_size(list) == 0)
		json_object_del(slots, principal);
	p = lease_path(s, "slots.json");
	r = write_derived_json(s, p, slots, e);
	free(p);
out:
	json_decref(slots);
	return r;
}

int lease_ns_effect(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	const char *id = lease_jstr(rec, "id"), *st = lease_jstr(rec, "state");
	enum lease_state state;
	char *ns;
	int r = 0;

	if (!id || !st || lease_state_parse(st, &state) < 0)
		return common_errf(e, "lease record", "missing id or state");
	ns = lease_ns_dir(s, id);
	if (state == LEASE_DESTROYED) {
		if (access(ns, F_OK) == 0)
			r = common_rm_rf(ns, e);
	} else if (access(ns, F_OK) < 0) {
		if (mkdir(ns, 0700) < 0 && errno != EEXIST)
			r = common_errno(e, errno, "namespace %s", ns);
	}
	free(ns);
	return r;
}

/* The idempotent side effects of a record's state: ns dir, slot index. */
static int lease_apply_effects(struct lease_store *s, const json_t *rec, struct common_err *e)
{
	enum lease_state state;

	if (lease_ns_effect(s, rec, e) < 0)
		return -1;
	lease_state_parse(lease_jstr(rec, "state"), &state);
	return slots_sync(s, lease_jstr(rec, "principal"), lease_jstr(rec, "id"),
			  lease_state_live(state), e);
}

/* Remember the journal as a complete commit left it (lease_recover skips then). */
static void lease_journal_note(struct lease_store *s)
{
	char *p = lease_path(s, "journal.jsonl");

	s->jst_ok = stat(p, &s->jst) == 0;
	free(p);
}

/* The journal's last `want` bytes cut to whole lines: *buf holds lines ending in '\n'
 * (*len 0 when none). *from_start when they begin at a line start. A torn tail (no
 * final newline) is cut off first: its transition never reached the record and was
 * never acknowledged. */
static int journal_window(struct lease_store *s, size_t want, char **buf, size_t *len,
			  int *from_start, struct common_err *e)
{
	char *p = lease_path(s, "journal.jsonl"), *b = NULL;
	struct stat st;
	size_t n, end;
	int fd, r = -1;

	*buf = NULL;
	*len = 0;
	*from_start = 1;
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		r = errno == ENOENT ? 0 : common_errno(e, errno, "%s", p);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		common_errno(e, errno, "%s", p);
		goto out;
	}
	n = (size_t)st.st_size < want ? (size_t)st.st_size : want;
	if (n == 0) {
		r = 0;
		goto out;
	}
	b = common_xmalloc(n + 1);
	if (pread(fd, b, n, st.st_size - (off_t)n) != (ssize_t)n) {
		common_errno(e, errno ? errno : EIO, "%s: reading the tail", p);
		goto out;
	}
	b[n] = '\0';
	end = n;
	if (b[n - 1] != '\n') {
		while (end > 0 && b[end - 1] != '\n')
			end--;
		if (end == 0 && (size_t)st.st_size > n) {
			common_errf(e, p, "last line longer than %u bytes", LEASE_LINE_MAX);
			goto out;
		}
		if (ftruncate(fd, st.st_size - (off_t)(n - end)) < 0 || fsync(fd) < 0) {
			common_errno(e, errno, "%s: cutting a torn last line", p);
			goto out;
		}
	}
	b[end] = '\0';
	*from_start = (size_t)st.st_size == n;
	*buf = b;
	*len = end;
	b = NULL;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(b);
	free(p);
	return r;
}

/* The receipts journaled after the record's head, oldest first: the trailing lines of
 * one lease, each the prev of the next (a batch of lease_steps is one append). NULL
 * when they do not chain up to the record (verify reports it); *more when the window
 * did not reach back far enough. */
static json_t *tail_chain(const char *buf, size_t len, int from_start, const json_t *pair,
			  int *more)
{
	const char *head = pair ? lease_jstr(json_object_get(pair, "lease"), "head") : NULL;
	json_t *chain = json_array(), *r;
	size_t end = len, start;
	const char *id = NULL, *want = NULL;

	*more = 0;
	while (json_array_size(chain) <= LEASE_STEPS_MAX) {
		start = end - 1;
		while (start > 0 && buf[start - 1] != '\n')
			start--;
		if (start == 0 && !from_start) {
			*more = 1;
			break;
		}
		r = common_json_load(buf + start, end - 1 - start, "journal.jsonl", NULL);
		if (!id)
			id = lease_jstr(r, "lease");
		if (!lease_id_valid(id) || !lease_jstr(r, "digest") || !lease_jstr(r, "lease") ||
		    strcmp(lease_jstr(r, "lease"), id) != 0 ||
		    (want && strcmp(lease_jstr(r, "digest"), want) != 0)) {
			json_decref(r);
			break;
		}
		json_array_insert_new(chain, 0, r);
		want = lease_jstr(r, "prev");
		if (head ? want && strcmp(want, head) == 0 : lease_jint(r, "seq") == 0)
			return chain;
		if (start == 0)
			break;
		end = start;
	}
	json_decref(chain);
	return NULL;
}

/* Where the last line of buf starts; -1 when the window cut it (too long). */
static ssize_t last_line(const char *buf, size_t len, int from_start)
{
	size_t start = len - 1;

	while (start > 0 && buf[start - 1] != '\n')
		start--;
	return start == 0 && !from_start ? -1 : (ssize_t)start;
}

int lease_recover(struct lease_store *s, struct common_err *e)
{
	json_t *pair = NULL, *rec = NULL, *np = NULL, *chain = NULL, *r = NULL, *last;
	const char *id, *head;
	char *buf = NULL, *p;
	size_t len, want = LEASE_LINE_MAX + 1, i;
	struct stat st;
	ssize_t start;
	int ret = -1, from_start, more, same;

	if (s->etcd)
		return 0; /* an etcd transaction is whole or absent: nothing to roll forward */
	/* Nothing was appended since this process's own complete commit. */
	p = lease_path(s, "journal.jsonl");
	same = s->jst_ok && stat(p, &st) == 0 && common_same_file(&st, &s->jst);
	free(p);
	if (same)
		return 0;
	s->jst_ok = 0;
again:
	if (journal_window(s, want, &buf, &len, &from_start, e) < 0)
		return -1;
	if (len == 0) {
		ret = 0;
		goto out;
	}
	start = last_line(buf, len, from_start);
	if (start < 0) {
		common_errf(e, "journal.jsonl", "last line longer than %u bytes", LEASE_LINE_MAX);
		goto out;
	}
	r = common_json_load(buf + start, len - 1 - (size_t)start, "journal.jsonl", NULL);
	id = lease_jstr(r, "lease");
	/* Not a receipt, or an unreadable record: not ours to repair; verify reports
	 * it, and the rest of the store stays usable. */
	if (!lease_id_valid(id) || !lease_jstr(r, "digest") || lease_pair_read(s, id, &pair, NULL) < 0) {
		ret = 0;
		goto out;
	}
	head = pair ? lease_jstr(json_object_get(pair, "lease"), "head") : NULL;
	if (head && strcmp(head, lease_jstr(r, "digest")) == 0) {
		/* The common case: the record is current; only the idempotent effects may lag. */
		ret = lease_apply_effects(s, json_object_get(pair, "lease"), e);
		goto out;
	}
	chain = tail_chain(buf, len, from_start, pair, &more);
	if (!chain && more && want < (LEASE_STEPS_MAX + 1) * (LEASE_LINE_MAX + 1)) {
		json_decref(pair);
		json_decref(r);
		pair = r = NULL;
		free(buf);
		buf = NULL;
		want = (LEASE_STEPS_MAX + 1) * (LEASE_LINE_MAX + 1);
		goto again;
	}
	if (!chain) {
		ret = 0;
		goto out;
	}
	/* Rolling forward needs receipts that really are ours. */
	rec = pair ? json_incref(json_object_get(pair, "lease")) : NULL;
	json_array_foreach(chain, i, last) {
		json_t *next;
		if (lease_receipt_verify(s, last, "journal.jsonl", NULL) < 0 ||
		    lease_fold(rec, last, &next, NULL) < 0) {
			ret = 0;
			goto out;
		}
		json_decref(rec);
		rec = next;
	}
	last = json_array_get(chain, json_array_size(chain) - 1);
	np = json_pack("{s:O, s:O}", "lease", rec, "receipt", last);
	if (lease_pair_write(s, id, np, e) < 0)
		goto out;
	ret = lease_apply_effects(s, rec, e);
out:
	if (ret == 0)
		lease_journal_note(s);
	free(buf);
	json_decref(r);
	json_decref(chain);
	json_decref(np);
	json_decref(rec);
	json_decref(pair);
	return ret;
}

int lease_store_sign(const struct lease_store *s, const void *msg, size_t len, uint8_t sig[64],
		     struct common_err *e)
{
	/* the receipt key signs only DSSE's pre-authentication encoding besides
	 * receipts: such a message can never read as a receipt */
	if (len < 7 || memcmp(msg, "DSSEv1 ", 7) != 0)
		return common_errf(e, "sign", "the store's key signs only DSSE messages");
	return common_key_sign(&s->key, msg, len, sig, e);
}

void lease_store_pubkey(const struct lease_store *s, uint8_t pub[32])
{
	memcpy(pub, s->key.pub, 32);
}

/* Commit sealed receipts of one lease (rec folds them all). The journal is the truth
 * and is written first, in one append; a kill after it is rolled forward by
 * lease_recover, a kill before it leaves nothing, a kill within it whole receipts
 * up to a torn line that recovery cuts. */
static int file_commit(struct lease_store *s, const json_t *rs, const json_t *rec,
		       struct common_err *e)
{
	char *c, *jp, *buf = NULL;
	size_t len = 0, i;
	json_t *pair, *r;
	int rc;

	json_array_foreach(rs, i, r) {
		c = common_json_canonical(r);
		buf = common_xrealloc(buf, len + strlen(c) + 2);
		len += (size_t)sprintf(buf + len, "%s\n", c);
		free(c);
	}
	s->jst_ok = 0;
	jp = lease_path(s, "journal.jsonl");
	rc = common_append_durable(jp, buf, len, e);
	free(jp);
	free(buf);
	if (rc < 0)
		return -1;
	common_fault_point("lease-after-journal");
	r = json_array_get(rs, json_array_size(rs) - 1);
	pair = json_pack("{s:O, s:O}", "lease", rec, "receipt", r);
	rc = lease_pair_write(s, lease_jstr(r, "lease"), pair, e);
	json_decref(pair);
	if (rc < 0)
		return -1;
	common_fault_point("lease-after-record");
	if (lease_apply_effects(s, rec, e) < 0)
		return -1;
	common_fault_point("lease-after-effects");
	lease_journal_note(s);
	return 0;
}

static const struct lease_backend lease_file_backend = {
	.pair_read = file_pair_read,
	.slots_read = file_slots_read,
	.commit = file_commit,
	.clock_read = file_clock_read,
	.clock_write = file_clock_write,
	.ids = lease_file_ids,
	.receipts = lease_file_receipts,
	.snap_get = lease_file_snap_get,
	.snap_put = lease_file_snap_put,
	.snap_del = lease_file_snap_del,
	.snap_all = lease_file_snap_all,
};
