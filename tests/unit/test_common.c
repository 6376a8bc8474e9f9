/* libcommon: hashing, signing, numbers, canonical JSON, durable files. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "libcommon/common.h"
#include "tests/unit/unit.h"

static void test_sha256(void)
{
	uint8_t d[32];
	char hex[65];

	common_sha256("abc", 3, d);
	common_hex(d, 32, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	uint8_t back[32];
	CHECK(common_unhex(hex, back, 32) == 0 && !memcmp(back, d, 32));
	CHECK(common_unhex("zz", back, 1) < 0);
	CHECK(common_unhex(hex, back, 31) < 0);
}

static void test_sign(void)
{
	struct common_key k;
	uint8_t sig[64];

	CHECK(common_key_generate(&k, NULL) == 0);
	CHECK(common_key_sign(&k, "msg", 3, sig, NULL) == 0);
	CHECK(common_key_verify(k.pub, "msg", 3, sig) == 1);
	CHECK(common_key_verify(k.pub, "msh", 3, sig) == 0);
	sig[10] ^= 1;
	CHECK(common_key_verify(k.pub, "msg", 3, sig) == 0);

	/* more keys than a process keeps made: each signs as itself, in any order */
	struct common_key ks[7];
	uint8_t first[7][64], again[64];
	for (int i = 0; i < 7; i++) {
		CHECK(common_key_generate(&ks[i], NULL) == 0);
		CHECK(common_key_sign(&ks[i], "msg", 3, first[i], NULL) == 0);
	}
	for (int i = 6; i >= 0; i--) {
		struct common_key d = { .has_priv = 0 };
		memcpy(d.priv, ks[i].priv, 32);
		CHECK(common_key_derive(&d) == 0 && memcmp(d.pub, ks[i].pub, 32) == 0);
		CHECK(common_key_sign(&ks[i], "msg", 3, again, NULL) == 0);
		CHECK(memcmp(again, first[i], 64) == 0); /* Ed25519 is deterministic */
		CHECK(common_key_verify(ks[i].pub, "msg", 3, again) == 1);
		CHECK(common_key_verify(ks[(i + 1) % 7].pub, "msg", 3, again) == 0);
	}
}

static void test_numbers(void)
{
	uint64_t v;
	struct common_err e;

	CHECK(common_parse_u64("64M", UINT64_MAX, &v, &e) == 0 && v == 64ull << 20);
	CHECK(common_parse_u64("1G", 1ull << 30, &v, &e) == 0 && v == 1ull << 30);
	CHECK(common_parse_u64("1025M", 1ull << 30, &v, &e) < 0);
	CHECK(common_parse_u64("-1", UINT64_MAX, &v, &e) < 0);
	CHECK(common_parse_u64("1.5", UINT64_MAX, &v, &e) < 0);
	CHECK(common_parse_u64("", UINT64_MAX, &v, &e) < 0);
	CHECK(common_parse_u64("18446744073709551616", UINT64_MAX, &v, &e) < 0);
	CHECK(common_parse_u64("17179869184G", UINT64_MAX, &v, &e) < 0);
	CHECK(common_parse_u64("12x", UINT64_MAX, &v, &e) < 0);
}

static void test_json(void)
{
	struct common_err e;
	json_t *j = common_json_load("{\"b\":1,\"a\":[true,null],\"c\":\"x\"}", 31, "t", &e);
	char *s;
	int64_t i;
	const char *str;

	CHECK(j != NULL);
	s = common_json_canonical(j);
	CHECK_STR(s, "{\"a\":[true,null],\"b\":1,\"c\":\"x\"}");
	free(s);
	CHECK(common_json_int(j, "b", &i, "t", &e) == 0 && i == 1);
	CHECK(common_json_str(j, "b", &str, "t", &e) < 0);
	CHECK_STR(e.what, "t: field \"b\"");
	CHECK(common_json_int(j, "zz", &i, "t", &e) < 0);
	json_decref(j);
	CHECK(common_json_load("{\"a\":1,\"a\":2}", 13, "t", &e) == NULL);
	CHECK(common_json_load("{\"a\":", 5, "t", &e) == NULL);
}

