#!/usr/bin/env bats
# sbx_call: one callback in a guest running the same executable, its graph
# written back; every failure leaves the host's objects unchanged.
load helpers

setup() {
	sbx_setup_store
	# the guest runs unprivileged: its bind source must be reachable by anyone
	SRC=$(mktemp -d /tmp/sbx-call.XXXXXX)
	chmod 755 "$SRC"
	printf hello >"$SRC/hello.txt"
	printf other >"$SRC/other.txt"
	chmod 644 "$SRC"/*.txt
}

teardown() {
	rm -rf "$SRC"
}

@test "Readfile demo: the host sees builds=1 metadata=hello, the guest opened and read /src/hello.txt" {
	run "$GUESTS/readfile" "$SRC" "$BATS_TEST_TMPDIR/readfile.trace"
	assert_success
	assert_line "builds=1 metadata=hello"
	assert_line --partial "guest openat /src/hello.txt"
	# the callback ran once, in the guest (its own pid namespace), and the host went on
	assert_line --regexp "^host pid [0-9]+ continues; the callback ran as pid [1-9] in the guest$"
	run jq -r 'select(.ev == "sys" and .path == "/src/hello.txt") | .name' "$BATS_TEST_TMPDIR/readfile.trace"
	assert_output "openat"
	run sbx-trace files --format json "$BATS_TEST_TMPDIR/readfile.trace"
	assert_success
	assert_output --partial "/src/hello.txt"
}

@test "the call's trace records the guest's open of /src/hello.txt" {
	run "$GUESTS/call_modes" trace "$SRC" "$BATS_TEST_TMPDIR/call.trace"
	assert_success
	assert_output "builds=1 metadata=hello errors=0"
	run jq -r 'select(.ev == "sys" and .name == "openat") | .path' "$BATS_TEST_TMPDIR/call.trace"
	assert_line "/src/hello.txt"
	run sbx-trace verify "$BATS_TEST_TMPDIR/call.trace"
	assert_success
}

@test "the guest ran the program's constructors but not its main" {
	run "$GUESTS/call_modes" entry "$SRC"
	assert_success
	assert_line "guest: constructors=1 main=0"
}

@test "a 100000-node list crosses the boundary and back" {
	run "$GUESTS/call_modes" list "$SRC" 100000
	assert_success
	# sum of 1..100000, plus the appended node's -1
	assert_output "nodes=100001 sum=5000049999"
}

@test "a missing file is reported through the context's error slice" {
	rm "$SRC/hello.txt"
	run "$GUESTS/call_modes" readfile "$SRC"
	assert_success
	assert_output "builds=1 metadata=(null) errors=1"
}

@test "a guest abort() after changing everything leaves the host graph unchanged" {
	run "$GUESTS/call_modes" abort "$SRC"
	assert_failure 1
	assert_line "call_modes: error: sbx_call: guest killed by signal 6 (Aborted)"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "a guest exiting non-zero changes nothing on the host" {
	run "$GUESTS/call_modes" exit "$SRC"
	assert_failure 1
	assert_line "call_modes: error: sbx_call: guest exited with status 3"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "a result forging a function pointer is refused and changes nothing" {
	run "$GUESTS/call_modes" evilfn "$SRC"
	assert_failure 1
	assert_line --regexp "^call_modes: error: state image: byte [0-9]+: function pointer is not a function of this executable"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "a clean exit without a result, or with a malformed one, changes nothing" {
	run "$GUESTS/call_modes" noresult "$SRC"
	assert_failure 1
	assert_line "call_modes: error: state result: missing: the guest wrote no result"
	assert_line "builds=0 metadata=(null) errors=0"
	run "$GUESTS/call_modes" garbage "$SRC"
	assert_failure 1
	assert_line "call_modes: error: state image: digest mismatch (truncated or corrupted)"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "an inspector rewrite of the opened path is what the callback reads" {
	run "$GUESTS/call_modes" rewrite "$SRC"
	assert_success
	assert_line "builds=1 metadata=other errors=0"
	assert_line "rewrites=1"
}

@test "a --policy file: a denied open reaches the callback as its errno, a rewrite as the other file" {
	printf '{"rules":[{"syscall":"openat","path":"/src/hello.txt","action":"deny","errno":"EACCES"}]}' \
		>"$BATS_TEST_TMPDIR/deny.json"
	run "$GUESTS/call_modes" policy "$SRC" "$BATS_TEST_TMPDIR/deny.json"
	assert_success
	assert_output "builds=1 metadata=(null) errors=1"
	printf '{"rules":[{"path":"/src/hello.txt","action":"rewrite","from":"/src/hello.txt","to":"/src/other.txt"}]}' \
		>"$BATS_TEST_TMPDIR/rw.json"
	run "$GUESTS/call_modes" policy "$SRC" "$BATS_TEST_TMPDIR/rw.json"
	assert_success
	assert_output "builds=1 metadata=other errors=0"
}

@test "under an Active lease of this image: metered, observed; another image's lease is refused" {
	id=$(sbx-lease request --image "$GUESTS/call_modes" --escrow 100 |
		sbx-lease fund --amount 100 --evidence - | sbx-lease activate --evidence - | jq -r .lease.id)
	run "$GUESTS/call_modes" lease "$SRC" "$id"
	assert_success
	assert_output "builds=1 metadata=hello errors=0"
	run sbx-lease show "$id"
	assert_success
	assert_equal "$(jq -r '.lease.state' <<<"$output")" Active
	[ "$(jq -r '.lease.usage.fuel' <<<"$output")" -gt 0 ]
	other=$(sbx-lease request --image /bin/true | sbx-lease fund --amount 1 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	run "$GUESTS/call_modes" lease "$SRC" "$other"
	assert_failure 1
	assert_line --partial "is not lease $other's image"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "a PIE executable is refused before anything runs" {
	run "$GUESTS/call_modes_pie" readfile "$SRC"
	assert_failure 1
	assert_line --partial "position-independent executable (ET_DYN): sbx_call needs a non-PIE ET_EXEC image"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "a callback that is not a function symbol of the ELF is refused" {
	run "$GUESTS/call_modes" badfn "$SRC"
	assert_failure 1
	assert_line --regexp "call_modes: error: sbx_call: callback 0x[0-9a-f]+ is not a function symbol of .*/call_modes$"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "an executable replaced on disk while running is refused" {
	cp "$GUESTS/call_modes" "$BATS_TEST_TMPDIR/cm"
	cp "$GUESTS/readfile" "$BATS_TEST_TMPDIR/other"
	run "$BATS_TEST_TMPDIR/cm" swap "$SRC" "$BATS_TEST_TMPDIR/other"
	assert_failure 1
	assert_line --partial "the running executable was replaced or deleted on disk"
	assert_line "builds=0 metadata=(null) errors=0"
}

