/* State transport guest: reads its input image from fd 3 and appends a result.
 * usage: state_echo [copy|big N|none|empty|garbage] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/trace.h"

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "copy";
	void *in;
	size_t n;
	int r;

	if ((r = sbx_state_read_input(&in, &n)) < 0) {
		fprintf(stderr, "state_echo: reading input: %s\n", strerror(-r));
		return 1;
	}
	if (strcmp(mode, "copy") == 0) {
		/* the result: "got N:" followed by the input */
		char head[64];
		int hl = snprintf(head, sizeof head, "got %zu:", n);
		char *out = malloc((size_t)hl + n + 1);
		memcpy(out, head, (size_t)hl);
		memcpy(out + hl, in, n);
		r = sbx_state_write_result(out, (size_t)hl + n);
	} else if (strcmp(mode, "big") == 0 && argc > 2) {
		size_t len = strtoull(argv[2], NULL, 10);
		char *out = malloc(len);
		for (size_t i = 0; i < len; i++)
			out[i] = (char)(i % 251);
		r = sbx_state_write_result(out, len);
	} else if (strcmp(mode, "none") == 0) {
		r = 0;
	} else if (strcmp(mode, "empty") == 0) {
		r = sbx_state_write_result("", 0);
	} else if (strcmp(mode, "garbage") == 0) {
		/* a header that claims more than was written */
		uint64_t claim = 1000;
		r = pwrite(TRACE_STATE_FD, &claim, 8, (off_t)(n + 8)) == 8 ? 0 : -1;
		if (r == 0 && pwrite(TRACE_STATE_FD, "abc", 3, (off_t)(n + 16)) != 3)
			r = -1;
	} else if (strcmp(mode, "trailing") == 0) {
		r = sbx_state_write_result("ok", 2);
		if (r == 0 && pwrite(TRACE_STATE_FD, "zz", 2, (off_t)(n + 8 + 8 + 2)) != 2)
			r = -1;
	} else if (strcmp(mode, "overlap") == 0) {
		/* move the input header so the result would overlap the input */
		uint64_t small = 8;
		r = pwrite(TRACE_STATE_FD, &small, 8, 0) == 8 ? 0 : -1;
		if (r == 0)
			r = sbx_state_write_result("xy", 2);
	}
	if (r < 0) {
		fprintf(stderr, "state_echo: writing result failed\n");
		return 1;
	}
	return 0;
}
