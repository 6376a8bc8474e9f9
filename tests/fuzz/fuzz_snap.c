/* libFuzzer target for the snapshot decoder and the manifest decoder. A first
 * byte of 0 feeds the manifest decoder; 1 puts a valid domain and the current
 * version (with its thread list and process tree) in front so mutations reach
 * the fields, 3 the same with version 2, 5 with version 3; anything else is
 * decoded as is. An accepted image must encode back to exactly the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "snap/snap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct common_err e;
	if (size == 0)
		return 0;
	if (data[0] == 0) {
		struct snap_manifest m;
		uint8_t out[SNAP_MANIFEST_LEN];
		if (snap_manifest_decode(data + 1, size - 1, &m, &e) == 0) {
			snap_manifest_encode(&m, out);
			if (memcmp(out, data + 1, SNAP_MANIFEST_LEN))
				abort();
		}
		return 0;
	}
	uint8_t *buf;
	size_t len;
	if (data[0] == 1 || data[0] == 3 || data[0] == 5) {
		const size_t dl = strlen(SNAP_DOMAIN);
		len = 4 + dl + 4 + size - 1;
		buf = malloc(len);
		buf[0] = (uint8_t)dl;
		buf[1] = buf[2] = buf[3] = 0;
		memcpy(buf + 4, SNAP_DOMAIN, dl);
		buf[4 + dl] = data[0] == 1 ? SNAP_VERSION : data[0] == 3 ? 2 : 3;
		buf[5 + dl] = buf[6 + dl] = buf[7 + dl] = 0;
		memcpy(buf + 8 + dl, data + 1, size - 1);
	} else {
		len = size - 1;
		buf = malloc(len ? len : 1);
		memcpy(buf, data + 1, len);
	}
	struct snap_state st;
	if (snap_decode(buf, len, "fuzz", &st, &e) == 0) {
		struct snap_image im;
		if (snap_encode(&st, &im, &e) < 0 || im.len != len || memcmp(im.bytes, buf, len))
			abort();
		snap_image_free(&im);
		snap_state_free(&st);
	}
	free(buf);
	return 0;
}
