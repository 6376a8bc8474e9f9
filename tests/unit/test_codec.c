/* codec: primitives, descriptors, object graphs, write-back, hostile images.
 * A "guest" here is codec_decode + a mutation + codec_encode_graph, exactly
 * what the guest entry of sbx_call does, without the process boundary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "codec/codec.h"
#include "tests/unit/unit.h"

struct counter { int n; };
struct input { const char *name; struct counter *c; };
struct pair { struct input *left, *right; };

static const struct sbx_field counter_f[] = { SBX_FIELD_AUTO(struct counter, n) };
static const struct sbx_type counter_t = SBX_STRUCT("counter", struct counter, counter_f);
static const struct sbx_type counter_p = SBX_PTR("counter*", &counter_t);
static const struct sbx_field input_f[] = {
	SBX_FIELD_AUTO(struct input, name),
	SBX_FIELD(struct input, c, &counter_p),
};
static const struct sbx_type input_t = SBX_STRUCT("input", struct input, input_f);
static const struct sbx_type input_p = SBX_PTR("input*", &input_t);
static const struct sbx_field pair_f[] = {
	SBX_FIELD(struct pair, left, &input_p),
	SBX_FIELD(struct pair, right, &input_p),
};
static const struct sbx_type pair_t = SBX_STRUCT("pair", struct pair, pair_f);

struct node { long value; struct node *next, *other; };
static const struct sbx_type node_t;
static const struct sbx_type node_p = SBX_PTR("node*", &node_t);
static const struct sbx_field node_f[] = {
	SBX_FIELD_AUTO(struct node, value),
	SBX_FIELD(struct node, next, &node_p),
	SBX_FIELD(struct node, other, &node_p),
};
static const struct sbx_type node_t = SBX_STRUCT("node", struct node, node_f);

/* the same shape with a narrower value: must not decode as node */
struct node32 { int value; struct node32 *next, *other; };
static const struct sbx_type node32_t;
static const struct sbx_type node32_p = SBX_PTR("node*", &node32_t);
static const struct sbx_field node32_f[] = {
	SBX_FIELD_AUTO(struct node32, value),
	SBX_FIELD(struct node32, next, &node32_p),
	SBX_FIELD(struct node32, other, &node32_p),
};
static const struct sbx_type node32_t = SBX_STRUCT("node", struct node32, node32_f);

struct holder { int x; int arr[8]; int *pf; int *pa; struct node n; long *pn; };
static const struct sbx_type int_p = SBX_PTR("int*", &sbx_type_i32);
static const struct sbx_type long_p = SBX_PTR("long*", &sbx_type_i64);
static const struct sbx_type arr8_t = SBX_ARRAY("int[8]", struct holder, arr, &sbx_type_i32);
static const struct sbx_field holder_f[] = {
	SBX_FIELD_AUTO(struct holder, x),
	SBX_FIELD(struct holder, arr, &arr8_t),
	SBX_FIELD(struct holder, pf, &int_p),
	SBX_FIELD(struct holder, pa, &int_p),
	SBX_FIELD(struct holder, n, &node_t),
	SBX_FIELD(struct holder, pn, &long_p),
};
static const struct sbx_type holder_t = SBX_STRUCT("holder", struct holder, holder_f);

typedef SBX_SLICE_OF(int) int_slice;
struct slices { int_slice a, b, nil, empty; const char *s_null, *s_empty, *s; };
static const struct sbx_type int_s = SBX_SLICE("[]int", &sbx_type_i32);
static const struct sbx_field slices_f[] = {
	SBX_FIELD(struct slices, a, &int_s),
	SBX_FIELD(struct slices, b, &int_s),
	SBX_FIELD(struct slices, nil, &int_s),
	SBX_FIELD(struct slices, empty, &int_s),
	SBX_FIELD_AUTO(struct slices, s_null),
	SBX_FIELD_AUTO(struct slices, s_empty),
	SBX_FIELD_AUTO(struct slices, s),
};
static const struct sbx_type slices_t = SBX_STRUCT("slices", struct slices, slices_f);

struct big { SBX_SLICE_OF(double) d; SBX_SLICE_OF(uint8_t) b; };
static const struct sbx_type f64_s = SBX_SLICE("[]double", &sbx_type_f64);
static const struct sbx_type u8_s = SBX_SLICE("[]u8", &sbx_type_u8);
static const struct sbx_field big_f[] = {
	SBX_FIELD(struct big, d, &f64_s),
	SBX_FIELD(struct big, b, &u8_s),
};
static const struct sbx_type big_t = SBX_STRUCT("big", struct big, big_f);

