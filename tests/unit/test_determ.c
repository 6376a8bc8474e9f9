/* trace/determ/determ.c: what the filter traps, the header's determinism object,
 * namespace pids. (Guest-visible behaviour is in tests/determ.bats.) */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "codec/codec.h"
#include "trace/determ/determ.h"
#include "trace/record/record.h"
#include "tests/unit/unit.h"

/* A struct stat (x86-64 layout) of a file: dev, ino, mode, mtime, ctime (ns). */
static void stat_of(uint8_t b[144], uint64_t dev, uint64_t ino, uint32_t mode, int64_t m, int64_t c)
{
	int64_t t[4] = { m / 1000000000, m % 1000000000, c / 1000000000, c % 1000000000 };
	memset(b, 0, 144);
	memcpy(b, &dev, 8);
	memcpy(b + 8, &ino, 8);
	memcpy(b + 24, &mode, 4);
	memcpy(b + 72, t, 16); /* atime: the host's, whatever it is */
	memcpy(b + 88, t, 16);
	memcpy(b + 104, t + 2, 16);
}

static int64_t at(const uint8_t *b, size_t off)
{
	int64_t x;
	memcpy(&x, b + off, 8);
	return x;
}

/* A probe (the answer at once or at the task's turn) numbers nothing; a
 * writer's close numbers the times it wrote from its own clock. */
static void written_check(struct trace_determ_files *f, struct trace_determ_view *v, int64_t ep)
{
	uint8_t b[144];
	struct stat sb;
	char path[] = "/tmp/test_determ.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, "x", 1) == 1 && fstat(fd, &sb) == 0);
	/* a file not yet seen: the probe says a turn is needed, and numbers nothing */
	stat_of(b, sb.st_dev, sb.st_ino, S_IFREG | 0644, 1000000000ll * 1000000000, 1000000000ll * 1000000000);
	trace_determ_files_probe(f);
	trace_determ_files_stat(f, v, b);
	CHECK(trace_determ_files_probe_end(f) == 1);
	stat_of(b, 2049, 5, S_IFREG | 0644, 1000000000ll * 1000000000, 1000000000ll * 1000000000);
	trace_determ_files_probe(f);
	trace_determ_files_stat(f, v, b);
	CHECK(trace_determ_files_probe_end(f) == 0 && at(b, 8) == 3); /* known: answered at once */
	/* the writer drops it: its times are the writer's clock, a step on */
	*v->clock = 7000000;
	trace_determ_files_written(f, v, getpid(), fd);
	CHECK(*v->clock == 7001000);
	stat_of(b, sb.st_dev, sb.st_ino, S_IFREG | 0644, 0, 0);
	memcpy(b + 88, &sb.st_mtim, 16);
	memcpy(b + 104, &sb.st_ctim, 16);
	trace_determ_files_probe(f);
	trace_determ_files_stat(f, v, b);
	CHECK(trace_determ_files_probe_end(f) == 1); /* its identity is still a first sight */
	*v->clock = 0; /* a reader: the writer's time moves its clock on */
	stat_of(b, sb.st_dev, sb.st_ino, S_IFREG | 0644, 0, 0);
	memcpy(b + 88, &sb.st_mtim, 16);
	memcpy(b + 104, &sb.st_ctim, 16);
	trace_determ_files_stat(f, v, b);
	CHECK(at(b, 88) == ep && at(b, 96) == 7001000 && *v->clock == 7001000);
	/* a descriptor only read from numbers nothing */
	int rd = open(path, O_RDONLY);
	CHECK(rd >= 0 && write(fd, "y", 1) == 1);
	*v->clock = 9000000;
	trace_determ_files_written(f, v, getpid(), rd);
	CHECK(*v->clock == 9000000);
	close(rd);
	close(fd);
	unlink(path);
}

/* trace/determ/files.c: identities in first-sight order, the run's times
 * logical and causal, the inputs' kept, what is not a file at the epoch. */
