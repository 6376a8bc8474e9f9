#!/usr/bin/env bats
# sbx-snap and sbx-restore: snapshots of running guests, restore into new leases.
load helpers

STEPS=60

# request + fund (+ activate with "active") a lease; prints its id
lease_new() {
	local image=$1 mode=$2
	shift 2
	local out
	out=$(sbx-lease request --image "$image" --escrow 10 "$@" |
		sbx-lease fund --amount 10 --evidence -)
	if [ "$mode" = active ]; then
		out=$(printf '%s' "$out" | sbx-lease activate --evidence -)
	fi
	printf '%s' "$out" | jq -r .lease.id
}

lease_state() { sbx-lease show "$1" | jq -r .lease.state; }
lease_seq() { sbx-lease show "$1" | jq -r .lease.seq; }
head_of() { sbx-lease log "$1" | tail -n 1; }

# start sbx-run on lease $1 in the background; wait until the guest made progress
run_bg() {
	local id=$1
	shift
	sbx-run --lease "$id" -- "$@" >"$BATS_TEST_TMPDIR/src.out" 2>"$BATS_TEST_TMPDIR/src.err" &
	SRC_PID=$!
	local ns="$SBX_STORE/ns/$id"
	for _ in $(seq 1 200); do
		[ -f "$ns/steps.log" ] && [ "$(wc -l <"$ns/steps.log")" -ge 2 ] && return 0
		[ -f "$ns/ready" ] && return 0
		sleep 0.05
	done
	return 1
}

# a snapshot of the steps guest taken mid-run, source stopped; sets SRC and DIGEST
snapshot_mid_run() {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M "$@")
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS"
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
}

@test "workflow: run, snapshot, settle/expire/destroy source, restore into a new lease, finish identically" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS")
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS"
	run sbx-snap take "$SRC"
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	[ "$(printf '%s' "$output" | jq -r .receipt.edge)" = snapshot ]
	[ "$(printf '%s' "$output" | jq -r .chunks)" -ge 1 ]
	# the source goes on after a snapshot without --stop and finishes by itself
	wait "$SRC_PID"
	[ "$(cat "$BATS_TEST_TMPDIR/src.out")" = "$want" ]
	# settle, expire, destroy the source
	head_of "$SRC" | sbx-lease settle "$SRC" --evidence - | sbx-lease expire --evidence - |
		sbx-lease destroy --evidence - >/dev/null
	[ "$(lease_state "$SRC")" = Destroyed ]
	run sbx-snap verify "$DIGEST"
	assert_success
	assert_output --partial '"verified":true'
	# a new funded target continues from the snapshot
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT" --result "$BATS_TEST_TMPDIR/res.json"
	assert_success
	assert_output "$want"
	[ "$(wc -l <"$SBX_STORE/ns/$TGT/steps.log")" -eq "$STEPS" ]
	sbx-lease log "$TGT" | jq -r .edge | grep -qx restore
	head_of "$TGT" | sbx-lease settle "$TGT" --evidence - | sbx-lease expire --evidence - |
		sbx-lease destroy --evidence - >/dev/null
	[ "$(lease_state "$TGT")" = Destroyed ]
	# every receipt of both leases verifies; the source id stays dead
	run sbx-lease verify
	assert_success
	assert_output --partial '"ok":true'
	run sbx-lease fund "$SRC" --amount 1 --evidence <(head_of "$SRC")
	assert_failure
}

@test "restore of a snapshot taken with --stop finishes with the uninterrupted output" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS")
	snapshot_mid_run
	lines=$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")
	[ "$lines" -lt "$STEPS" ]
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_output "$want"
	[ "$(lease_state "$TGT")" = Active ]
	# a second restore target gets the same result from the same snapshot
	TGT2=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT2"
	assert_success
	assert_output "$want"
	cmp "$SBX_STORE/ns/$TGT/steps.log" "$SBX_STORE/ns/$TGT2/steps.log"
}