struct in2 { int id; FILE *fs; };
struct ctx { SBX_SLICE_OF(struct in2) inputs; void *raw; };
static const struct sbx_field in2_f[] = {
	SBX_FIELD_AUTO(struct in2, id),
	SBX_FIELD(struct in2, fs, &sbx_type_file),
};
static const struct sbx_type in2_t = SBX_STRUCT("in2", struct in2, in2_f);
static const struct sbx_type in2_s = SBX_SLICE("[]in2", &in2_t);
static const struct sbx_field ctx_f[] = {
	SBX_FIELD(struct ctx, inputs, &in2_s),
	SBX_FIELD(struct ctx, raw, &sbx_type_voidptr),
};
static const struct sbx_type ctx_t = SBX_STRUCT("ctx", struct ctx, ctx_f);

struct rect { int w, h; };
struct shape { int kind; union { double r; struct rect rect; const char *label; } u; };
static const struct sbx_field rect_f[] = { SBX_FIELD_AUTO(struct rect, w), SBX_FIELD_AUTO(struct rect, h) };
static const struct sbx_type rect_t = SBX_STRUCT("rect", struct rect, rect_f);
static const struct sbx_field shape_m[] = {
	SBX_MEMBER(struct shape, u.r, &sbx_type_f64, 1),
	SBX_MEMBER(struct shape, u.rect, &rect_t, 2),
	SBX_MEMBER(struct shape, u.label, &sbx_type_string, 3),
	SBX_MEMBER(struct shape, u, NULL, 0),
};
static const struct sbx_type shape_t = SBX_UNION("shape", struct shape, kind, shape_m);

struct cb { void (*fn)(void); int calls; };
static const struct sbx_field cb_f[] = {
	SBX_FIELD(struct cb, fn, &sbx_type_fn),
	SBX_FIELD_AUTO(struct cb, calls),
};
static const struct sbx_type cb_t = SBX_STRUCT("cb", struct cb, cb_f);

/* an inline descriptor cycle: selfy holds a selfy */
struct selfy { int a; };
static const struct sbx_type selfy_t;
static const struct sbx_field selfy_f[] = { SBX_FIELD(struct selfy, a, &selfy_t) };
static const struct sbx_type selfy_t = SBX_STRUCT("selfy", struct selfy, selfy_f);

struct wrong { int a; };
static const struct sbx_field wrong_f[] = { SBX_FIELD(struct wrong, a, &sbx_type_i64) };
static const struct sbx_type wrong_t = SBX_STRUCT("wrong", struct wrong, wrong_f);

static void known_fn(void) {}
static int check_fn(void *arg, uint64_t addr, struct common_err *e)
{
	(void)arg;
	if (addr == (uint64_t)(uintptr_t)&known_fn)
		return 0;
	return common_errf(e, "function", "%#llx is not a known function", (unsigned long long)addr);
}
static const struct codec_opts opts = { .check_fn = check_fn };

static void *guest_allocs[16];
static int nguest_allocs;
static void *guest_alloc(size_t n)
{
	void *p = calloc(1, n);
	guest_allocs[nguest_allocs++] = p;
	return p;
}

typedef void (*mutator)(void *groot);
/* host encode -> guest decode + mutate + encode -> host write-back */
static int roundtrip(const struct sbx_type *t, void *root, mutator m, struct common_err *e)
{
	struct codec_buf in, out;
	struct codec_graph *hg = NULL, *gg = NULL;
	void *groot;
	int rc;

	codec_buf_init(&in);
	codec_buf_init(&out);
	if ((rc = codec_encode(t, root, &opts, &in, &hg, e)) < 0)
		goto out;
	if ((rc = codec_decode(t, in.p, in.len, &opts, &groot, &gg, e)) < 0)
		goto out;
	if (m)
		m(groot);
	rc = codec_encode_graph(gg, &opts, &out, e);
	for (int i = 0; i < nguest_allocs; i++)
		free(guest_allocs[i]);
	nguest_allocs = 0;
	if (rc < 0)
		goto out;
	rc = codec_writeback(hg, out.p, out.len, &opts, e);
out:
	codec_graph_free(hg);
	codec_graph_free(gg);
	codec_buf_free(&in);
	codec_buf_free(&out);
	return rc;
}