static void files_check(void)
{
	struct trace_determ_files *f = trace_determ_files_new();
	uint64_t clock = 5000000; /* the reader's clock: 5 ms into the run */
	struct trace_determ_view v = { 1764806400, &clock, 0 };
	int64_t ep = 1764806400, s = 1000000000;
	uint8_t a[144], b[144], c[144];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* after the run's start: times the run wrote */
	int64_t now = (int64_t)ts.tv_sec * s + ts.tv_nsec;

	/* an input: older than the run; its ctime (when it was copied) is not told */
	stat_of(a, 2049, 777777, S_IFREG | 0644, 1000000000 * s, now - 10 * s);
	trace_determ_files_stat(f, &v, a);
	CHECK(at(a, 0) == (int64_t)makedev(0, 1) && at(a, 8) == 2);
	CHECK(at(a, 72) == 1000000000 && at(a, 88) == 1000000000 && at(a, 104) == 1000000000);
	CHECK(clock == 5000000);
	/* two files the run wrote (host times out of order): first sight orders them */
	stat_of(b, 2049, 5, S_IFREG | 0644, now, now);
	trace_determ_files_stat(f, &v, b);
	CHECK(at(b, 8) == 3 && at(b, 88) == ep && at(b, 96) == 5000000 && at(b, 104) == ep);
	clock = 1000; /* another reader, behind: the time it sees moves it on */
	stat_of(c, 2049, 6, S_IFREG | 0644, now - 1, now - 1);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 88) == ep && at(c, 96) == 5001000 && clock == 5001000);
	/* seen again: the same answers; another device: the next number */
	stat_of(b, 2049, 5, S_IFREG | 0644, now, now);
	trace_determ_files_stat(f, &v, b);
	CHECK(at(b, 8) == 3 && at(b, 96) == 5000000 && clock == 5001000);
	stat_of(c, 7, 5, S_IFREG | 0644, 1000000000 * s, 1000000000 * s);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 0) == (int64_t)makedev(0, 2) && at(c, 8) == 5);
	/* a directory (any task's new name restamps it), a pipe, anything under /ns: the epoch */
	stat_of(c, 2049, 9, S_IFDIR | 0755, now, now);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 72) == ep && at(c, 88) == ep && at(c, 96) == 0 && at(c, 104) == ep && at(c, 8) == 6);
	stat_of(c, 12, 99, S_IFIFO | 0600, now, now);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 72) == ep && at(c, 88) == ep && at(c, 96) == 0 && at(c, 104) == ep);
	v.in_ns = 1;
	stat_of(c, 2049, 5, S_IFREG | 0644, now, now);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 88) == ep && at(c, 96) == 0 && at(c, 8) == 3);
	/* a time in the host's future is the guest's own choice (touch -d): kept */
	v.in_ns = 0;
	stat_of(c, 2049, 8, S_IFREG | 0644, now + 100000 * s, now);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 88) == now / s + 100000 && at(c, 104) == ep);
	CHECK(!trace_determ_files_full(f));
	written_check(f, &v, ep);
	/* bounded: once the table is full a new file keeps the host's number, and says so */
	uint64_t ino = 0;
	for (ino = 100; !trace_determ_files_full(f) && ino < 100 + (1u << 20); ino++) {
		stat_of(c, 2049, ino, S_IFREG | 0644, 1000000000 * s, 1000000000 * s);
		trace_determ_files_stat(f, &v, c);
	}
	CHECK(trace_determ_files_full(f) && ino < 100 + (1u << 20));
	stat_of(c, 2049, 0x7777777, S_IFREG | 0644, 1000000000 * s, 1000000000 * s);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 8) == 0x7777777);
	stat_of(c, 2049, 5, S_IFREG | 0644, 1000000000 * s, 1000000000 * s);
	trace_determ_files_stat(f, &v, c);
	CHECK(at(c, 8) == 3); /* what it knows it still tells */
	trace_determ_files_free(f);
}

/* A determinism record by hand (trace/determ/state.c): two tasks, 1 (make)
 * and 2 (its child), the fields given; ver 1 leaves the schedule and the
 * queued events out. */
struct rec_fields {
	uint32_t ver, tids[2], tgid2, skip[2], nskip;
	uint64_t orders[2], next;
	uint32_t qtid, seq_at;
	const char *line;
};

