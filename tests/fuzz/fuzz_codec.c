/* libFuzzer target for the object-graph image decoder. The digest trailer is
 * recomputed so the fuzzer reaches the structure checks; with a first byte of
 * 1 the input follows a valid header and type table. Any accepted image must
 * re-encode to an image that decodes again; nothing may crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct shape { int kind; union { double r; const char *label; } u; };
struct fz {
	long v;
	char *s;
	struct fz *next;
	SBX_SLICE_OF(int) ints;
	struct shape sh;
	double arr[4];
	_Bool b;
	int *pi;
};

static const struct sbx_type fz_t;
static const struct sbx_type fz_p = SBX_PTR("fz*", &fz_t);
static const struct sbx_type int_s = SBX_SLICE("[]int", &sbx_type_i32);
static const struct sbx_type int_p = SBX_PTR("int*", &sbx_type_i32);
static const struct sbx_field shape_m[] = {
	SBX_MEMBER(struct shape, u.r, &sbx_type_f64, 1),
	SBX_MEMBER(struct shape, u.label, &sbx_type_string, 2),
	SBX_MEMBER(struct shape, u, NULL, 0),
};
static const struct sbx_type shape_t = SBX_UNION("shape", struct shape, kind, shape_m);
static const struct sbx_type arr_t = SBX_ARRAY("double[4]", struct fz, arr, &sbx_type_f64);
static const struct sbx_field fz_f[] = {
	SBX_FIELD_AUTO(struct fz, v),
	SBX_FIELD_AUTO(struct fz, s),
	SBX_FIELD(struct fz, next, &fz_p),
	SBX_FIELD(struct fz, ints, &int_s),
	SBX_FIELD(struct fz, sh, &shape_t),
	SBX_FIELD(struct fz, arr, &arr_t),
	SBX_FIELD_AUTO(struct fz, b),
	SBX_FIELD(struct fz, pi, &int_p),
};
static const struct sbx_type fz_t = SBX_STRUCT("fz", struct fz, fz_f);

static const struct codec_opts opts = { .max_alloc = 64u << 20 };

/* Header + type table + root reference: the common prefix of two encodings
 * that differ in their object count. */
static size_t prefix(uint8_t **out)
{
	int nums[3] = { 1, 2, 3 };
	struct fz b = { .v = 2, .s = "x" }, a = { .v = 1, .next = &b, .ints = { nums, 2, 3 } };
	struct codec_buf x, y;
	struct common_err e;
	size_t n = 0;

	codec_buf_init(&x);
	codec_buf_init(&y);
	if (codec_encode(&fz_t, &a, NULL, &x, NULL, &e) == 0 &&
	    codec_encode(&fz_t, &b, NULL, &y, NULL, &e) == 0)
		while (n < x.len && n < y.len && x.p[n] == y.p[n])
			n++;
	*out = malloc(n ? n : 1);
	memcpy(*out, x.p, n);
	codec_buf_free(&x);
	codec_buf_free(&y);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *pre;
	static size_t npre = (size_t)-1;
	struct common_err e;
	struct codec_graph *g, *g2;
	void *root;

	if (npre == (size_t)-1)
		npre = prefix(&pre);
	if (size == 0)
		return 0;
	size_t head = data[0] == 1 ? npre : 0;
	size_t len = head + size - 1;
	uint8_t *img = malloc(len + COMMON_SHA256_LEN);
	memcpy(img, pre, head);
	memcpy(img + head, data + 1, size - 1);
	common_sha256(img, len, img + len);
	if (codec_decode(&fz_t, img, len + COMMON_SHA256_LEN, &opts, &root, &g, &e) == 0) {
		struct codec_buf again;
		codec_buf_init(&again);
		if (codec_encode_graph(g, &opts, &again, &e) < 0)
			abort(); /* a decoded graph is always encodable */
		if (codec_decode(&fz_t, again.p, again.len, &opts, &root, &g2, &e) < 0)
			abort(); /* and its encoding decodes */
		codec_graph_free(g2);
		codec_buf_free(&again);
		codec_graph_free(g);
	}
	free(img);
	return 0;
}
