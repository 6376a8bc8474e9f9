/* lease: lifecycle table, limits parsing, canonical receipts, evidence checks, store ops. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lease/lease.h"
#include "tests/unit/unit.h"

static void test_table(void)
{
	enum lease_state to;
	int declared = 0;

	CHECK(lease_edge_next(LEASE_EDGE_FUND, LEASE_REQUESTED, &to) && to == LEASE_FUNDED);
	CHECK(lease_edge_next(LEASE_EDGE_ACTIVATE, LEASE_FUNDED, &to) && to == LEASE_ACTIVE);
	CHECK(lease_edge_next(LEASE_EDGE_OBSERVE, LEASE_ACTIVE, &to) && to == LEASE_ACTIVE);
	CHECK(lease_edge_next(LEASE_EDGE_SNAPSHOT, LEASE_ACTIVE, &to) && to == LEASE_ACTIVE);
	CHECK(lease_edge_next(LEASE_EDGE_RESTORE, LEASE_FUNDED, &to) && to == LEASE_ACTIVE);
	CHECK(lease_edge_next(LEASE_EDGE_SETTLE, LEASE_ACTIVE, &to) && to == LEASE_SETTLING);
	for (int s = LEASE_REQUESTED; s <= LEASE_SETTLING; s++)
		CHECK(lease_edge_next(LEASE_EDGE_EXPIRE, (enum lease_state)s, &to) && to == LEASE_EXPIRED);
	CHECK(lease_edge_next(LEASE_EDGE_DESTROY, LEASE_EXPIRED, &to) && to == LEASE_DESTROYED);
	/* exactly the 11 (edge, state) pairs above are declared; Destroyed is terminal */
	for (int e = 0; e < LEASE_EDGE_COUNT; e++)
		for (int s = 0; s < LEASE_STATE_COUNT; s++)
			declared += lease_edge_next((enum lease_edge)e, (enum lease_state)s, NULL);
	CHECK(declared == 11);
	for (int e = 0; e < LEASE_EDGE_COUNT; e++)
		CHECK(!lease_edge_next((enum lease_edge)e, LEASE_DESTROYED, NULL));
	CHECK(!lease_edge_next(LEASE_EDGE_ACTIVATE, LEASE_REQUESTED, NULL));
	CHECK_STR(lease_edge_needs(LEASE_EDGE_ACTIVATE), "Funded");
	CHECK_STR(lease_state_name(LEASE_SETTLING), "Settling");
	CHECK_STR(lease_dim_name(LEASE_DIM_NAMESPACE_BYTES), "namespace_bytes");
	CHECK(lease_dim_ceiling(LEASE_DIM_OUTPUT_VALUES) == 65536);
	CHECK(lease_id_valid("L0123456789abcdef"));
	CHECK(!lease_id_valid("L0123456789ABCDEF"));
	CHECK(!lease_id_valid("L0123456789abcde"));
	CHECK(!lease_id_valid("../../etc/passwdx"));
}

static void test_limits(void)
{
	struct lease_request r;
	struct common_err e;
	uint64_t u[LEASE_DIM_COUNT] = { 0 }, v;
	int given[LEASE_DIM_COUNT] = { 0 };

	memset(&r, 0, sizeof r);
	CHECK(lease_parse_limits("fuel=100,memory=64M,namespace_bytes=1G,lifetime=9", &r, &e) == 0);
	CHECK(r.limits[LEASE_DIM_FUEL] == 100 && r.has_limit[LEASE_DIM_FUEL]);
	CHECK(r.limits[LEASE_DIM_MEMORY] == 64u << 20);
	CHECK(r.limits[LEASE_DIM_NAMESPACE_BYTES] == 1u << 30 && r.lifetime == 9);
	CHECK(!r.has_limit[LEASE_DIM_OUTPUT_BYTES]);
	CHECK(lease_parse_limits("fuel=1000000001", &r, &e) < 0 && strstr(e.why, "ceiling"));
	CHECK(lease_parse_limits("memory=2G", &r, &e) < 0);
	CHECK(lease_parse_limits("fuel=-1", &r, &e) < 0 && strstr(e.why, "negative"));
	CHECK(lease_parse_limits("fuel=1.5", &r, &e) < 0 && strstr(e.why, "not a non-negative integer"));
	CHECK(lease_parse_limits("fuel=", &r, &e) < 0);
	CHECK(lease_parse_limits("cpu=1", &r, &e) < 0 && strstr(e.why, "unknown dimension"));
	CHECK(lease_parse_limits("fuel=1,fuel=2", &r, &e) < 0 && strstr(e.why, "twice"));
	CHECK(lease_parse_limits("", &r, &e) < 0);
	CHECK(lease_parse_limits("fuel", &r, &e) < 0);
	CHECK(lease_parse_limits("lifetime=1000001", &r, &e) < 0);
	CHECK(lease_parse_limits("fuel=99999999999999999999999", &r, &e) < 0);
	CHECK(lease_parse_fees("fuel=3,memory=1", &r, &e) == 0 && r.fees[LEASE_DIM_FUEL] == 3);
	CHECK(lease_parse_fees("fuel=1K", &r, &e) < 0); /* prices take no suffix */
	CHECK(lease_parse_fees("fuel=1000001", &r, &e) < 0);
	CHECK(lease_parse_usage("fuel=5,output_values=2", u, given, &e) == 0 && u[LEASE_DIM_FUEL] == 5 &&
	      given[LEASE_DIM_OUTPUT_VALUES] && !given[LEASE_DIM_MEMORY]);
	CHECK(lease_parse_amount("--amount", "12", &v, &e) == 0 && v == 12);
	CHECK(lease_parse_amount("--amount", "-3", &v, &e) < 0);
}

