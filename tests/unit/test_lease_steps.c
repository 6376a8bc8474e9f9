/* lease: batched steps, the backwards log, crash roll-forward of a batch, the
 * rebuild after a machine crash, and the image-hash cache. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lease/lease.h"
#include "tests/unit/unit.h"

static const char *rid(const json_t *r)
{
	return json_string_value(json_object_get(r, "lease"));
}

static int verify_ok(const char *dir)
{
	struct lease_store *s;
	struct common_err e;
	json_t *rep = NULL;
	int ok;

	if (lease_store_open(dir, &s, &e) < 0)
		return 0;
	ok = lease_verify(s, NULL, &rep, &e) == 0 && json_is_true(json_object_get(rep, "ok"));
	if (!ok && rep) {
		char *t = json_dumps(rep, 0);
		fprintf(stderr, "verify: %s\n", t);
		free(t);
	}
	json_decref(rep);
	lease_store_close(s);
	return ok;
}

static void init_req(struct lease_request *req)
{
	memset(req, 0, sizeof *req);
	req->image = "/bin/true";
	req->principal = "steps";
}

static const struct lease_step open_steps[] = { { LEASE_EDGE_FUND, NULL, 0 },
						{ LEASE_EDGE_ACTIVATE, NULL, 0 } };
static const struct lease_step close_steps[] = { { LEASE_EDGE_SETTLE, NULL, 1 },
						 { LEASE_EDGE_EXPIRE, NULL, 0 },
						 { LEASE_EDGE_DESTROY, NULL, 0 } };

static void test_steps(const char *dir)
{
	struct lease_store *s;
	struct common_err e;
	struct lease_request req;
	struct lease_step st[2];
	json_t *rs = NULL, *cs = NULL, *log = NULL, *amount = json_pack("{s:i}", "amount", 0), *head;
	uint64_t u[LEASE_DIM_COUNT] = { 0 };
	const char *closed;
	char id[32];

	CHECK(lease_store_open(dir, &s, &e) == 0);
	init_req(&req);
	memcpy(st, open_steps, sizeof st);
	st[0].args = amount;
	CHECK(lease_steps(s, &req, NULL, NULL, st, 2, &rs, &e) == 0 && json_array_size(rs) == 3);
	snprintf(id, sizeof id, "%s", rid(json_array_get(rs, 0)));
	/* each step its own receipt, chained; each hashes to its digest (sealed and
	 * folded without a second digest, nothing changed it in between) */
	for (size_t i = 0; i < json_array_size(rs); i++)
		CHECK(lease_receipt_check(json_array_get(rs, i), "receipt", &e) == 0);
	for (size_t i = 1; i < json_array_size(rs); i++) {
		json_t *r = json_array_get(rs, i), *p = json_array_get(rs, i - 1);
		CHECK(json_integer_value(json_object_get(r, "seq")) == (json_int_t)i);
		CHECK_STR(json_string_value(json_object_get(r, "prev")),
			  json_string_value(json_object_get(p, "digest")));
	}
	CHECK_STR(json_string_value(json_object_get(json_array_get(rs, 2), "to")), "Active");
	/* the head with one field edited (digest and signature left alone) is no head:
	 * only the very receipt skips a digest, the edited one is found tampered */
	head = json_deep_copy(json_array_get(rs, 2));
	json_int_t batch = json_integer_value(json_object_get(head, "batch"));
	json_object_set_new(head, "batch", json_integer(batch + 1));
	CHECK(lease_steps(s, NULL, id, head, close_steps, 3, &cs, &e) < 0 && strstr(e.why, "tampered"));
	json_object_set_new(head, "batch", json_integer(batch));
	json_object_set_new(head, "extra", json_true()); /* a field added */
	CHECK(lease_steps(s, NULL, id, head, close_steps, 3, &cs, &e) < 0 && strstr(e.why, "tampered"));
	json_decref(head);
	/* evidence other than the head is refused, before anything is written */
	CHECK(lease_steps(s, NULL, id, json_array_get(rs, 0), close_steps, 3, &cs, &e) < 0 &&
	      strstr(e.why, "replayed"));
	u[LEASE_DIM_FUEL] = 7;
	CHECK(lease_observe_usage(s, id, u, &closed, &cs, &e) == 0 && json_array_size(cs) == 1);
	json_decref(cs);
	CHECK(lease_head(s, id, &head, &e) == 0);
	CHECK(lease_steps(s, NULL, NULL, head, close_steps, 3, &cs, &e) == 0 && json_array_size(cs) == 3);
	json_decref(head);
	CHECK_STR(json_string_value(json_object_get(json_array_get(cs, 2), "to")), "Destroyed");
	/* the log read backwards: all, or what follows a seq */
	CHECK(lease_log_since(s, id, -1, &log, &e) == 0 && json_array_size(log) == 7);
	CHECK(json_integer_value(json_object_get(json_array_get(log, 0), "seq")) == 0);
	json_decref(log);
	CHECK(lease_log_since(s, id, 4, &log, &e) == 0 && json_array_size(log) == 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(log, 1), "edge")), "destroy");
	json_decref(log);
	CHECK(lease_log_since(s, id, 6, &log, &e) == 0 && json_array_size(log) == 0);
	json_decref(log);
	CHECK(lease_log_since(s, "L0000000000000000", -1, &log, &e) < 0 && strstr(e.why, "no such lease"));
	/* a refused step leaves nothing: Destroyed is terminal */
	CHECK(lease_steps(s, NULL, id, NULL, close_steps, 3, &log, &e) < 0);
	CHECK(lease_log_since(s, id, -1, &log, &e) == 0 && json_array_size(log) == 7);
	json_decref(log);
	json_decref(rs);
	json_decref(cs);
	json_decref(amount);
	lease_store_close(s);
	CHECK(verify_ok(dir));
}

