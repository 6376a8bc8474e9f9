#!/usr/bin/env bats
# Several hosts, one etcd store (SPEC §14): the 32-slot rule, chains and signatures
# hold across hosts, through the loss of the leader; without quorum commands fail
# in bounded time and leave nothing half-written.
load helpers

setup_file() {
	sbx_etcd_start
}

teardown_file() {
	sbx_etcd_stop
}

setup() {
	sbx_setup_store
	export SBX_STORE
	SBX_STORE=$(sbx_etcd_url "f$BATS_TEST_NUMBER")
	cd "$BATS_TEST_TMPDIR"
}

# A cluster of the test's own, for tests that kill members (teardown stops it).
own_cluster() {
	export SBX_TEST_ETCD="$BATS_TEST_TMPDIR/etcd"
	OWN_ETCD=$SBX_TEST_ETCD
	"$BATS_TEST_DIRNAME/etcd-cluster.sh" start "$SBX_TEST_ETCD" >/dev/null
	SBX_STORE=$(sbx_etcd_url "f$BATS_TEST_NUMBER")
}

teardown() {
	[ -z "${RUN_PID:-}" ] || kill -9 "$RUN_PID" 2>/dev/null || true
	[ -z "${OWN_ETCD:-}" ] || "$BATS_TEST_DIRNAME/etcd-cluster.sh" stop "$OWN_ETCD"
}

cluster() {
	"$BATS_TEST_DIRNAME/etcd-cluster.sh" "$@" "$SBX_TEST_ETCD"
}

# sbx-lease as simulated host $1 (its own directory and key)
on_host() {
	local h=$1
	shift
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host$h" sbx-lease "$@"
}

# 64 requests for principal racer, 16 from each of 4 hosts, all at once
race() {
	for i in $(seq 0 63); do
		(on_host $((i % 4)) request --image /bin/true --principal racer >"c$i.out" 2>"c$i.err"
			echo $? >"c$i.rc") &
	done
}

live_count() {
	sbx_etcdctl get --prefix --keys-only "/f$BATS_TEST_NUMBER/lease/" | grep -c lease/ || true
}

check_race() {
	assert_equal "$(cat c*.rc | grep -c '^0$')" 32
	assert_equal "$(grep -l "already holds 32" c*.err | wc -l)" 32
	run on_host 3 list --principal racer
	assert_equal "${#lines[@]}" 32
	# every host verifies every chain, signed by the 4 registered host keys
	for h in 0 1 2 3; do
		run on_host $h verify
		assert_success
		assert_equal "$(jq -r .ok <<<"$output")" true
		assert_equal "$(jq -r .receipts <<<"$output")" 32
	done
	cat c*.out | jq -r .receipt.signer | sort | uniq -c >signers
	assert_equal "$(wc -l <signers)" 4
}

@test "4 hosts, 64 concurrent requests for one principal: exactly 32 live, verified" {
	race
	wait
	check_race
}

@test "a lease moves between hosts: each signs its edge, each verifies the others" {
	on_host 0 request --image /bin/true --escrow 2 >r.json
	on_host 1 fund --amount 2 --evidence r.json >f.json
	on_host 2 activate --evidence f.json | on_host 3 settle --evidence - >s.json
	assert_equal "$(jq -r .lease.state s.json)" Settling
	run on_host 0 log "$(jq -r .lease.id s.json)"
	assert_success
	assert_equal "$(jq -r .signer <<<"$output" | sort -u | wc -l)" 4
	run on_host 2 verify
	assert_success
	# a receipt signed by a key the store never registered is forged
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/stranger" SBX_STORE=$(sbx_etcd_url elsewhere) \
		sbx-lease request --image /bin/true >x.json
	run on_host 0 fund "$(jq -r .lease.id r.json)" --amount 2 --evidence x.json
	assert_failure 1
	assert_output --partial "is not a key registered in store"
}