@test "every restore precondition is refused by name and changes nothing" {
	snapshot_mid_run
	check_refused() { # target, expected message, sbx-run options
		local seq before t=$1 m=$2
		shift 2
		before=$(sbx-lease show "$t" | jq -c '.lease | {state, seq, head, snapshot_bytes}')
		run sbx-restore "$DIGEST" --lease "$t" "$@"
		assert_failure
		assert_output --partial "$m"
		[ "$(sbx-lease show "$t" | jq -c '.lease | {state, seq, head, snapshot_bytes}')" = "$before" ]
		[ -z "$(ls -A "$SBX_STORE/ns/$t" 2>/dev/null)" ]
	}
	check_refused "$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)" "restore needs Funded"
	req=$(sbx-lease request --image "$GUESTS/snap_steps" --escrow 10 | jq -r .lease.id)
	check_refused "$req" "restore needs Funded"
	check_refused "$(lease_new "$GUESTS/snap_steps" funded --principal mallory --limits namespace_bytes=64M)" "principal differs"
	check_refused "$(lease_new "$GUESTS/snap_steps" funded --host-program other --limits namespace_bytes=64M)" "host program differs"
	check_refused "$(lease_new "$GUESTS/snap_heap" funded --limits namespace_bytes=64M)" "image hash differs"
	check_refused "$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=4096)" "namespace bytes"
	# all or nothing: a run that fails after the checks (its set-up, its program)
	# leaves the target Funded and uncharged, exit 125 with the error
	F=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	check_refused "$F" "/ns is the lease namespace" --mount bind:/:/ --mount tmpfs:none:/ns
	assert_equal "$status" 125
	check_refused "$F" "is not lease $F's image" --result "$BATS_TEST_TMPDIR/r.json" -- /bin/true
	assert_equal "$status" 125
	[ "$(jq -r .error "$BATS_TEST_TMPDIR/r.json")" != null ]
	run sbx-restore 0000000000000000000000000000000000000000000000000000000000000000 --lease "$req"
	assert_failure
	assert_output --partial "no such snapshot"
	run sbx-restore "not-a-digest" --lease "$req"
	assert_failure
	assert_output --partial "not a snapshot digest"
}

@test "a restore that fails during the rebuild exits 125 with the error and leaves the target as it was" {
	snapshot_mid_run
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	before=$(sbx-lease show "$TGT" | jq -c '.lease | {state, usage, seq}')
	SBX_FAULT=restore-rebuild:fail run sbx-restore "$DIGEST" --lease "$TGT" \
		--result "$BATS_TEST_TMPDIR/r.json"
	assert_equal "$status" 125
	assert_output --partial "failure injected after the memory was rebuilt"
	jq -r .error "$BATS_TEST_TMPDIR/r.json" | grep -q "failure injected after the memory was rebuilt"
	# Funded, uncharged, its log unchanged, and no namespace cell of the snapshot left
	assert_equal "$(sbx-lease show "$TGT" | jq -c '.lease | {state, usage, seq}')" "$before"
	assert_equal "$(lease_state "$TGT")" Funded
	[ -z "$(ls -A "$SBX_STORE/ns/$TGT" 2>/dev/null)" ]
	# and the same target then restores
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
}

@test "a corrupted chunk, a wrong manifest length and a missing chunk are refused" {
	snapshot_mid_run
	dir="$SBX_STORE/snapshots/$DIGEST"
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	# corrupted chunk
	cp "$dir/000000" "$BATS_TEST_TMPDIR/c0"
	printf 'X' | dd of="$dir/000000" bs=1 seek=100 conv=notrunc 2>/dev/null
	run sbx-snap verify "$DIGEST"
	assert_failure
	assert_output --partial "digest"
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_failure
	[ "$(lease_state "$TGT")" = Funded ]
	cp "$BATS_TEST_TMPDIR/c0" "$dir/000000"
	# wrong manifest length (u64 at byte 32): its low byte changed (a fixed
	# value was the length's own one time in 256)
	cp "$dir/manifest" "$BATS_TEST_TMPDIR/m"
	low=$(od -An -tu1 -j32 -N1 "$dir/manifest")
	printf "\\$(printf %o $(((low + 1) % 256)))" | dd of="$dir/manifest" bs=1 seek=32 conv=notrunc 2>/dev/null
	cmp -s "$dir/manifest" "$BATS_TEST_TMPDIR/m" && false
	run sbx-snap verify "$DIGEST"
	assert_failure
	cp "$BATS_TEST_TMPDIR/m" "$dir/manifest"
	# truncated manifest
	head -c 40 "$BATS_TEST_TMPDIR/m" >"$dir/manifest"
	run sbx-snap verify "$DIGEST"
	assert_failure
	assert_output --partial "exactly 44"
	cp "$BATS_TEST_TMPDIR/m" "$dir/manifest"
	# missing chunk
	mv "$dir/000000" "$BATS_TEST_TMPDIR/c0"
	run sbx-snap verify "$DIGEST"
	assert_failure
	assert_output --partial "missing"
	mv "$BATS_TEST_TMPDIR/c0" "$dir/000000"
	run sbx-snap verify "$DIGEST"
	assert_success
}

