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
