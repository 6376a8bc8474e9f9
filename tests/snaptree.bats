#!/usr/bin/env bats
# The snaptree suite: guests snapshotted at a random point and restored in a new
# lease finish with their uninterrupted output (tests/snaptree/lib.bash).
load helpers
load snaptree/lib

@test "snaptree: counter" {
	snaptree_case counter
}

@test "snaptree: eventfd" {
	snaptree_case eventfd
}

@test "snaptree: timerfd" {
	snaptree_case timerfd
}

@test "snaptree: signalfd" {
	snaptree_case signalfd
}
