/* The store's front (SPEC §2): opening and creating a store, its key, the lock, the
 * clock; what is stored where is the back end's (s->be). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

#define RETRY_MAX 400
#define KEY_HEX 128

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
	s->lock_gen++;
	if (s->be->boot_check && s->key.has_priv && !s->boot_ok && s->be->boot_check(s, e) < 0) {
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
	s->kept_ok = 0;
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
		r = lease_json_write(p, clk, 0600, e);
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
	if (r == 0 && s->be->open)
		r = s->be->open(s, e);
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
	if (s->be->close)
		s->be->close(s);
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

int lease_recover(struct lease_store *s, struct common_err *e)
{
	return s->be->recover ? s->be->recover(s, e) : 0;
}

int lease_slots_read(struct lease_store *s, const char *principal, json_t **slots,
		     struct common_err *e)
{
	return s->be->slots_read(s, principal, slots, e);
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

int lease_retry(struct lease_store *s, unsigned *attempt)
{
	unsigned cap = *attempt < 6 ? 1u << *attempt : 64, r = 0;
	struct timespec ts;

	if (!s->conflict)
		return 0;
	s->conflict = 0;
	if (++*attempt > RETRY_MAX)
		return 0;
	/* a random pause spreads the losers of one race over the next rounds */
	if (getrandom(&r, sizeof r, 0) < 0)
		r = (unsigned)getpid();
	ts.tv_sec = 0;
	ts.tv_nsec = (long)(r % (cap * 1000)) * 1000L;
	nanosleep(&ts, NULL);
	return 1;
}