static void test_primitives(void)
{
	struct codec_buf b;
	struct codec_rd r;
	uint64_t v;
	int64_t s;
	uint8_t u8;
	uint32_t u32;

	codec_buf_init(&b);
	codec_put_u32(&b, 0x01020304);
	codec_put_uvarint(&b, 300);
	codec_put_svarint(&b, -2);
	codec_put_uvarint(&b, UINT64_MAX);
	codec_put_bytes(&b, "hi", 2);
	static const uint8_t golden[] = { 4, 3, 2, 1, 0xac, 0x02, 0x03,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 'h', 'i' };
	CHECK(b.len == sizeof golden && memcmp(b.p, golden, sizeof golden) == 0);
	codec_rd_init(&r, b.p, b.len);
	CHECK(codec_get_u32(&r, &u32) == 0 && u32 == 0x01020304);
	CHECK(codec_get_uvarint(&r, &v) == 0 && v == 300);
	CHECK(codec_get_svarint(&r, &s) == 0 && s == -2);
	CHECK(codec_get_uvarint(&r, &v) == 0 && v == UINT64_MAX);
	const uint8_t *p;
	size_t n;
	CHECK(codec_get_bytes(&r, &p, &n, 1) < 0 && !strcmp(r.why, "length exceeds limit"));
	CHECK(codec_get_u8(&r, &u8) < 0); /* the failure sticks */
	codec_rd_init(&r, b.p, b.len);
	r.off = b.len - 3;
	CHECK(codec_get_bytes(&r, &p, &n, 2) == 0 && n == 2 && !memcmp(p, "hi", 2));
	CHECK(codec_rd_end(&r) == 0);
	codec_buf_free(&b);

	static const uint8_t overlong[] = { 0x80, 0x00 }, overflow[] = { 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 }, trunc[] = { 0x80 };
	codec_rd_init(&r, overlong, sizeof overlong);
	CHECK(codec_get_uvarint(&r, &v) < 0 && !strcmp(r.why, "overlong varint"));
	codec_rd_init(&r, overflow, sizeof overflow);
	CHECK(codec_get_uvarint(&r, &v) < 0 && !strcmp(r.why, "varint overflows 64 bits"));
	codec_rd_init(&r, trunc, sizeof trunc);
	CHECK(codec_get_uvarint(&r, &v) < 0 && !strcmp(r.why, "truncated varint"));
	codec_rd_init(&r, overlong, 1);
	CHECK(codec_get_u16(&r, (uint16_t *)&u32) < 0 && !strcmp(r.why, "truncated"));
	/* every value survives its shortest form */
	for (int i = 0; i < 64; i++) {
		uint64_t x = (1ull << i) - 1, y;
		int64_t sx = -(int64_t)x, sy;
		codec_buf_init(&b);
		codec_put_uvarint(&b, x);
		codec_put_svarint(&b, sx);
		codec_rd_init(&r, b.p, b.len);
		CHECK(codec_get_uvarint(&r, &y) == 0 && y == x && codec_get_svarint(&r, &sy) == 0 &&
		      sy == sx && codec_rd_end(&r) == 0);
		codec_buf_free(&b);
	}
}

struct gold { uint32_t a; int16_t b; };
static const struct sbx_field gold_f[] = { SBX_FIELD_AUTO(struct gold, a), SBX_FIELD_AUTO(struct gold, b) };
static const struct sbx_type gold_t = SBX_STRUCT("g", struct gold, gold_f);

static void test_golden(void)
{
	struct gold g = { 300, -2 };
	struct codec_buf b;
	struct common_err e;
	static const uint8_t body[] = { 'S', 'B', 'X', 'G', 1,
		3,                                         /* types */
		17, 1, 'g', 8, 2, 1, 'a', 0, 1, 1, 'b', 4, 2,  /* struct g */
		8, 3, 'u', '3', '2', 4,                    /* u32 */
		3, 3, 'i', '1', '6', 2,                    /* i16 */
		1, 1, 0,                                   /* root: object 1 [0] */
		1, 0, 1,                                   /* one object: type 0 x1 */
		0xac, 0x02, 0x03 };                        /* a = 300, b = -2 */
	uint8_t dg[32];

	codec_buf_init(&b);
	CHECK(codec_encode(&gold_t, &g, NULL, &b, NULL, &e) == 0);
	common_sha256(body, sizeof body, dg);
	CHECK(b.len == sizeof body + 32 && !memcmp(b.p, body, sizeof body) &&
	      !memcmp(b.p + sizeof body, dg, 32));
	codec_buf_free(&b);
}

