#!/usr/bin/env bats
# tests/layers.sh: the layer rule of tests/layers.txt holds and has teeth.
load helpers

obj() { # obj DIR NAME C-SOURCE
	mkdir -p "$BATS_TEST_TMPDIR/b/obj/$1"
	printf '%s\n' "$3" | cc -x c -c -o "$BATS_TEST_TMPDIR/b/obj/$1/$2.o" -
}

@test "the built library keeps every layer below the ones above it" {
	run "$BATS_TEST_DIRNAME/layers.sh" "$SBX_BUILD"
	assert_success
	assert_output --regexp 'layers: [1-9][0-9]* passed, 0 failed'
}

@test "a lower layer calling a higher one is named and fails the check" {
	obj lease/front store 'int lease_open(void) { return 1; }'
	obj libcommon err 'int lease_open(void); int common_x(void) { return lease_open(); }'
	obj snap cli 'int lease_open(void); int snap_y(void) { return lease_open(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: libcommon/err.o uses lease_open of lease/front, a layer above libcommon'
	assert_output --partial 'layers: 2 passed, 1 failed'
}

@test "a subfolder layer is below the next: trace/tracee may not call trace/run" {
	obj trace/run run 'int trace_run_main(void) { return 1; }'
	obj trace/tracee mem 'int trace_run_main(void); int trace_mem_x(void) { return trace_run_main(); }'
	obj trace/sv supervise 'int trace_mem_x(void); int trace_sv_y(void) { return trace_mem_x(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: trace/tracee/mem.o uses trace_run_main of trace/run, a layer above trace/tracee'
	assert_output --partial 'layers: 2 passed, 1 failed'
}

@test "a lease back end calls neither the front nor the other back end" {
	obj lease/front lifecycle 'int lease_transition(void) { return 1; }'
	obj lease/etcd shared 'int lease_etcd_x(void) { return 1; }'
	obj lease/file records 'int lease_transition(void); int lease_etcd_x(void); int lease_file_y(void) { return lease_transition() + lease_etcd_x(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: lease/file/records.o uses lease_transition of lease/front, a layer above lease/file'
	assert_output --partial 'layers: lease/file/records.o uses lease_etcd_x of lease/etcd, beside lease/file in one layer'
	assert_output --partial 'layers: 2 passed, 1 failed'
}

@test "two features on one line may not call each other; one folder may call itself" {
	obj trace/determ determ 'int trace_determ_x(void) { return 1; }'
	obj trace/determ tsc 'int trace_determ_x(void); int trace_tsc_y(void) { return trace_determ_x(); }'
	obj trace/meter meter 'int trace_determ_x(void); int trace_meter_z(void) { return trace_determ_x(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: trace/meter/meter.o uses trace_determ_x of trace/determ, beside trace/meter in one layer'
	assert_output --partial 'layers: 2 passed, 1 failed'
}

@test "an object of trace/ naming a snap_ symbol fails, defined or not" {
	obj trace/run run 'int snap_take(void); int trace_run_x(void) { return snap_take(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: trace/run/run.o uses snap_take: trace/ never reaches snap/'
}

@test "an object in no listed layer fails; one whose source is gone is not checked" {
	obj lease/front store 'int lease_open(void) { return 1; }'
	obj bin sbx-run 'int main(void) { return 0; }'
	obj trace gone 'int lease_open(void); int trace_gone(void) { return lease_open(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: bin/sbx-run.o lies in no layer of tests/layers.txt'
	assert_output --partial 'layers: 1 passed, 1 failed'
}

@test "a header included from a room above, or beside, fails; trace.h includes no room" {
	mkdir -p "$BATS_TEST_TMPDIR/src/trace/box" "$BATS_TEST_TMPDIR/src/trace/meter" "$BATS_TEST_TMPDIR/b/obj"
	printf '#include "trace/sv/sv.h"\n' > "$BATS_TEST_TMPDIR/src/trace/box/env.c"
	printf '#include "trace/determ/determ.h"\n#include "trace/sys/sys.h"\n' > "$BATS_TEST_TMPDIR/src/trace/meter/meter.c"
	printf '#include "trace/box/box.h"\n' > "$BATS_TEST_TMPDIR/src/trace/trace.h"
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b" "$BATS_TEST_TMPDIR/src"
	assert_failure
	assert_output --partial 'layers: trace/box/env.c includes trace/sv/sv.h of trace/sv, not below trace/box'
	assert_output --partial 'layers: trace/meter/meter.c includes trace/determ/determ.h of trace/determ, not below trace/meter'
	refute_output --partial 'includes trace/sys/sys.h'
	assert_output --partial 'layers: trace/trace.h includes trace/box/box.h'
}

# The supervisor's layers (trace/sv/sv.h): one order, walked at every hook point.
@test "every hook point walks the layers in their one order; each task has a slot per layer" {
	run "$GUESTS/layer_host" walk /bin/sh -c '/bin/true & wait'
	assert_success
	for p in start entry exec spawn proc_exit tick; do
		assert_line "$p: CIMDSRA" # control, inspect, meter, determ, restore, record, after
	done
	# the child's seven slots: the even ones freed by their layers at its exit, the rest by the supervisor
	assert_line "slots: set 7, freed at exit 4, freed by the supervisor 3, mismatched 0"
	assert_line "stopped: no"
}

@test "a layer failing at entry ends the walk there and stops the guest" {
	run "$GUESTS/layer_host" refuse /bin/sh -c '/bin/true & wait'
	assert_success
	assert_line "entry: CIMD"
	assert_line "exec: "
	assert_line "stopped: inspector failed"
}