@test "a snapshot over namespace_bytes is refused and nothing is written" {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=100K)
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS"
	seq=$(lease_seq "$SRC")
	run sbx-snap take "$SRC"
	assert_failure
	assert_output --partial "namespace_bytes"
	assert_output --partial "nothing written"
	run sbx-snap list "$SRC"
	assert_output "[]"
	[ -z "$(ls "$SBX_STORE/snapshots" | grep -v '^\.')" ]
	wait "$SRC_PID"
	sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
}

@test "a threaded guest snapshotted with --stop at a random point finishes identically after restore" {
	for mode in turns spin gap; do
		want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_thread" 30 "$mode")
		SRC=$(lease_new "$GUESTS/snap_thread" active --limits namespace_bytes=64M)
		run_bg "$SRC" "$GUESTS/snap_thread" 30 "$mode"
		sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
		run sbx-snap take "$SRC" --stop
		assert_success
		DIGEST=$(printf '%s' "$output" | jq -r .digest)
		wait "$SRC_PID" || true
		[ "$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")" -lt 30 ]
		run sbx-snap show "$DIGEST"
		assert_success
		[ "$(printf '%s' "$output" | jq -r .threads)" -eq "$([ $mode = spin ] && echo 4 || echo 3)" ]
		TGT=$(lease_new "$GUESTS/snap_thread" funded --limits namespace_bytes=64M)
		run sbx-restore "$DIGEST" --lease "$TGT"
		assert_success
		assert_output "$want"
		[ "$(wc -l <"$SBX_STORE/ns/$TGT/steps.log")" -eq 30 ]
	done
}

@test "a threaded guest holding a pipe, or whose worker forked a child, is snapshotted and restored" {
	for mode in pipe child; do
		want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_thread" 30 "$mode")
		SRC=$(lease_new "$GUESTS/snap_thread" active --limits namespace_bytes=64M)
		run_bg "$SRC" "$GUESTS/snap_thread" 30 "$mode"
		run sbx-snap take "$SRC" --stop
		assert_success
		DIGEST=$(printf '%s' "$output" | jq -r .digest)
		wait "$SRC_PID" || true
		TGT=$(lease_new "$GUESTS/snap_thread" funded --limits namespace_bytes=64M)
		run sbx-restore "$DIGEST" --lease "$TGT"
		assert_success
		# every thread took all its turns, in the source and then the target
		[ "$(wc -l <"$SBX_STORE/ns/$TGT/steps.log")" -eq 30 ]
		[ $mode = child ] || assert_output "$want"
	done
}

@test "a threaded guest snapshotted without --stop runs on to its own output" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_thread" 30)
	SRC=$(lease_new "$GUESTS/snap_thread" active --limits namespace_bytes=64M)
	run_bg "$SRC" "$GUESTS/snap_thread" 30
	run sbx-snap take "$SRC"
	assert_success
	run sbx-snap take "$SRC"
	assert_success
	wait "$SRC_PID"
	[ "$(cat "$BATS_TEST_TMPDIR/src.out")" = "$want" ]
}

@test "take is refused for another principal and a lease without a guest" {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	run sbx-snap take "$SRC"
	assert_failure
	assert_output --partial "no running guest"
	run sbx-snap take "$SRC" --principal mallory
	assert_failure
	assert_output --partial "belongs to principal"
}