static void m_counter(void *root)
{
	struct pair *p = root;
	p->left->c->n++;
	p->right->c->n++;
}

static void test_shared_counter(void)
{
	struct counter c = { 0 };
	struct input l = { "left", &c }, r = { "right", &c };
	struct pair p = { &l, &r };
	struct common_err e;

	CHECK(roundtrip(&pair_t, &p, m_counter, &e) == 0);
	CHECK(c.n == 2);
	CHECK(l.c == &c && r.c == &c && p.left == &l && p.right == &r);
	CHECK_STR(l.name, "left");
}

static void m_cycles(void *root)
{
	struct node *a = root;
	/* a <-> b two-node cycle, a->other is a self-cycle */
	CHECK(a->other == a && a->next->next == a && a->next != a);
	a->value = 10;
	a->next->value = 20;
}

static void test_cycles(void)
{
	struct node a = { 1, NULL, NULL }, b = { 2, &a, NULL };
	struct common_err e;

	a.next = &b;
	a.other = &a;
	CHECK(roundtrip(&node_t, &a, m_cycles, &e) == 0);
	CHECK(a.value == 10 && b.value == 20 && a.next == &b && b.next == &a && a.other == &a);
}

static void m_interior(void *root)
{
	struct holder *h = root;
	CHECK(h->pf == &h->x && h->pa == &h->arr[3] && h->pn == &h->n.value);
	*h->pa = 42;
	*h->pf = 7;
	*h->pn = 9;
	h->pa = &h->arr[5]; /* still interior, another element */
}

static void test_interior(void)
{
	struct holder h = { 0 };
	struct common_err e;

	h.pf = &h.x;
	h.pa = &h.arr[3];
	h.pn = &h.n.value;
	CHECK(roundtrip(&holder_t, &h, m_interior, &e) == 0);
	CHECK(h.arr[3] == 42 && h.x == 7 && h.n.value == 9);
	CHECK(h.pf == &h.x && h.pa == &h.arr[5] && h.pn == &h.n.value);
}

static void m_slices(void *root)
{
	struct slices *s = root;
	CHECK(s->b.ptr == s->a.ptr + 2 && s->a.len == 4 && s->a.cap == 10 && s->b.len == 3 &&
	      s->b.cap == 8);
	CHECK(!s->nil.ptr && s->empty.ptr && s->empty.len == 0 && s->empty.cap == 0);
	CHECK(s->s_null == NULL && s->s_empty && s->s_empty[0] == '\0');
	s->a.ptr[3] = 99;  /* seen through b[1] */
	s->b.ptr[7] = 55;  /* beyond b's len, within cap: a[9] */
	s->b.len = 8;
}