@test "typed state through sbx-run --state-in/--state-out uses the same image format" {
	cd "$BATS_TEST_TMPDIR"
	run "$GUESTS/call_state" make in.img
	assert_success
	run sbx-run --ephemeral --state-in in.img --state-out out.img -- "$GUESTS/call_state" guest
	assert_success
	run "$GUESTS/call_state" show out.img
	assert_success
	assert_output "runs=1 name=build self=cycle step=step log=1 [ran in the guest]"
	# a state image the guest cannot decode fails the run and writes no result
	head -c 40 /dev/urandom >bad.img
	run sbx-run --ephemeral --state-in bad.img --state-out bad-out.img -- "$GUESTS/call_state" guest
	assert_failure
	assert_output --partial "call_state: error: state image: digest mismatch"
	[ ! -e bad-out.img ]
}

# The invoker, and as root also an unprivileged user (nobody): sbx_call beside
# other work of the same host process.
invokers() {
	echo invoker
	[ "$(id -u)" != 0 ] || echo nobody
}

as_who() {
	local who=$1
	shift
	if [ "$who" = nobody ]; then
		$SBX_AS_NOBODY "$@"
	else
		"$@"
	fi
}

@test "two host threads call at once, 20 rounds each: every result right, nothing hangs, the host's handler stays" {
	for who in $(invokers); do
		run as_who "$who" "$GUESTS/call_host" pair "$SRC" 20
		assert_success
		assert_output "pair: 40 of 40 calls right; host handler kept"
	done
}

@test "while a call runs, the host's system(\"true\") in another thread returns 0, 20 of 20" {
	mkfifo -m 666 "$SRC/go"
	for who in $(invokers); do
		run as_who "$who" "$GUESTS/call_host" system "$SRC" 20
		assert_success
		assert_output "system: 20 of 20 returned 0; call right"
	done
}

@test "the calling thread's own child and a SIGTERM pending for the host stay the host's" {
	for who in $(invokers); do
		run as_who "$who" "$GUESTS/call_host" child "$SRC"
		assert_success
		assert_output "child: call right; own child reaped by us, status 7"
		run as_who "$who" "$GUESTS/call_host" pending "$SRC"
		assert_success
		assert_output "pending: call right; SIGTERM still pending"
	done
}

@test "a host with its stdin closed: the call's state fd does not land on the image fd" {
	for who in $(invokers); do
		run as_who "$who" "$GUESTS/call_host" nostdin "$SRC"
		assert_success
		assert_output "nostdin: call right"
	done
}

@test "a co-process that hangs up fails the call; the host's SIGPIPE disposition is untouched" {
	for who in $(invokers); do
		run as_who "$who" "$GUESTS/call_host" sigpipe "$SRC"
		assert_success
		assert_line "sigpipe: call failed; SIGPIPE default, not pending"
		assert_line --partial "inspector reply: missing"
	done
}

@test "a warm sandbox: many calls in one guest, isolated calls, a crash, a closed handle, two threads" {
	for who in $(invokers); do
		for mode in calls isolated crash dies closed threads; do
			run as_who "$who" "$GUESTS/call_warm" "$mode" 20
			assert_success
			assert_line "$mode ok"
		done
	done
	run "$GUESTS/call_warm" crash
	assert_line --partial "killed by signal 6"
	run "$GUESTS/call_warm" dies
	assert_line --partial "the warm guest ended"
	run "$GUESTS/call_warm" closed
	assert_line --partial "is not an open sandbox"
}
