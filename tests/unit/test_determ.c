/* trace/determ.c: what the filter traps, the header's determinism object,
 * namespace pids. (Guest-visible behaviour is in tests/determ.bats.) */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include "trace/trace.h"
#include "tests/unit/unit.h"

int main(void)
{
	struct common_err e;

	CHECK(trace_determ_traps(TRACE_SYS_fstat));
	CHECK(trace_determ_traps(TRACE_SYS_getdents64));
	CHECK(trace_determ_traps(TRACE_SYS_sched_getaffinity));
	CHECK(trace_determ_traps(TRACE_SYS_clone));
	CHECK(trace_determ_traps(TRACE_SYS_rseq));
	CHECK(!trace_determ_traps(TRACE_SYS_write));
	CHECK(!trace_determ_traps(TRACE_SYS_exit_group));
	unsigned c = trace_determ_classes();
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

	json_t *h = trace_determ_header(NULL, &e);
	CHECK(h != NULL);
	CHECK(json_integer_value(json_object_get(h, "epoch")) == TRACE_DETERM_EPOCH);
	json_t *u = json_object_get(h, "uncontrolled");
	int rdtsc = 0;
	size_t i;
	json_t *v;
	json_array_foreach(u, i, v)
		rdtsc |= !strcmp(json_string_value(v), "rdtsc");
	CHECK(rdtsc);
	CHECK(json_object_get(h, "ns_sha256") == NULL);
	json_decref(h);

	char dir[] = "/tmp/test_determ.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	h = trace_determ_header(dir, &e);
	CHECK(h && strlen(json_string_value(json_object_get(h, "ns_sha256"))) == 64);
	char *f = common_xasprintf("%s/cell", dir);
	CHECK(common_write_atomic(f, "x", 1, 0600, &e) == 0);
	json_t *h2 = trace_determ_header(dir, &e);
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

	struct trace_determ *d = trace_determ_new("L0123456789abcdef");
	trace_determ_on_spawn(d, getpid(), getppid(), 0);
	trace_determ_on_proc_exit(d, getppid());
	CHECK(trace_determ_emulated(d) == 0);
	trace_determ_free(d);
	return unit_finish("test_determ");
}
