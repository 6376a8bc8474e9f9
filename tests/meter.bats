#!/usr/bin/env bats
# Metering and automatic closure (SPEC §4): every hog is stopped by its own
# dimension, the lease is closed Active -> Settling with a receipt naming it, the
# run exits 124 and the result names it; observations are monotonic and survive a
# SIGKILL of sbx-run.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
	AS=""
}

teardown() {
	[ -z "${UDIR:-}" ] || rm -rf "$UDIR"
}

# the following runs as an unprivileged invoking user (nobody), store and files in a 0777 dir
as_nobody() {
	UDIR=$(mktemp -d /tmp/sbx-meter.XXXXXX)
	chmod 0777 "$UDIR"
	cd "$UDIR"
	AS="$SBX_AS_NOBODY env SBX_STORE=$UDIR/store"
}

# hog DIM REQUEST-OPTIONS... -- HOG-ARGS...: one ephemeral run (or one on --lease ID)
# that must be closed by DIM.
hog() {
	local dim=$1 opts=()
	shift
	[ "$1" = --lease ] || opts=(--ephemeral)
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	status=0
	$AS sbx-run "${opts[@]}" --result r.json -- "$@" >out 2>err || status=$?
	[ "$status" = 124 ] || cat err >&2
	assert_equal "$status" 124
	assert_equal "$(jq -r .closed r.json)" "$dim"
	assert_equal "$(jq -r .exit_code r.json)" 124
	# the closing receipt: Active -> Settling, naming the dimension
	assert_equal "$(jq -r '.receipts[] | select(.edge == "settle") | "\(.from) \(.to) \(.reason)"' r.json)" \
		"Active Settling $dim"
}

usage_of() { jq -r ".usage.$1" r.json; }

@test "a CPU spinner is stopped by fuel" {
	hog fuel --limits fuel=200000 -- "$GUESTS/meter_hog" fuel
	[ "$(usage_of fuel)" -gt 200000 ]
	[ "$(usage_of fuel)" -lt 1400000 ] # stopped within 1 s of crossing 0.2 s
}

# SPEC's target is 20 ms (bench/meter.sh measures it); 40 ms here leaves room for
# a loaded host, where the supervisor's wake-up waits for a CPU too
@test "spinners on more processes than CPUs end at most 20 ms of CPU past fuel" {
	local n h="$GUESTS/meter_hog"
	n=$(( $(getconf _NPROCESSORS_CONF) + 1 ))
	hog fuel --limits fuel=200000 -- /bin/sh -c "for i in \$(seq $n); do \"$h\" fuel & done; wait"
	echo "fuel at closure: $(usage_of fuel)"
	[ "$(usage_of fuel)" -gt 200000 ]
	[ "$(usage_of fuel)" -le 220000 ]
	hog fuel --limits fuel=200000 -- "$h" fuel
	echo "fuel at closure: $(usage_of fuel)"
	[ "$(usage_of fuel)" -le 220000 ]
}

# The pid of the process whose command line is exactly $1, once there is one (the
# first child of sbx-run may be another, short-lived process).
pid_of_cmd() {
	local c
	for _ in $(seq 1 600); do
		c=$(pgrep -n -f -x -- "$1") && { echo "$c"; return 0; }
		sleep 0.05
	done
	return 1
}

cpu_us() { awk '{ printf "%d", $1 / 1000 }' "/proc/$1/schedstat"; }

# CPU µs of all threads of the processes whose command line is exactly $1 (those
# gone count 0)
tree_cpu_us() {
	local p
	for p in $(pgrep -f -x -- "$1"); do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done |
		awk '{ s += $1 } END { printf "%d", s / 1000 }'
}

