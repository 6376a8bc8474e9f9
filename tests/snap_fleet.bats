#!/usr/bin/env bats
# A process tree moves between hosts of a fleet (SPEC §8.4, §14): two host
# directories, one etcd store, one shared snapshot dir, as lease_fleet.bats.
load helpers
load snap_project

setup_file() {
	sbx_etcd_start
}

teardown_file() {
	sbx_etcd_stop
}

setup() {
	sbx_setup_store
	export SBX_STORE
	SBX_STORE=$(sbx_etcd_url "sf$BATS_TEST_NUMBER")
	export SBX_SNAPSHOT_DIR="$BATS_TEST_TMPDIR/shared"
	cd "$BATS_TEST_TMPDIR"
}

teardown() {
	[ -z "${RUN_PID:-}" ] || kill -9 "$RUN_PID" 2>/dev/null || true
}

# a command as simulated host $1 (its own directory and key)
on_host() {
	local h=$1
	shift
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host$h" "$@"
}

# request + fund (+ activate with "active") on host $1 a lease of image $2; prints its id
host_lease() {
	local out
	out=$(on_host "$1" sbx-lease request --image "$2" --escrow 10 --limits namespace_bytes=1G |
		on_host "$1" sbx-lease fund --amount 10 --evidence -)
	[ "$3" = active ] && out=$(printf '%s' "$out" | on_host "$1" sbx-lease activate --evidence -)
	printf '%s' "$out" | jq -r .lease.id
}

@test "make -j2 snapshotted with --stop mid-build on one host restores on another to the same objects and binary" {
	gen_project native
	(cd native && make -j2 >/dev/null)
	SRC=$(host_lease 0 /usr/bin/make active)
	ns="$BATS_TEST_TMPDIR/host0/ns/$SRC"
	gen_project "$ns"
	chmod -R a+rwX "$ns"
	on_host 0 sbx-run --lease "$SRC" -- /usr/bin/make -j2 >src.out 2>&1 &
	RUN_PID=$!
	for _ in $(seq 1 600); do
		[ "$(ls "$ns"/*.o 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	for _ in $(seq 1 50); do
		run on_host 0 sbx-snap take "$SRC" --stop
		[[ $output == *"no lease guest"* || $output == *"try again"* ]] || break
		sleep 0.1
	done
	[ "$status" -eq 0 ] || tail -n 20 src.out >&2
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	wait "$RUN_PID" || true
	RUN_PID=
	[ ! -e "$ns/prog" ]
	# the chunks are in the shared dir only; host 1 knows the snapshot from etcd
	[ -f "$SBX_SNAPSHOT_DIR/$DIGEST/manifest" ]
	[ ! -e "$BATS_TEST_TMPDIR/host0/snapshots/$DIGEST" ]
	run on_host 1 sbx-snap show "$DIGEST"
	assert_success
	printf '%s' "$output" | jq -r '.processes[].program' | grep -q '/cc1$\|-as$'
	[ "$(printf '%s' "$output" | jq '.processes | length')" -ge 3 ]
	TGT=$(host_lease 1 /usr/bin/make funded)
	run on_host 1 sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	for f in main.o m{1..12}.o prog; do
		cmp "native/$f" "$BATS_TEST_TMPDIR/host1/ns/$TGT/$f"
	done
	# the target ran on host 1: its edges signed by host 1's key, not host 0's
	key0=$(on_host 0 sbx-lease log "$SRC" | jq -r .signer | head -n 1)
	key1=$(on_host 1 sbx-lease log "$TGT" | jq -r .signer | sort -u)
	[ "$key1" != "$key0" ]
	assert_equal "$(on_host 1 sbx-lease log "$TGT" | jq -r .edge | head -n 3 | tr '\n' ' ')" "request fund restore "
	run on_host 0 sbx-lease verify
	assert_success
}