/* Golden bytes: the digest of a fixed receipt, computed independently of sbx. */
static void test_receipt_digest(void)
{
	const char *body = "{\"amount\":5,\"batch\":3,\"edge\":\"fund\",\"from\":\"Requested\","
			   "\"lease\":\"L0123456789abcdef\",\"prev\":\"%s\",\"seq\":1,\"to\":\"Funded\","
			   "\"v\":1,\"digest\":\"%s\",\"sig\":\"%s\"}";
	char prev[65], sig[129], *txt;
	struct common_err e;
	json_t *r;

	memset(prev, 'a', 64);
	prev[64] = '\0';
	memset(sig, '0', 128);
	sig[128] = '\0';
	txt = common_xasprintf(body, prev,
			       "de309c42f4906c2b2320a95139eee151c731b86fc1c230f2df32e29aa844d0f4", sig);
	CHECK(lease_evidence_parse(txt, strlen(txt), "golden", &r, &e) == 0);
	json_decref(r);
	free(txt);
	/* one byte of content changed: tampered */
	txt = common_xasprintf(body, prev,
			       "de309c42f4906c2b2320a95139eee151c731b86fc1c230f2df32e29aa844d0f5", sig);
	CHECK(lease_evidence_parse(txt, strlen(txt), "golden", &r, &e) < 0 && strstr(e.why, "tampered"));
	free(txt);
	CHECK(lease_evidence_parse("[]", 2, "x", &r, &e) < 0);
	CHECK(lease_evidence_parse("{\"v\":1}", 7, "x", &r, &e) < 0);
}

static json_t *step(struct lease_store *s, enum lease_edge edge, json_t *ev, json_t *args,
		    struct common_err *e)
{
	json_t *out = NULL;

	if (lease_transition(s, NULL, edge, ev, args, &out, e) < 0)
		out = NULL; /* e says why; callers check it */
	json_decref(args);
	return out;
}

static void test_store(void)
{
	char dir[] = "/tmp/test_lease.XXXXXX", *cmd;
	struct lease_store *s;
	struct common_err e;
	struct lease_request req;
	json_t *req_out = NULL, *f, *a, *o, *rep, *tam, *rs;
	uint64_t usage[LEASE_DIM_COUNT] = { 0 };
	const char *closed;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(lease_store_open(dir, &s, &e) == 0);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "unit";
	req.escrow = 3;
	req.fees[LEASE_DIM_FUEL] = 1;
	req.limits[LEASE_DIM_MEMORY] = 100;
	req.has_limit[LEASE_DIM_MEMORY] = 1;
	CHECK(lease_request(s, &req, &req_out, &e) == 0);
	/* fund below the declared escrow is refused */
	CHECK(!step(s, LEASE_EDGE_FUND, req_out, json_pack("{s:i}", "amount", 2), &e));
	CHECK(strstr(e.why, "below the declared escrow") != NULL);
	f = step(s, LEASE_EDGE_FUND, req_out, json_pack("{s:i}", "amount", 10), &e);
	CHECK(f != NULL);
	/* replay of the request receipt */
	CHECK(!step(s, LEASE_EDGE_ACTIVATE, req_out, NULL, &e) && strstr(e.why, "replayed"));
	/* tampered copy of the head */
	tam = json_deep_copy(f);
	json_object_set_new(json_object_get(tam, "receipt"), "amount", json_integer(11));
	CHECK(!step(s, LEASE_EDGE_ACTIVATE, tam, NULL, &e) && strstr(e.why, "tampered"));
	json_decref(tam);
	a = step(s, LEASE_EDGE_ACTIVATE, f, NULL, &e);
	CHECK(a != NULL);
	/* runtime observations: monotonic, no receipt when unchanged, auto-close on a bound */
	usage[LEASE_DIM_FUEL] = 4;
	CHECK(lease_observe_usage(s, json_string_value(json_object_get(json_object_get(a, "lease"), "id")),
				  usage, &closed, &rs, &e) == 0);
	CHECK(closed == NULL && json_array_size(rs) == 1);
	json_decref(rs);
	CHECK(lease_observe_usage(s, json_string_value(json_object_get(json_object_get(a, "lease"), "id")),
				  usage, &closed, &rs, &e) == 0 && json_array_size(rs) == 0);
	json_decref(rs);
	usage[LEASE_DIM_FUEL] = 3;
	CHECK(lease_observe_usage(s, json_string_value(json_object_get(json_object_get(a, "lease"), "id")),
				  usage, &closed, &rs, &e) < 0 && strstr(e.why, "monotonic"));
	usage[LEASE_DIM_FUEL] = 4;
	usage[LEASE_DIM_MEMORY] = 101;
	CHECK(lease_observe_usage(s, json_string_value(json_object_get(json_object_get(a, "lease"), "id")),
				  usage, &closed, &rs, &e) == 0);
	CHECK(closed && !strcmp(closed, "memory") && json_array_size(rs) == 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(rs, 0), "to")), "Settling");
	json_decref(rs);
	o = NULL;
	CHECK(lease_head(s, json_string_value(json_object_get(json_object_get(a, "lease"), "id")), &o,
			 &e) == 0);
	/* settle via expire: charge min(cost 4, escrow 10), refund 6 */
	f = (json_decref(f), step(s, LEASE_EDGE_EXPIRE, o, NULL, &e));
	CHECK(f && json_integer_value(json_object_get(json_object_get(f, "lease"), "charge")) == 4);
	CHECK(f && json_integer_value(json_object_get(json_object_get(f, "lease"), "refund")) == 6);
	CHECK(lease_verify(s, NULL, &rep, &e) == 0 && json_is_true(json_object_get(rep, "ok")));
	json_decref(rep);
	json_decref(o);
	json_decref(f);
	json_decref(a);
	json_decref(req_out);
	lease_store_close(s);
	cmd = common_xasprintf("rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	free(cmd);
}