/* A child killed at a fault point inside a batch, or in the close that writes the
 * record and the slot index the batch left in memory; the store must verify and
 * hold every journaled receipt, rolled forward into the record. */
static void test_batch_kill(const char *dir)
{
	/* :2 is the slot index, which both batches change */
	static const char *const faults[] = { "lease-after-journal", "lease-after-record",
					      "atomic-before-rename:1", "atomic-before-rename:2",
					      "lease-after-effects", "lease-flush-after-record",
					      "lease-after-flush" };
	struct lease_store *s;
	struct common_err e;
	json_t *rec, *log;
	char id[32];

	for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
		for (int phase = 0; phase < 2; phase++) {
			int fds[2], status;
			pid_t pid;
			CHECK(pipe(fds) == 0);
			if (phase == 1) {
				/* a lease opened normally, closed by the killed child */
				struct lease_request req;
				json_t *rs, *amount = json_pack("{s:i}", "amount", 0);
				struct lease_step st[2];
				memcpy(st, open_steps, sizeof st);
				st[0].args = amount;
				init_req(&req);
				CHECK(lease_store_open(dir, &s, &e) == 0);
				CHECK(lease_steps(s, &req, NULL, NULL, st, 2, &rs, &e) == 0);
				snprintf(id, sizeof id, "%s", rid(json_array_get(rs, 0)));
				json_decref(rs);
				json_decref(amount);
				lease_store_close(s);
			}
			pid = fork();
			if (pid == 0) {
				struct lease_request req;
				json_t *rs, *amount = json_pack("{s:i}", "amount", 0);
				struct lease_step st[2];
				memcpy(st, open_steps, sizeof st);
				st[0].args = amount;
				init_req(&req);
				if (lease_store_open(dir, &s, &e) < 0)
					_exit(3);
				setenv("SBX_FAULT", faults[f], 1);
				if (phase == 0) {
					if (lease_steps(s, &req, NULL, NULL, st, 2, &rs, &e) < 0)
						_exit(4);
				} else if (lease_steps(s, NULL, id, NULL, close_steps, 3, &rs, &e) < 0) {
					_exit(4);
				}
				lease_store_close(s);
				_exit(write(fds[1], "x", 1) == 1 ? 5 : 6);
			}
			close(fds[1]);
			CHECK(waitpid(pid, &status, 0) == pid);
			close(fds[0]);
			CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
			CHECK(verify_ok(dir));
			CHECK(lease_store_open(dir, &s, &e) == 0);
			if (phase == 0) {
				json_t *l;
				CHECK(lease_list(s, NULL, LEASE_ACTIVE, &l, &e) == 0);
				CHECK(json_array_size(l) == 1);
				snprintf(id, sizeof id, "%s",
					 json_string_value(json_object_get(json_array_get(l, 0), "id")));
				json_decref(l);
			}
			CHECK(lease_load(s, id, &rec, &e) == 0);
			CHECK_STR(json_string_value(json_object_get(rec, "state")),
				  phase == 0 ? "Active" : "Destroyed");
			json_decref(rec);
			CHECK(lease_log_since(s, id, -1, &log, &e) == 0 &&
			      json_array_size(log) == (phase == 0 ? 3 : 6));
			json_decref(log);
			if (phase == 0) { /* tidy: close it so the next round lists one Active */
				CHECK(lease_steps(s, NULL, id, NULL, close_steps, 3, &log, &e) == 0);
				json_decref(log);
			}
			lease_store_close(s);
		}
	}
}

static int write_file(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, buf, len) == (ssize_t)len;
	close(fd);
	return ok ? 0 : -1;
}

/* Another boot id in "boot" stands for a machine crash: records and the slot index
 * (never fsynced) may be lost, stale or torn; the first lock rebuilds them. */
