/* Usage parked on the host while its etcd store is unreachable (SPEC §14): the
 * guest stays bounded by this host's meter; each lease's highest usage is kept
 * durable in HOSTDIR/parked/ID.json and observed into etcd at the next opening of
 * the store on this host. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

#define PARKED_MAX 4096

int lease_store_unreachable(const struct lease_store *s)
{
	return s->be->unreachable && s->be->unreachable(s);
}

/* parked/.lock: parking waits for it; a replay already under way elsewhere is left alone */
static int park_lock(struct lease_store *s, int wait, struct common_err *e)
{
	char *p = lease_path(s, "parked/.lock");
	int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0 || flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) < 0) {
		common_errno(e, errno, "%s", p);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	free(p);
	return fd;
}

/* usage of a parked file; -1 when it is not one */
static int parked_read(const char *path, char id[64], uint64_t u[LEASE_DIM_COUNT])
{
	json_t *j = common_json_load_file(path, PARKED_MAX, NULL), *use;
	const char *lid = lease_jstr(j, "lease");
	int rc = -1;

	use = json_object_get(j, "usage");
	if (lid && lease_id_valid(lid) && json_is_object(use)) {
		snprintf(id, 64, "%s", lid);
		rc = 0;
		/* an absent or negative dimension is no usage (lease_jint's -1 would read as UINT64_MAX) */
		for (int d = 0; d < LEASE_DIM_COUNT; d++) {
			int64_t v = lease_jint(use, lease_dim_name((enum lease_dim)d));
			if (v < 0)
				rc = -1;
			u[d] = (uint64_t)v;
		}
	}
	json_decref(j);
	return rc;
}

int lease_observe_park(struct lease_store *s, const char *id,
		       const uint64_t usage[LEASE_DIM_COUNT], struct common_err *e)
{
	uint64_t u[LEASE_DIM_COUNT], old[LEASE_DIM_COUNT];
	char *dir = lease_path(s, "parked"), *p, *text, oid[64];
	json_t *j, *use;
	int fd, rc;

	if (!lease_id_valid(id)) {
		free(dir);
		return common_errf(e, id, "not a lease id");
	}
	memcpy(u, usage, sizeof u);
	if (common_mkdir_p(dir, 0700, e) < 0 || (fd = park_lock(s, 1, e)) < 0) {
		free(dir);
		return -1;
	}
	p = lease_path(s, "parked/%s.json", id);
	/* usage only grows: a parked value stays unless this one is higher */
	if (parked_read(p, oid, old) == 0)
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			u[d] = old[d] > u[d] ? old[d] : u[d];
	use = json_object();
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		json_object_set_new(use, lease_dim_name((enum lease_dim)d), json_integer((json_int_t)u[d]));
	j = json_pack("{s:s, s:o}", "lease", id, "usage", use);
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	rc = common_write_atomic(p, text, strlen(text), 0600, e);
	free(text);
	json_decref(j);
	free(p);
	free(dir);
	common_unlock(fd);
	return rc;
}

/* One parked file observed: 1 done (recorded, or refused for good: the lease moved
 * on or holds more), 0 kept (the store is still unreachable). */
static int replay_one(struct lease_store *s, const char *path)
{
	uint64_t u[LEASE_DIM_COUNT];
	const char *closed;
	json_t *rec = NULL;
	char id[64];

	if (parked_read(path, id, u) < 0) { /* damaged: kept aside for a person, never observed */
		char *bad = common_xasprintf("%s.bad", path);
		rename(path, bad);
		free(bad);
		return 1;
	}
	int r = lease_observe_usage(s, id, u, &closed, &rec, NULL);
	json_decref(rec);
	if (r < 0 && lease_store_unreachable(s))
		return 0;
	unlink(path);
	return 1;
}

void lease_parked_replay(struct lease_store *s)
{
	char *dir = lease_path(s, "parked"), *p;
	struct dirent *de;
	DIR *d;
	int fd;

	if (!s->etcd || access(dir, F_OK) < 0 || (fd = park_lock(s, 0, NULL)) < 0) {
		free(dir);
		return;
	}
	if ((d = opendir(dir))) {
		while ((de = readdir(d))) {
			size_t n = strlen(de->d_name);
			if (de->d_name[0] == '.' || n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
				continue;
			p = common_xasprintf("%s/%s", dir, de->d_name);
			int done = replay_one(s, p);
			free(p);
			if (!done)
				break;
		}
		closedir(d);
	}
	free(dir);
	common_unlock(fd);
}