@test "a refused snapshot harms nothing: the guest runs on to its own output, the lease stays Active" {
	for mode in shared-rw deleted fifo pipe-rdwr orphan; do
		want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS" -1 "$mode")
		SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
		run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS" -1 "$mode"
		run sbx-snap take "$SRC"
		assert_failure
		assert_output --partial "$([ $mode = orphan ] && echo "outlived its parent" || echo "not supported")"
		run sbx-snap take "$SRC" --stop
		assert_failure
		[ "$(lease_state "$SRC")" = Active ]
		wait "$SRC_PID"
		[ "$(cat "$BATS_TEST_TMPDIR/src.out")" = "$want" ]
		sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
	done
}

@test "a run carrying a --state-in/--state-out channel is refused a snapshot and delivers its result" {
	cd "$BATS_TEST_TMPDIR"
	printf 'input-bytes' >in.img
	SRC=$(lease_new /bin/sh active)
	sbx-run --lease "$SRC" --state-in in.img --state-out out.img -- /bin/sh -c \
		'touch /ns/ready; sleep 1; exec "$0" copy' "$GUESTS/state_echo" >src.out 2>src.err &
	SRC_PID=$!
	for _ in $(seq 1 200); do [ -f "$SBX_STORE/ns/$SRC/ready" ] && break; sleep 0.05; done
	run sbx-snap take "$SRC"
	assert_failure
	assert_output --partial "--state-in/--state-out channel"
	[ "$(lease_state "$SRC")" = Active ]
	wait "$SRC_PID"
	assert_equal "$(cat out.img)" "got 11:input-bytes"
	sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
}

@test "a take while the sandbox is being set up says try again; the next one is taken" {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	sbx-run --lease "$SRC" -- "$GUESTS/snap_steps" "$STEPS" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	SRC_PID=$!
	taken=
	for _ in $(seq 1 400); do
		out=$(sbx-snap take "$SRC" 2>&1) && { taken=1; break; }
		case $out in
		*"has no running guest"* | *"not started yet: try again"*) ;;
		*) echo "$out" >&2; false ;;
		esac
	done
	[ -n "$taken" ]
	wait "$SRC_PID"
	[ "$(lease_state "$SRC")" = Active ]
}

@test "a shared anonymous mapping is snapshotted once and mapped shared again" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS" -1 shared-anon)
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS" -1 shared-anon
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
	run sbx-snap show "$DIGEST"
	assert_success
	assert_equal "$(printf '%s' "$output" | jq -c '[.shared_memory[].kind]')" '["anonymous"]'
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	[ "$(printf '%s\n' "$output" | tail -n 1)" = "$want" ]
}

@test "a read-only shared file mapping is snapshotted by content and mapped shared again" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS" -1 shared-ro)
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS" -1 shared-ro
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	[ "$(printf '%s\n' "$output" | tail -n 1)" = "$want" ]
}

@test "libarchive is loaded only to export or import: no tool links it; without it they say so" {
	for t in "$SBX_BUILD"/bin/sbx-*; do
		run ldd "$t"
		assert_success
		refute_output --partial libarchive
	done
	mkdir "$BATS_TEST_TMPDIR/noarchive"
	: >"$BATS_TEST_TMPDIR/noarchive/libarchive.so.13"
	printf 'not a tar' >"$BATS_TEST_TMPDIR/bad.tar"
	LD_LIBRARY_PATH=$BATS_TEST_TMPDIR/noarchive run sbx-snap import "$BATS_TEST_TMPDIR/bad.tar"
	assert_failure 1
	assert_output --partial "sbx-snap: error: snapshot archive: cannot load libarchive: "
	run sbx-snap import "$BATS_TEST_TMPDIR/bad.tar"
	assert_failure 1
	refute_output --partial "cannot load libarchive"
}

