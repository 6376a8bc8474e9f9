/* libFuzzer target for the trace reader and the build record built on it:
 * any bytes must give events or a clean error, never a crash or a leak.
 * Each input is read twice: as given (the chain check stops most mutations
 * at the first line), and re-chained the way the writer would, so the JSON,
 * type and build-record layers behind the chain get fuzzed too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "trace/record/reader/reader.h"
#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void consume(int fd, const void *buf, size_t n)
{
	char path[64];
	struct common_err e;
	struct trace_reader *t;
	struct trace_event ev;
	json_t *b;

	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, n, 0) != (ssize_t)n)
		return;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	t = trace_reader_open(path, &e);
	if (t) {
		while (trace_reader_next(t, &ev, &e) > 0)
			;
		trace_reader_close(t);
	}
	b = trace_buildrec(path, 1, &e);
	json_decref(b);
}

/* Replace each line's ,"h":"..."} tail (or final '}') by the right chain hash. */
static char *rechain(const uint8_t *data, size_t size, size_t *outlen)
{
	static const char dom[] = "sbx/trace/v1";
	char *out, hex[65];
	uint8_t h[32];
	size_t o = 0, i = 0, lines = 1;
	int first = 1;

	for (size_t k = 0; k < size; k++)
		lines += data[k] == '\n';
	out = malloc(size + 80 * lines); /* each line gains at most ,"h":"<64>"}\n */

	while (i < size) {
		const uint8_t *nl = memchr(data + i, '\n', size - i);
		size_t len = nl ? (size_t)(nl - (data + i)) : size - i;
		const char *l = (const char *)data + i;
		size_t body = len;
		if (body >= 72 && !memcmp(l + body - 72, ",\"h\":\"", 6))
			body -= 72;
		else if (body && l[body - 1] == '}')
			body--;
		struct common_sha256 c;
		common_sha256_init(&c);
		if (first)
			common_sha256_update(&c, dom, sizeof dom);
		else
			common_sha256_update(&c, h, 32);
		common_sha256_update(&c, l, body);
		common_sha256_update(&c, "}", 1);
		common_sha256_final(&c, h);
		common_hex(h, 32, hex);
		memcpy(out + o, l, body);
		o += body;
		o += (size_t)sprintf(out + o, ",\"h\":\"%s\"}\n", hex);
		first = 0;
		i += len + 1;
	}
	*outlen = o;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	size_t n;
	char *r;

	if (fd < 0)
		fd = memfd_create("fuzz_trace", 0);
	if (fd < 0 || size > (1u << 20))
		return 0;
	consume(fd, data, size);
	r = rechain(data, size, &n);
	consume(fd, r, n);
	free(r);
	return 0;
}