static json_t *funded(struct lease_store *s, const char *principal, uint64_t ns_limit)
{
	struct lease_request req;
	struct common_err e;
	json_t *r = NULL, *f;

	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = principal;
	req.limits[LEASE_DIM_NAMESPACE_BYTES] = ns_limit;
	req.has_limit[LEASE_DIM_NAMESPACE_BYTES] = 1;
	if (lease_request(s, &req, &r, &e) < 0)
		return NULL;
	f = step(s, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 1), &e);
	json_decref(r);
	return f;
}

/* snapshot and restore edges as sbx-snap / sbx-restore drive them */
static void test_snapshot_restore(void)
{
	char dir[] = "/tmp/test_lease.XXXXXX", *cmd, hex[65];
	struct lease_store *s;
	struct common_err e;
	json_t *src, *a, *snap, *tgt, *other, *out, *rep;
	const char *sid;

	memset(hex, 'c', 64);
	hex[64] = '\0';
	CHECK(mkdtemp(dir) != NULL);
	CHECK(lease_store_open(dir, &s, &e) == 0);
	src = funded(s, "u", 1000);
	CHECK(src != NULL);
	a = step(s, LEASE_EDGE_ACTIVATE, src, NULL, &e);
	CHECK(a != NULL);
	sid = json_string_value(json_object_get(json_object_get(a, "lease"), "id"));
	/* more bytes than the namespace limit leaves: refused */
	CHECK(!step(s, LEASE_EDGE_SNAPSHOT, a, json_pack("{s:s, s:i}", "snapshot", hex, "bytes", 1001), &e));
	CHECK(strstr(e.why, "exceed the namespace_bytes left") != NULL);
	CHECK(!step(s, LEASE_EDGE_SNAPSHOT, a, json_pack("{s:s, s:i}", "snapshot", "xyz", "bytes", 1), &e));
	snap = step(s, LEASE_EDGE_SNAPSHOT, a, json_pack("{s:s, s:i}", "snapshot", hex, "bytes", 600), &e);
	CHECK(snap != NULL);
	CHECK(json_integer_value(json_object_get(json_object_get(snap, "lease"), "snapshot_bytes")) == 600);
	CHECK(json_array_size(json_object_get(json_object_get(snap, "lease"), "snapshots")) == 1);
	/* a second snapshot cannot bypass the ceiling */
	CHECK(!step(s, LEASE_EDGE_SNAPSHOT, snap, json_pack("{s:s, s:i}", "snapshot", hex, "bytes", 500), &e));
	/* restore into a Funded target of the same principal, host and image */
	tgt = funded(s, "u", 1000);
	other = funded(s, "v", 1000);
	CHECK(tgt && other);
	CHECK(!step(s, LEASE_EDGE_RESTORE, other, json_pack("{s:s, s:s, s:i}", "snapshot", hex, "source", sid, "bytes", 600), &e));
	CHECK(strstr(e.why, "another principal") != NULL);
	out = step(s, LEASE_EDGE_RESTORE, tgt, json_pack("{s:s, s:s, s:i}", "snapshot", hex, "source", sid, "bytes", 600), &e);
	CHECK(out != NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(out, "lease"), "state")), "Active");
	CHECK(lease_verify(s, NULL, &rep, &e) == 0 && json_is_true(json_object_get(rep, "ok")));
	json_decref(rep);
	json_decref(snap);
	json_decref(src);
	json_decref(out);
	json_decref(tgt);
	json_decref(other);
	json_decref(a);
	lease_store_close(s);
	cmd = common_xasprintf("rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	free(cmd);
}

static void test_image(void)
{
	char hex[COMMON_SHA256_HEX];
	struct common_err e;

	CHECK(lease_image_check("/bin/true", hex, &e) == 0 && strlen(hex) == 64);
	CHECK(lease_image_check("/etc/passwd", hex, &e) < 0 && strstr(e.why, "not an ELF"));
	CHECK(lease_image_check("/nonexistent", hex, &e) < 0);
	CHECK(lease_image_check("/tmp", hex, &e) < 0);
}

