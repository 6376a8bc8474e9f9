/* libFuzzer target for the lease-record reader and the journal verifier: a record
 * or a journal of arbitrary bytes is checked or refused, never crashes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lease_store *store;
static char journal[512];
static char dir[] = "/tmp/fuzz_lease.XXXXXX";

static void cleanup(void)
{
	common_rm_rf(dir, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct common_err e;
	json_t *j, *rep = NULL;
	FILE *f;

	j = common_json_load((const char *)data, size, "fuzz", &e);
	if (j) {
		lease_record_check(j, "fuzz", &e);
		lease_record_check(json_object_get(j, "lease"), "fuzz", &e);
		json_decref(j);
	}
	/* the same bytes as a store journal: verify (and crash recovery) must cope */
	if (!store) {
		if (!mkdtemp(dir) || lease_store_open(dir, &store, &e) < 0)
			abort();
		atexit(cleanup);
		snprintf(journal, sizeof journal, "%s/journal.jsonl", dir);
	}
	f = fopen(journal, "w");
	if (!f)
		abort();
	fwrite(data, 1, size, f);
	fclose(f);
	if (lease_verify(store, NULL, &rep, &e) == 0)
		json_decref(rep);
	return 0;
}