static void test_slices_strings(void)
{
	int backing[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, one = 0;
	struct slices s = { { backing, 4, 10 }, { backing + 2, 3, 8 }, { NULL, 0, 0 },
			    { &one, 0, 0 }, NULL, "", "same" };
	const char *same = s.s;
	struct common_err e;

	CHECK(roundtrip(&slices_t, &s, m_slices, &e) == 0);
	CHECK(backing[3] == 99 && backing[9] == 55 && s.b.len == 8 && s.b.cap == 8);
	CHECK(s.a.ptr == backing && s.b.ptr == backing + 2 && s.a.len == 4);
	CHECK(s.nil.ptr == NULL && s.empty.ptr != NULL && s.empty.len == 0);
	CHECK(s.s_null == NULL && s.s_empty && s.s_empty[0] == '\0');
	CHECK(s.s == same); /* unchanged strings keep the host's pointer */
	CHECK(s.empty.ptr == &one);
}

static void m_redirect(void *root)
{
	struct node *a = root;
	struct node *b = a->next, *c = a->other;
	a->next = c;     /* redirect to another existing node */
	a->other = NULL; /* b is now detached ... */
	b->value = 77;   /* ... but its change must still arrive */
	(void)b;
}

static void test_redirect_detached(void)
{
	struct node c = { 3, NULL, NULL }, b = { 2, NULL, NULL }, a = { 1, &b, &c };
	struct common_err e;

	CHECK(roundtrip(&node_t, &a, m_redirect, &e) == 0);
	CHECK(a.next == &c && a.other == NULL && b.value == 77 && c.value == 3);
}

static void m_newnode(void *root)
{
	struct node *a = root;
	struct node *n = guest_alloc(sizeof *n);
	n->value = 123;
	n->next = a;     /* points back at a host object */
	a->other = n;
	struct node *m = guest_alloc(sizeof *m);
	m->value = 456;
	n->other = m;
}

static void test_new_node(void)
{
	struct node a = { 1, NULL, NULL };
	struct common_err e;

	CHECK(roundtrip(&node_t, &a, m_newnode, &e) == 0);
	CHECK(a.other && a.other->value == 123 && a.other->next == &a);
	CHECK(a.other && a.other->other && a.other->other->value == 456);
	if (a.other) {
		free(a.other->other);
		free(a.other);
	}
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void m_big(void *root)
{
	struct big *b = root;
	b->d.ptr[999999] = 0.5;
	b->b.ptr[0] ^= 0xff;
}

static void test_big_arrays(void)
{
	size_t n = 1000000;
	struct big b = { { calloc(n, sizeof(double)), n, n }, { malloc(n), n, n } };
	double *copy = malloc(n * sizeof(double));
	struct common_err e;

	for (size_t i = 0; i < n; i++) {
		uint64_t bits = xorshift();
		memcpy(&b.d.ptr[i], &bits, 8); /* any bit pattern: NaNs, -0, denormals */
		b.b.ptr[i] = (uint8_t)bits;
	}
	b.d.ptr[1] = -0.0;
	b.d.ptr[2] = NAN;
	memcpy(copy, b.d.ptr, n * sizeof(double));
	uint8_t first = b.b.ptr[0];

	struct codec_buf in;
	struct codec_graph *g;
	void *groot;
	codec_buf_init(&in);
	CHECK(codec_encode(&big_t, &b, NULL, &in, NULL, &e) == 0);
	CHECK(in.len > n * 9 && in.len < n * 9 + 512); /* bulk: one copy each */
	CHECK(codec_decode(&big_t, in.p, in.len, NULL, &groot, &g, &e) == 0);
	struct big *gb = groot;
	CHECK(gb->d.len == n && !memcmp(gb->d.ptr, copy, n * sizeof(double)));
	CHECK(gb->b.len == n && !memcmp(gb->b.ptr, b.b.ptr, n));
	codec_graph_free(g);
	codec_buf_free(&in);

	CHECK(roundtrip(&big_t, &b, m_big, &e) == 0);
	CHECK(b.d.ptr[999999] == 0.5 && !memcmp(b.d.ptr, copy, (n - 1) * sizeof(double)));
	uint8_t flipped = (uint8_t)(first ^ 0xffu);
	CHECK(b.b.ptr[0] == flipped);
	free(b.d.ptr);
	free(b.b.ptr);
	free(copy);
}

static void m_union(void *root)
{
	struct shape *s = root;
	CHECK(s->kind == 2 && s->u.rect.w == 3 && s->u.rect.h == 4);
	s->kind = 3;
	s->u.label = strdup("circle");
}

static void test_union_fn(void)
{
	struct shape s = { .kind = 2, .u.rect = { 3, 4 } };
	struct common_err e;

	CHECK(roundtrip(&shape_t, &s, m_union, &e) == 0);
	CHECK(s.kind == 3);
	CHECK_STR(s.u.label, "circle");
	free((char *)s.u.label);
	s.kind = 9; /* selects no member */
	CHECK(roundtrip(&shape_t, &s, NULL, &e) < 0);
	CHECK(strstr(e.why, "tag 9 selects no member") != NULL);

	struct cb c = { known_fn, 1 };
	CHECK(roundtrip(&cb_t, &c, NULL, &e) == 0 && c.fn == known_fn);
	c.fn = (void (*)(void))((uintptr_t)known_fn + 1);
	CHECK(roundtrip(&cb_t, &c, NULL, &e) < 0);
	CHECK_STR(e.what, "cb.fn");
}

static void test_refusals(void)
{
	struct in2 ins[3] = { { 1, NULL }, { 2, NULL }, { 3, stdin } };
	struct ctx c = { { ins, 3, 3 }, NULL };
	struct codec_buf b;
	struct common_err e;

	codec_buf_init(&b);
	CHECK(codec_encode(&ctx_t, &c, NULL, &b, NULL, &e) < 0);
	CHECK_STR(e.what, "ctx.inputs[2].fs");
	CHECK_STR(e.why, "FILE* is not transferable");
	CHECK(b.len == 0);
	ins[2].fs = NULL;
	c.raw = &c;
	CHECK(codec_encode(&ctx_t, &c, NULL, &b, NULL, &e) < 0);
	CHECK_STR(e.what, "ctx.raw");
	CHECK_STR(e.why, "void* is not transferable");
	c.raw = NULL;
	CHECK(codec_encode(&ctx_t, &c, NULL, &b, NULL, &e) == 0);
	codec_buf_free(&b);

	struct selfy sf = { 0 };
	CHECK(codec_type_check(&selfy_t, &e) < 0 && strstr(e.why, "descriptor cycle"));
	codec_buf_init(&b);
	CHECK(codec_encode(&selfy_t, &sf, NULL, &b, NULL, &e) < 0);
	struct wrong w = { 0 };
	CHECK(codec_encode(&wrong_t, &w, NULL, &b, NULL, &e) < 0 && strstr(e.why, "field a is 4 bytes"));

	/* len > cap, NULL with len, and a pointer typed against the storage */
	struct slices s = { { (int *)ins, 5, 3 }, { 0 }, { 0 }, { 0 }, NULL, NULL, NULL };
	CHECK(codec_encode(&slices_t, &s, NULL, &b, NULL, &e) < 0 && strstr(e.why, "exceeds cap"));
	s.a.ptr = NULL;
	CHECK(codec_encode(&slices_t, &s, NULL, &b, NULL, &e) < 0 && strstr(e.why, "NULL slice"));
	struct holder h = { 0 };
	h.pf = (int *)&h.n.next; /* an int* into a pointer field */
	CHECK(codec_encode(&holder_t, &h, NULL, &b, NULL, &e) < 0);
	CHECK_STR(e.what, "holder.pf");
	codec_buf_free(&b);

	/* narrowing: an image of node does not decode as node32 */
	struct node a = { 1, NULL, NULL };
	struct codec_graph *g;
	void *root;
	codec_buf_init(&b);
	CHECK(codec_encode(&node_t, &a, NULL, &b, NULL, &e) == 0);
	CHECK(codec_decode(&node32_t, b.p, b.len, NULL, &root, &g, &e) < 0);
	CHECK(strstr(e.why, "type table differs") != NULL);
	codec_buf_free(&b);
}

/* Descriptors that lie about their C layout are refused before any value is read. */
struct two { int tag; union { int a; long b; } u; };
static const struct sbx_field two_overlap[] = {
	{ "a", 0, 4, &sbx_type_i32, 1 }, /* on top of the tag */
};
static const struct sbx_type two_overlap_t = SBX_UNION("two", struct two, tag, two_overlap);
static const struct sbx_field two_dup[] = {
	SBX_MEMBER(struct two, u.a, &sbx_type_i32, 1),
	SBX_MEMBER(struct two, u.b, &sbx_type_i64, 1),
};
static const struct sbx_type two_dup_t = SBX_UNION("two", struct two, tag, two_dup);
static const struct sbx_type bad_arr_t = { .kind = SBX_K_ARRAY, .name = "int[3]", .size = 12,
					   .elem = &sbx_type_i64, .count = 3 };
static const struct sbx_field unordered_f[] = {
	SBX_FIELD(struct two, u.a, &sbx_type_i32),
	SBX_FIELD_AUTO(struct two, tag),
};
static const struct sbx_type unordered_t = SBX_STRUCT("two", struct two, unordered_f);
static const struct sbx_type nullptr_t = { .kind = SBX_K_PTR, .name = "p", .size = 8 };

static void test_descriptors(void)
{
	struct common_err e;

	CHECK(codec_type_check(&pair_t, &e) == 0);
	CHECK(codec_type_check(&shape_t, &e) == 0);
	CHECK(codec_type_check(&two_overlap_t, &e) < 0 && strstr(e.why, "overlaps the tag"));
	CHECK(codec_type_check(&two_dup_t, &e) < 0 && strstr(e.why, "share tag 1"));
	CHECK(codec_type_check(&bad_arr_t, &e) < 0 && strstr(e.why, "is not 3 x 8"));
	CHECK(codec_type_check(&unordered_t, &e) < 0 && strstr(e.why, "out of order"));
	CHECK(codec_type_check(&nullptr_t, &e) < 0 && strstr(e.why, "without an element"));
}

/* A fingerprint of the host graph: its encoding. */
static void fingerprint(struct codec_buf *b, void *root)
{
	struct common_err e;
	codec_buf_init(b);
	CHECK(codec_encode(&pair_t, root, NULL, b, NULL, &e) == 0);
}

static void m_hostile(void *root)
{
	struct pair *p = root;
	p->left->c->n = 5;
	p->right->name = strdup("changed");
}

static void test_hostile_results(void)
{
	struct counter c = { 1 };
	struct input l = { "left", &c }, r = { NULL, &c };
	struct pair p = { &l, &r };
	struct codec_buf in, res, fp0, fp;
	struct codec_graph *hg, *gg;
	struct common_err e;
	void *groot;

	codec_buf_init(&in);
	codec_buf_init(&res);
	CHECK(codec_encode(&pair_t, &p, NULL, &in, &hg, &e) == 0);
	CHECK(codec_decode(&pair_t, in.p, in.len, NULL, &groot, &gg, &e) == 0);
	m_hostile(groot);
	CHECK(codec_encode_graph(gg, NULL, &res, &e) == 0);
	codec_graph_free(gg);
	fingerprint(&fp0, &p);

	size_t body = res.len - 32, refused = 0, fixed_refused = 0;
	uint8_t *tmp = malloc(res.len);
	for (size_t len = 0; len < res.len; len++) {
		refused += codec_writeback(hg, res.p, len, NULL, &e) < 0;
		/* the same prefix with a valid digest exercises the structure checks */
		if (len < body) {
			memcpy(tmp, res.p, len);
			common_sha256(tmp, len, tmp + len);
			fixed_refused += codec_writeback(hg, tmp, len + 32, NULL, &e) < 0;
		}
	}
	CHECK(refused == res.len);
	CHECK(fixed_refused == body);
	fingerprint(&fp, &p);
	CHECK(fp.len == fp0.len && !memcmp(fp.p, fp0.p, fp.len));
	codec_buf_free(&fp);

	size_t corrupt_refused = 0, decoded = 0;
	for (int i = 0; i < 3000; i++) {
		memcpy(tmp, res.p, res.len);
		int flips = 1 + (int)(xorshift() % 4);
		for (int f = 0; f < flips; f++)
			tmp[xorshift() % body] ^= (uint8_t)(1 + xorshift() % 255);
		corrupt_refused += codec_writeback(hg, tmp, res.len, NULL, &e) < 0;
		/* with a recomputed digest the decoder itself must cope */
		common_sha256(tmp, body, tmp + body);
		struct codec_graph *g2;
		void *r2;
		if (codec_decode(&pair_t, tmp, res.len, NULL, &r2, &g2, &e) == 0) {
			decoded++;
			codec_graph_free(g2);
		}
	}
	CHECK(corrupt_refused == 3000);
	CHECK(decoded < 3000);
	fingerprint(&fp, &p);
	CHECK(fp.len == fp0.len && !memcmp(fp.p, fp0.p, fp.len));
	CHECK(c.n == 1 && r.name == NULL);
	codec_buf_free(&fp);
	codec_buf_free(&fp0);

	/* the intact result applies */
	CHECK(codec_writeback(hg, res.p, res.len, NULL, &e) == 0);
	CHECK(c.n == 5);
	CHECK_STR(r.name, "changed");
	free((char *)r.name);
	/* a result whose objects changed type is refused */
	struct node a = { 1, NULL, NULL };
	struct codec_buf other;
	codec_buf_init(&other);
	CHECK(codec_encode(&node_t, &a, NULL, &other, NULL, &e) == 0);
	CHECK(codec_writeback(hg, other.p, other.len, NULL, &e) < 0);
	codec_buf_free(&other);
	free(tmp);
	codec_graph_free(hg);
	codec_buf_free(&in);
	codec_buf_free(&res);
}

typedef SBX_SLICE_OF(uint8_t) u8_slice;
struct two_slices { u8_slice whole, part; };
static const struct sbx_field two_slices_f[] = {
	SBX_FIELD(struct two_slices, whole, &u8_s),
	SBX_FIELD(struct two_slices, part, &u8_s),
};
static const struct sbx_type two_slices_t = SBX_STRUCT("two", struct two_slices, two_slices_f);

/* A forged capacity that wraps index + capacity around must not pass. */
static void test_forged_capacity(void)
{
	uint8_t buf[8] = {0};
	struct two_slices t = { { buf, 8, 8 }, { buf + 1, 2, 7 } };
	struct codec_buf b, f;
	struct codec_graph *g;
	struct common_err e;
	void *root;
	static const uint8_t part[] = { 1, 2, 7 }, huge[] = { 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0x01 };

	codec_buf_init(&b);
	CHECK(codec_encode(&two_slices_t, &t, NULL, &b, NULL, &e) == 0);
	size_t body = b.len - 32, at = 0;
	for (size_t i = 0; i + 3 <= body; i++)
		if (!memcmp(b.p + i, part, 3))
			at = i;
	CHECK(at > 0);
	codec_buf_init(&f);
	codec_put_raw(&f, b.p, at + 2);
	codec_put_raw(&f, huge, sizeof huge);
	codec_put_raw(&f, b.p + at + 3, body - at - 3);
	codec_buf_reserve(&f, 32);
	common_sha256(f.p, f.len - 32, f.p + f.len - 32);
	CHECK(codec_decode(&two_slices_t, f.p, f.len, NULL, &root, &g, &e) < 0);
	CHECK(strstr(e.why, "reference range exceeds its array") != NULL);
	/* the unforged image decodes, part aliasing whole */
	CHECK(codec_decode(&two_slices_t, b.p, b.len, NULL, &root, &g, &e) == 0);
	struct two_slices *r = root;
	CHECK(r->part.ptr == r->whole.ptr + 1 && r->part.cap == 7);
	codec_graph_free(g);
	codec_buf_free(&b);
	codec_buf_free(&f);
}

typedef SBX_SLICE_OF(struct node) node_slice;
struct arena { node_slice all; struct node *first; };
static const struct sbx_type node_s = SBX_SLICE("[]node", &node_t);
static const struct sbx_field arena_f[] = {
	SBX_FIELD(struct arena, all, &node_s),
	SBX_FIELD(struct arena, first, &node_p),
};
static const struct sbx_type arena_t = SBX_STRUCT("arena", struct arena, arena_f);

static void m_arena(void *root)
{
	struct arena *a = root;
	size_t n = a->all.len;
	/* thousands of node pointers into one backing array: still one array in the guest */
	CHECK(a->first == &a->all.ptr[0]);
	CHECK(a->all.ptr[0].next == &a->all.ptr[1] && a->all.ptr[n - 2].next == &a->all.ptr[n - 1]);
	CHECK(a->all.ptr[7].other == &a->all.ptr[(7 * 31) % n]);
	a->all.ptr[n - 1].value = -1;
}

static void test_many_interior(void)
{
	size_t n = 5000;
	struct node *v = calloc(n, sizeof *v);
	struct arena a = { { v, n, n }, v };
	struct common_err e;

	for (size_t i = 0; i < n; i++) {
		v[i].value = (long)i;
		v[i].next = i + 1 < n ? &v[i + 1] : NULL;
		v[i].other = &v[(i * 31) % n];
	}
	CHECK(roundtrip(&arena_t, &a, m_arena, &e) == 0);
	CHECK(v[n - 1].value == -1 && a.all.ptr == v && a.first == v && v[7].other == &v[(7 * 31) % n]);
	free(v);
}

static void m_identity(void *root) { (void)root; }

static void test_linked_list(void)
{
	size_t n = 100000;
	struct node *v = calloc(n, sizeof *v);
	struct common_err e;

	for (size_t i = 0; i < n; i++) {
		v[i].value = (long)i;
		v[i].next = i + 1 < n ? &v[i + 1] : NULL;
		v[i].other = &v[(i * 7919) % n];
	}
	/* 100k nodes, each its own object, with cross links */
	CHECK(roundtrip(&node_t, &v[0], m_identity, &e) == 0);
	CHECK(v[n - 1].value == (long)(n - 1) && v[5].other == &v[(5 * 7919) % n]);
	free(v);
}

int main(void)
{
	test_primitives();
	test_golden();
	test_shared_counter();
	test_cycles();
	test_interior();
	test_slices_strings();
	test_redirect_detached();
	test_new_node();
	test_big_arrays();
	test_union_fn();
	test_refusals();
	test_descriptors();
	test_hostile_results();
	test_forged_capacity();
	test_many_interior();
	test_linked_list();
	return unit_finish("test_codec");
}