static void put_file(const char *dir, const char *name, const char *value)
{
	char *p = common_xasprintf("%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0 && write(fd, value, strlen(value)) == (ssize_t)strlen(value));
	close(fd);
	free(p);
}

/* The digest takes the cells in the order of their whole keys ("a.b/.." < "a/.." <
 * "a0"), as a reference implementation does (golden value), at any depth with a few
 * descriptors; the bounded measure refuses what lies deeper than it goes. */
static void test_ns_digest(void)
{
	char dir[] = "/tmp/test_ns.XXXXXX", hex[COMMON_SHA256_HEX];
	const char *dirs[] = { "a", "a/-z", "a.b", "a.b/x", "b", "b/c", "b/c/d", "empty" };
	uint64_t cells = 0, bytes = 0;
	struct common_err e;
	int st;

	CHECK(mkdtemp(dir) != NULL);
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		char *p = common_xasprintf("%s/%s", dir, dirs[i]);
		CHECK(mkdir(p, 0700) == 0);
		free(p);
	}
	put_file(dir, "a/x", "hello");
	put_file(dir, "a0", "1");
	put_file(dir, "a.b/x/y", "22");
	put_file(dir, "a/-z/q", "333");
	put_file(dir, "a.c", "");
	char *p = common_xasprintf("%s/b/c/d/s", dir);
	CHECK(symlink("../target", p) == 0);
	free(p);
	CHECK(lease_ns_digest(dir, hex, &cells, &bytes, &e) == 0);
	CHECK_STR(hex, "3ea45e4be7cf0b1b1c360c0fe2eec1f64bb64c80baf83e8bfd24b803a9e13d82");
	CHECK(cells == 6 && bytes == 48);
	CHECK(lease_ns_measure(dir, &bytes, &e) == 0 && bytes == 48);
	/* 200 levels, a 1-byte cell at the bottom: key "d/" x 200 "c" */
	p = common_xasprintf("%s/deep", dir);
	CHECK(mkdir(p, 0700) == 0);
	int fd = open(p, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 200; i++) {
		int sub = mkdirat(fd, "d", 0700) < 0 ? -1 : openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = sub;
	}
	CHECK(fd >= 0);
	close(openat(fd, "c", O_WRONLY | O_CREAT, 0600));
	close(fd);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 16, 16 };
		_exit(setrlimit(RLIMIT_NOFILE, &rl) < 0 ||
		      lease_ns_digest(p, hex, &cells, &bytes, &e) < 0 || cells != 1 || bytes != 401);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(lease_ns_measure(p, &bytes, &e) < 0 && strstr(e.why, "deeper than 64"));
	free(p);
	common_rm_rf(dir, &e);
}

/* etcd store URLs are checked before any connection; the host part goes to SBX_HOST_DIR. */
static void test_etcd_url(void)
{
	static const struct { const char *url, *why; } bad[] = {
		{ "etcd://127.0.0.1:2379", "expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX" },
		{ "etcd:///sbx", "expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX" },
		{ "etcd://localhost/sbx", "endpoint \"localhost\" is not HOST:PORT" },
		{ "etcd://u@h:1/sbx", "endpoint \"u@h:1\" is not HOST:PORT" },
		{ "etcd://h:1/a b", "prefix may hold only A-Z a-z 0-9 . _ - /" },
	};
	char dir[] = "/tmp/sbx-test-etcd.XXXXXX";
	struct lease_store *s;
	struct common_err e;

	CHECK(mkdtemp(dir) != NULL);
	setenv("SBX_HOST_DIR", dir, 1);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(lease_store_open(bad[i].url, &s, &e) < 0);
		CHECK_STR(e.why, bad[i].why);
	}
	/* nothing listens on port 1: the error names etcd and the endpoint, in bounded time */
	setenv("SBX_ETCD_TIMEOUT_MS", "200", 1);
	CHECK(lease_store_open("etcd://127.0.0.1:1/sbx", &s, &e) < 0);
	CHECK_STR(e.what, "store");
	CHECK(strncmp(e.why, "etcd unreachable: http://127.0.0.1:1: ", 38) == 0);
	setenv("SBX_ETCD_TIMEOUT_MS", "nope", 1);
	CHECK(lease_store_open("etcd://127.0.0.1:1/sbx", &s, &e) < 0);
	unsetenv("SBX_ETCD_TIMEOUT_MS");
	unsetenv("SBX_HOST_DIR");
	struct common_err rm;
	common_rm_rf(dir, &rm);
}

/* Snapshot records are checked field by field; the directory store keeps none and
 * finds chunks in $SBX_SNAPSHOT_DIR, then in its own snapshots directory. */