static void test_files(void)
{
	char dir[] = "/tmp/sbx-unit-XXXXXX";
	char *path, *buf;
	size_t len;
	struct common_err e;

	CHECK(mkdtemp(dir) != NULL);
	path = common_xasprintf("%s/a/b/f", dir);
	char *sub = common_xasprintf("%s/a/b", dir), *lock = common_xasprintf("%s/lock", dir);
	CHECK(common_mkdir_p(sub, 0700, &e) == 0);
	CHECK(common_write_atomic(path, "hello", 5, 0600, &e) == 0);
	CHECK(common_read_file(path, 100, &buf, &len, &e) == 0 && len == 5 && !strcmp(buf, "hello"));
	free(buf);
	CHECK(common_read_file(path, 4, &buf, &len, &e) < 0);
	CHECK(common_append_durable(path, "!", 1, &e) == 0);
	CHECK(common_read_file(path, 100, &buf, &len, &e) == 0 && len == 6);
	free(buf);
	int fd = common_lock(lock, &e);
	CHECK(fd >= 0);
	common_unlock(fd);
	CHECK(common_rm_rf(dir, &e) == 0);
	CHECK(access(dir, F_OK) < 0);
	free(path);
	free(sub);
	free(lock);
}

/* The file-hash cache: a hit by identity, kept across opens for block devices
 * only, and any damage to the file gives an empty cache (never a wrong hash). */
/* control bytes, C1, invalid UTF-8 and backslashes escaped; printable UTF-8 kept */
static void check_esc(const char *in, size_t len, unsigned flags, const char *want)
{
	char *x = common_escape(in, len, flags);
	CHECK_STR(x, want);
	free(x);
}

static void test_escape(void)
{
	check_esc("plain/path.c", 12, 0, "plain/path.c");
	check_esc("a\033]0;t\007b", 8, 0, "a\\e]0;t\\ab");
	check_esc("\n\t\r\b\f\v", 6, 0, "\\n\\t\\r\\b\\f\\v");
	check_esc("\001\177x", 3, 0, "\\001\\177x");
	check_esc("caf\xc3\xa9 \xe2\x82\xac", 9, 0, "caf\xc3\xa9 \xe2\x82\xac");
	check_esc("\xc2\x9b" "2J", 4, 0, "\\302\\2332J");
	check_esc("\xff\xc3(\xe2\x82", 5, 0, "\\xff\\xc3(\\xe2\\x82");
	check_esc("\xc0\xaf\xed\xa0\x80", 5, 0, "\\xc0\\xaf\\xed\\xa0\\x80");
	check_esc("a\\b", 3, 0, "a\\\\b");
	check_esc("a\\u001b", 7, COMMON_ESC_KEEP_BACKSLASH, "a\\u001b");
	check_esc("nul\0in", 6, 0, "nul\\000in");
	check_esc("", 0, 0, "");
}

/* the file lands in the directory opened first, even after that directory was
 * moved and a symlink put in its place; a symlink at the file name is replaced */
static void test_outfile(void)
{
	char dir[] = "/tmp/sbx-unit-XXXXXX";
	struct common_outfile o;
	struct common_err e;
	char *buf;
	size_t len;

	CHECK(mkdtemp(dir) != NULL);
	char *out = common_xasprintf("%s/out", dir), *moved = common_xasprintf("%s/moved", dir);
	char *victim = common_xasprintf("%s/victim", dir), *f = common_xasprintf("%s/out/r.json", dir);
	CHECK(mkdir(out, 0700) == 0 && mkdir(victim, 0700) == 0);
	CHECK(common_outfile_open(&o, f, &e) == 0);
	CHECK(rename(out, moved) == 0 && symlink(victim, out) == 0);
	CHECK(common_outfile_write(&o, "one", 3, 0644, &e) == 0);
	char *in_moved = common_xasprintf("%s/r.json", moved), *in_victim = common_xasprintf("%s/r.json", victim);
	CHECK(access(in_victim, F_OK) < 0);
	CHECK(common_read_file(in_moved, 100, &buf, &len, &e) == 0 && len == 3);
	free(buf);
	CHECK(unlink(in_moved) == 0 && symlink(in_victim, in_moved) == 0);
	CHECK(common_outfile_write(&o, "two", 3, 0644, &e) == 0);
	struct stat st;
	CHECK(lstat(in_moved, &st) == 0 && S_ISREG(st.st_mode) && access(in_victim, F_OK) < 0);
	common_outfile_close(&o);
	CHECK(common_outfile_open(&o, "/nonexistent/dir/r.json", &e) < 0);
	CHECK(common_outfile_open(&o, "/tmp/", &e) < 0);
	common_rm_rf(dir, &e);
	free(out), free(moved), free(victim), free(f), free(in_moved), free(in_victim);
}