static void test_rebuild(const char *dir)
{
	struct lease_store *s;
	struct common_err e;
	struct lease_request req;
	json_t *a, *b, *rs, *rec, *amount = json_pack("{s:i}", "amount", 0);
	struct lease_step st[2];
	char *p, *old = NULL, *id_a, *id_b;
	size_t oldlen = 0;

	memcpy(st, open_steps, sizeof st);
	st[0].args = amount;
	init_req(&req);
	req.principal = "rebuild";
	CHECK(lease_store_open(dir, &s, &e) == 0);
	CHECK(lease_steps(s, &req, NULL, NULL, st, 1, &a, &e) == 0);
	id_a = common_xstrdup(rid(json_array_get(a, 0)));
	lease_store_close(s); /* writes the record the commit left in memory */
	CHECK(lease_store_open(dir, &s, &e) == 0);
	p = common_xasprintf("%s/leases/%s.json", dir, id_a);
	CHECK(common_read_file(p, 1 << 20, &old, &oldlen, &e) == 0); /* Funded */
	CHECK(lease_steps(s, NULL, id_a, NULL, st + 1, 1, &rs, &e) == 0);
	json_decref(rs);
	CHECK(lease_steps(s, &req, NULL, NULL, st, 2, &b, &e) == 0);
	id_b = common_xstrdup(rid(json_array_get(b, 0)));
	lease_store_close(s);
	/* the crash: a's record is back one receipt, b's torn, the slot index gone */
	CHECK(write_file(p, old, oldlen) == 0);
	free(p);
	p = common_xasprintf("%s/leases/%s.json", dir, id_b);
	CHECK(write_file(p, "{\"lea", 5) == 0);
	free(p);
	p = common_xasprintf("%s/slots.json", dir);
	CHECK(unlink(p) == 0);
	free(p);
	p = common_xasprintf("%s/boot", dir);
	CHECK(write_file(p, "00000000-0000-0000-0000-000000000000\n", 37) == 0);
	free(p);
	CHECK(verify_ok(dir));
	CHECK(lease_store_open(dir, &s, &e) == 0);
	CHECK(lease_load(s, id_a, &rec, &e) == 0);
	CHECK_STR(json_string_value(json_object_get(rec, "state")), "Active");
	json_decref(rec);
	CHECK(lease_load(s, id_b, &rec, &e) == 0);
	CHECK_STR(json_string_value(json_object_get(rec, "state")), "Active");
	json_decref(rec);
	/* and the chain goes on from the rebuilt heads */
	CHECK(lease_steps(s, NULL, id_b, NULL, close_steps, 3, &rs, &e) == 0 && json_array_size(rs) == 3);
	json_decref(rs);
	lease_store_close(s);
	CHECK(verify_ok(dir));
	free(old);
	free(id_a);
	free(id_b);
	json_decref(a);
	json_decref(b);
	json_decref(amount);
}

/* Same path, new content: the cache must notice (identity includes size, mtime, ctime). */
static void test_image_cache(const char *dir)
{
	struct lease_store *s;
	struct common_err e;
	char h1[COMMON_SHA256_HEX], h2[COMMON_SHA256_HEX], want[COMMON_SHA256_HEX], *img, *buf;
	char *cache;
	size_t len;
	struct stat st;

	CHECK(lease_store_open(dir, &s, &e) == 0);
	img = common_xasprintf("%s/img", dir);
	cache = common_xasprintf("%s/image-hashes", dir);
	CHECK(common_read_file("/bin/true", 64 << 20, &buf, &len, &e) == 0);
	CHECK(write_file(img, buf, len) == 0);
	CHECK(lease_image_check(img, want, &e) == 0);
	CHECK(lease_image_check_cached(s, img, h1, &e) == 0);
	CHECK_STR(h1, want);
	CHECK(stat(img, &st) == 0);
	/* the cache is kept only for files on block devices (tmpfs reuses inode numbers) */
	if (major(st.st_dev) != 0)
		CHECK(access(cache, F_OK) == 0);
	CHECK(lease_image_check_cached(s, img, h2, &e) == 0);
	CHECK_STR(h2, want);
	/* same size, one byte changed in place */
	buf[len - 1] ^= 0x5a;
	CHECK(write_file(img, buf, len) == 0);
	CHECK(lease_image_check(img, want, &e) == 0 && strcmp(want, h1) != 0);
	CHECK(lease_image_check_cached(s, img, h2, &e) == 0);
	CHECK_STR(h2, want);
	/* another binary at the same path */
	free(buf);
	CHECK(common_read_file("/bin/false", 64 << 20, &buf, &len, &e) == 0);
	CHECK(write_file(img, buf, len) == 0);
	CHECK(lease_image_check(img, want, &e) == 0);
	CHECK(lease_image_check_cached(s, img, h2, &e) == 0);
	CHECK_STR(h2, want);
	/* a damaged cache is ignored, and a non-ELF is still refused */
	CHECK(write_file(cache, "sbx-image-hashes 1 x\n", 21) == 0);
	CHECK(lease_image_check_cached(s, img, h2, &e) == 0);
	CHECK_STR(h2, want);
	CHECK(write_file(img, "#!/bin/sh\n", 10) == 0);
	CHECK(lease_image_check_cached(s, img, h2, &e) < 0 && strstr(e.why, "not an ELF"));
	free(buf);
	free(img);
	free(cache);
	lease_store_close(s);
}

int main(void)
{
	char dir[] = "/tmp/test_lease_steps.XXXXXX", *cmd;

	CHECK(mkdtemp(dir) != NULL);
	test_steps(dir);
	test_batch_kill(dir);
	test_rebuild(dir);
	test_image_cache(dir);
	cmd = common_xasprintf("rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	free(cmd);
	return unit_finish("test_lease_steps");
}