static void test_snapshot_records(void)
{
	static const char *const bad[][2] = {
		{ "digest", "\"x\"" }, { "manifest", "\"00\"" }, { "bytes", "-1" },
		{ "chunks", "\"2\"" }, { "lease", "\"../x\"" }, { "principal", "\"a b\"" },
		{ "image", "7" }, { "signer", "\"EF\"" }, { "host", "\"a\\nb\"" },
		{ "location", "\"elsewhere\"" },
	};
	char d[65], m[89], dir[] = "/tmp/sbx-test-snaprec.XXXXXX", hex[65], *p;
	struct lease_store *s;
	struct common_err e, rm;
	json_t *rec, *got;

	memset(d, 'a', 64);
	d[64] = 0;
	snprintf(m, sizeof m, "%s0100000000000000" "01000000", d);
	rec = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "digest", d,
			"manifest", m, "bytes", 1, "chunks", 1, "persisted_bytes", 200, "batch", 0,
			"lease", "L0123456789abcdef", "principal", "alice", "host_program", "sbx",
			"image", d, "signer", d, "host", "hostA", "location", "host");
	CHECK(lease_snapshot_record_check(rec, d, "t", &e) == 0);
	CHECK(lease_snapshot_record_check(rec, NULL, "t", &e) == 0);
	memset(hex, 'b', 64);
	hex[64] = 0;
	CHECK(lease_snapshot_record_check(rec, hex, "t", &e) < 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *r = json_deep_copy(rec);
		json_object_set_new(r, bad[i][0], json_loads(bad[i][1], JSON_DECODE_ANY, NULL));
		CHECK(lease_snapshot_record_check(r, NULL, "t", &e) < 0);
		CHECK(strstr(e.why, bad[i][0]) != NULL);
		json_decref(r);
	}
	CHECK(mkdtemp(dir) != NULL);
	p = common_xasprintf("%s/shared", dir);
	setenv("SBX_SNAPSHOT_DIR", p, 1);
	CHECK(lease_store_open(dir, &s, &e) == 0);
	CHECK_STR(lease_snapshot_top(s), p);
	CHECK(lease_snapshot_register(s, rec, &e) == 1);
	CHECK(lease_snapshot_lookup(s, d, &got, &e) == 0 && got == NULL);
	CHECK(lease_snapshot_chunks(s, d, NULL, &e) == NULL);
	CHECK_STR(e.why, "no such snapshot in the store");
	free(p);
	p = common_xasprintf("%s/snapshots/%s", dir, d);
	CHECK(common_mkdir_p(p, 0700, &e) == 0);
	char *found = lease_snapshot_chunks(s, d, NULL, &e);
	CHECK(found && strcmp(found, p) == 0);
	free(found);
	free(p);
	CHECK(lease_snapshot_chunks(s, "../etc", NULL, &e) == NULL);
	lease_store_close(s);
	unsetenv("SBX_SNAPSHOT_DIR");
	json_decref(rec);
	common_rm_rf(dir, &rm);
}

/* The bound a run keeps in its claim: written, read back, refused when damaged,
 * another lease's, or above any usage. */
static void test_run_bound(void)
{
	char path[] = "/tmp/sbx-bound-XXXXXX";
	const char *id = "L0123456789abcdef";
	uint64_t b[LEASE_DIM_COUNT], got[LEASE_DIM_COUNT], seq;
	uint8_t slot[2][LEASE_RUN_BOUND_SLOT];
	struct common_err e;
	int fd = mkstemp(path);

	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		b[d] = 1000u * (unsigned)d + 7;
	CHECK(fd >= 0);
	CHECK(lease_run_bound_write(fd, id, 4, b, 1, &e) == 0);
	b[0] = 99999;
	CHECK(lease_run_bound_write(fd, id, 5, b, 1, &e) == 0);
	CHECK(pread(fd, slot, sizeof slot, 4096) == (ssize_t)sizeof slot);
	CHECK(lease_run_bound_decode(slot[1], sizeof slot[1], id, &seq, got) == 0);
	CHECK(seq == 5 && got[0] == 99999 && got[LEASE_DIM_COUNT - 1] == b[LEASE_DIM_COUNT - 1]);
	CHECK(lease_run_bound_decode(slot[0], sizeof slot[0], id, &seq, got) == 0 && seq == 4);
	CHECK(lease_run_bound_decode(slot[0], sizeof slot[0], "L0123456789abcdee", &seq, got) < 0);
	CHECK(lease_run_bound_decode(slot[0], sizeof slot[0] - 1, id, &seq, got) < 0);
	for (size_t i = 0; i < sizeof slot[0]; i += 37) { /* every field is covered */
		slot[0][i] ^= 1;
		CHECK(lease_run_bound_decode(slot[0], sizeof slot[0], id, &seq, got) < 0);
		slot[0][i] ^= 1;
	}
	b[2] = (1ull << 62) + 1; /* whole, but above any usage */
	CHECK(lease_run_bound_write(fd, id, 6, b, 0, &e) == 0);
	CHECK(pread(fd, slot[0], sizeof slot[0], 4096) == (ssize_t)sizeof slot[0]);
	CHECK(lease_run_bound_decode(slot[0], sizeof slot[0], id, &seq, got) < 0);
	close(fd);
	unlink(path);
}

/* Two handles on one store, as two processes: each sees what the other committed
 * (records are kept in memory only while the journal is as a handle's own last
 * commit left it), and verify reads the files as they are, not as remembered. */