@test "the leader killed amid 64 concurrent requests loses nothing; then without quorum commands fail in bounded time, writing nothing" {
	own_cluster
	race
	until [ "$(live_count)" -ge 4 ] || [ $SECONDS -gt 60 ]; do sleep 0.1; done
	first=$(cluster leader)
	cluster kill "$first"
	wait
	[ "$(live_count)" -ge 4 ]
	check_race
	# one member of three is left: no quorum
	on_host 0 request --image /bin/true --principal other >r.json
	id=$(jq -r .lease.id r.json)
	for second in 0 1 2; do [ "$second" = "$first" ] || break; done
	cluster kill "$second"
	SBX_ETCD_TIMEOUT_MS=1500 run on_host 0 fund --amount 1 --evidence r.json
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd unreachable: "
	cluster revive "$first"
	cluster revive "$second"
	run on_host 1 show "$id"
	assert_success
	assert_equal "$(jq -r .lease.state <<<"$output")" Requested
	run on_host 1 verify
	assert_success
	# and the store goes on
	run on_host 1 fund --amount 1 --evidence r.json
	assert_success
}

@test "an unreachable store fails at once with the endpoints it tried" {
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	SBX_ETCD_TIMEOUT_MS=300 run on_host 0 --store "etcd://127.0.0.1:$port/x" list
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd unreachable: http://127.0.0.1:$port: "
	run on_host 0 --store "etcd://127.0.0.1:$port" list
	assert_failure 1
	assert_output --partial "expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX"
}

@test "libcurl is loaded only for an etcd store: tools do not link it; without it the etcd store is named" {
	for t in "$SBX_BUILD"/bin/sbx-*; do
		run ldd "$t"
		assert_success
		refute_output --partial libcurl
	done
	mkdir nocurl
	: >nocurl/libcurl.so.4
	export SBX_HOST_DIR=$BATS_TEST_TMPDIR/host
	LD_LIBRARY_PATH=$PWD/nocurl run sbx-lease --store "$BATS_TEST_TMPDIR/files" list
	assert_success
	LD_LIBRARY_PATH=$PWD/nocurl run sbx-lease list
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd: cannot load libcurl: "
	run sbx-lease list
	assert_success
}

@test "sbx-run runs a lease of the shared store on another host, and --ephemeral" {
	on_host 0 request --image /bin/sh | on_host 0 fund --amount 0 --evidence - |
		on_host 1 activate --evidence - >a.json
	id=$(jq -r .lease.id a.json)
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host2" run sbx-run --lease "$id" -- /bin/sh -c 'echo on host2; echo x >/ns/f'
	assert_success
	assert_output "on host2"
	run on_host 3 show "$id"
	assert_equal "$(jq -r .lease.usage.output_values <<<"$output")" 1
	[ -f "$BATS_TEST_TMPDIR/host2/ns/$id/f" ]
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host3" run sbx-run --ephemeral --result r.json -- /bin/echo hi
	assert_success
	assert_equal "$(jq -r '.receipts | length' r.json)" "$(on_host 0 log "$(jq -r .lease r.json)" | wc -l)"
	run on_host 0 verify
	assert_success
}

