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
	obj lease store 'int lease_open(void) { return 1; }'
	obj libcommon err 'int lease_open(void); int common_x(void) { return lease_open(); }'
	obj snap cli 'int lease_open(void); int snap_y(void) { return lease_open(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: libcommon/err.o uses lease_open of lease, a layer above libcommon'
	assert_output --partial 'layers: 2 passed, 1 failed'
}

@test "a subfolder layer is below its parent folder: trace/tracee may not call the rest of trace" {
	obj trace run 'int trace_run(void) { return 1; }'
	obj trace/tracee mem 'int trace_run(void); int trace_mem_x(void) { return trace_run(); }'
	obj trace supervise 'int trace_mem_x(void); int trace_sv_y(void) { return trace_mem_x(); }'
	run "$BATS_TEST_DIRNAME/layers.sh" "$BATS_TEST_TMPDIR/b"
	assert_failure
	assert_output --partial 'layers: trace/tracee/mem.o uses trace_run of trace, a layer above trace/tracee'
	assert_output --partial 'layers: 2 passed, 1 failed'
}