static void test_store_cache(void)
{
	char dir[] = "/tmp/test_lease.XXXXXX", *p;
	struct lease_store *s1, *s2;
	struct common_err e;
	struct lease_request req;
	json_t *r = NULL, *f, *a, *o = NULL, *st, *rep, *rs;
	uint64_t usage[LEASE_DIM_COUNT] = { 0 };
	const char *closed, *id;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(lease_store_open(dir, &s1, &e) == 0 && lease_store_open(dir, &s2, &e) == 0);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "unit";
	req.fees[LEASE_DIM_FUEL] = 1;
	CHECK(lease_request(s1, &req, &r, &e) == 0);
	f = step(s1, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 10), &e);
	a = f ? step(s2, LEASE_EDGE_ACTIVATE, f, NULL, &e) : NULL;
	CHECK(f && a);
	id = json_string_value(json_object_get(json_object_get(r, "lease"), "id"));
	/* s1 last wrote the record as Funded: it must see s2's Active */
	usage[LEASE_DIM_FUEL] = 2;
	CHECK(lease_observe_usage(s1, id, usage, &closed, &rs, &e) == 0 && json_array_size(rs) == 1);
	json_decref(rs);
	/* s2 last wrote it at seq 2: the head is s1's observation, not a replay */
	CHECK(lease_head(s1, id, &o, &e) == 0 && json_integer_value(json_object_get(o, "seq")) == 3);
	st = step(s2, LEASE_EDGE_SETTLE, o, NULL, &e);
	CHECK(st && !strcmp(json_string_value(json_object_get(json_object_get(st, "lease"), "state")),
			    "Settling"));
	CHECK(lease_verify(s1, NULL, &rep, &e) == 0 && json_is_true(json_object_get(rep, "ok")));
	json_decref(rep);
	/* a hand-edited record is verify's to report, whatever s2 last wrote */
	p = common_xasprintf("%s/leases/%s.json", dir, id);
	CHECK(common_write_atomic(p, "{}\n", 3, 0600, &e) == 0);
	free(p);
	CHECK(lease_verify(s2, NULL, &rep, &e) == 0 && json_is_false(json_object_get(rep, "ok")));
	json_decref(rep);
	json_decref(st);
	json_decref(o);
	json_decref(a);
	json_decref(f);
	json_decref(r);
	lease_store_close(s1);
	lease_store_close(s2);
	common_rm_rf(dir, &e);
}

/* This process's read calls so far (/proc/self/io), -1 when the kernel keeps none. */
static long read_calls(void)
{
	char *buf = NULL, *at;
	size_t len;
	long n = -1;

	if (common_read_file("/proc/self/io", 4096, &buf, &len, NULL) == 0 &&
	    (at = strstr(buf, "syscr: ")))
		n = strtol(at + 7, NULL, 10);
	free(buf);
	return n;
}

/* A transition reads nothing back of what this process wrote: the record and the
 * slot index are kept while the journal is as its last commit left it. */
static void test_store_reads(void)
{
	char dir[] = "/tmp/test_lease.XXXXXX";
	struct lease_store *s;
	struct common_err e;
	struct lease_request req;
	json_t *r = NULL, *f, *a, *rs;
	uint64_t usage[LEASE_DIM_COUNT] = { 0 };
	const char *closed, *id;
	long before, after;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(lease_store_open(dir, &s, &e) == 0);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "unit";
	req.fees[LEASE_DIM_FUEL] = 1;
	CHECK(lease_request(s, &req, &r, &e) == 0);
	f = step(s, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 100), &e);
	a = f ? step(s, LEASE_EDGE_ACTIVATE, f, NULL, &e) : NULL;
	CHECK(a != NULL);
	id = json_string_value(json_object_get(json_object_get(r, "lease"), "id"));
	before = read_calls();
	for (int i = 1; i <= 20; i++) {
		usage[LEASE_DIM_FUEL] = (uint64_t)i;
		CHECK(lease_observe_usage(s, id, usage, &closed, &rs, &e) == 0 && json_array_size(rs) == 1);
		json_decref(rs);
	}
	after = read_calls();
	/* the record and the slot index read back each time: 4 reads a transition */
	CHECK(before < 0 || after - before < 20);
	/* more leases than a process keeps: each still moves from its own record */
	json_t *many[70], *clk;
	CHECK(lease_clock_set_mode(s, "manual", &clk, &e) == 0);
	json_decref(clk);
	for (int i = 0; i < 70; i++) {
		req.lifetime = i % 7 == 0 ? 0 : 1;
		CHECK(lease_request(s, &req, &many[i], &e) == 0);
		if (i % 7 == 0) /* 10 kept live: the principal has 32 slots */
			continue;
		CHECK(lease_clock_tick(s, 1, &clk, &e) == 0);
		json_decref(clk);
		json_t *x = step(s, LEASE_EDGE_EXPIRE, many[i], NULL, &e);
		json_t *d = x ? step(s, LEASE_EDGE_DESTROY, x, NULL, &e) : NULL;
		CHECK(d != NULL);
		json_decref(x);
		json_decref(d);
	}
	for (int i = 0; i < 70; i += 7) {
		json_t *g = step(s, LEASE_EDGE_FUND, many[i], json_pack("{s:i}", "amount", 1), &e);
		CHECK(g && json_integer_value(json_object_get(json_object_get(g, "receipt"), "seq")) == 1);
		json_decref(g);
	}
	for (int i = 0; i < 70; i++)
		json_decref(many[i]);
	CHECK(lease_verify(s, NULL, &rs, &e) == 0 && json_is_true(json_object_get(rs, "ok")));
	json_decref(rs);
	json_decref(a);
	json_decref(f);
	json_decref(r);
	lease_store_close(s);
	common_rm_rf(dir, &e);
}

