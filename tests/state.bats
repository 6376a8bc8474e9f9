#!/usr/bin/env bats
# State transport through fd 3 (SPEC §6.4): --state-in / --state-out.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

@test "fd-3 round trip: the guest reads its input and appends a result" {
	printf 'input-bytes' >in.img
	run sbx-run --ephemeral --state-in in.img --state-out out.img -- "$GUESTS/state_echo" copy
	assert_success
	assert_equal "$(cat out.img)" "got 11:input-bytes"
}

@test "fd-3 round trip with a 100 MiB result" {
	run sbx-run --ephemeral --state-out out.img -- "$GUESTS/state_echo" big 104857600
	assert_success
	assert_equal "$(stat -c %s out.img)" 104857600
	# the guest wrote byte i as i mod 251
	assert_equal "$(od -An -tu1 -j 251 -N 3 out.img | tr -s ' ')" " 0 1 2"
	assert_equal "$(od -An -tu1 -j 104857599 -N 1 out.img | tr -d ' ')" $((104857599 % 251))
}

@test "every malformed result is refused and nothing is written" {
	printf 'input-bytes' >in.img
	for m in none:missing empty:empty garbage:truncated trailing:oversized overlap:overlapping; do
		run sbx-run --ephemeral --state-in in.img --state-out out.img -- "$GUESTS/state_echo" "${m%%:*}"
		assert_failure 125
		assert_output --partial "sbx-run: error: state result: ${m#*:}"
		[ ! -e out.img ]
	done
}

@test "a missing or unreadable state input is refused before anything runs" {
	run sbx-run --ephemeral --state-in nope.img --state-out out.img -- "$GUESTS/state_echo" copy
	assert_failure 125
	assert_output --partial "state input nope.img"
	[ ! -e out.img ]
	[ ! -d "$SBX_STORE/leases" ] || [ -z "$(ls "$SBX_STORE/leases")" ]
}

@test "a state output in a missing directory is refused before anything runs" {
	run sbx-run --ephemeral --state-out no/such/dir/out.img -- "$GUESTS/state_echo" copy
	assert_failure 125
	assert_output --partial "--state-out no/such/dir/out.img"
	[ ! -d "$SBX_STORE/leases" ] || [ -z "$(ls "$SBX_STORE/leases")" ]
}

@test "no result is written back when the guest fails or a bound closes the lease" {
	run sbx-run --ephemeral --state-out out.img -- /bin/sh -c 'exit 3'
	assert_failure 3
	[ ! -e out.img ]
	run sbx-run --ephemeral --limits output_bytes=10 --state-out out.img -- "$GUESTS/meter_hog" flood
	assert_failure 124
	[ ! -e out.img ]
}
