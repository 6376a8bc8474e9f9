/* snap: version 8's tmpfs entries: they round-trip, every hostile field is
 * refused by name, every truncation is refused, and version 7 still decodes
 * without them. SBX_SNAP_CORPUS=DIR writes the image as DIR/image-tmp. */
#include <stdint.h>
#include <stdlib.h>
#include "snap/snap-internal.h"
#include "unit.h"

static uint8_t xstate[SNAP_XCANON_SIZE];
static uint8_t big[5000];

/* The smallest tree the decoder takes, holding entries t[0..n). */
static void base(struct snap_state *s, struct snap_tmp *t, size_t n)
{
	memset(s, 0, sizeof *s);
	s->version = SNAP_VERSION;
	s->meta = (struct snap_meta){ .lease = "L1", .principal = "", .host_program = "",
				      .ns_prefix = "" };
	s->xfeatures = 3;
	s->xstate = xstate;
	s->regs[15] = (uint64_t)-1; /* orig_rax: never inside a syscall */
	s->tid = s->pid = 1;
	s->cwd = "/tmp/d";
	s->exe = "/bin/sh";
	s->tmps = t;
	s->ntmps = n;
}

static void entries(struct snap_tmp *t)
{
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7 + 1);
	t[0] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_DIR, .mode = 0750, .path = "d" };
	t[1] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_FILE, .mode = 0604, .path = "d/big",
				  .size = sizeof big, .bytes = big };
	t[2] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_DIR, .mode = 01777, .path = "d/e" };
	t[3] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_FIFO, .mode = 0640, .path = "d/e/fifo" };
	t[4] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_SYMLINK, .mode = 0777,
				  .path = "d/link", .target = "../d/big" };
	t[5] = (struct snap_tmp){ .mount = 0, .kind = SNAP_TMP_FILE, .mode = 0600, .path = "empty",
				  .bytes = big };
	t[6] = (struct snap_tmp){ .mount = 1, .kind = SNAP_TMP_FILE, .mode = 0600, .path = "d",
				  .size = 3, .bytes = (const uint8_t *)"shm" };
}

/* s encoded, decoded: refused naming why. */
static void refused(const struct snap_state *s, const char *why)
{
	struct snap_image a;
	struct snap_state t;
	struct common_err e;
	CHECK(snap_encode(s, &a, &e) == 0);
	int rc = snap_decode(a.bytes, a.len, "x", &t, &e);
	CHECK(rc < 0);
	if (rc < 0 && !strstr(e.why, why))
		fprintf(stderr, "refused for \"%s\", wanted \"%s\"\n", e.why, why);
	CHECK(rc < 0 && strstr(e.why, why));
	if (rc == 0)
		snap_state_free(&t);
	snap_image_free(&a);
}

static void test_round_trip(void)
{
	struct snap_tmp t[7];
	struct snap_state s, d;
	struct snap_image a, b;
	struct common_err e;
	entries(t);
	base(&s, t, 7);
	CHECK(snap_encode(&s, &a, &e) == 0);
	int rc = snap_decode(a.bytes, a.len, "x", &d, &e);
	if (rc < 0)
		fprintf(stderr, "decode: %s: %s\n", e.what, e.why);
	CHECK(rc == 0);
	if (rc < 0)
		return;
	CHECK(d.ntmps == 7 && d.tmps[1].size == sizeof big && !memcmp(d.tmps[1].bytes, big, sizeof big) &&
	      d.tmps[2].mode == 01777 && d.tmps[3].kind == SNAP_TMP_FIFO &&
	      !strcmp(d.tmps[4].target, "../d/big") && d.tmps[5].size == 0 && d.tmps[6].mount == 1);
	CHECK(snap_encode(&d, &b, &e) == 0 && b.len == a.len && !memcmp(a.bytes, b.bytes, a.len));
	snap_state_free(&d);
	snap_image_free(&b);
	const char *corpus = getenv("SBX_SNAP_CORPUS");
	if (corpus) {
		char path[4200];
		snprintf(path, sizeof path, "%s/image-tmp", corpus);
		FILE *f = fopen(path, "wb");
		CHECK(f && fputc(2, f) == 2 && fwrite(a.bytes, 1, a.len, f) == a.len && fclose(f) == 0);
	}
	for (size_t cut = a.len - 1; cut > 0; cut = cut > 4000 ? cut - 997 : cut / 2)
		CHECK(snap_decode(a.bytes, cut, "x", &d, &e) < 0);
	for (size_t cut = a.len - 1; cut > a.len - 300; cut--)
		CHECK(snap_decode(a.bytes, cut, "x", &d, &e) < 0);
	snap_image_free(&a);
	/* version 7 has no such section: the same state encodes without it */
	s.version = 7;
	s.ntmps = 0;
	CHECK(snap_encode(&s, &a, &e) == 0 && snap_decode(a.bytes, a.len, "x", &d, &e) == 0);
	CHECK(d.version == 7 && d.ntmps == 0);
	snap_state_free(&d);
	snap_image_free(&a);
}