/* The seq of the receipt the record file on disk names, -1 when there is none. */
static int64_t disk_seq(const char *dir, const char *id)
{
	char *p = common_xasprintf("%s/leases/%s.json", dir, id);
	json_t *j = common_json_load_file(p, 1 << 20, NULL);
	int64_t seq = json_is_integer(json_object_get(json_object_get(j, "receipt"), "seq"))
			      ? json_integer_value(json_object_get(json_object_get(j, "receipt"), "seq"))
			      : -1;

	json_decref(j);
	free(p);
	return seq;
}

/* A commit leaves its record in memory: another handle still reads every
 * transition, the record on disk lags by a bounded number of receipts (else no
 * recovery could roll it forward), and another lease's commit writes it first. */
static void test_store_lag(void)
{
	char dir[] = "/tmp/test_lease.XXXXXX";
	struct lease_store *s1, *s2;
	struct common_err e;
	struct lease_request req;
	json_t *r = NULL, *f, *a, *rs, *h = NULL, *l = NULL, *rec = NULL;
	uint64_t usage[LEASE_DIM_COUNT] = { 0 };
	const char *closed, *id;
	int64_t worst = 0;
	int status;
	pid_t pid;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(lease_store_open(dir, &s1, &e) == 0 && lease_store_open(dir, &s2, &e) == 0);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "unit";
	req.fees[LEASE_DIM_FUEL] = 1;
	CHECK(lease_request(s1, &req, &r, &e) == 0);
	id = json_string_value(json_object_get(json_object_get(r, "lease"), "id"));
	/* a listing in the handle that made it, and in another */
	CHECK(lease_list(s1, NULL, -1, &l, &e) == 0 && json_array_size(l) == 1);
	json_decref(l);
	f = step(s1, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 100), &e);
	CHECK(lease_list(s2, NULL, -1, &l, &e) == 0 && json_array_size(l) == 1);
	json_decref(l);
	a = f ? step(s1, LEASE_EDGE_ACTIVATE, f, NULL, &e) : NULL;
	CHECK(a != NULL);
	for (int i = 1; i <= 30; i++) {
		int64_t behind;
		usage[LEASE_DIM_FUEL] = (uint64_t)i;
		CHECK(lease_observe_usage(s1, id, usage, &closed, &rs, &e) == 0 && json_array_size(rs) == 1);
		json_decref(rs);
		behind = 2 + i - disk_seq(dir, id);
		if (behind > worst)
			worst = behind;
	}
	/* it did lag (one write a transition is what this saves), never past the bound */
	CHECK(worst >= 2 && worst <= LEASE_STEPS_MAX + 1);
	/* another handle (another process alike) rolls it forward from the journal */
	CHECK(lease_head(s2, id, &h, &e) == 0 && json_integer_value(json_object_get(h, "seq")) == 32);
	json_decref(h);
	CHECK(lease_head(s1, id, &h, &e) == 0 && json_integer_value(json_object_get(h, "seq")) == 32);
	json_decref(h);
	/* two handles taking turns write at once (from the turn that finds the other's
	 * append): each would roll the other's kept record forward (a signature check
	 * a receipt) at every turn */
	for (int i = 1; i <= 4; i++) {
		usage[LEASE_DIM_FUEL] = (uint64_t)(30 + i);
		CHECK(lease_observe_usage(i % 2 ? s2 : s1, id, usage, &closed, &rs, &e) == 0);
		json_decref(rs);
		CHECK(i == 1 || disk_seq(dir, id) == 32 + i);
	}
	/* alone again, it keeps the record in memory once more */
	usage[LEASE_DIM_FUEL] = 35;
	CHECK(lease_observe_usage(s1, id, usage, &closed, &rs, &e) == 0);
	json_decref(rs);
	usage[LEASE_DIM_FUEL] = 36;
	CHECK(lease_observe_usage(s1, id, usage, &closed, &rs, &e) == 0);
	json_decref(rs);
	CHECK(disk_seq(dir, id) < 38);
	/* killed right after the journal append of another lease's request: the record
	 * the last commit left in memory was written before it */
	usage[LEASE_DIM_FUEL] = 37;
	CHECK(lease_observe_usage(s1, id, usage, &closed, &rs, &e) == 0);
	json_decref(rs);
	CHECK(disk_seq(dir, id) < 39);
	pid = fork();
	if (pid == 0) {
		json_t *r2;
		usage[LEASE_DIM_FUEL] = 38;
		if (lease_observe_usage(s1, id, usage, &closed, &rs, &e) < 0)
			_exit(3);
		setenv("SBX_FAULT", "lease-after-journal", 1);
		lease_request(s1, &req, &r2, &e);
		_exit(4);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(disk_seq(dir, id) == 40);
	CHECK(lease_verify(s2, NULL, &rs, &e) == 0 && json_is_true(json_object_get(rs, "ok")));
	json_decref(rs);
	CHECK(lease_load(s2, id, &rec, &e) == 0 && json_integer_value(json_object_get(
		json_object_get(rec, "usage"), "fuel")) == 38);
	json_decref(rec);
	json_decref(a);
	json_decref(f);
	json_decref(r);
	lease_store_close(s1);
	lease_store_close(s2);
	common_rm_rf(dir, &e);
}