@test "list, show, export and import; hostile archives are refused" {
	snapshot_mid_run
	run sbx-snap list
	assert_success
	[ "$(printf '%s' "$output" | jq -r '.[0].digest')" = "$DIGEST" ]
	run sbx-snap show "$DIGEST"
	assert_success
	[ "$(printf '%s' "$output" | jq -r .lease)" = "$SRC" ]
	[ "$(printf '%s' "$output" | jq -r .cwd)" = /ns ]
	run sbx-snap export "$DIGEST" -o "$BATS_TEST_TMPDIR/s.tar"
	assert_success
	other="$BATS_TEST_TMPDIR/other"
	run sbx-snap --store "$other" import "$BATS_TEST_TMPDIR/s.tar"
	assert_success
	run sbx-snap --store "$other" verify "$DIGEST"
	assert_success
	# options on both sides of the verb and its operand, "--" before an operand
	after=$(sbx-snap show "$DIGEST" --format text --store "$other")
	run sbx-snap --format=text --store "$other" show -- "$DIGEST"
	assert_success
	assert_output "$after"
	run sbx-snap --stop --store "$other" show "$DIGEST"
	assert_failure 2
	assert_line --index 0 "sbx-snap: error: --stop: not an option of this command"
	run sbx-snap --store "$other" import "$BATS_TEST_TMPDIR/s.tar"
	assert_failure
	assert_output --partial "already"
	# hostile archives
	mk() { python3 - "$BATS_TEST_TMPDIR/s.tar" "$BATS_TEST_TMPDIR/bad.tar" "$1" <<'EOF'
import io, sys, tarfile
src, dst, kind = sys.argv[1:4]
inp = tarfile.open(src)
out = tarfile.open(dst, "w", format=tarfile.PAX_FORMAT)
members = inp.getmembers()
for m in members:
    data = inp.extractfile(m).read()
    name = m.name
    if kind == "missing" and name.endswith("/000000"):
        continue
    if kind == "corrupt" and name.endswith("/000000"):
        data = bytes([data[0] ^ 1]) + data[1:]
    if kind == "oversized" and name.endswith("/000000"):
        data = data + b"x" * 70000
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    out.addfile(ti, io.BytesIO(data))
if kind == "traversal":
    ti = tarfile.TarInfo("../../escape")
    ti.size = 1
    out.addfile(ti, io.BytesIO(b"x"))
if kind == "symlink":
    ti = tarfile.TarInfo(members[0].name.split("/")[0] + "/000999")
    ti.type = tarfile.SYMTYPE
    ti.linkname = "/etc/passwd"
    out.addfile(ti)
out.close()
EOF
	}
	for kind in traversal symlink oversized missing corrupt; do
		mk "$kind"
		run sbx-snap --store "$BATS_TEST_TMPDIR/hostile" import "$BATS_TEST_TMPDIR/bad.tar"
		assert_failure
		[ -z "$(ls "$BATS_TEST_TMPDIR/hostile/snapshots")" ]
	done
	[ ! -e "$BATS_TEST_TMPDIR/escape" ]
}

@test "sbx-run --snapshot-every-batches takes snapshots on the batch clock; each restores to the same output" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS")
	sbx-lease clock manual >/dev/null
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	sbx-run --lease "$SRC" --snapshot-every-batches 1 -- "$GUESTS/snap_steps" "$STEPS" \
		>"$BATS_TEST_TMPDIR/src.out" &
	pid=$!
	for _ in $(seq 1 100); do
		[ -f "$SBX_STORE/ns/$SRC/steps.log" ] && break
		sleep 0.05
	done
	sbx-lease tick 1 >/dev/null
	for _ in $(seq 1 100); do
		[ "$(sbx-snap list "$SRC" | jq length)" -ge 1 ] && break
		sleep 0.05
	done
	wait "$pid"
	[ "$(cat "$BATS_TEST_TMPDIR/src.out")" = "$want" ]
	DIGEST=$(sbx-snap list "$SRC" | jq -r '.[0].digest')
	sbx-lease log "$SRC" | jq -r .snapshot | grep -qx "$DIGEST"
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_output "$want"
}

