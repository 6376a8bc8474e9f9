/* Codec and sbx_call figures for bench/codec.sh (built non-PIE by it).
 *   codec_bench graph N      encode/decode/write-back of an N-node linked list
 *                            (re-encode: the guest's side, keeping IDs)
 *   codec_bench array BYTES  the same for one numeric array of BYTES
 *   codec_bench call N       sbx_call round trip (empty callback) vs fork+exec
 *   codec_bench noop         exits at once (the fork+exec baseline) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "codec/codec.h"
#include "trace/trace.h"

struct node { long value; struct node *next; };
static const struct sbx_type node_t;
static const struct sbx_type node_p = SBX_PTR("node*", &node_t);
static const struct sbx_field node_f[] = {
	SBX_FIELD_AUTO(struct node, value),
	SBX_FIELD(struct node, next, &node_p),
};
static const struct sbx_type node_t = SBX_STRUCT("node", struct node, node_f);

struct arr { SBX_SLICE_OF(uint64_t) v; };
static const struct sbx_type u64_s = SBX_SLICE("[]u64", &sbx_type_u64);
static const struct sbx_field arr_f[] = { SBX_FIELD(struct arr, v, &u64_s) };
static const struct sbx_type arr_t = SBX_STRUCT("arr", struct arr, arr_f);

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const struct common_err *e)
{
	fprintf(stderr, "codec_bench: error: %s: %s\n", e->what, e->why);
	exit(1);
}

/* encode, decode, guest re-encode and write-back of one graph */
static void codec_figures(const char *what, const struct sbx_type *t, void *root, double nobj,
			  const char *unit)
{
	struct codec_buf img, res;
	struct codec_graph *hg, *gg;
	struct common_err e;
	void *groot;

	codec_buf_init(&img);
	codec_buf_init(&res);
	double t0 = now();
	if (codec_encode(t, root, NULL, &img, &hg, &e) < 0)
		die(&e);
	double t1 = now();
	if (codec_decode(t, img.p, img.len, NULL, &groot, &gg, &e) < 0)
		die(&e);
	double t2 = now();
	if (codec_encode_graph(gg, NULL, &res, &e) < 0)
		die(&e);
	double t3 = now();
	if (codec_writeback(hg, res.p, res.len, NULL, &e) < 0)
		die(&e);
	double t4 = now();
	double mb = (double)img.len / 1e6;
	printf("%-28s image %.1f MB, %.0f %s\n", what, mb, nobj, unit);
	printf("  encode      %8.3f s  %12.0f %s/s  %8.1f MB/s\n", t1 - t0, nobj / (t1 - t0), unit, mb / (t1 - t0));
	printf("  decode      %8.3f s  %12.0f %s/s  %8.1f MB/s\n", t2 - t1, nobj / (t2 - t1), unit, mb / (t2 - t1));
	printf("  re-encode   %8.3f s  %12.0f %s/s  %8.1f MB/s\n", t3 - t2, nobj / (t3 - t2), unit, mb / (t3 - t2));
	printf("  write-back  %8.3f s  %12.0f %s/s  %8.1f MB/s\n", t4 - t3, nobj / (t4 - t3), unit, mb / (t4 - t3));
	codec_graph_free(gg);
	codec_graph_free(hg);
	codec_buf_free(&img);
	codec_buf_free(&res);
}

static void empty(void *arg)
{
	(void)arg;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "noop"))
		return 0;
	if (argc != 3) {
		fprintf(stderr, "usage: codec_bench graph N | array BYTES | call N | noop\n");
		return 2;
	}
	long n = atol(argv[2]);
	if (!strcmp(argv[1], "graph")) {
		struct node *head = NULL;
		for (long i = 0; i < n; i++) {
			struct node *x = malloc(sizeof *x);
			x->value = n - i;
			x->next = head;
			head = x;
		}
		codec_figures("linked list", &node_t, head, (double)n, "objects");
	} else if (!strcmp(argv[1], "array")) {
		size_t cnt = (size_t)n / 8;
		struct arr a = { { malloc(cnt * 8), cnt, cnt } };
		for (size_t i = 0; i < cnt; i++)
			a.v.ptr[i] = i * 0x9e3779b97f4a7c15ull;
		codec_figures("numeric array (u64)", &arr_t, &a, (double)cnt, "elements");
	} else if (!strcmp(argv[1], "call")) {
		double *tc = calloc((size_t)n, sizeof *tc), *tf = calloc((size_t)n, sizeof *tf);
		struct node root = { 1, NULL };
		struct common_err e;
		struct sbx_sandbox sb = { .err = &e };
		char self[4096];
		ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
		self[k > 0 ? k : 0] = '\0';
		for (long i = 0; i < n; i++) {
			double t0 = now();
			if (sbx_call(&sb, empty, &node_t, &root) < 0)
				die(&e);
			double t1 = now();
			pid_t p = fork();
			if (p == 0) {
				execl(self, self, "noop", (char *)NULL);
				_exit(127);
			}
			int st;
			waitpid(p, &st, 0);
			double t2 = now();
			tc[i] = t1 - t0;
			tf[i] = t2 - t1;
		}
		qsort(tc, (size_t)n, sizeof *tc, cmp);
		qsort(tf, (size_t)n, sizeof *tf, cmp);
		printf("sbx_call round trip, empty callback: median %.2f ms (min %.2f, max %.2f, n=%ld)\n",
		       tc[n / 2] * 1e3, tc[0] * 1e3, tc[n - 1] * 1e3, n);
		printf("fork+exec of the same binary:        median %.2f ms (min %.2f, max %.2f, n=%ld)\n",
		       tf[n / 2] * 1e3, tf[0] * 1e3, tf[n - 1] * 1e3, n);
	} else {
		return 2;
	}
	return 0;
}