static void test_hashcache(void)
{
	char dir[] = "/var/tmp/sbx-hc-XXXXXX", hex[COMMON_SHA256_HEX], *path, *buf = NULL;
	const char *h1 = "1111111111111111111111111111111111111111111111111111111111111111";
	struct stat st = { .st_dev = makedev(8, 1), .st_ino = 42, .st_size = 7 }, other = st, anon = st;
	struct common_hashcache *c;
	size_t len = 0;

	CHECK(mkdtemp(dir) != NULL);
	path = common_xasprintf("%s/h", dir);
	other.st_ctim.tv_nsec = 1;
	anon.st_dev = makedev(0, 50);
	c = common_hashcache_open(path, "test-hashes");
	CHECK(common_hashcache_get(c, &st, hex) == 0);
	common_hashcache_put(c, &st, h1);
	common_hashcache_put(c, &anon, h1);
	CHECK(common_hashcache_get(c, &st, hex) == 1 && strcmp(hex, h1) == 0);
	CHECK(common_hashcache_get(c, &other, hex) == 0);
	common_hashcache_close(c);
	c = common_hashcache_open(path, "test-hashes");
	CHECK(common_hashcache_get(c, &st, hex) == 1 && strcmp(hex, h1) == 0);
	CHECK(common_hashcache_get(c, &anon, hex) == 0);
	common_hashcache_close(c);
	c = common_hashcache_open(path, "other-hashes");
	CHECK(common_hashcache_get(c, &st, hex) == 0);
	common_hashcache_close(c);
	/* one flipped hash digit: the sum no longer matches */
	CHECK(common_read_file(path, 1 << 20, &buf, &len, NULL) == 0);
	char *at = strstr(buf, h1);
	CHECK(at != NULL);
	if (at) {
		at[0] = '2';
		CHECK(common_write_atomic(path, buf, len, 0600, NULL) == 0);
	}
	c = common_hashcache_open(path, "test-hashes");
	CHECK(common_hashcache_get(c, &st, hex) == 0);
	common_hashcache_close(c);
	c = common_hashcache_open(NULL, "test-hashes");
	common_hashcache_put(c, &st, h1);
	CHECK(common_hashcache_get(c, &st, hex) == 1);
	common_hashcache_close(c);
	free(buf);
	unlink(path);
	free(path);
	CHECK(rmdir(dir) == 0);
}

/* A chain of n directories under root, a file every 10 levels and a side directory
 * every 7. */
static int deep_tree(const char *root, int n)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY), r = 0;

	for (int i = 0; r == 0 && i < n; i++) {
		if (i % 10 == 0)
			close(openat(fd, "f", O_WRONLY | O_CREAT, 0600));
		if (i % 7 == 0)
			mkdirat(fd, "side", 0700);
		int sub = mkdirat(fd, "d", 0700) < 0 ? -1 : openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = sub;
		r = fd < 0 ? -1 : 0;
	}
	close(fd);
	return r;
}

/* Removal goes to any depth with a few descriptors, and through directories their
 * owner cannot list or write (a guest leaves them so in its namespace). */
static void test_rm_rf_hostile(void)
{
	char dir[] = "/tmp/test_rm.XXXXXX", *p;
	struct common_err e;
	int st;

	CHECK(mkdtemp(dir) != NULL);
	p = common_xasprintf("%s/t", dir);
	CHECK(mkdir(p, 0700) == 0 && deep_tree(p, 3000) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 16, 16 };
		_exit(setrlimit(RLIMIT_NOFILE, &rl) < 0 || common_rm_rf(p, &e) < 0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(access(p, F_OK) < 0);
	free(p);
	p = common_xasprintf("%s/u/a/b", dir);
	CHECK(common_mkdir_p(p, 0700, &e) == 0);
	free(p);
	p = common_xasprintf("%s/u/a/b/f", dir);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	free(p);
	p = common_xasprintf("%s/u/a/c", dir);
	CHECK(mkdir(p, 0500) == 0);                 /* listable, not writable */
	free(p);
	p = common_xasprintf("%s/u/a/b", dir);
	CHECK(chmod(p, 0) == 0);                    /* neither */
	free(p);
	p = common_xasprintf("%s/u/a", dir);
	CHECK(chmod(p, 0300) == 0);                 /* not listable */
	free(p);
	p = common_xasprintf("%s/u", dir);
	if ((pid = fork()) == 0)
		_exit(unit_drop_dac() < 0 || common_rm_rf(p, &e) < 0);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(access(p, F_OK) < 0);
	free(p);
	CHECK(common_rm_rf(dir, &e) == 0);
}

int main(void)
{
	test_sha256();
	test_sign();
	test_numbers();
	test_json();
	test_files();
	test_hashcache();
	test_escape();
	test_outfile();
	test_rm_rf_hostile();
	return unit_finish("test_common");
}