@test "sbx-run --snapshot-on-exit-signal saves a guest about to die; the restore finishes its work" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS")
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	# the guest sends itself SIGTERM (uncaught) at step 15
	run sbx-run --lease "$SRC" --snapshot-on-exit-signal -- "$GUESTS/snap_steps" "$STEPS" 15
	assert_failure 143
	DIGEST=$(sbx-snap list "$SRC" | jq -r '.[0].digest')
	[ -n "$DIGEST" ] && [ "$DIGEST" != null ]
	[ "$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")" -eq 16 ]
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_output "$want"
	[ "$(wc -l <"$SBX_STORE/ns/$TGT/steps.log")" -eq "$STEPS" ]
}

@test "sbx-run --snapshot-on-exit-signal saves a threaded guest whose worker is about to die" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_thread" 30)
	SRC=$(lease_new "$GUESTS/snap_thread" active --limits namespace_bytes=64M)
	# a worker thread sends itself SIGTERM (uncaught) at turn 10
	run sbx-run --lease "$SRC" --snapshot-on-exit-signal -- "$GUESTS/snap_thread" 30 term
	assert_failure 143
	DIGEST=$(sbx-snap list "$SRC" | jq -r '.[0].digest')
	[ -n "$DIGEST" ] && [ "$DIGEST" != null ]
	[ "$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")" -eq 11 ]
	[ "$(sbx-snap show "$DIGEST" | jq -r .threads)" -eq 3 ]
	TGT=$(lease_new "$GUESTS/snap_thread" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_output "$want"
	[ "$(wc -l <"$SBX_STORE/ns/$TGT/steps.log")" -eq 30 ]
}

@test "restore continues under the target's bounds; a state that cannot fit is refused by dimension" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" "$STEPS" -1 limits | head -n 1)
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M,memory=1G,table_elements=4096)
	run_bg "$SRC" "$GUESTS/snap_steps" "$STEPS" -1 limits
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
	# the target's smaller bounds are what the restored guest runs under:
	# descriptors table_elements + 1; no address-space limit (memory is metered on pages)
	TGT=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M,memory=256M,table_elements=64)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	[ "${lines[0]}" = "$want" ]
	[ "${lines[1]}" = "as 18446744073709551615 nofile 65" ]
	# a state that does not fit is refused before anything changes
	for lim in table_elements=2 memory=64K; do
		T=$(lease_new "$GUESTS/snap_steps" funded --limits namespace_bytes=64M,$lim)
		run sbx-restore "$DIGEST" --lease "$T"
		assert_failure
		assert_output --partial "${lim%%=*}: the snapshot"
		[ "$(lease_state "$T")" = Funded ]
		[ -z "$(ls -A "$SBX_STORE/ns/$T" 2>/dev/null)" ]
	done
}

@test "a snapshot records the supervisor's trace head; show reports it" {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
	tr="$BATS_TEST_TMPDIR/src.trace"
	sbx-run --lease "$SRC" --trace "$tr" --trace-level all -- "$GUESTS/snap_steps" "$STEPS" \
		>"$BATS_TEST_TMPDIR/src.out" 2>"$BATS_TEST_TMPDIR/src.err" &
	SRC_PID=$!
	for _ in $(seq 1 200); do
		[ -f "$SBX_STORE/ns/$SRC/steps.log" ] && [ "$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")" -ge 2 ] && break
		sleep 0.05
	done
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
	run sbx-snap show "$DIGEST"
	assert_success
	head=$(printf '%s' "$output" | jq -r .trace_head)
	seq=$(printf '%s' "$output" | jq -r .trace_seq)
	[ "$seq" -gt 0 ]
	# the chain hash of the trace line written last before the boundary
	# (line 1 is the header, then seq events); later lines go on from it
	[ "$(sed -n "$((seq + 1))p" "$tr" | jq -r .h)" = "$head" ]
	[ "$(wc -l <"$tr")" -gt "$((seq + 1))" ]
	sbx-trace verify "$tr" >/dev/null
	# a run without a trace records none
	snapshot_mid_run
	run sbx-snap show "$DIGEST"
	assert_success
	[ "$(printf '%s' "$output" | jq -r .trace_head)" = "$(printf '0%.0s' $(seq 1 64))" ]
	[ "$(printf '%s' "$output" | jq -r .trace_seq)" = 0 ]
}

