/* State transport: round trip through fd 3 and every malformed result refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/inspect/inspect.h"

static int passed, failed;
static char dir[] = "/tmp/test_state.XXXXXX";

#define CHECK(c) do { if (c) passed++; else { failed++; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static char *path(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
	return buf[i];
}

static void put(int fd, uint64_t off, const void *b, size_t n)
{
	if (pwrite(fd, b, n, (off_t)off) != (ssize_t)n)
		abort();
}

static void le64(uint8_t b[8], uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

/* Open a transport with input "hello", put it at fd 3 as a guest would see it. */
static void open_st(struct trace_state *st)
{
	struct common_err e = {0};
	int fd = open(path("in"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, "hello", 5) != 5 || close(fd) < 0)
		abort();
	if (trace_state_open(st, path("in"), &e) < 0) {
		common_report(&e);
		abort();
	}
	if (dup2(st->memfd, TRACE_STATE_FD) < 0)
		abort();
}

static void done_st(struct trace_state *st)
{
	close(TRACE_STATE_FD);
	trace_state_close(st);
}

/* Expect finish to fail mentioning want and leave no output file. */
static void refused(struct trace_state *st, const char *want)
{
	struct common_err e = {0};
	struct stat sb;

	close(TRACE_STATE_FD);
	CHECK(trace_state_finish(st, path("out"), &e) < 0);
	CHECK(strstr(e.why, want) != NULL);
	if (!strstr(e.why, want))
		fprintf(stderr, "  wanted \"%s\", got \"%s: %s\"\n", want, e.what, e.why);
	CHECK(stat(path("out"), &sb) < 0 && errno == ENOENT);
	trace_state_close(st);
}

static void test_round_trip(void)
{
	struct trace_state st;
	struct common_err e = {0};
	void *in;
	size_t n, big = 3u << 20;
	char *res = malloc(big), *got;

	open_st(&st);
	CHECK(st.result_off == 13);
	CHECK(sbx_state_read_input(&in, &n) == 0);
	CHECK(n == 5 && memcmp(in, "hello", 5) == 0);
	free(in);
	for (size_t i = 0; i < big; i++)
		res[i] = (char)(i * 7);
	CHECK(sbx_state_write_result(res, big) == 0);
	close(TRACE_STATE_FD);
	CHECK(trace_state_finish(&st, path("out"), &e) == 0);
	CHECK(common_read_file(path("out"), 16u << 20, &got, &n, &e) == 0);
	CHECK(n == big && memcmp(got, res, big) == 0);
	free(got);
	free(res);
	trace_state_close(&st);
	unlink(path("out"));
}

static void test_empty_input(void)
{
	struct trace_state st;
	struct common_err e = {0};
	void *in;
	size_t n;

	CHECK(trace_state_open(&st, NULL, &e) == 0);
	CHECK(st.result_off == 8);
	CHECK(dup2(st.memfd, TRACE_STATE_FD) == TRACE_STATE_FD);
	CHECK(sbx_state_read_input(&in, &n) == 0 && n == 0);
	free(in);
	CHECK(sbx_state_write_result("x", 1) == 0);
	done_st(&st);
}

static void test_malformed(void)
{
	struct trace_state st;
	uint8_t h[8];

	open_st(&st); /* nothing written */
	refused(&st, "missing");

	open_st(&st);
	CHECK(sbx_state_write_result("", 0) == 0);
	refused(&st, "empty");

	open_st(&st); /* a partial header */
	put(TRACE_STATE_FD, 13, "\x10\0\0", 3);
	refused(&st, "truncated");

	open_st(&st); /* header promises more than is there */
	le64(h, 8 + 100);
	put(TRACE_STATE_FD, 13, h, 8);
	put(TRACE_STATE_FD, 21, "abc", 3);
	refused(&st, "truncated");

	open_st(&st); /* header smaller than itself */
	le64(h, 3);
	put(TRACE_STATE_FD, 13, h, 8);
	refused(&st, "malformed");

	open_st(&st); /* trailing bytes */
	le64(h, 8 + 2);
	put(TRACE_STATE_FD, 13, h, 8);
	put(TRACE_STATE_FD, 21, "abcdef", 6);
	refused(&st, "oversized");

	open_st(&st); /* size beyond the transport maximum */
	le64(h, TRACE_STATE_MAX + 9);
	put(TRACE_STATE_FD, 13, h, 8);
	put(TRACE_STATE_FD, 21, "abcdef", 6);
	refused(&st, "oversized");

	open_st(&st); /* guest rewrote the input header to move the result */
	le64(h, 9);
	put(TRACE_STATE_FD, 0, h, 8);
	(void)sbx_state_write_result("zz", 2);
	refused(&st, "overlapping");

	open_st(&st); /* guest shrank the transport into the input */
	CHECK(ftruncate(TRACE_STATE_FD, 4) == 0);
	refused(&st, "truncated");

	open_st(&st); /* huge length: no overflow in the checks */
	le64(h, UINT64_MAX);
	put(TRACE_STATE_FD, 13, h, 8);
	refused(&st, "oversized");
}

static void test_guest_refuses_bad_input(void)
{
	struct trace_state st;
	uint8_t h[8];
	void *in;
	size_t n;

	open_st(&st);
	le64(h, 1u << 20); /* input header past the end */
	put(TRACE_STATE_FD, 0, h, 8);
	CHECK(sbx_state_read_input(&in, &n) == -EBADMSG);
	CHECK(sbx_state_write_result("a", 1) == -EBADMSG);
	done_st(&st);
}

static void test_bad_input_file(void)
{
	struct trace_state st;
	struct common_err e = {0};

	CHECK(trace_state_open(&st, path("nope"), &e) < 0);
	CHECK(strstr(e.what, "nope") != NULL);
	CHECK(trace_state_open(&st, dir, &e) < 0);
	CHECK(strstr(e.why, "regular file") != NULL);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	test_round_trip();
	test_empty_input();
	test_malformed();
	test_guest_refuses_bad_input();
	test_bad_input_file();
	unlink(path("in"));
	rmdir(dir);
	printf("test_state: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