@test "etcd lost mid-run: the guest goes on bounded by the host's meter; its usage reaches etcd when it returns" {
	own_cluster
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" SBX_ETCD_TIMEOUT_MS=800
	lease() {
		sbx-lease request --image /bin/sh --escrow 10 --limits output_values=4 |
			sbx-lease fund --amount 10 --evidence - | sbx-lease activate --evidence - | jq -r .lease.id
	}
	# waits for /ns/go, then prints $1 lines
	guest='echo 1; while [ ! -e /ns/go ]; do :; done; i=1; while [ $i -lt $1 ]; do i=$((i+1)); echo $i; done'
	a=$(lease)
	b=$(lease)
	sbx-run --lease "$a" -- /bin/sh -c "$guest" sh 3 >a.out 2>a.err &
	pa=$!
	sbx-run --lease "$b" -- /bin/sh -c "$guest" sh 100000 >b.out 2>b.err &
	pb=$!
	until [ -s a.out ] && [ -s b.out ]; do sleep 0.05; done
	for m in 0 1 2; do cluster kill $m; done
	touch "$SBX_HOST_DIR/ns/$a/go" "$SBX_HOST_DIR/ns/$b/go"
	wait $pa
	assert_equal "$(cat a.out)" "$(printf '1\n2\n3')"
	# b is stopped at its bound, with no store to tell
	run wait $pb
	assert_failure
	[ "$(wc -l <b.out)" -le 5 ]
	[ -s "$SBX_HOST_DIR/parked/$a.json" ]
	[ -s "$SBX_HOST_DIR/parked/$b.json" ]
	for m in 0 1 2; do cluster revive $m; done
	SBX_ETCD_TIMEOUT_MS=20000 run sbx-lease show "$a"
	assert_success
	assert_equal "$(jq -r .lease.usage.output_values <<<"$output")" 3
	assert_equal "$(jq -r .lease.state <<<"$output")" Active
	run sbx-lease show "$b"
	assert_equal "$(jq -r .lease.usage.output_values <<<"$output")" 5
	assert_equal "$(jq -r .lease.state <<<"$output")" Settling
	assert_equal "$(jq -r .lease.closed <<<"$output")" output_values
	[ ! -e "$SBX_HOST_DIR/parked/$a.json" ]
	[ ! -e "$SBX_HOST_DIR/parked/$b.json" ]
	run sbx-lease verify
	assert_success
}