static void test_hostile(void)
{
	struct snap_tmp t[7];
	struct snap_state s;
	struct snap_shm g = { .kind = SNAP_SHM_NAMED, .name = "/dev/shm/d", .size = 3, .mode = 0600,
			      .content = { .start = 0, .end = SNAP_PAGE } };
	uint8_t bitmap = 0;
	g.content.bitmap = &bitmap;
	entries(t);
	base(&s, t, 7);
#define REFUSED(field, bad, why)                \
	do {                                    \
		__typeof__(field) keep_ = (field); \
		(field) = (bad);                \
		refused(&s, why);               \
		(field) = keep_;                \
	} while (0)
	REFUSED(t[0].path, "..", "\"..\" component");
	REFUSED(t[0].path, ".", "\"..\" component");
	REFUSED(t[0].path, "/d", "absolute");
	REFUSED(t[0].path, "", "path empty");
	REFUSED(t[1].path, "d//big", "empty");
	REFUSED(t[1].path, "d/../big", "\"..\" component");
	REFUSED(t[1].path, "d/big/", "empty");
	REFUSED(t[0].mount, 2, "mount out of range");
	REFUSED(t[0].kind, 4, "kind or mode invalid");
	REFUSED(t[0].mode, 010000, "kind or mode invalid");
	REFUSED(t[2].path, "d/a", "not in mount and path order");
	REFUSED(t[2].path, "d/big", "not in mount and path order");
	REFUSED(t[3].path, "d/e/f/fifo", "not an earlier directory");
	REFUSED(t[0].kind, SNAP_TMP_FIFO, "not an earlier directory");
	REFUSED(t[6].mount, 0, "not in mount and path order");
	REFUSED(t[4].target, "", "empty symlink target");
	/* the file a named shared memory object is, twice */
	struct snap_region r = { .start = 0x10000, .end = 0x11000, .prot = 3,
				 .kind = SNAP_REGION_SHM };
	s.shms = &g;
	s.nshms = 1;
	s.regions = &r;
	s.nregions = 1;
	refused(&s, "shared memory object's");
	/* elsewhere, the same object is fine */
	g.name = "/dev/shm/e";
	struct snap_image a;
	struct snap_state d;
	struct common_err e;
	CHECK(snap_encode(&s, &a, &e) == 0 && snap_decode(a.bytes, a.len, "x", &d, &e) == 0);
	snap_state_free(&d);
	snap_image_free(&a);
}

/* Counts and sizes beyond the input or the bounds, spliced into the bytes. */
static void test_bounds(void)
{
	struct snap_tmp t[1] = { { .mount = 0, .kind = SNAP_TMP_FILE, .mode = 0600, .path = "f",
				   .size = 4, .bytes = (const uint8_t *)"abcd" } };
	struct snap_state s, d;
	struct snap_image a;
	struct common_err e;
	base(&s, t, 1);
	CHECK(snap_encode(&s, &a, &e) == 0);
	/* the entry: u32 mount, u32 1 "f", u32 kind, u32 mode, u64 size, 4 bytes, then the cells' u32 0 */
	size_t at = a.len - 4 - 4 - 8 - 4 - 4 - 5 - 4 - 4;
	uint32_t n;
	memcpy(&n, a.bytes + at, 4);
	CHECK(n == 1);
	uint32_t huge = SNAP_TMP_MAX + 1;
	memcpy(a.bytes + at, &huge, 4);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0 && strstr(e.why, "count out of range"));
	huge = 3;
	memcpy(a.bytes + at, &huge, 4);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0);
	memcpy(a.bytes + at, &n, 4);
	uint64_t size = (uint64_t)SNAP_TMP_BYTES_MAX + 1;
	memcpy(a.bytes + a.len - 4 - 4 - 8, &size, 8);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0 && strstr(e.why, "file size exceeds"));
	size = 5;
	memcpy(a.bytes + a.len - 4 - 4 - 8, &size, 8);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0);
	size = 4;
	memcpy(a.bytes + a.len - 4 - 4 - 8, &size, 8);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) == 0);
	snap_state_free(&d);
	/* a path length past the string bound */
	uint32_t plen = SNAP_STR_MAX + 1;
	memcpy(a.bytes + at + 8, &plen, 4);
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0 && strstr(e.why, "longer than 4096"));
	/* a NUL inside the path */
	plen = 1;
	memcpy(a.bytes + at + 8, &plen, 4);
	a.bytes[at + 12] = 0;
	CHECK(snap_decode(a.bytes, a.len, "x", &d, &e) < 0 && strstr(e.why, "NUL byte"));
	snap_image_free(&a);
}

int main(void)
{
	test_round_trip();
	test_hostile();
	test_bounds();
	return unit_finish("test_snap_tmp");
}