/* The clock one handle read is not used once another moved it: a tick past a
 * lease's deadline decides its next edge (store: a directory made here, else
 * $SBX_TEST_STORE, an etcd URL when lease_etcd.bats runs this). */
static void test_store_clock(const char *url)
{
	char dir[] = "/tmp/test_lease.XXXXXX";
	const char *where = url ? url : mkdtemp(dir);
	struct lease_store *s1, *s2;
	struct common_err e;
	struct lease_request req;
	json_t *r = NULL, *clk, *f;

	CHECK(where && lease_store_open(where, &s1, &e) == 0 && lease_store_open(where, &s2, &e) == 0);
	CHECK(lease_clock_set_mode(s1, "manual", &clk, &e) == 0);
	json_decref(clk);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "unit";
	req.lifetime = 5;
	CHECK(lease_request(s1, &req, &r, &e) == 0);
	CHECK(lease_clock_tick(s2, 10, &clk, &e) == 0);
	json_decref(clk);
	/* s1 read the clock before the tick: with it, the lease would still be funded */
	f = step(s1, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 1), &e);
	CHECK(!f && strstr(e.why, "Expired"));
	json_decref(f);
	json_decref(r);
	lease_store_close(s1);
	lease_store_close(s2);
	if (!url)
		common_rm_rf(dir, &e);
}

/* A process alone at a shared store (an etcd URL: lease_etcd.bats counts its reads)
 * compares what it kept instead of reading it again; a record another handle moved
 * meanwhile loses the comparison, and the transition is decided again on it. */
static void test_store_kept(const char *url)
{
	struct lease_store *s1, *s2;
	struct common_err e;
	struct lease_request req;
	json_t *r = NULL, *f, *f2, *a, *o = NULL, *rs, *h = NULL;
	uint64_t usage[LEASE_DIM_COUNT] = { 0 };
	const char *closed;

	CHECK(lease_store_open(url, &s1, &e) == 0 && lease_store_open(url, &s2, &e) == 0);
	memset(&req, 0, sizeof req);
	req.image = "/bin/true";
	req.principal = "kept";
	CHECK(lease_request(s1, &req, &r, &e) == 0);
	f = step(s1, LEASE_EDGE_FUND, r, json_pack("{s:i}", "amount", 1), &e);
	a = f ? step(s1, LEASE_EDGE_ACTIVATE, f, NULL, &e) : NULL;
	CHECK(a != NULL);
	for (int i = 1; i <= 30 && a; i++) {
		o = step(s1, LEASE_EDGE_OBSERVE, a, json_pack("{s:{s:i}}", "usage", "fuel", i), &e);
		CHECK(o != NULL);
		json_decref(a);
		a = o;
	}
	/* another handle observes: the head s1 kept is no longer the head */
	usage[LEASE_DIM_FUEL] = 40;
	CHECK(lease_observe_usage(s2, json_string_value(json_object_get(json_object_get(a, "receipt"),
				  "lease")), usage, &closed, &rs, &e) == 0);
	json_decref(rs);
	o = step(s1, LEASE_EDGE_OBSERVE, a, json_pack("{s:{s:i}}", "usage", "fuel", 41), &e);
	CHECK(!o && strstr(e.why, "replayed"));
	CHECK(lease_head(s1, json_string_value(json_object_get(json_object_get(a, "receipt"), "lease")),
			 &h, &e) == 0);
	o = h ? step(s1, LEASE_EDGE_OBSERVE, h, json_pack("{s:{s:i}}", "usage", "fuel", 41), &e) : NULL;
	CHECK(o && json_integer_value(json_object_get(json_object_get(o, "receipt"), "seq")) == 34);
	/* settled by the other handle: an observation that changes nothing by what s1
	 * kept is refused all the same */
	f2 = o ? step(s2, LEASE_EDGE_SETTLE, o, NULL, &e) : NULL;
	CHECK(f2 != NULL);
	usage[LEASE_DIM_FUEL] = 41;
	rs = NULL;
	CHECK(lease_observe_usage(s1, json_string_value(json_object_get(json_object_get(a, "receipt"),
				  "lease")), usage, &closed, &rs, &e) < 0 && strstr(e.why, "Settling"));
	json_decref(rs);
	json_decref(f2);
	json_decref(o);
	json_decref(h);
	json_decref(a);
	json_decref(f);
	json_decref(r);
	lease_store_close(s1);
	lease_store_close(s2);
}

int main(void)
{
	if (getenv("SBX_TEST_STORE")) {
		if (getenv("SBX_TEST_KEPT"))
			test_store_kept(getenv("SBX_TEST_STORE"));
		else
			test_store_clock(getenv("SBX_TEST_STORE"));
		return unit_finish("test_lease (shared store)");
	}
	test_table();
	test_limits();
	test_receipt_digest();
	test_store();
	test_store_cache();
	test_store_reads();
	test_store_lag();
	test_store_clock(NULL);
	test_snapshot_restore();
	test_image();
	test_ns_digest();
	test_etcd_url();
	test_snapshot_records();
	test_run_bound();
	return unit_finish("test_lease");
}