# A guest of 60 steps started on host 0 and snapshotted (stopped) there midway:
# sets want (the uninterrupted run's output), src and digest.
snapshot_on_host0() {
	steps=60
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_steps" $steps)
	src=$(on_host 0 request --image "$GUESTS/snap_steps" --escrow 10 --limits namespace_bytes=64M |
		on_host 0 fund --amount 10 --evidence - | on_host 0 activate --evidence - | jq -r .lease.id)
	local ns="$BATS_TEST_TMPDIR/host0/ns/$src" pid
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" sbx-run --lease "$src" -- "$GUESTS/snap_steps" $steps \
		>src.out 2>src.err &
	pid=$!
	until [ -f "$ns/steps.log" ] && [ "$(wc -l <"$ns/steps.log")" -ge 2 ]; do
		kill -0 $pid
		sleep 0.05
	done
	digest=$(SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" sbx-snap take "$src" --stop | jq -r .digest)
	wait $pid || true
	[ "$(wc -l <"$ns/steps.log")" -lt $steps ]
}

# A Funded lease on host 1 for the guest
target_on_host1() {
	on_host 1 request --image "$GUESTS/snap_steps" --escrow 10 --limits namespace_bytes=64M |
		on_host 1 fund --amount 10 --evidence - | jq -r .lease.id
}

# The target lease is as it was: Funded, uncharged, its namespace empty
untouched() {
	run on_host 2 show "$1"
	assert_equal "$(jq -r .lease.state <<<"$output")" Funded
	assert_equal "$(jq -r .lease.usage.namespace_bytes <<<"$output")" 0
	assert_equal "$(jq -r .lease.snapshot_bytes <<<"$output")" 0
	assert_equal "$(ls -A "$BATS_TEST_TMPDIR/host1/ns/$1" 2>/dev/null)" ""
}

@test "a running guest moves to another host: snapshot on one, export | import, restore on the other" {
	snapshot_on_host0
	tgt=$(target_on_host1)
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host1"
	# etcd knows the snapshot and where its chunks are: on host 0 only
	run sbx-snap list
	assert_success
	assert_equal "$(jq -r '.[0].digest' <<<"$output")" "$digest"
	assert_equal "$(jq -r '.[0].location' <<<"$output")" host
	assert_equal "$(jq -r '.[0].lease' <<<"$output")" "$src"
	key0=$(on_host 0 log "$src" | jq -r .signer | head -n 1)
	assert_equal "$(jq -r '.[0].signer' <<<"$output")" "$key0"
	run sbx-restore "$digest" --lease "$tgt"
	assert_failure 1
	assert_output --partial "sbx-restore: error: snapshot $digest: its chunks are on host $(hostname) (key ${key0:0:16}): carry them with sbx-snap export | sbx-snap import, or use a shared snapshot dir"
	untouched "$tgt"
	# the chunks travel as an archive; the store (etcd) holds the receipts
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" sbx-snap export "$digest" -o snap.tar
	sbx-snap import snap.tar
	run sbx-restore "$digest" --lease "$tgt"
	assert_success
	assert_output "$want"
	assert_equal "$(wc -l <"$SBX_HOST_DIR/ns/$tgt/steps.log")" $steps
	run on_host 2 log "$tgt"
	assert_equal "$(jq -r .edge <<<"$output" | head -n 3 | tr '\n' ' ')" "request fund restore "
	run on_host 3 verify
	assert_success
}

@test "a snapshot moves by its digest alone through a shared snapshot dir" {
	export SBX_SNAPSHOT_DIR="$BATS_TEST_TMPDIR/shared"
	snapshot_on_host0
	[ -f "$SBX_SNAPSHOT_DIR/$digest/manifest" ]
	[ ! -e "$BATS_TEST_TMPDIR/host0/snapshots/$digest" ]
	tgt=$(target_on_host1)
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host1"
	run sbx-snap list "$src"
	assert_equal "$(jq -r '.[0].location' <<<"$output")" shared
	# a host without the shared dir is told where the chunks are
	SBX_SNAPSHOT_DIR= run sbx-restore "$digest" --lease "$tgt"
	assert_failure 1
	assert_output --partial "sbx-restore: error: snapshot $digest: its chunks are in the shared snapshot dir of host $(hostname)"
	untouched "$tgt"
	run sbx-restore "$digest" --lease "$tgt"
	assert_success
	assert_output "$want"
	assert_equal "$(wc -l <"$SBX_HOST_DIR/ns/$tgt/steps.log")" $steps
	run on_host 3 verify
	assert_success
}

@test "chunks in the shared dir that differ from the registered manifest are refused; the target stays Funded, uncharged" {
	export SBX_SNAPSHOT_DIR="$BATS_TEST_TMPDIR/shared"
	snapshot_on_host0
	tgt=$(target_on_host1)
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host1"
	d="$SBX_SNAPSHOT_DIR/$digest"
	cp -a "$d" orig
	# one byte of a chunk flipped
	printf '\xff' | dd of="$d/000001" bs=1 seek=100 conv=notrunc status=none
	run sbx-restore "$digest" --lease "$tgt"
	assert_failure 1
	assert_output --partial "sbx-restore: error: snapshot $digest: $d: chunks hash to digest "
	untouched "$tgt"
	# a chunk cut short and the manifest rewritten to agree with it: the store's manifest says no
	rm -rf "$d"
	cp -a orig "$d"
	python3 - "$d" <<'PY'
import hashlib, os, struct, sys
d = sys.argv[1]
names = sorted(n for n in os.listdir(d) if n.isdigit())
last = os.path.join(d, names[-1])
data = open(last, 'rb').read()
open(last, 'wb').write(data[:-1])
h, n = hashlib.sha256(), 0
for c in names:
    b = open(os.path.join(d, c), 'rb').read()
    h.update(b)
    n += len(b)
open(os.path.join(d, 'manifest'), 'wb').write(h.digest() + struct.pack('<QI', n, len(names)))
PY
	run sbx-restore "$digest" --lease "$tgt"
	assert_failure 1
	assert_output --partial "sbx-restore: error: snapshot: $digest: $d/manifest is not the manifest the store registered ("
	untouched "$tgt"
	# the chunks as they were taken restore
	rm -rf "$d"
	cp -a orig "$d"
	run sbx-restore "$digest" --lease "$tgt"
	assert_success
	assert_output "$want"
}

@test "import against a store that registered another manifest for the digest is refused; a damaged record is named" {
	snapshot_on_host0
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" sbx-snap export "$digest" -o snap.tar
	key="/f$BATS_TEST_NUMBER/snapshot/$digest"
	good=$(sbx_etcdctl get --print-value-only "$key")
	forged=$(jq -c --arg m "${digest}000000000000000100000001" '.manifest = $m' <<<"$good")
	sbx_etcdctl put "$key" "$forged" >/dev/null
	# where the chunks are, they no longer match what the store registered
	tgt=$(on_host 0 request --image "$GUESTS/snap_steps" --escrow 10 --limits namespace_bytes=64M |
		on_host 0 fund --amount 10 --evidence - | jq -r .lease.id)
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0" run sbx-restore "$digest" --lease "$tgt"
	assert_failure 1
	assert_output --partial "manifest is not the manifest the store registered (${digest}000000000000000100000001); refused"
	run on_host 2 show "$tgt"
	assert_equal "$(jq -r .lease.state <<<"$output")" Funded
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host1"
	run sbx-snap import snap.tar
	assert_failure 1
	assert_output --partial "sbx-snap: error: snapshot: $digest: store $SBX_STORE registered another manifest for it"
	[ ! -e "$SBX_HOST_DIR/snapshots/$digest" ]
	sbx_etcdctl put "$key" '{"digest":"'"$digest"'","manifest":7}' >/dev/null
	run sbx-snap list
	assert_failure 1
	assert_output --partial "snapshot record: \"manifest\" must be 88 hex digits"
	run sbx-restore "$digest" --lease "$(target_on_host1)"
	assert_failure 1
	assert_output --partial "sbx-restore: error: snapshot $digest: snapshot record: \"manifest\""
	sbx_etcdctl put "$key" "$good" >/dev/null
	run sbx-snap import snap.tar
	assert_success
	run sbx-snap verify "$digest"
	assert_success
}

@test "a cluster that wants TLS client certificates: with them it works, without them it is named" {
	ETCD_TLS=1 own_cluster
	t="$SBX_TEST_ETCD/tls"
	SBX_ETCD_TIMEOUT_MS=300 run on_host 0 list
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd unreachable: "
	# the members' certificate is not from a CA the host trusts
	SBX_ETCD_CACERT=/etc/ssl/certs/ca-certificates.crt run on_host 0 list
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd TLS: https://127.0.0.1:"
	export SBX_ETCD_CACERT="$t/ca.pem" SBX_ETCD_CERT="$t/client.pem" SBX_ETCD_KEY="$t/client.key"
	on_host 0 request --image /bin/true | on_host 1 fund --amount 0 --evidence - >f.json
	assert_equal "$(jq -r .lease.state f.json)" Funded
	run on_host 2 verify
	assert_success
}

# Last: it turns on authentication in the file's shared cluster.
@test "a cluster with users: the password from the environment or a file; a wrong one is named" {
	sbx_etcdctl user add root:sesame >/dev/null
	sbx_etcdctl user grant-role root root >/dev/null
	sbx_etcdctl auth enable >/dev/null
	run on_host 0 list
	assert_failure 1
	assert_output --partial "sbx-lease: error: store: etcd: "
	assert_output --partial "user name is empty"
	SBX_ETCD_USER=root SBX_ETCD_PASSWORD=wrong run on_host 0 list
	assert_failure 1
	assert_output --partial "authentication failed"
	SBX_ETCD_USER=root SBX_ETCD_PASSWORD=sesame run on_host 0 request --image /bin/true
	assert_success
	echo sesame >pw
	SBX_ETCD_USER=root SBX_ETCD_PASSWORD_FILE=pw run on_host 1 verify
	assert_success
	assert_equal "$(jq -r .leases <<<"$output")" 1
	sbx_etcdctl --user root:sesame auth disable >/dev/null
}

@test "a damaged parked usage (a dimension missing or negative) is set aside, never observed" {
	export SBX_HOST_DIR="$BATS_TEST_TMPDIR/host0"
	id=$(sbx-lease request --image /bin/sh --escrow 10 | sbx-lease fund --amount 10 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	mkdir -p "$SBX_HOST_DIR/parked"
	use='"storage_read":0,"storage_write":0,"output_bytes":0,"output_values":0,"table_elements":0,"namespace_bytes":0'
	printf '{"lease":"%s","usage":{"memory":0,%s}}' "$id" "$use" >"$SBX_HOST_DIR/parked/$id.json"
	run sbx-lease show "$id"
	assert_success
	assert_equal "$(jq -r .lease.state <<<"$output")" Active
	assert_equal "$(jq -r .lease.usage.fuel <<<"$output")" 0
	[ ! -e "$SBX_HOST_DIR/parked/$id.json" ]
	[ -s "$SBX_HOST_DIR/parked/$id.json.bad" ]
}

# A caller on host $1 with configuration directory cfg$1 (its own principal keys)
caller_on() {
	local h=$1
	shift
	XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/cfg$h" on_host "$h" "$@"
}

@test "a principal's key works from every host; a caller without it is refused on every host" {
	caller_on 0 request --image /bin/true --principal alice --escrow 1 >r.json
	key=$BATS_TEST_TMPDIR/cfg0/sbx/principals/alice
	for h in 1 2 3; do
		caller_on "$h" request --image /bin/true --principal "bob$h" >/dev/null
		run caller_on "$h" fund --amount 1 --evidence r.json
		assert_failure
		assert_output --partial "principal alice: not signed by its key"
		run caller_on "$h" fund --amount 1 --evidence r.json \
			--principal-key "$BATS_TEST_TMPDIR/cfg$h/sbx/principals/bob$h"
		assert_failure
		assert_output --partial "principal alice: not signed by its key"
	done
	assert_equal "$(on_host 2 show "$(jq -r .lease.id r.json)" | jq -r .lease.seq)" 0
	# recorded at first use in the shared store, so every host knows it
	pub=$(cut -c65-128 "$key")
	assert_equal "$(sbx_etcdctl get "/f$BATS_TEST_NUMBER/principals/alice" --print-value-only | jq -r .key)" "$pub"
	# alice's key, wherever she is, moves her lease from every host
	caller_on 1 fund --amount 1 --evidence r.json --principal-key "$key" >f.json
	caller_on 2 activate --evidence f.json >a.json
	caller_on 3 settle --evidence a.json --principal-key "$key" >s.json
	caller_on 1 expire --evidence s.json >e.json
	assert_equal "$(on_host 0 log "$(jq -r .lease.id r.json)" | jq -r 'select(.renter_sig) | .renter' | sort -u)" "$pub"
	# every host checks every renter signature against the key the store recorded
	for h in 0 1 2 3; do
		run on_host $h verify
		assert_success
	done
	for h in 1 2 3; do
		run caller_on "$h" destroy --evidence e.json
		assert_failure
		assert_output --partial "principal alice: not signed by its key"
	done
	caller_on 0 destroy --evidence e.json --principal-key "$key" >d.json
	assert_equal "$(jq -r .lease.state d.json)" Destroyed
}

@test "recover on a shared store: a host recovers the one-shot runs it ran, never another host's" {
	SBX_HOST_DIR="$BATS_TEST_TMPDIR/host1" sbx-run --ephemeral -- /bin/sleep 1000 >run.out 2>run.err &
	RUN_PID=$!
	id=""
	for _ in $(seq 1 600); do
		id=$(on_host 0 list --state Active | jq -r .id)
		[ -n "$id" ] && [ -e "$BATS_TEST_TMPDIR/host1/run/$id.lock" ] && break
		sleep 0.05
	done
	[ -n "$id" ]
	kill -9 "$RUN_PID"
	wait "$RUN_PID" || true
	# another host leaves it alone: the lease names the key of the host that ran it
	on_host 2 recover >r2.json
	assert_equal "$(jq -c .recovered r2.json)" "[]"
	assert_equal "$(on_host 2 show "$id" | jq -r .lease.state)" Active
	run on_host 1 verify
	assert_failure
	assert_output --partial "lease $id: its run died without closing it"
	on_host 1 recover >r1.json
	assert_equal "$(jq -c .recovered r1.json)" "[{\"from\":\"Active\",\"lease\":\"$id\",\"to\":\"Destroyed\"}]"
	[ ! -e "$BATS_TEST_TMPDIR/host1/ns/$id" ]
	for h in 0 1 2; do
		run on_host $h verify
		assert_success
	done
}