@test "a take killed while writing chunks or the manifest leaves no snapshot and no receipt" {
	for fault in snap-chunk:2 snap-manifest; do
		SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M)
		SBX_FAULT=$fault sbx-run --lease "$SRC" -- "$GUESTS/snap_steps" "$STEPS" \
			>"$BATS_TEST_TMPDIR/src.out" 2>"$BATS_TEST_TMPDIR/src.err" &
		SRC_PID=$!
		for _ in $(seq 1 200); do
			[ -f "$SBX_STORE/ns/$SRC/steps.log" ] && [ "$(wc -l <"$SBX_STORE/ns/$SRC/steps.log")" -ge 2 ] && break
			sleep 0.05
		done
		run sbx-snap take "$SRC"
		assert_failure
		# not 'run wait': run's subshell can wait only for a job already reaped
		st=0
		wait "$SRC_PID" || st=$?
		[ "$st" -eq 137 ]
		# the supervisor died mid-write: nothing under a digest, no receipt
		[ -z "$(ls "$SBX_STORE/snapshots" | grep -E '^[0-9a-f]{64}$')" ]
		[ "$(sbx-snap list "$SRC")" = "[]" ]
		! sbx-lease log "$SRC" | jq -r .edge | grep -qx snapshot || false
		[ "$(sbx-lease show "$SRC" | jq -r '.lease.snapshot_bytes // 0')" = 0 ]
	done
}

@test "sbx-snap and sbx-restore take options on both sides of the verb and the digest" {
	zero=0000000000000000000000000000000000000000000000000000000000000000
	run sbx-snap list --store "$SBX_STORE" --format=json
	assert_success
	assert_output "[]"
	run sbx-snap --format json --store "$SBX_STORE" list
	assert_success
	assert_output "[]"
	# parsed in full on both sides: the refusal is the missing snapshot's, not usage
	run sbx-restore --store "$SBX_STORE" "$zero" --lease L0000000000000000 --trace-level exec
	assert_failure 1
	refute_output --partial usage
	run sbx-restore --lease L0000000000000000 "$zero" --max-procs 8 -- /bin/true
	assert_failure 1
	refute_output --partial usage
	run sbx-restore "$zero" --lease L0000000000000000 --ephemeral
	assert_failure 125
	assert_line --index 0 "sbx-restore: error: --ephemeral: unknown option"
	assert_output --partial "usage: sbx-restore"
	run sbx-restore --lease L0000000000000000 "$zero" --trace-level
	assert_failure 125
	assert_line --index 0 "sbx-restore: error: --trace-level: needs a value"
	run sbx-snap list --frob
	assert_failure 2
	assert_line --index 0 "sbx-snap: error: --frob: unknown option"
	run sbx-snap -o
	assert_failure 2
	assert_line --index 0 "sbx-snap: error: -o: needs a value"
}

# a control request straight to the run's socket, past sbx-snap; prints the reply
ctl() {
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.recv(65536).decode())' "$SBX_STORE/run/$1.sock" "$2"
}

@test "a snapshot is the renter's: without its key, unsigned or forged, it is refused and nothing is taken" {
	SRC=$(lease_new "$GUESTS/snap_steps" active --limits namespace_bytes=64M --principal alice)
	run_bg "$SRC" "$GUESTS/snap_steps" 1000
	run env XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/other" sbx-snap take "$SRC" --principal alice
	assert_failure
	assert_output --partial "sbx-snap: error: principal alice: not signed by its key"
	run ctl "$SRC" '{"op":"snapshot","stop":false}'
	assert_output --partial "not signed by the lease's renter"
	run ctl "$SRC" '{"op":"snapshot","stop":false,"renter_sig":5}'
	assert_output --partial "not signed by the lease's renter"
	pub=$(cut -c65-128 "$XDG_CONFIG_HOME/sbx/principals/alice")
	run ctl "$SRC" "{\"op\":\"snapshot\",\"stop\":false,\"renter\":\"$pub\",\"renter_sig\":\"$(printf '%0128d' 0)\"}"
	assert_output --partial "principal alice: not signed by its key"
	# a malformed one is no signature: the run's own key does not stand in for it
	run ctl "$SRC" "{\"op\":\"snapshot\",\"stop\":false,\"renter\":\"$pub\",\"renter_sig\":\"x\"}"
	assert_output --partial "principal alice: not signed by its key (a malformed signature)"
	sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
	# the renter's own take, signed by its key, is made
	run sbx-snap take "$SRC" --principal alice --stop
	assert_success
	assert_equal "$(printf '%s' "$output" | jq -r .receipt.renter)" "$pub"
	wait "$SRC_PID" || true
	assert_equal "$(sbx-lease log "$SRC" | jq -r .edge | grep -cx snapshot)" 1
}