static struct codec_buf record_of(const struct rec_fields *f)
{
	struct codec_buf b;
	codec_buf_init(&b);
	codec_put_u32(&b, f->ver);
	codec_put_u32(&b, 4);
	codec_put_raw(&b, "seed", 4);
	codec_put_u64(&b, 1700000000);
	codec_put_u64(&b, 3);
	codec_put_u32(&b, 2);                  /* last pid */
	for (int k = 0; k < 3; k++)            /* an empty file table */
		codec_put_u64(&b, k ? 1 : 0);
	codec_put_u32(&b, 0);
	codec_put_u32(&b, 0);
	for (int k = 0; k < 6; k++)            /* stdio */
		codec_put_u64(&b, 0);
	if (f->ver == 2) {
		codec_put_u64(&b, f->next);
		codec_put_u32(&b, 2);
		for (int i = 0; i < 2; i++) {
			codec_put_u32(&b, f->tids[i]);
			codec_put_u32(&b, i ? f->tgid2 : f->tids[0]);
			codec_put_u64(&b, f->orders[i]);
			codec_put_u64(&b, 10 + (uint64_t)i);
		}
		codec_put_u64(&b, 4 + 8 + 8 + strlen(f->line) + 4 + 4 * (f->nskip < 2 ? f->nskip : 2) + 4);
		codec_put_u32(&b, 1);          /* one queue of one line */
		codec_put_u32(&b, f->qtid);
		codec_put_u32(&b, 1);
		codec_put_u32(&b, f->seq_at);
		codec_put_u32(&b, (uint32_t)strlen(f->line));
		codec_put_raw(&b, f->line, strlen(f->line));
		codec_put_u32(&b, f->nskip);
		for (uint32_t i = 0; i < f->nskip && i < 2; i++)
			codec_put_u32(&b, f->skip[i]);
		codec_put_u32(&b, 0);          /* no threads */
	}
	codec_put_u32(&b, 2);
	for (uint32_t i = 0; i < 2; i++) {
		codec_put_u32(&b, i + 1);
		codec_put_u32(&b, i + 1);
		codec_put_u32(&b, i);
		for (int k = 0; k < 3; k++)
			codec_put_u64(&b, 0);
		codec_put_u32(&b, 32);
		for (int k = 0; k < 8; k++)
			codec_put_u32(&b, 0);
	}
	return b;
}

/* NULL when the record is accepted, else why it is refused. */
static const char *why_of(const struct rec_fields *f)
{
	static char why[256];
	struct codec_buf b = record_of(f);
	const char *w = trace_determ_record_why(b.p, b.len, trace_rec_state_why);
	snprintf(why, sizeof why, "%s", w ? w : "");
	codec_buf_free(&b);
	return w ? why : NULL;
}

/* Version 2 holds the schedule's keys and the queued events, each field
 * checked; version 1 still decodes. */
static void record_check(void)
{
	const char *ev = "{\"ev\":\"exit\",\"exit\":0,\"pid\":2,\"seq\":";
	struct rec_fields ok = { .ver = 2, .tids = { 1, 2 }, .tgid2 = 2, .orders = { 0, 1 },
				 .next = 2, .qtid = 2, .line = ev, .seq_at = (uint32_t)strlen(ev),
				 .skip = { 1 }, .nskip = 1 }, f;
	CHECK(why_of(&ok) == NULL);
	struct codec_buf b = record_of(&ok);
	CHECK(trace_determ_record_last_pid(b.p, b.len) == 2);
	for (size_t cut = 1; cut < b.len; cut += 7) /* cut short anywhere: refused */
		CHECK(trace_determ_record_why(b.p, b.len - cut, trace_rec_state_why) != NULL);
	codec_buf_free(&b);
	f = ok, f.ver = 1;
	CHECK(why_of(&f) == NULL);
	f = ok, f.ver = 3;
	CHECK(strstr(why_of(&f), "unsupported determinism record version"));
	f = ok, f.tids[0] = 3;
	CHECK(strstr(why_of(&f), "schedule: a task's id is out of range or out of order"));
	f = ok, f.tids[1] = 5000000;
	CHECK(strstr(why_of(&f), "schedule: a task's id is out of range or out of order"));
	f = ok, f.tgid2 = 7;
	CHECK(strstr(why_of(&f), "schedule: a task's process is not a task of the record"));
	f = ok, f.orders[1] = 2;
	CHECK(strstr(why_of(&f), "schedule: a task's spawn order was never handed out"));
	f = ok, f.orders[1] = 0;
	CHECK(strstr(why_of(&f), "schedule: two tasks have one spawn order"));
	f = ok, f.qtid = 0;
	CHECK(strstr(why_of(&f), "queued events: a task id is out of range"));
	f = ok, f.seq_at = 3;
	CHECK(strstr(why_of(&f), "queued events: a line is not an event awaiting its seq"));
	f = ok, f.line = "{\"ev\":\"exit\",\n\"seq\":";
	f.seq_at = (uint32_t)strlen(f.line);
	CHECK(strstr(why_of(&f), "queued events: a line is not an event awaiting its seq"));
	f = ok, f.seq_at = (uint32_t)strlen(ev) + 1;
	CHECK(strstr(why_of(&f), "queued events: a line is not an event awaiting its seq"));
	f = ok, f.skip[0] = 2, f.skip[1] = 1, f.nskip = 2;
	CHECK(strstr(why_of(&f), "queued events: skipped tasks out of order"));
	f = ok, f.nskip = 0x40000000;
	CHECK(strstr(why_of(&f), "queued events: skip count beyond the input"));
}

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
	files_check();
	record_check();
	return unit_finish("test_determ");
}
