/* snap: the sbx-snap and sbx-restore command lines. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "lease/lease.h"
#include "snap/snap-internal.h"
#include "trace/trace.h"
#include "sbx.h"

#define SNAP_META_MAX 65536

static const char *user_name(void)
{
	struct passwd *pw = getpwuid(getuid());
	return pw ? pw->pw_name : "unknown";
}

/* im's manifest must be the one the store registered (rec may be NULL: none). */
static int check_registered(const struct snap_image *im, const char *hex, const json_t *rec,
			    const char *dir, struct common_err *e)
{
	struct snap_manifest m;
	uint8_t mb[SNAP_MANIFEST_LEN];
	char got[2 * SNAP_MANIFEST_LEN + 1];

	common_hex(im->digest, 32, got);
	if (strcmp(got, hex) != 0)
		return common_errf(e, "snapshot", "%s: the chunks in %s hash to snapshot %s; refused",
				   hex, dir, got);
	memcpy(m.digest, im->digest, 32);
	m.len = im->len;
	m.chunks = (uint32_t)((im->len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX);
	snap_manifest_encode(&m, mb);
	common_hex(mb, sizeof mb, got);
	if (rec && strcmp(got, common_jstr(rec, "manifest", "")) != 0)
		return common_errf(e, "snapshot", "%s: the chunks in %s make manifest %s, the store "
				   "registered %s; refused", hex, dir, got, common_jstr(rec, "manifest", ""));
	return 0;
}

/* dir's manifest must be the registered one before anything it claims is read. */
static int manifest_registered(const char *dir, const char *hex, const json_t *rec,
			       struct common_err *e)
{
	char *mp = common_xasprintf("%s/manifest", dir), *mb, got[2 * SNAP_MANIFEST_LEN + 1] = "";
	size_t ml;
	int rc = common_read_file(mp, SNAP_MANIFEST_LEN + 1, &mb, &ml, e);
	if (rc == 0) {
		if (ml == SNAP_MANIFEST_LEN)
			common_hex((const uint8_t *)mb, ml, got);
		if (strcmp(got, common_jstr(rec, "manifest", "")) != 0)
			rc = common_errf(e, "snapshot", "%s: %s is not the manifest the store "
					 "registered (%s); refused", hex, mp, common_jstr(rec, "manifest", ""));
		free(mb);
	}
	free(mp);
	return rc;
}

/* The stored snapshot with digest hex, found where the store says, verified
 * against its registered manifest and decoded. */
static int load_snapshot(struct lease_store *s, const char *hex, struct snap_image *im,
			 json_t **meta, struct common_err *e)
{
	json_t *rec = NULL;
	if (lease_snapshot_lookup(s, hex, &rec, e) < 0)
		return -1;
	char *dir = lease_snapshot_chunks(s, hex, rec, e);
	if (!dir) {
		json_decref(rec);
		return -1;
	}
	int rc = rec ? manifest_registered(dir, hex, rec, e) : 0;
	if (rc == 0 && (rc = snap_store_read(dir, im, e)) < 0)
		common_err_context(e, "snapshot %s", hex);
	if (rc == 0 && (rc = check_registered(im, hex, rec, dir, e)) < 0)
		snap_image_free(im);
	json_decref(rec);
	if (rc == 0 && meta) {
		char *mp = common_xasprintf("%s/meta.json", dir);
		*meta = common_json_load_file(mp, SNAP_META_MAX, e);
		free(mp);
		if (!*meta || !json_is_object(*meta)) {
			snap_image_free(im);
			rc = *meta ? common_errf(e, hex, "meta.json is not an object") : -1;
			json_decref(*meta);
			*meta = NULL;
		}
	}
	free(dir);
	return rc;
}

int snap_load(struct lease_store *s, const char *hex, struct snap_image *im, json_t **meta,
	      struct common_err *e)
{
	return load_snapshot(s, hex, im, meta, e);
}

static int print_json(json_t *j, enum common_format f)
{
	int rc = common_json_print(j, f == COMMON_FMT_TEXT);
	json_decref(j);
	return rc < 0 ? SBX_EXIT_SBX : SBX_EXIT_OK;
}

static int cmd_take(struct lease_store *s, const char *lease, int stop, const char *principal,
		    enum common_format f, struct common_err *e)
{
	json_t *rec = NULL;
	if (lease_load(s, lease, &rec, e) < 0)
		return SBX_EXIT_FAIL;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	const char *who = principal ? principal : user_name();
	if (strcmp(common_jstr(l, "principal", ""), who) != 0) {
		common_errf(e, "snapshot", "lease %s belongs to principal %s, not %s: only its "
			    "renter may snapshot it", lease, common_jstr(l, "principal", ""), who);
		json_decref(rec);
		return SBX_EXIT_FAIL;
	}
	/* renter-authorized: the run makes the edge, signed here by the renter's key */
	char pub[65], sig[129];
	int signed_ok = lease_renter_presign(s, l, LEASE_EDGE_SNAPSHOT, pub, sig, e);
	json_decref(rec);
	if (signed_ok < 0)
		return SBX_EXIT_FAIL;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/run/%s.sock", lease_store_dir(s), lease);
	if (n < 0 || (size_t)n >= sizeof a.sun_path) {
		common_errf(e, "snapshot", "control socket path too long");
		return SBX_EXIT_SBX;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		common_errf(e, "snapshot", "lease %s has no running guest (%s: %s)", lease, a.sun_path,
			    strerror(errno));
		if (fd >= 0)
			close(fd);
		return SBX_EXIT_FAIL;
	}
	struct timeval tv = { .tv_sec = 600 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char req[320];
	snprintf(req, sizeof req, "{\"op\":\"snapshot\",\"stop\":%s,\"renter\":\"%s\","
		 "\"renter_sig\":\"%s\"}\n", stop ? "true" : "false", pub, sig);
	char *buf = common_xmalloc(65536);
	size_t len = 0;
	/* a refused peer is answered and closed at once: read that answer all the same
	 * (no SIGPIPE for a request that found the socket closed) */
	ssize_t w = send(fd, req, strlen(req), MSG_NOSIGNAL);
	if ((w < 0 && errno != EPIPE && errno != ECONNRESET) || (w >= 0 && (size_t)w != strlen(req))) {
		common_errno(e, w < 0 ? errno : EIO, "send to %s", a.sun_path);
		close(fd);
		free(buf);
		return SBX_EXIT_SBX;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, 65535 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		if (memchr(buf, '\n', len) || len == 65535)
			break;
	}
	close(fd);
	json_t *rep = common_json_load(buf, len, "control reply", e);
	free(buf);
	if (!rep)
		return SBX_EXIT_SBX;
	if (json_object_get(rep, "error")) {
		common_errf(e, "snapshot", "%s", common_jstr(rep, "error", ""));
		json_decref(rep);
		return SBX_EXIT_FAIL;
	}
	return print_json(rep, f);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The meta.json of every snapshot under top into by (digest -> meta), kept when there. */
static void scan_local(const char *top, json_t *by)
{
	DIR *d = opendir(top);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64 ||
		    json_object_get(by, de->d_name))
			continue;
		char *mp = common_xasprintf("%s/%s/meta.json", top, de->d_name);
		json_t *m = common_json_load_file(mp, SNAP_META_MAX, NULL);
		if (json_is_object(m) && !strcmp(common_jstr(m, "digest", ""), de->d_name))
			json_object_set(by, de->d_name, m);
		json_decref(m);
		free(mp);
	}
	if (d)
		closedir(d);
}

/* The snapshots the store registered (every host's) and those stored here. */
static int cmd_list(struct lease_store *s, const char *lease, enum common_format f,
		    struct common_err *e)
{
	json_t *recs, *by = json_object(), *arr = json_array(), *r;
	size_t i, n = 0;
	const char *k, **keys;
	if (lease_snapshot_records(s, &recs, e) < 0) {
		json_decref(by);
		json_decref(arr);
		return SBX_EXIT_FAIL;
	}
	json_array_foreach(recs, i, r)
		json_object_set(by, common_jstr(r, "digest", ""), r);
	json_decref(recs);
	char *own = common_xasprintf("%s/snapshots", lease_store_dir(s));
	scan_local(lease_snapshot_top(s), by);
	scan_local(own, by);
	free(own);
	keys = common_xcalloc(json_object_size(by) + 1, sizeof *keys);
	json_object_foreach(by, k, r)
		keys[n++] = k;
	qsort(keys, n, sizeof *keys, cmp_str);
	for (i = 0; i < n; i++) {
		r = json_object_get(by, keys[i]);
		if (!lease || !strcmp(common_jstr(r, "lease", ""), lease))
			json_array_append(arr, r);
	}
	free(keys);
	json_decref(by);
	return print_json(arr, f);
}

/* Version 6: each kernel object several processes hold, with its holders. */
static void show_kobjs(json_t *j, const struct snap_state *st)
{
	json_t *arr = json_array();
	for (size_t n = 1; n <= st->nkobjs; n++) {
		json_t *held = json_array();
		for (size_t k = 0; k <= st->nprocs; k++) {
			const struct snap_state *p = k ? &st->procs[k - 1] : st;
			for (size_t i = 0; i < p->nfds; i++)
				if (p->fds[i].kind == SNAP_FD_SHARED && p->fds[i].size == n)
					json_array_append_new(held, json_pack("{s:I,s:I}", "pid",
						(json_int_t)(k ? p->pid : st->tid), "fd",
						(json_int_t)p->fds[i].fd));
		}
		json_array_append_new(arr, json_pack("{s:s,s:o}", "kind",
						     snap_obj_name(st->kobjs[n - 1].kind), "holders", held));
	}
	json_object_set_new(j, "shared_objects", arr);
}

/* Version 4: the processes (the root first) and the pipes with their bytes. */
static void show_tree(json_t *j, const struct snap_state *st)
{
	json_t *procs = json_array(), *pipes = json_array();
	for (size_t k = 0; k <= st->nprocs; k++) {
		const struct snap_state *p = k ? &st->procs[k - 1] : st;
		json_t *o = json_pack("{s:I,s:I,s:b}", "pid", (json_int_t)(k ? p->pid : st->tid),
				      "ppid", (json_int_t)p->ppid, "zombie", (int)p->zombie);
		if (p->zombie)
			json_object_set_new(o, "wait_status", json_integer((json_int_t)p->wstatus));
		else
			json_object_set_new(o, "program", json_string(p->exe ? p->exe : ""));
		if (!p->zombie)
			json_object_set_new(o, "threads", json_integer((json_int_t)p->nthreads + 1));
		json_array_append_new(procs, o);
	}
	for (size_t i = 0; i < st->npipes; i++)
		json_array_append_new(pipes, json_pack("{s:I,s:I}", "capacity",
						       (json_int_t)st->pipes[i].capacity, "bytes",
						       (json_int_t)st->pipes[i].len));
	json_object_set_new(j, "processes", procs);
	json_object_set_new(j, "pipes", pipes);
	if (st->version < 5)
		return;
	json_t *shm = json_array();
	for (size_t i = 0; i < st->nshms; i++)
		json_array_append_new(shm, json_pack("{s:s,s:s,s:I}", "kind",
						     st->shms[i].kind == SNAP_SHM_MEMFD ? "memfd" :
						     st->shms[i].kind == SNAP_SHM_FILE ? "deleted-file" :
						     st->shms[i].kind == SNAP_SHM_NAMED ? "tmpfs-file" : "anonymous",
						     "name", st->shms[i].name, "size",
						     (json_int_t)st->shms[i].size));
	json_object_set_new(j, "shared_memory", shm);
	if (st->version >= 6)
		show_kobjs(j, st);
	if (st->version < 8)
		return;
	/* a summary: the paths are the guest's bytes, not always UTF-8 */
	uint64_t bytes = 0;
	for (size_t i = 0; i < st->ntmps; i++)
		bytes += st->tmps[i].size;
	json_object_set_new(j, "tmpfs", json_pack("{s:I,s:I}", "entries", (json_int_t)st->ntmps,
						  "bytes", (json_int_t)bytes));
}

static int cmd_show(struct lease_store *s, const char *hex, int verify_only,
		    enum common_format f, struct common_err *e)
{
	struct snap_image im;
	struct snap_state st;
	json_t *meta = NULL;
	if (load_snapshot(s, hex, &im, &meta, e) < 0)
		return SBX_EXIT_FAIL;
	if (snap_decode(im.bytes, im.len, hex, &st, e) < 0) {
		snap_image_free(&im);
		json_decref(meta);
		return SBX_EXIT_FAIL;
	}
	json_t *j = json_pack("{s:s,s:I,s:I,s:b}", "digest", hex, "bytes", (json_int_t)im.len,
			      "chunks", (json_int_t)((im.len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX),
			      "verified", 1);
	if (!verify_only) {
		uint64_t mem = 0;
		json_t *fds = json_array();
		for (size_t i = 0; i < st.nregions; i++)
			mem += st.regions[i].end - st.regions[i].start;
		for (size_t i = 0; i < st.nfds; i++)
			json_array_append_new(fds, json_pack("{s:I,s:s,s:s,s:I}", "fd",
					      (json_int_t)st.fds[i].fd, "kind", snap_fd_kind_name(&st, &st.fds[i]),
					      "path", st.fds[i].path, "pos", (json_int_t)st.fds[i].pos));
		json_object_update_missing(j, meta); /* what was verified wins over meta.json */
		json_object_set_new(j, "regions", json_integer((json_int_t)st.nregions));
		json_object_set_new(j, "mapped_bytes", json_integer((json_int_t)mem));
		json_object_set_new(j, "fds", fds);
		json_object_set_new(j, "cells", json_integer((json_int_t)st.ncells));
		json_object_set_new(j, "sysv_segments", json_integer((json_int_t)st.nsegments));
		json_object_set_new(j, "cwd", json_string(st.cwd));
		json_object_set_new(j, "version", json_integer((json_int_t)st.version));
		json_object_set_new(j, "threads", json_integer((json_int_t)st.nthreads + 1));
		json_object_set_new(j, "rip", json_sprintf("%#llx", (unsigned long long)st.regs[16]));
		if (st.version >= 4)
			show_tree(j, &st);
		/* the supervisor's state: its trace head and how many events led to it */
		char th[COMMON_SHA256_HEX];
		common_hex(st.meta.trace_head, 32, th);
		json_object_set_new(j, "trace_head", json_string(th));
		json_object_set_new(j, "trace_seq", json_integer((json_int_t)st.meta.step));
		json_t *usage = json_object();
		for (int d = 0; d < SNAP_NUSAGE && d < LEASE_DIM_COUNT; d++)
			json_object_set_new(usage, lease_dim_name((enum lease_dim)d),
					    json_integer((json_int_t)st.meta.usage[d]));
		json_object_set_new(j, "usage", usage);
	}
	snap_state_free(&st);
	snap_image_free(&im);
	json_decref(meta);
	return print_json(j, f);
}

static int cmd_export(struct lease_store *s, const char *hex, const char *out,
		      struct common_err *e)
{
	struct snap_image im;
	json_t *meta = NULL;
	if (snap_tar_load(e) < 0 || load_snapshot(s, hex, &im, &meta, e) < 0)
		return SBX_EXIT_FAIL;
	char *tmp = common_xasprintf("%s.tmp.%d", out, (int)getpid());
	struct archive *a = snap_tar.write_new();
	snap_tar.write_set_format_pax_restricted(a);
	int rc = snap_tar.write_open_filename(a, tmp) == ARCHIVE_OK ? 0
		 : common_errf(e, out, "%s", snap_tar.error_string(a));
	struct snap_manifest m;
	memcpy(m.digest, im.digest, 32);
	m.len = im.len;
	m.chunks = (uint32_t)((im.len + SNAP_CHUNK_MAX - 1) / SNAP_CHUNK_MAX);
	uint8_t mb[SNAP_MANIFEST_LEN];
	snap_manifest_encode(&m, mb);
	char *mtxt = common_json_canonical(meta);
	for (int64_t i = -2; rc == 0 && i < (int64_t)m.chunks; i++) {
		char name[128];
		const void *p;
		size_t n;
		if (i == -2) {
			snprintf(name, sizeof name, "%s/manifest", hex);
			p = mb;
			n = sizeof mb;
		} else if (i == -1) {
			snprintf(name, sizeof name, "%s/meta.json", hex);
			p = mtxt;
			n = strlen(mtxt);
		} else {
			snprintf(name, sizeof name, "%s/%06u", hex, (unsigned)i);
			size_t off = (size_t)i * SNAP_CHUNK_MAX;
			p = im.bytes + off;
			n = im.len - off < SNAP_CHUNK_MAX ? im.len - off : SNAP_CHUNK_MAX;
		}
		struct archive_entry *en = snap_tar.entry_new();
		snap_tar.entry_set_pathname(en, name);
		snap_tar.entry_set_filetype(en, AE_IFREG);
		snap_tar.entry_set_perm(en, 0600);
		snap_tar.entry_set_size(en, (la_int64_t)n);
		if (snap_tar.write_header(a, en) != ARCHIVE_OK ||
		    snap_tar.write_data(a, p, n) != (la_ssize_t)n)
			rc = common_errf(e, out, "%s", snap_tar.error_string(a));
		snap_tar.entry_free(en);
	}
	if (snap_tar.write_close(a) != ARCHIVE_OK && rc == 0)
		rc = common_errf(e, out, "%s", snap_tar.error_string(a));
	snap_tar.write_free(a);
	free(mtxt);
	if (rc == 0 && rename(tmp, out) < 0)
		rc = common_errno(e, errno, "rename %s to %s", tmp, out);
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	snap_image_free(&im);
	json_decref(meta);
	if (rc < 0)
		return SBX_EXIT_FAIL;
	return print_json(json_pack("{s:s,s:s}", "digest", hex, "exported", out), COMMON_FMT_JSON);
}

/* A member name: HEX/manifest, HEX/meta.json or HEX/NNNNNN, nothing else. */
static int member_kind(const char *name, char hex[65], uint32_t *chunk)
{
	const char *slash = strchr(name, '/');
	if (!slash || slash - name != 64 || strspn(name, "0123456789abcdef") != 64)
		return -1;
	if (hex[0] && strncmp(hex, name, 64))
		return -1;
	memcpy(hex, name, 64);
	hex[64] = 0;
	const char *rest = slash + 1;
	if (!strcmp(rest, "manifest"))
		return 0;
	if (!strcmp(rest, "meta.json"))
		return 1;
	if (strlen(rest) == 6 && strspn(rest, "0123456789") == 6) {
		*chunk = (uint32_t)strtoul(rest, NULL, 10);
		return 2;
	}
	return -1;
}

/* The archive's members, each checked (name, type, size, a bound on the whole),
 * into the fresh directory tmp; hex names the snapshot. 0 or -1 (e). */
static int import_unpack(const char *file, const char *tmp, char hex[65], struct common_err *e)
{
	if (snap_tar_load(e) < 0)
		return -1;
	struct archive *a = snap_tar.read_new();
	snap_tar.read_support_format_tar(a);
	snap_tar.read_support_format_gnutar(a);
	int rc = 0, have_manifest = 0, have_meta = 0;
	uint64_t total = 0;
	if (common_mkdir_p(tmp, 0700, e) < 0)
		rc = -1;
	else if (snap_tar.read_open_filename(a, file, 65536) != ARCHIVE_OK)
		rc = common_errf(e, file, "%s", snap_tar.error_string(a));
	struct archive_entry *en;
	uint8_t *buf = common_xmalloc(SNAP_CHUNK_MAX + 1);
	while (rc == 0) {
		int r = snap_tar.read_next_header(a, &en);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			rc = common_errf(e, file, "%s", snap_tar.error_string(a));
			break;
		}
		const char *name = snap_tar.entry_pathname(en);
		uint32_t chunk = 0;
		int kind = name ? member_kind(name, hex, &chunk) : -1;
		if (kind < 0) {
			rc = common_errf(e, file, "member \"%s\" is not part of a snapshot "
					 "(HEX/manifest, HEX/meta.json, HEX/NNNNNN)", name ? name : "");
			break;
		}
		if (snap_tar.entry_filetype(en) != AE_IFREG || snap_tar.entry_hardlink(en) ||
		    snap_tar.entry_symlink(en)) {
			rc = common_errf(e, file, "member %s is not a regular file", name);
			break;
		}
		la_int64_t size = snap_tar.entry_size(en);
		la_int64_t max = kind == 0 ? SNAP_MANIFEST_LEN : kind == 1 ? SNAP_META_MAX : SNAP_CHUNK_MAX;
		if (size < 0 || size > max || (kind == 2 && chunk > SNAP_MAX_BYTES / SNAP_CHUNK_MAX)) {
			rc = common_errf(e, file, "member %s is oversized (%lld bytes)", name,
					 (long long)size);
			break;
		}
		total += (uint64_t)size;
		if (total > SNAP_MAX_BYTES + SNAP_META_MAX + SNAP_MANIFEST_LEN) {
			rc = common_errf(e, file, "archive holds more than a snapshot can");
			break;
		}
		la_ssize_t got = snap_tar.read_data(a, buf, (size_t)size + 1);
		if (got != size) {
			rc = common_errf(e, file, "member %s: short or long data", name);
			break;
		}
		char *dst = common_xasprintf("%s/%s", tmp, name + 65);
		int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = errno == EEXIST ? common_errf(e, file, "member %s appears twice", name)
					     : common_errno(e, errno, "create %s", dst);
		else {
			if (common_write_all(fd, buf, (size_t)size) < 0)
				rc = common_errno(e, errno, "write %s", dst);
			close(fd);
		}
		free(dst);
		have_manifest |= kind == 0;
		have_meta |= kind == 1;
	}
	free(buf);
	snap_tar.read_free(a);
	if (rc == 0 && (!have_manifest || !have_meta))
		rc = common_errf(e, file, "archive lacks the %s", have_manifest ? "meta.json" : "manifest");
	return rc;
}

static int cmd_import(struct lease_store *s, const char *file, struct common_err *e)
{
	char hex[65] = "";
	char *top = common_xstrdup(lease_snapshot_top(s));
	char *tmp = snap_tmp_name(top, "import");
	common_rm_rf(tmp, NULL);
	int rc = import_unpack(file, tmp, hex, e);
	struct snap_image im = { 0 };
	struct snap_state st;
	if (rc == 0 && snap_store_read(tmp, &im, e) < 0)
		rc = -1;
	char got[65];
	if (rc == 0) {
		common_hex(im.digest, 32, got);
		if (strcmp(got, hex))
			rc = common_errf(e, file, "contents hash to %s, not the named snapshot %s", got, hex);
	}
	if (rc == 0) {
		if (snap_decode(im.bytes, im.len, file, &st, e) < 0)
			rc = -1;
		else
			snap_state_free(&st);
	}
	json_t *meta = NULL;
	if (rc == 0) {
		char *mp = common_xasprintf("%s/meta.json", tmp);
		meta = common_json_load_file(mp, SNAP_META_MAX, e);
		free(mp);
		if (!meta || !json_is_object(meta) || strcmp(common_jstr(meta, "digest", ""), hex))
			rc = meta ? common_errf(e, file, "meta.json does not describe snapshot %s", hex) : -1;
	}
	char *dir = rc == 0 ? common_xasprintf("%s/%s", top, hex) : NULL;
	struct stat sb;
	if (rc == 0 && stat(dir, &sb) == 0)
		rc = common_errf(e, hex, "snapshot already in the store");
	/* registered (or checked against the registered manifest) before it appears here */
	int registered = 0;
	if (rc == 0) {
		struct snap_manifest m = { .len = im.len,
					   .chunks = (uint32_t)((im.len + SNAP_CHUNK_MAX - 1) /
								SNAP_CHUNK_MAX) };
		memcpy(m.digest, im.digest, 32);
		if ((registered = snap_register(s, meta, &m, e)) < 0)
			rc = -1;
	}
	if (rc == 0 && rename(tmp, dir) < 0)
		rc = common_errno(e, errno, "rename %s", tmp);
	if (rc < 0 && registered == 1)
		lease_snapshot_unregister(s, hex, NULL);
	if (rc < 0)
		common_rm_rf(tmp, NULL);
	json_decref(meta);
	snap_image_free(&im);
	free(dir);
	free(tmp);
	free(top);
	if (rc < 0)
		return SBX_EXIT_FAIL;
	return print_json(json_pack("{s:s,s:s}", "digest", hex, "imported", file), COMMON_FMT_JSON);
}

static int v_take(void *p)
{
	struct snap_cli *c = p;
	return cmd_take(c->s, c->pos[0], c->stop, c->principal, c->fmt, &c->e);
}

static int v_list(void *p)
{
	struct snap_cli *c = p;
	return cmd_list(c->s, c->pos[0], c->fmt, &c->e);
}

static int v_show(void *p)
{
	struct snap_cli *c = p;
	return cmd_show(c->s, c->pos[0], 0, c->fmt, &c->e);
}

static int v_verify(void *p)
{
	struct snap_cli *c = p;
	return cmd_show(c->s, c->pos[0], 1, c->fmt, &c->e);
}

static int v_export(void *p)
{
	struct snap_cli *c = p;
	return cmd_export(c->s, c->pos[0], c->out, &c->e);
}

static int v_import(void *p)
{
	struct snap_cli *c = p;
	return cmd_import(c->s, c->pos[0], &c->e);
}

static const struct common_verb snap_verbs[] = {
	{ "take", v_take, "take [--store DIR] [--format json|text] [--stop] [--principal NAME]\n"
	  "         [--principal-key FILE] LEASE", 1, 1 },
	{ "list", v_list, "list [--store DIR] [--format json|text] [LEASE]", 0, 1 },
	{ "show", v_show, "show [--store DIR] [--format json|text] DIGEST", 1, 1 },
	{ "verify", v_verify, "verify [--store DIR] [--format json|text] DIGEST", 1, 1 },
	{ "export", v_export, "export [--store DIR] -o FILE.tar DIGEST", 1, 1 },
	{ "import", v_import, "import [--store DIR] FILE.tar", 1, 1 },
};
#define NVERBS (sizeof snap_verbs / sizeof snap_verbs[0])

/* A bit per snap_verbs row. */
enum { TAKE = 1u << 0, LIST = 1u << 1, SHOW = 1u << 2, VERIFY = 1u << 3, EXPORT = 1u << 4,
       IMPORT = 1u << 5 };
#define OPT(...) COMMON_OPT(struct snap_cli, __VA_ARGS__)

static const struct common_opt snap_opts[] = {
	OPT("store", &common_opt_str, store, 0),
	OPT("format", &common_opt_format, fmt, TAKE | LIST | SHOW | VERIFY),
	OPT("output", &common_opt_str, out, EXPORT, .letter = 'o'),
	OPT("principal", &common_opt_str, principal, TAKE),
	OPT("stop", &common_opt_flag, stop, TAKE),
	OPT("principal-key", &common_opt_str, principal_key, TAKE),
};

static const struct common_cli snap_cli = {
	.opts = snap_opts, .nopts = sizeof snap_opts / sizeof snap_opts[0],
	.verbs = snap_verbs, .nverbs = NVERBS,
};

int snap_cli_parse(int argc, char **argv, struct snap_cli *c, struct common_err *e)
{
	struct common_words w;
	int rc;

	memset(c, 0, sizeof *c);
	if ((rc = common_cli_parse(&snap_cli, argc, argv, c, &w, e)) != 0)
		return rc;
	c->verb = w.verb;
	for (int i = 0; i < w.noperands; i++)
		c->pos[c->npos++] = w.operands[i];
	if (c->verb->run == v_export && !c->out)
		return common_errf(e, "export", "needs -o FILE.tar");
	return 0;
}

static void snap_usage(FILE *f)
{
	common_verb_usage(f, snap_verbs, NVERBS);
}

int snap_cli_main(int argc, char **argv)
{
	struct snap_cli c;
	int rc = common_cli_parsed(snap_cli_parse(argc, argv, &c, &c.e), &c.e, snap_usage, SBX_EXIT_USAGE);

	if (rc >= 0)
		return rc;
	if (lease_store_open(c.store, &c.s, &c.e) < 0) {
		common_report(&c.e);
		return SBX_EXIT_SBX;
	}
	lease_store_principal_key(c.s, c.principal_key);
	c.e.what[0] = 0;
	rc = c.verb->run(&c);
	if (rc != SBX_EXIT_OK && c.e.what[0])
		common_report(&c.e);
	lease_store_close(c.s);
	return rc;
}

/* The restore receipt, once the guest is rebuilt: Funded -> Active, charged. */
static int restore_commit(const struct snap_restore_ctx *r, struct common_err *e)
{
	struct lease_store *s;
	json_t *head = NULL, *out = NULL;
	if (lease_store_open(r->store, &s, e) < 0)
		return -1;
	int rc = lease_head(s, r->target, &head, e);
	if (rc == 0) {
		json_t *args = json_pack("{s:s,s:s,s:I}", "snapshot", r->hex, "source",
					 r->st.meta.lease, "bytes", (json_int_t)r->charge);
		rc = lease_transition(s, r->target, LEASE_EDGE_RESTORE, head, args, &out, e) < 0 ? -1 : 0;
		json_decref(args);
	}
	json_decref(head);
	json_decref(out);
	lease_store_close(s);
	return rc;
}

/* All or nothing: the cells, the rebuilt guest, then the receipt; a failure
 * anywhere leaves the target as it was (Funded, uncharged, its namespace empty). */
int snap_restore_at_exec(void *ctx, pid_t pid, struct common_err *e)
{
	struct snap_restore_ctx *r = ctx;
	if (snap_cells_write(&r->st, r->ns, e) < 0 ||
	    snap_restore_checked(pid, &r->st, r->ns, &r->im, e) < 0 ||
	    snap_determ_ids(pid, &r->st, e) < 0 || restore_commit(r, e) < 0) {
		snap_cells_remove(&r->st, r->ns);
		return -1;
	}
	return 0;
}

void snap_restore_ctx_free(struct snap_restore_ctx *r)
{
	snap_state_free(&r->st);
	snap_image_free(&r->im);
	free(r->ns);
	memset(r, 0, sizeof *r);
}

static const char restore_usage[] =
	"usage: sbx-restore [--store DIR] DIGEST --lease TARGET [sbx-run options] "
	"[-- PROGRAM [ARG...]]\n"
	"options may come before or after DIGEST; -- ends them\n";

/* Every precondition before anything changes; the charge comes with the rebuilt guest. */
int snap_restore_prepare(struct lease_store *s, const char *hex, const char *target,
			 struct snap_restore_ctx *r, char **image, struct common_err *e)
{
	struct snap_image im;
	json_t *meta = NULL, *rec = NULL;
	int rc = -1;
	if (load_snapshot(s, hex, &r->im, &meta, e) < 0)
		return -1;
	im = r->im;
	if (snap_decode(im.bytes, im.len, hex, &r->st, e) < 0)
		goto done;
	if (lease_load(s, target, &rec, e) < 0)
		goto done;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	char img[65];
	common_hex(r->st.meta.image, 32, img);
	if (strcmp(common_jstr(l, "state", ""), "Funded") != 0) {
		common_errf(e, "restore", "cannot restore into lease %s: state is %s, restore needs "
			    "Funded", target, common_jstr(l, "state", ""));
		goto done;
	}
	if (strcmp(common_jstr(l, "principal", ""), r->st.meta.principal) != 0) {
		common_errf(e, "restore", "principal differs: lease %s is %s's, the snapshot %s's",
			    target, common_jstr(l, "principal", ""), r->st.meta.principal);
		goto done;
	}
	if (strcmp(common_jstr(l, "host_program", ""), r->st.meta.host_program) != 0) {
		common_errf(e, "restore", "host program differs: lease %s has %s, the snapshot %s",
			    target, common_jstr(l, "host_program", ""), r->st.meta.host_program);
		goto done;
	}
	if (strcmp(common_jstr(json_object_get(l, "image"), "sha256", ""), img) != 0) {
		common_errf(e, "restore", "image hash differs: lease %s has %s, the snapshot %s",
			    target, common_jstr(json_object_get(l, "image"), "sha256", ""), img);
		goto done;
	}
	/* the CPU must hold every register component the guest used */
	struct snap_xlayout xl;
	uint64_t xf = r->st.xfeatures;
	if (snap_xlayout_host(&xl, e) < 0 || snap_xstate_fit(&xl, &xf, r->st.xstate, e) < 0)
		goto done;
	/* charge the canonical bytes and the reconstructed cells before anything runs */
	uint64_t charge = im.len + snap_cells_bytes(&r->st), used = 0;
	const json_t *lim = json_object_get(l, "limits");
	const json_t *lv = json_object_get(lim, "namespace_bytes");
	uint64_t limit = json_is_integer(lv) ? (uint64_t)json_integer_value(lv) : 0;
	if (lease_ns_bytes(s, target, &used, e) < 0)
		goto done;
	if (used > limit || charge > limit - used) {
		common_errf(e, "restore", "snapshot needs %llu namespace bytes, lease %s has %llu left",
			    (unsigned long long)charge, target,
			    (unsigned long long)(used > limit ? 0 : limit - used));
		goto done;
	}
	/* the state must fit the target's memory and table bounds (undeclared: no bound) */
	const json_t *mv = json_object_get(lim, "memory"), *tv = json_object_get(lim, "table_elements");
	uint64_t resident = 0;
	for (size_t i = 0; i < r->st.nregions; i++) {
		const struct snap_region *g = &r->st.regions[i];
		uint64_t bl = ((g->end - g->start) / SNAP_PAGE + 7) / 8;
		for (uint64_t k = 0; g->bitmap && k < bl; k++)
			resident += (uint64_t)__builtin_popcount(g->bitmap[k]) * SNAP_PAGE;
	}
	if (json_is_integer(mv) && resident > (uint64_t)json_integer_value(mv)) {
		common_errf(e, "restore", "memory: the snapshot holds %llu bytes of memory, lease %s "
			    "allows %lld", (unsigned long long)resident, target,
			    (long long)json_integer_value(mv));
		goto done;
	}
	if (json_is_integer(tv) && r->st.nfds > (uint64_t)json_integer_value(tv)) {
		common_errf(e, "restore", "table_elements: the snapshot has %zu descriptors open, "
			    "lease %s allows %lld", r->st.nfds, target, (long long)json_integer_value(tv));
		goto done;
	}
	r->ns = lease_ns_dir(s, target);
	r->target = target;
	r->hex = hex;
	r->charge = charge;
	*image = common_xstrdup(common_jstr(json_object_get(l, "image"), "path", ""));
	memcpy(r->digest, im.digest, 32);
	rc = 0;
done:
	json_decref(meta);
	json_decref(rec);
	return rc;
}

int snap_restore_main(int argc, char **argv)
{
	struct trace_run_opts o = { .result_fd = -1 };
	struct common_err e = { "", "" };
	const char *hex;
	int rc = trace_run_parse(argc, argv, TRACE_RUN_RESTORE, &o, &hex, &e);
	if (rc != 0)
		trace_run_opts_free(&o);
	if (rc == 1) {
		fputs(restore_usage, stdout);
		return SBX_EXIT_OK;
	}
	if (rc < 0)
		return common_usage_error(&e, restore_usage, SBX_EXIT_SBX);
	struct lease_store *s;
	if (lease_store_open(o.store, &s, &e) < 0) {
		common_report(&e);
		return SBX_EXIT_SBX;
	}
	struct snap_restore_ctx r;
	char *image = NULL;
	memset(&r, 0, sizeof r);
	r.store = o.store;
	if (snap_restore_prepare(s, hex, o.lease, &r, &image, &e) < 0) {
		common_report(&e);
		snap_restore_ctx_free(&r);
		lease_store_close(s);
		return SBX_EXIT_FAIL;
	}
	lease_store_close(s);
	char *dflt[2] = { image, NULL };
	if (!o.argv)
		o.argv = dflt;
	if (r.st.determ) { /* a --deterministic run's: it goes on as that run would */
		o.deterministic = 1;
		o.determ_resume = r.st.determ;
		o.determ_resume_len = r.st.determ_len;
		o.resume_seq = r.st.meta.step;
		o.resume_head = r.st.meta.trace_head;
	}
	o.restore_exec = snap_restore_at_exec;
	o.restore_ctx = &r;
	o.snap = &snap_ops;
	int code = trace_run_main(&o);
	snap_restore_ctx_free(&r);
	free(image);
	return code;
}