@test "descriptor objects are snapshotted and restored: eventfd, timerfd, signalfd, epoll, socket pairs with queued bytes, listeners, a pty" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_fdkinds" all)
	SRC=$(lease_new "$GUESTS/snap_fdkinds" active --limits namespace_bytes=64M)
	run_bg "$SRC" "$GUESTS/snap_fdkinds" all
	run sbx-snap take "$SRC" --stop
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$SRC_PID" || true
	run sbx-snap show "$DIGEST"
	assert_success
	kinds=$(printf '%s' "$output" | jq -r '[.fds[] | select(.fd > 2) | .kind] | join(" ")')
	echo "kinds: $kinds"
	for k in eventfd timerfd signalfd epoll unix-socket tcp-listener pty-master pty-slave; do
		[[ " $kinds " == *" $k "* ]]
	done
	[ "$(printf '%s' "$output" | jq -r '.fds[] | select(.fd == 40) | .kind')" = eventfd ]
	TGT=$(lease_new "$GUESTS/snap_fdkinds" funded --limits namespace_bytes=64M)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_output "$want"
}

@test "a descriptor a snapshot cannot hold is refused by name and harms nothing: the guest runs on, the lease stays Active" {
	# every mode's native run (2 s each) goes on at once, each in its own directory
	declare -A native
	for mode in tcp-established tcp-pending unix-pending scm-rights pty-buffered dgram-unconnected \
		udp pty-orphan epoll-stale sysv-partial sysv-unattached inotify; do
		mkdir "$BATS_TEST_TMPDIR/nat-$mode"
		(cd "$BATS_TEST_TMPDIR/nat-$mode" && "$GUESTS/snap_fdkinds" "$mode" >"../nat-$mode.out") &
		native[$mode]=$!
	done
	cd "$BATS_TEST_TMPDIR"
	for mc in "tcp-established:an established TCP connection cannot be snapshotted" \
		"tcp-pending:connection(s) not yet accepted" \
		"unix-pending:a Unix listener with 1 connection(s) not yet accepted" \
		"scm-rights:descriptors in flight in a Unix socket are not supported" \
		"pty-buffered:byte(s) buffered in the pty's master side" \
		"dgram-unconnected:datagrams queued in an unconnected Unix socket" \
		"udp:only listening TCP sockets are supported" \
		"pty-orphan:a pty slave whose master the run does not hold" \
		"epoll-stale:which no longer holds the watched file" \
		"sysv-partial:SysV segment 0 is mapped in part" \
		"sysv-unattached:SysV segment 0 exists but is not attached" \
		"inotify:anon_inode:inotify cannot be snapshotted"; do
		mode=${mc%%:*} msg=${mc#*:}
		wait "${native[$mode]}"
		want=$(cat "nat-$mode.out")
		SRC=$(lease_new "$GUESTS/snap_fdkinds" active --limits namespace_bytes=64M)
		run_bg "$SRC" "$GUESTS/snap_fdkinds" "$mode"
		run sbx-snap take "$SRC" --stop
		assert_failure
		assert_output --partial "sbx-snap: error: "
		assert_output --partial "$msg"
		run sbx-snap take "$SRC"
		assert_failure
		[ "$(lease_state "$SRC")" = Active ]
		wait "$SRC_PID"
		[ "$(cat "$BATS_TEST_TMPDIR/src.out")" = "$want" ]
		sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
		rm -f "$BATS_TEST_TMPDIR/ready"
	done
}
