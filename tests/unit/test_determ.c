/* trace/determ/determ.c: what the filter traps, the header's determinism object,
 * namespace pids. (Guest-visible behaviour is in tests/determ.bats.) */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/determ/determ.h"
#include "trace/record/record.h"
#include "tests/unit/unit.h"

int main(void)
{
	struct common_err e;

	CHECK(trace_sys_facts(TRACE_SYS_fstat) & TRACE_FACT_DETERM);
	CHECK(trace_sys_facts(TRACE_SYS_getdents64) & TRACE_FACT_DETERM);
	CHECK(trace_sys_facts(TRACE_SYS_sched_getaffinity) & TRACE_FACT_DETERM);
	CHECK(trace_sys_facts(TRACE_SYS_clone) & TRACE_FACT_DETERM);
	CHECK(trace_sys_facts(TRACE_SYS_rseq) & TRACE_FACT_DETERM);
	CHECK(trace_sys_facts(TRACE_SYS_write) & TRACE_FACT_DETERM); /* a pipe's bytes are ordered */
	CHECK(!(trace_sys_facts(TRACE_SYS_exit_group) & TRACE_FACT_DETERM));
	unsigned c = trace_determ_classes();
	/* every call the parallel schedule orders stops in every deterministic run */
	for (size_t i = 0; i < trace_sys_count(); i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		unsigned f = trace_sys_facts(s->nr);
		if (f & (TRACE_FACT_ORDERED | TRACE_FACT_FD_ORDERED))
			CHECK((f & (TRACE_FACT_DETERM | TRACE_FACT_AT_EXIT)) || (s->classes & c));
	}
	CHECK(trace_sys_facts(TRACE_SYS_wait4) & TRACE_FACT_ORDERED);
	CHECK(trace_sys_facts(TRACE_SYS_futex) & TRACE_FACT_ORDERED);
	CHECK(trace_sys_facts(TRACE_SYS_read) & TRACE_FACT_FD_ORDERED);
	CHECK(!(trace_sys_facts(TRACE_SYS_openat) & (TRACE_FACT_ORDERED | TRACE_FACT_FD_ORDERED)));
	CHECK(c & TRACE_CLASS_TIME);
	CHECK(c & TRACE_FILTER_DETERM);
	/* getrandom and every time call are TRACE_CLASS_TIME in the table */
	CHECK(trace_sys_by_name("getrandom")->classes & TRACE_CLASS_TIME);
	CHECK(trace_sys_by_name("clock_gettime")->classes & TRACE_CLASS_TIME);
	CHECK(trace_sys_by_name("gettimeofday")->classes & TRACE_CLASS_TIME);
	/* the filter builds with the modifier (it is not a class bit) */
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(trace_filter_export(c | trace_classes(TRACE_LEVEL_FILE), fd, &e) == 0);
	close(fd);

	/* the header names rdtsc by what the probe found */
	struct trace_determ *un = trace_determ_new("L0123456789abcdef", 1764806400, 0);
	struct trace_determ *ct = trace_determ_new("L0123456789abcdef", 1764806400, 1);
	json_t *h = trace_determ_header(un, NULL, &e), *hc = trace_determ_header(ct, NULL, &e);
	CHECK(h != NULL && hc != NULL);
	CHECK(json_integer_value(json_object_get(h, "epoch")) == 1764806400);
	CHECK(!strcmp(json_string_value(json_object_get(h, "rdtsc")), "uncontrolled"));
	CHECK(!strcmp(json_string_value(json_object_get(hc, "rdtsc")), "controlled"));
	int rdtsc = 0, rdtsc_c = 0;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(h, "uncontrolled"), i, v)
		rdtsc |= !strcmp(json_string_value(v), "rdtsc");
	json_array_foreach(json_object_get(hc, "uncontrolled"), i, v)
		rdtsc_c |= !strcmp(json_string_value(v), "rdtsc");
	CHECK(rdtsc && !rdtsc_c);
	CHECK(json_object_get(h, "ns_sha256") == NULL);
	json_decref(h);
	json_decref(hc);
	trace_determ_free(ct);
	CHECK(trace_sys_facts(TRACE_SYS_prctl) & TRACE_FACT_DETERM); /* PR_SET_TSC is refused */

	/* the epoch: the end of the request's batch, rounded up to a second */
	json_t *clk = json_pack("{s:s,s:I,s:I}", "mode", "wall", "epoch_ms", (json_int_t)1764806400500,
				"batch_ms", (json_int_t)1000);
	CHECK(trace_determ_epoch(clk, 0) == 1764806402);
	CHECK(trace_determ_epoch(clk, 99) == 1764806501);
	CHECK(trace_determ_epoch(clk, -1) == -1);
	CHECK(trace_determ_epoch(clk, INT64_MAX / 2) == -1);
	json_object_set_new(clk, "batch_ms", json_integer(250));
	CHECK(trace_determ_epoch(clk, 2) == 1764806402); /* 1764806401.250 */
	json_object_set_new(clk, "batch_ms", json_integer(0));
	CHECK(trace_determ_epoch(clk, 0) == -1);
	json_decref(clk);

	char dir[] = "/tmp/test_determ.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	h = trace_determ_header(un, dir, &e);
	CHECK(h && strlen(json_string_value(json_object_get(h, "ns_sha256"))) == 64);
	char *f = common_xasprintf("%s/cell", dir);
	CHECK(common_write_atomic(f, "x", 1, 0600, &e) == 0);
	json_t *h2 = trace_determ_header(un, dir, &e);
	CHECK(h2 && strcmp(json_string_value(json_object_get(h, "ns_sha256")),
			   json_string_value(json_object_get(h2, "ns_sha256"))) != 0);
	unlink(f);
	rmdir(dir);
	free(f);
	json_decref(h);
	json_decref(h2);

	/* in the host namespace a pid is its own namespace pid */
	CHECK(trace_determ_nspid(getpid()) == getpid());
	CHECK(trace_determ_nspid(0x3fffffff) == 0);

	struct trace_layer l = trace_determ_layer(un);
	CHECK(l.ctx == un && !trace_determ_layer(NULL).ctx);
	CHECK(trace_determ_emulated(un) == 0);
	trace_determ_free(un);
	return unit_finish("test_determ");
}