# late_supervisor PATTERN COMMAND...: a run under fuel=300000 whose supervisor is
# stopped (as on a host too loaded to run it, or for as long as anyone likes) once
# the guest's processes whose command line is PATTERN have burnt 50 ms, for up to
# 6 s while they burn on; then it goes on. Fuel must end past the bound by at most
# the SPEC's 20 ms, closed by fuel.
late_supervisor() {
	local pat=$1
	shift
	sbx-run --ephemeral --limits fuel=300000 --result r.json -- "$@" >out 2>err &
	pid=$!
	pid_of_cmd "$pat" >/dev/null
	while [ "$(tree_cpu_us "$pat")" -lt 50000 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
	kill -STOP "$pid"
	for _ in $(seq 1 120); do
		[ "$(tree_cpu_us "$pat")" -gt 420000 ] && break
		sleep 0.05
	done
	echo "stopped supervisor: guest at $(tree_cpu_us "$pat") µs"
	kill -CONT "$pid"
	status=0
	wait "$pid" || status=$?
	[ "$status" = 124 ] || cat err >&2
	assert_equal "$status" 124
	assert_equal "$(jq -r .closed r.json)" fuel
	echo "fuel at closure: $(usage_of fuel)"
	[ "$(usage_of fuel)" -gt 300000 ]
	[ "$(usage_of fuel)" -le 320000 ]
	assert_equal "$(jq -r .fuel_held_by r.json)" cgroup
}

# A CFS quota is a rate: it refills every period (1 s at most), so the quota main
# set (half what was left, per period) let a tree whose supervisor was stopped for
# several periods burn one in each (342 ms against 300 ms once in make check; 428 ms
# here). The fuse, armed in advance on the cgroup's CPU count, ends it at the bound.
@test "fuel holds while the supervisor is stopped for many quota periods" {
	sbx_fusecg || skip "no cgroup CPU count can be had here: fuel is held by samples alone"
	late_supervisor "$GUESTS/meter_hog fuel" "$GUESTS/meter_hog" fuel
}

@test "fuel holds while the supervisor is stopped for many quota periods, threads at full speed" {
	sbx_fusecg || skip "no cgroup CPU count can be had here: fuel is held by samples alone"
	late_supervisor "$GUESTS/meter_hog threads 4" "$GUESTS/meter_hog" threads 4
}

@test "fuel holds while the supervisor is stopped for many quota periods, processes at full speed" {
	sbx_fusecg || skip "no cgroup CPU count can be had here: fuel is held by samples alone"
	local h="$GUESTS/meter_hog"
	late_supervisor "$h fuel" /bin/sh -c "for i in 1 2 3; do \"$h\" fuel & done; wait"
}

# The fuse ends a tree past its bound only: one that stays below it runs to its end
# while its supervisor is stopped, and exits as it would have.
@test "a run below its fuel bound is not ended while its supervisor is stopped" {
	sbx_fusecg || skip "no cgroup CPU count can be had here: fuel is held by samples alone"
	sbx-run --ephemeral --limits fuel=300000 --result r.json -- "$GUESTS/meter_hog" spin 150 \
		>out 2>err &
	pid=$!
	g=$(pid_of_cmd "$GUESTS/meter_hog spin 150")
	while [ "$(cpu_us "$g" 2>/dev/null || echo 0)" -lt 50000 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
	kill -STOP "$pid"
	sleep 2
	kill -CONT "$pid"
	status=0
	wait "$pid" || status=$?
	[ "$status" = 0 ] || cat err >&2
	assert_equal "$status" 0
	assert_equal "$(jq -r .closed r.json)" null
	[ "$(usage_of fuel)" -ge 150000 ]
	[ "$(usage_of fuel)" -lt 300000 ]
}

# whether sbx-run can make the run a memory cgroup here (root with a writable v1
# memory hierarchy, or cgroup v2 with the controller delegated); told apart from
# sbx-run itself, which must then use one (the guest sees it)
memcg_or_skip() {
	sbx_memcg || skip "no memory cgroup can be made here: memory is held by samples alone"
}

@test "with a memory cgroup, a full-speed allocator ends at most max(1%, 1 MiB) past memory" {
	memcg_or_skip
	hog memory --limits memory=64M -- "$GUESTS/meter_hog" memory
	[ "$(usage_of memory)" -gt $((64 << 20)) ]
	[ "$(usage_of memory)" -le $(((64 << 20) + (1 << 20))) ]
}

# init builds the guest's tree while sbx-run moves it into the run's cgroups (a
# move waits out an RCU grace period); the guest is forked only after the move
@test "the guest is in the run's memory and CPU cgroups from its first instruction" {
	memcg_or_skip
	local i
	for i in 1 2 3 4 5; do
		sbx-run --ephemeral -- /bin/cat /proc/self/cgroup >cg 2>err || { cat err; false; }
		grep -q '^[0-9]*:memory:/sbx-run\.[0-9]*\.[0-9]*$' cg || { cat cg; false; }
		if sbx_fusecg; then
			grep -q '^[0-9]*:cpuacct:/sbx-run\.[0-9]*\.[0-9]*$' cg || { cat cg; false; }
		fi
	done
}

@test "concurrent bounded runs each keep their own memory cgroup" {
	memcg_or_skip
	local pids=() i st
	for i in $(seq 1 24); do
		sbx-run --ephemeral --limits memory=64M -- /bin/true >"o$i" 2>&1 &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		st=0
		wait "${pids[$i]}" || st=$?
		[ "$st" = 0 ] || { cat "o$((i + 1))"; false; }
	done
}

@test "memory no process maps (memfd, SysV shm) or a leaderless thread holds is memory" {
	memcg_or_skip
	for how in memfd shm leaderless; do
		hog memory --limits memory=64M -- "$GUESTS/meter_hold" "$how" 256
		echo "$how: memory at closure $(usage_of memory)"
		[ "$(usage_of memory)" -le $(((64 << 20) + (1 << 20))) ]
	done
}

@test "without a memory cgroup a run is held by samples and says so once; --memory-exact is refused and nothing moves" {
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	memcg_or_skip
	as_nobody
	local nb="setpriv --reuid=65534 --regid=65534 --clear-groups env -u SBX_MEMORY_SAMPLED -u SBX_MEMORY_EXACT SBX_STORE=$UDIR/store XDG_CONFIG_HOME=$SBX_NOBODY_CONFIG"
	# a first run runs: sampled, said once on stderr and in the result
	run $nb sbx-run --ephemeral --result r0.json -- /bin/true
	assert_success
	assert_output --partial "sbx-run: warning: memory: held by samples, not by a cgroup (memory_held_by: samples; --memory-exact refuses instead): no memory cgroup can be made for the run"
	assert_equal "$(grep -c warning <<<"$output")" 1
	assert_equal "$(jq -r .memory_held_by r0.json)" samples
	rm -rf "$UDIR/store"
	# a caller who would rather be refused is, before the store is opened
	run $nb sbx-run --ephemeral --memory-exact -- /bin/true
	assert_failure 125
	assert_output --partial "sbx-run: error: --memory-exact: memory: no memory cgroup can be made for the run"
	[ ! -e "$UDIR/store" ]
	run $nb SBX_MEMORY_EXACT=1 sbx-run --ephemeral -- /bin/true
	assert_failure 125
	assert_output --partial "sbx-run: error: --memory-exact: memory: no memory cgroup can be made"
	run $nb sbx-run --ephemeral --memory-exact --memory-sampled -- /bin/true
	assert_failure 125
	assert_output --partial "sbx-run: error: --memory-exact: conflicts with --memory-sampled"
	id=$($nb sbx-lease request --image /bin/true | $nb sbx-lease fund --amount 0 --evidence - |
		$nb sbx-lease activate --evidence - | jq -r .lease.id)
	before=$($nb sbx-lease log "$id")
	run $nb sbx-run --memory-exact --lease "$id" -- /bin/true
	assert_failure 125
	assert_output --partial "no memory cgroup can be made"
	assert_equal "$($nb sbx-lease log "$id")" "$before"
	assert_equal "$($nb sbx-lease show "$id" | jq -r .lease.state)" Active
	# asked for, by option or environment: it runs without a word and says how memory was held
	run $nb sbx-run --memory-sampled --lease "$id" --result r.json -- /bin/true
	assert_success
	refute_output --partial warning
	assert_equal "$(jq -r .memory_held_by r.json)" samples
	run $nb SBX_MEMORY_SAMPLED=1 sbx-run --ephemeral --result r2.json -- /bin/true
	assert_success
	refute_output --partial warning
	assert_equal "$(jq -r .memory_held_by r2.json)" samples
	# where a cgroup can be made it holds memory, asked or not, exact or not
	run sbx-run --memory-sampled --ephemeral --result r3.json -- /bin/true
	assert_success
	assert_equal "$(jq -r .memory_held_by r3.json)" cgroup
	run sbx-run --memory-exact --ephemeral --result r4.json -- /bin/true
	assert_success
	assert_equal "$(jq -r .memory_held_by r4.json)" cgroup
}

@test "a memory hog is stopped by memory" {
	hog memory --limits memory=64M -- "$GUESTS/meter_hog" memory
	[ "$(usage_of memory)" -gt $((64 << 20)) ]
}

@test "a 2 GiB file writer is stopped by storage_write" {
	hog storage_write --limits storage_write=32M -- "$GUESTS/meter_hog" write
	[ "$(usage_of storage_write)" -gt $((32 << 20)) ]
	[ "$(usage_of storage_write)" -lt $((2 << 30)) ]
}

@test "a reader of a large file is stopped by storage_read" {
	hog storage_read --limits storage_read=32M -- "$GUESTS/meter_hog" read /usr/lib/x86_64-linux-gnu/libc.so.6
	[ "$(usage_of storage_read)" -gt $((32 << 20)) ]
}

@test "storage_read: a leader that ends before its threads is counted once" {
	# its reads are taken at its exit event; a zombie leader sampled again at the
	# ticks while its other thread sleeps used to be counted twice (64 MiB here)
	run sbx-run --ephemeral --result "$BATS_TEST_TMPDIR/r.json" -- "$GUESTS/meter_leader" 32
	assert_success
	jq -e '.usage.storage_read >= 33554432 and .usage.storage_read < 33554432 + 1048576' \
		"$BATS_TEST_TMPDIR/r.json"
}

# within max(1 %, 1 MiB) of the bound, whatever the read path, at full speed
@test "readers at full speed end within 1 MiB of storage_read, on every read path" {
	local libc=/usr/lib/x86_64-linux-gnu/libc.so.6 how
	for how in read big pread readv sendfile threads; do
		hog storage_read --limits storage_read=32M -- "$GUESTS/meter_load" "$how" "$libc"
		echo "$how: storage_read at closure $(usage_of storage_read)"
		[ "$(usage_of storage_read)" -gt $((32 << 20)) ]
		[ "$(usage_of storage_read)" -le $(((32 << 20) + (1 << 20))) ]
	done
	# far from the bound reads run unstopped until the margin: held all the same
	hog storage_read --limits storage_read=1G -- "$GUESTS/meter_load" threads "$libc"
	echo "threads, 1G: storage_read at closure $(usage_of storage_read)"
	[ "$(usage_of storage_read)" -le $(((1 << 30) + (1 << 30) / 100)) ]
}

@test "a guest racing its own iovec moves no more than it reserved: writev, pwritev2, readv" {
	# a second thread flips a segment between 1 byte and 64 MiB: the kernel must
	# move what the supervisor read at the stop, not what the array says later.
	# Before, about half of such runs stored or read 64 MiB against 32 MiB.
	mkdir w
	for i in 1 2 3 4; do
		for how in writev pwritev2; do
			rm -f w/f
			run sbx-run --ephemeral --limits storage_write=32M --rw "$PWD/w:/w" \
				--result r.json -- "$GUESTS/meter_race" "$how" /w/f
			assert_equal "$status" 124
			assert_equal "$(jq -r .closed r.json)" storage_write
			[ "$(stat -c %s w/f)" -le $((32 << 20)) ]
		done
		run sbx-run --ephemeral --limits storage_read=32M --result r.json -- \
			"$GUESTS/meter_race" readv /dev/zero
		assert_equal "$status" 124
		assert_equal "$(usage_of storage_read)" $(((32 << 20) + 1))
	done
}

@test "a guest racing its own iovec on a pipe, a stream or a datagram socket reads no more than it reserved" {
	# the segment grows from 1 byte to what the descriptor holds (1 MiB in a pipe,
	# 8 MiB on a stream socket, 3 MiB datagrams) after the supervisor read it at the
	# stop: the kernel must read what the stop saw. Before, pipe runs ended 4 KB past
	# the bound (at most a pipe's 1 MiB), datagram runs 2 MiB, stream runs 8 MiB.
	local how i
	for i in 1 2; do
		for how in pipe stream dgram; do
			run sbx-run --ephemeral --limits storage_read=16M --result r.json -- \
				"$GUESTS/meter_race" "$how"
			echo "$how: storage_read at closure $(usage_of storage_read)"
			assert_equal "$status" 124
			assert_equal "$(jq -r .closed r.json)" storage_read
			assert_equal "$(usage_of storage_read)" $(((16 << 20) + 1))
		done
	done
}

@test "vectored reads on pipes and sockets under storage_read behave as the kernel's own" {
	# datagrams whole across segments, EOF, EAGAIN, ESPIPE, EINTR and SA_RESTART,
	# the argument registers kept: the same lines natively and in the sandbox
	"$GUESTS/meter_vec" /etc/passwd >native
	run sbx-run --ephemeral --limits storage_read=64M -- "$GUESTS/meter_vec" /etc/passwd
	assert_success
	assert_equal "$output" "$(cat native)"
	refute_output --partial FAIL
	# a real program: Python's os.readv, short reads on a pipe gathered, a datagram split
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
	cat >pv.py <<'PY'
import os, socket
r, w = os.pipe()
os.write(w, b"hello, world")
os.close(w)
a, b, got = bytearray(5), bytearray(20), b""
while (n := os.readv(r, [a, b])) > 0:
    got += (bytes(a) + bytes(b))[:n]
print("pipe", got)
s, t = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
t.send(b"0123456789")
n = os.readv(s.fileno(), [a, b])
print("dgram", n, bytes(a), bytes(b[:n - 5]))
PY
	run sbx-run --ephemeral --limits storage_read=64M -- /usr/bin/python3 -c "$(cat pv.py)"
	assert_success
	assert_output "pipe b'hello, world'
dgram 10 b'01234' b'56789'"
}

@test "a stdout flooder is stopped by output_bytes; exactly the bound is delivered" {
	hog output_bytes --limits output_bytes=1M -- "$GUESTS/meter_hog" flood
	assert_equal "$(wc -c <out)" $((1 << 20))
	[ "$(usage_of output_bytes)" -gt $((1 << 20)) ]
	# counted up to the chunk that passed the bound (one pipe read), no further
	[ "$(usage_of output_bytes)" -le $(((1 << 20) + 65536)) ]
}

@test "a line printer is stopped by output_values; exactly the bound's records are delivered" {
	hog output_values --limits output_values=100 -- "$GUESTS/meter_hog" lines
	assert_equal "$(wc -l <out)" 100
	assert_equal "$(tail -n1 out)" "line 99"
	assert_equal "$(tail -c1 out | od -An -c | tr -d ' ')" '\n'
	assert_equal "$(usage_of output_values)" 101
}

@test "an fd leaker is stopped by table_elements" {
	hog table_elements --limits table_elements=64 -- "$GUESTS/meter_hog" fds
	[ "$(usage_of table_elements)" -gt 64 ]
}

@test "a namespace filler is stopped by namespace_bytes" {
	hog namespace_bytes --limits namespace_bytes=1M -- "$GUESTS/meter_hog" ns
	[ "$(usage_of namespace_bytes)" -gt $((1 << 20)) ]
}

# the closed lease's namespace is destroyed with it: the receipt digests every cell
destroyed_cells() { jq -r '.receipts[] | select(.edge == "destroy") | .cells' r.json; }

@test "namespace_bytes is held at the calls: bytes written behind a long walk end at bound + 1" {
	# 20000 names make one walk of the namespace take several ticks; the writer then
	# fills one file at full speed. Sampled, this ended at 179-286 MB against 4 MiB.
	hog namespace_bytes --limits namespace_bytes=16M -- "$GUESTS/meter_hog" nsburst 20000
	assert_equal "$(usage_of namespace_bytes)" $(((16 << 20) + 1))
}

@test "a namespace nested deeper than the walk goes counts as full" {
	# 70 directories, 2 MiB at the bottom: closed while it waits, and when it exits at once
	hog namespace_bytes --limits namespace_bytes=1M --trace t.jsonl -- "$GUESTS/meter_hog" nsdeep 70
	assert_equal "$(usage_of namespace_bytes)" $(((1 << 20) + 1))
	# the destroy digests the cell below the walk's depth, when the guest made it before
	# a tick's walk found the tree too deep and closed the lease
	made=$(jq -s '[.[] | select(.name == "openat" and ((.path // "") | endswith("/big")) and
		(.result // -1) >= 0)] | length' t.jsonl)
	assert_equal "$(destroyed_cells)" "$made"
	hog namespace_bytes --limits namespace_bytes=1M -- "$GUESTS/meter_hog" nsdeep 65 exit
	# on a lease of its own too
	hog namespace_bytes --lease "$(new_active --limits namespace_bytes=1M)" -- \
		"$GUESTS/meter_hog" nsdeep 70
	# as deep as the walk goes (64) is measured, not full: key d/d/.../big
	run sbx-run --ephemeral --limits namespace_bytes=3M --result r.json -- \
		"$GUESTS/meter_hog" nsdeep 64 exit
	assert_success
	assert_equal "$(usage_of namespace_bytes)" $(((2 << 20) + 64 * 2 + 3))
}

@test "a directory its owner made unreadable counts as full, as root and unprivileged" {
	# the 2 MiB write never runs: held at the call
	hog namespace_bytes --limits namespace_bytes=1M -- "$GUESTS/meter_hog" nshide exit
	assert_equal "$(usage_of namespace_bytes)" $(((1 << 20) + 1))
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	as_nobody
	hog namespace_bytes --limits namespace_bytes=1M -- "$GUESTS/meter_hog" nshide
	assert_equal "$(usage_of namespace_bytes)" $(((1 << 20) + 1))
	assert_equal "$(destroyed_cells)" 1
	hog namespace_bytes --limits namespace_bytes=1M -- "$GUESTS/meter_hog" nshide exit
	assert_equal "$(ls "$UDIR/store/ns")" ""
	hog namespace_bytes --lease "$(new_active --limits namespace_bytes=1M)" -- \
		"$GUESTS/meter_hog" nshide
}

@test "a sleeper past its lifetime is stopped by the wall clock" {
	hog lifetime --lifetime 2 -- /bin/sleep 30
}

@test "a guest whose fees exhaust its escrow is stopped by escrow" {
	hog escrow --escrow 100000 --fees fuel=1 -- "$GUESTS/meter_hog" fuel
	[ "$(usage_of fuel)" -gt 100000 ]
}

@test "a child's peak memory counts after it has exited, and closes the lease" {
	run sbx-run --ephemeral --result r.json -- /bin/sh -c "\"$GUESTS/meter_hog\" peak 96; true"
	assert_success
	[ "$(usage_of memory)" -ge $((96 << 20)) ]
	hog memory --limits memory=64M -- /bin/sh -c "\"$GUESTS/meter_hog\" peak 96; true"
}

@test "a run inside its bounds reports usage and is not closed" {
	run sbx-run --ephemeral --result r.json -- "$GUESTS/meter_hog" write-not
	assert_failure 2
	assert_equal "$(jq -r .closed r.json)" null
	[ "$(usage_of fuel)" -gt 0 ]
	[ "$(usage_of memory)" -gt 0 ]
	[ "$(usage_of table_elements)" -ge 3 ]
	# only this run's output: the usage line on stderr
	[ "$(usage_of output_bytes)" -gt 40 ]
}

new_active() {
	$AS sbx-lease request --image "$GUESTS/meter_hog" "$@" | $AS sbx-lease fund --amount 0 --evidence - |
		$AS sbx-lease activate --evidence - | jq -r .lease.id
}

@test "observations are in the lease after kill -9 of sbx-run, and stay monotonic" {
	id=$(new_active)
	sbx-run --lease "$id" -- "$GUESTS/meter_hog" fuel &
	pid=$!
	# observations land every 200 ms; a loaded machine may start the guest late
	for _ in $(seq 1 100); do
		[ "$(sbx-lease show "$id" | jq -r '.lease.usage.fuel // 0')" -gt 100000 ] && break
		sleep 0.1
	done
	kill -9 "$pid"
	wait "$pid" || true
	sbx_runs_released
	fuel=$(sbx-lease show "$id" | jq -r .lease.usage.fuel)
	[ "$fuel" -gt 100000 ]
	run bash -c "sbx-lease log $id | jq -r .edge | sort -u"
	assert_line observe
	# verify names the lease its dead run left Active
	run sbx-lease verify
	assert_failure
	assert_output --partial "lease $id: its run died without closing it"
	# the next store write settles it from its last durable observation
	sbx-lease log "$id" | tail -n1 >head.json
	run sbx-lease observe "$id" --usage fuel=1 --evidence head.json
	assert_failure
	assert_equal "$(sbx-lease show "$id" | jq -r .lease.state)" Settling
	# charged the bound its run left: at least the last observation
	assert_equal "$(sbx-lease log "$id" | tail -n1 | jq -r '"\(.edge) \(.reason)"')" "settle run-died"
	[ "$(sbx-lease log "$id" | tail -n1 | jq -r .usage.fuel)" -ge "$fuel" ]
	[ ! -e "$SBX_STORE/run/$id.sock" ] && [ ! -e "$SBX_STORE/run/$id.lock" ]
	run sbx-lease verify
	assert_success
	# a one-shot run killed the same way is closed by the next write too, to the end
	# (settled from its bound, expired, destroyed: one-shot mode leaves no lease)
	sbx-run --ephemeral --result r.json -- "$GUESTS/meter_hog" fuel &
	pid=$!
	for _ in $(seq 1 100); do
		eph=$(sbx-lease list | jq -r 'select(.state == "Active") | .id' | head -n1)
		[ -n "$eph" ] && [ -S "$SBX_STORE/run/$eph.sock" ] && break
		sleep 0.1
	done
	kill -9 "$pid"
	wait "$pid" || true
	sbx_runs_released
	sbx-lease request --image /bin/true >/dev/null
	assert_equal "$(sbx-lease show "$eph" | jq -r .lease.state)" Destroyed
	assert_equal "$(sbx-lease log "$eph" | jq -r 'select(.edge == "settle") | .reason')" run-died
	[ ! -e "$SBX_STORE/ns/$eph" ]
	run sbx-lease verify
	assert_success
}

# said_at_kill MODE ID THRESHOLD: run meter_hog MODE on lease ID, SIGKILL sbx-run once
# the guest said it used more than THRESHOLD; SAID is the last it said (a lower bound
# of its usage then).
said_at_kill() {
	sbx-run --lease "$2" -- "$GUESTS/meter_hog" "$1" >said 2>err &
	pid=$!
	for _ in $(seq 1 1000); do
		SAID=$(tail -n2 said | head -n1)
		[ -n "$SAID" ] && [ "$SAID" -gt "$3" ] && break
		sleep 0.01
	done
	kill -9 "$pid"
	wait "$pid" || true
	sbx_runs_released
	SAID=$(tail -n2 said | head -n1)
	[ "$SAID" -gt "$3" ]
}

@test "a run killed midway is charged at least what its guest used" {
	# observations lag (one every 200 ms); the bound the run keeps in its claim does not
	id=$(new_active --limits fuel=30000000)
	said_at_kill burnsay "$id" 300000
	sbx-lease request --image /bin/true >/dev/null
	assert_equal "$(sbx-lease log "$id" | tail -n1 | jq -r '"\(.edge) \(.reason)"')" "settle run-died"
	fuel=$(sbx-lease log "$id" | tail -n1 | jq -r .usage.fuel)
	echo "said $SAID, charged $fuel"
	[ "$fuel" -ge "$SAID" ]
	[ "$fuel" -le 30000000 ]
	run sbx-lease verify
	assert_success
	id=$(new_active --limits storage_write=1G)
	said_at_kill writesay "$id" 300000000
	sbx-lease request --image /bin/true >/dev/null
	bytes=$(sbx-lease log "$id" | tail -n1 | jq -r .usage.storage_write)
	echo "said $SAID, charged $bytes"
	[ "$bytes" -ge "$SAID" ]
	# output: what sbx-run delivered is what the guest used, at least
	delivered_at_kill flood 'stat -c %s said' 50000000
	[ "$(jq -r .usage.output_bytes last)" -ge "$(stat -c %s said)" ]
	delivered_at_kill lines 'wc -l <said' 30000
	[ "$(jq -r .usage.output_bytes last)" -ge "$(stat -c %s said)" ]
	[ "$(jq -r .usage.output_values last)" -ge "$(wc -l <said)" ]
}

# stalled_kill HOG-ARGS MEASURE THRESHOLD: meter_hog HOG-ARGS on a new lease; once it
# waits at its gate, sbx-run is stopped (nothing samples), the gate opened, and sbx-run
# killed once MEASURE (a command on the guest's pid G) passed THRESHOLD; SEEN is the
# last it measured, the settlement is in last
stalled_kill() {
	local id pid
	id=$(new_active --limits memory=256M,storage_read=1G,table_elements=4096)
	rm -f gate
	mkfifo gate
	sbx-run --lease "$id" -- "$GUESTS/meter_hog" $1 <gate >out 2>err 3>&- &
	pid=$!
	exec 7>gate
	G=$(pid_of_cmd "$GUESTS/meter_hog $1")
	# at the gate: blocked in read(2) on fd 0
	for _ in $(seq 1 600); do
		[ "$(cut -d' ' -f1-2 /proc/"$G"/syscall 2>/dev/null)" = "0 0x0" ] && break
		sleep 0.01
	done
	kill -STOP "$pid"
	echo >&7
	for _ in $(seq 1 1000); do
		SEEN=$(eval "$2")
		[ "$SEEN" -gt "$3" ] && break
		sleep 0.01
	done
	kill -9 "$pid"
	exec 7>&-
	wait "$pid" || true
	sbx_runs_released
	sbx-lease request --image /bin/true >/dev/null
	sbx-lease log "$id" | tail -n1 >last
	echo "$1: seen $SEEN; charged $(jq -c .usage last)"
	[ "$SEEN" -gt "$3" ]
	assert_equal "$(jq -r '"\(.edge) \(.reason)"' last)" "settle run-died"
}

@test "a run killed between samples is charged at least the fuel, memory, descriptors and reads its guest had" {
	# fuel has its headroom from the first bound: the guest burns before the first sample
	stalled_kill burn 'cpu_us $G' 20000
	[ "$(jq -r .usage.fuel last)" -ge "$SEEN" ]
	# page faults, dup and small reads stop nowhere the run could wait for its bound;
	# a dead run is charged at most its limits (RLIMIT_NOFILE lets one fd past them,
	# and with the supervisor stopped nothing holds reads)
	stalled_kill "hold 96" 'awk "/^VmRSS/ { print \$2 * 1024 }" /proc/$G/status' $((90 << 20))
	[ "$(jq -r .usage.memory last)" -ge "$SEEN" ]
	# a guest that closed its output is charged no output headroom either
	assert_equal "$(jq -r '"\(.usage.output_bytes) \(.usage.output_values)"' last)" "0 0"
	stalled_kill dups 'ls /proc/$G/fd | wc -l' 1000
	[ "$(jq -r .usage.table_elements last)" -ge "$((SEEN < 4096 ? SEEN : 4096))" ]
	# what the guest never moved is charged no headroom: it wrote no output
	assert_equal "$(jq -r '"\(.usage.output_bytes) \(.usage.output_values)"' last)" "0 0"
	stalled_kill "sip /dev/zero" 'awk "/^rchar/ { print \$2 }" /proc/$G/io' $((100 << 20))
	[ "$(jq -r .usage.storage_read last)" -ge "$((SEEN < (1 << 30) ? SEEN : 1 << 30))" ]
}

# delivered_at_kill MODE COUNT THRESHOLD: meter_hog MODE on a new lease, sbx-run killed
# once COUNT (a command on its output file) passed THRESHOLD; the settlement in last
delivered_at_kill() {
	local id pid
	id=$(new_active)
	sbx-run --lease "$id" -- "$GUESTS/meter_hog" "$1" >said 2>err &
	pid=$!
	for _ in $(seq 1 1000); do
		[ "$(eval "$2")" -gt "$3" ] && break
		sleep 0.01
	done
	kill -9 "$pid"
	wait "$pid" || true
	sbx_runs_released
	sbx-lease request --image /bin/true >/dev/null
	sbx-lease log "$id" | tail -n1 >last
	echo "$1: delivered $(stat -c %s said) bytes, $(wc -l <said) lines; charged $(jq -c .usage last)"
	assert_equal "$(jq -r '"\(.edge) \(.reason)"' last)" "settle run-died"
}

# le64 N: N as 8 bytes, x86-64 order, as printf escapes
le64() {
	local n=$1 out="" i
	for i in 0 1 2 3 4 5 6 7; do
		out+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255)))
	done
	printf %s "$out"
}

@test "a dead run's bound is charged up to the lease's limits, never past them" {
	id=$(new_active --limits fuel=1000000,storage_write=10M)
	# a whole bound, as a run writes it (see lease_run_bound_write), far above both limits
	{
		printf 'sbxbound\x08\0\0\0\0\0\0\0%s' "$id"
		head -c $((48 - ${#id})) /dev/zero
		printf "$(le64 1)"
		for v in 5000000000 1 2 $((1 << 40)) 3 4 5 6; do printf "$(le64 "$v")"; done
		head -c $((224 - 136)) /dev/zero
	} >slot
	[ "$(stat -c %s slot)" -eq 224 ]
	sha256sum slot | cut -c1-64 | sed 's/../\\x&/g' | xargs -0 printf >sum
	mkdir -p "$SBX_STORE/run"
	{ head -c 4096 /dev/zero; cat slot sum; } >"$SBX_STORE/run/$id.lock"
	sbx-lease request --image /bin/true >/dev/null
	sbx-lease log "$id" | tail -n2 >last
	assert_equal "$(jq -r '"\(.edge) \(.usage.fuel) \(.usage.storage_write) \(.usage.memory)"' last | head -n1)" \
		"observe 1000000 10485760 1"
	assert_equal "$(jq -r '"\(.edge) \(.reason)"' last | tail -n1)" "settle run-died"
}

@test "a dead run's bound is charged only when whole and its own lease's" {
	a=$(new_active)
	b=$(new_active)
	c=$(new_active)
	d=$(new_active)
	sbx-run --lease "$a" -- "$GUESTS/meter_hog" burnsay >said 2>err &
	pid=$!
	for _ in $(seq 1 1000); do
		[ "$(tail -n2 said | head -n1)" -gt 100000 ] 2>/dev/null && break
		sleep 0.01
	done
	cp "$SBX_STORE/run/$a.lock" claim
	kill -9 "$pid"
	wait "$pid" || true
	sbx_runs_released
	[ "$(stat -c %s claim)" -eq $((4096 + 2 * 256)) ]
	cp claim "$SBX_STORE/run/$b.lock"          # another lease's
	cp claim "$SBX_STORE/run/$c.lock"          # every byte of it checked
	printf '\001' | dd of="$SBX_STORE/run/$c.lock" bs=1 seek=$((4096 + 100)) conv=notrunc 2>/dev/null
	printf '\001' | dd of="$SBX_STORE/run/$c.lock" bs=1 seek=$((4096 + 256 + 100)) conv=notrunc 2>/dev/null
	head -c 4300 claim >"$SBX_STORE/run/$d.lock" # torn
	run sbx-lease verify
	assert_failure
	assert_output --partial "lease $a: its run died without closing it; sbx-lease recover (or the next store write) settles it from the bound its run kept"
	for l in "$b" "$c" "$d"; do
		assert_output --partial "lease $l: its run died without closing it; sbx-lease recover (or the next store write) settles it from its last observation (the bound in its claim is torn or damaged: ignored)"
	done
	sbx-lease request --image /bin/true >/dev/null
	[ "$(sbx-lease log "$a" | tail -n1 | jq -r .usage.fuel)" -gt 100000 ]
	for l in "$b" "$c" "$d"; do
		assert_equal "$(sbx-lease log "$l" | tail -n1 | jq -r '"\(.edge) \(.reason) \(.usage.fuel)"')" \
			"settle run-died 0"
	done
	run sbx-lease verify
	assert_success
}

@test "fuel counts the whole tree, exited children included" {
	hog fuel --limits fuel=500000 -- /bin/sh -c \
		"$GUESTS/meter_hog spin 300; $GUESTS/meter_hog spin 300; $GUESTS/meter_hog spin 300; echo not reached"
	! grep -q "not reached" out || false
	[ "$(usage_of fuel)" -gt 500000 ]
}

@test "the relay loses and reorders nothing, also behind a slow reader" {
	seq 1 60000 >want
	run bash -c "sbx-run --ephemeral -- seq 1 60000 | cmp - want"
	assert_success
	run bash -c "sbx-run --ephemeral -- seq 1 60000 | (sleep 1; cat) | cmp - want"
	assert_success
	run bash -c "sbx-run --ephemeral -- /bin/sh -c 'echo out; echo err >&2' 2>err.txt"
	assert_success
	assert_output "out"
	assert_equal "$(cat err.txt)" "err"
}

@test "storage_write is counted at the storing calls, storage_read without a stop; relayed output is not storage" {
	# 2048 reads and 2048 writes of 4 KiB each way, then the file read back
	run sbx-run --ephemeral --result r.json -- /bin/sh -c \
		'dd if=/dev/zero of=/ns/f bs=4k count=2048 2>/dev/null && dd if=/ns/f of=/dev/null bs=4k 2>/dev/null'
	assert_success
	assert_equal "$(usage_of storage_write)" $(((8 << 20) + 4096)) # the bytes and one inode
	[ "$(usage_of storage_read)" -ge $((8 << 20)) ]
	# every write stopped (2048 into the file, 2048 into /dev/null); no read did
	[ "$(jq .supervisor.stops r.json)" -ge 4096 ]
	[ "$(jq .supervisor.stops r.json)" -lt $((4096 + 200)) ]
	# a megabyte on stdout is output, not storage
	sbx-run --ephemeral --result r.json -- /bin/sh -c 'head -c 1000000 /dev/zero' >out
	assert_equal "$(wc -c <out)" 1000000
	assert_equal "$(usage_of output_bytes)" 1000000
	assert_equal "$(usage_of storage_write)" 0
	[ "$(usage_of storage_read)" -ge 1000000 ]
}

@test "every admitted table_elements runs a guest: small bounds hold in the guest, not in set-up" {
	# the guest's descriptors 0-2 count: below 3 it is closed by its own bound
	for n in 1 2; do
		hog table_elements --limits "table_elements=$n" -- /bin/true
		refute grep -q 'landlock\|sandbox set-up' err
	done
	for n in 3 5 11 12 16; do
		run sbx-run --ephemeral --limits "table_elements=$n" --result r.json -- /bin/sh -c 'echo ran'
		assert_success
		assert_output ran
		assert_equal "$(jq -r .closed r.json)" null
	done
	# RLIMIT_NOFILE is the bound + 1: one past it is the kernel's refusal (a
	# guest holding bound + 1 is closed at once, so the limit is read, not met)
	run sbx-run --ephemeral --limits table_elements=5 -- /bin/sh -c 'ulimit -n; ulimit -Hn'
	assert_success
	assert_output "$(printf '6\n6')"
}

@test "the trace is the guest's storage: an exec loop at level all is closed by storage_write" {
	# fuel ends the run on a tree that does not meter the trace
	sbx-run --ephemeral --limits storage_write=1M,fuel=5000000 --trace t.jsonl --trace-level all \
		--result r.json -- /bin/sh -c 'while :; do /bin/true; done' >out 2>err || true
	assert_equal "$(jq -r .closed r.json)" storage_write
	size=$(stat -c %s t.jsonl)
	used=$(usage_of storage_write)
	# every trace byte but the closing line is in the usage; one tick of overshoot at most
	[ "$used" -le "$size" ]
	[ $((size - used)) -lt 4096 ]
	[ "$size" -le $((1048576 + 1048576)) ]
}

@test "the trace is held like a write: a guest at full speed at level all ends within one trace buffer of storage_write" {
	# every event is fed to the bound as the recorder flushes it (32 KiB), not once
	# a tick: before, a tick's events (45-83 KB here) passed the bound
	run sbx-run --ephemeral --limits storage_write=4M --trace t.jsonl --trace-level all \
		--result r.json -- /bin/dd if=/dev/zero of=/dev/null bs=1
	assert_equal "$status" 124
	assert_equal "$(jq -r .closed r.json)" storage_write
	[ "$(stat -c %s t.jsonl)" -le $(((4 << 20) + (36 << 10))) ]
}

@test "a page shared inside the tree counts once: 50 children sharing 30 MiB finish, 50 with their own are closed" {
	cat >share.py <<'PY'
import mmap, os, sys, time
own = sys.argv[1] == "own"
m = mmap.mmap(-1, 30 << 20)
if not own:
    for i in range(0, len(m), 4096): m[i] = 1
kids = []
for _ in range(50):
    pid = os.fork()
    if pid == 0:
        if own:
            mine = mmap.mmap(-1, 30 << 20)
            for i in range(0, len(mine), 4096): mine[i] = 1
        time.sleep(1.5)
        os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
print("finished")
PY
	run sbx-run --ephemeral --limits memory=256M --ro "$PWD/share.py:/share.py" --result r.json -- /usr/bin/python3 /share.py shared
	assert_success
	assert_output finished
	[ "$(usage_of memory)" -lt $((256 << 20)) ]
	run sbx-run --ephemeral --limits memory=256M --ro "$PWD/share.py:/share.py" --result r.json -- /usr/bin/python3 /share.py own
	assert_equal "$status" 124
	assert_equal "$(jq -r .closed r.json)" memory
}

@test "memory held in the run's tmpfs counts, and no tmpfs holds more than the memory bound" {
	# 512 MiB into /tmp and /dev/shm under memory=64M: the pages close the lease
	# on memory (the mount stops at 64 MiB, or the memory cgroup first)
	for d in /tmp /dev/shm; do
		run sbx-run --ephemeral --limits memory=64M --result r.json -- /bin/sh -c \
			"dd if=/dev/zero of=$d/big bs=1M count=512 2>&1; sleep 2"
		assert_equal "$status" 124
		assert_equal "$(jq -r .closed r.json)" memory
		# each mount's size is the bound
		run sbx-run --ephemeral --limits memory=64M -- /usr/bin/stat -f -c '%b %S' "$d"
		assert_success
		[ $(( ${output% *} * ${output#* } )) -eq $((64 << 20)) ]
	done
	# within the bound nothing changes
	run sbx-run --ephemeral --limits memory=256M -- /bin/sh -c 'dd if=/dev/zero of=/tmp/f bs=1M count=16 2>/dev/null && echo wrote'
	assert_success
	assert_output wrote
}

@test "the tracer, its waker and the observation writer run SCHED_FIFO where permitted; the guest and the relay do not" {
	[ "$(id -u)" = 0 ] || skip "needs root (SCHED_FIFO)"
	mkdir w
	sbx-run --ephemeral --rw "$PWD/w:/w" --result r.json -- /bin/sh -c \
		'cut -d" " -f41 /proc/self/stat >/w/pol; while [ ! -e /w/go ]; do sleep 0.05; done' &
	pid=$!
	for _ in $(seq 1 600); do [ -s w/pol ] && break; sleep 0.05; done
	# policy is /proc/PID/stat's field 41 (0 SCHED_OTHER, 1 SCHED_FIFO)
	pols=$(for t in /proc/"$pid"/task/*; do echo "$(cat "$t/comm") $(awk '{ print $(NF-11) }' "$t/stat")"; done | sort)
	init=$(cat /proc/"$pid"/task/*/children | awk '{ print $1 }')
	ipol=$(awk '{ print $(NF-11) }' "/proc/$init/stat")
	touch w/go
	wait "$pid"
	assert_equal "$(cat w/pol)" 0
	assert_equal "$ipol" 0
	assert_equal "$pols" "$(printf 'sbx-observe 1\nsbx-relay 0\nsbx-run 1\nsbx-waker 1')"
	assert_equal "$(jq -r .supervisor.priority r.json)" realtime
	# an unprivileged invoker runs all the same, at its own priority
	as_nobody
	run $AS sbx-run --ephemeral --result r.json -- /bin/true
	assert_success
	assert_equal "$(jq -r .supervisor.priority r.json)" normal
}

@test "an invoker's own scheduling is kept for the tracer; the guest never runs real-time nor above the invoker's nice" {
	[ "$(id -u)" = 0 ] || skip "needs root (SCHED_FIFO)"
	# /proc/PID/stat: field 19 is the nice value, field 41 the policy (1 SCHED_FIFO)
	g='cut -d" " -f19,41 /proc/self/stat'
	run chrt -f 1 sbx-run --ephemeral --result r.json -- /bin/sh -c "$g"
	assert_success
	assert_output "0 0"
	assert_equal "$(jq -r .supervisor.priority r.json)" invoker
	run nice -n 5 sbx-run --ephemeral --result r.json -- /bin/sh -c "$g"
	assert_success
	assert_output "5 0"
	assert_equal "$(jq -r .supervisor.priority r.json)" invoker
	# an invoker at a higher priority (nice -5) is raised; its guest is born at nice 0
	run nice -n -5 sbx-run --ephemeral --result r.json -- /bin/sh -c "$g"
	assert_success
	assert_output "0 0"
	assert_equal "$(jq -r .supervisor.priority r.json)" realtime
}

@test "a guest that keeps its tracer busy does not keep it real-time" {
	[ "$(id -u)" = 0 ] || skip "needs root (SCHED_FIFO)"
	# with ptrace stops (the default) the tracer is sbx-run's first thread; with user
	# notification its sbx-notify thread: every openat of the guest keeps it busy
	# (a file-level trace records each one)
	for how in ptrace notify; do
		SBX_FILE_TRACE=$how sbx-run --ephemeral --trace /dev/null --trace-level file -- \
			"$GUESTS/inspect_loop" 1000000000 &
		pid=$!
		stat=/proc/$pid/stat
		if [ $how = notify ]; then
			for _ in $(seq 1 600); do
				t=$(grep -l '^sbx-notify$' /proc/$pid/task/*/comm 2>/dev/null | head -n 1) &&
					[ -n "$t" ] && break
				sleep 0.05
			done
			stat=${t%/comm}/stat
		fi
		pol() { awk '{ print $(NF-11) }' "$stat"; }
		for _ in $(seq 1 600); do raised=$(pol) && [ "$raised" = 1 ] && break; sleep 0.05; done
		for _ in $(seq 1 600); do busy=$(pol) && [ "$busy" = 0 ] && break; sleep 0.05; done
		kill -TERM "$pid"
		wait "$pid" || true
		assert_equal "$raised" 1
		assert_equal "$busy" 0
	done
}
