#!/usr/bin/env bats
# sbx-run --chain N: a job bigger than one lease runs as a chain of bounded leases,
# each link snapshotted near its bound, settled, and restored into the next.
load helpers
bats_require_minimum_version 1.5.0

W=snap_chainwriter # MiB [threads]: writes, overwrites, deletes; checksums on stdout

# the guest's output without a sandbox, in a directory of its own
native() {
	mkdir -p "$BATS_TEST_TMPDIR/native"
	(cd "$BATS_TEST_TMPDIR/native" && "$GUESTS/$W" "$@") || [ $? = 7 ]
}

links() { jq -c '[.links[] | {link: .link, end: .end}]' "$BATS_TEST_TMPDIR/res.json"; }
nlinks() { jq '.links | length' "$BATS_TEST_TMPDIR/res.json"; }

@test "chain: 200 MiB of writes under storage_write=64M complete as >= 3 leases, output as native" {
	native 200 >"$BATS_TEST_TMPDIR/native.out"
	run --separate-stderr sbx-run --ephemeral --limits storage_write=64M --chain 8 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 200
	[ "$status" -eq 7 ] # the guest's own status
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/native.out")" ]
	[ "$(nlinks)" -ge 3 ]
	jq -e '.exit_code == 7 and .status == 7 and .closed == null' "$BATS_TEST_TMPDIR/res.json"
	# every link but the last ended near storage_write with a snapshot; each under its bound
	jq -e '.links[:-1] | all(.end == "chain: storage_write" and (.snapshot | length) == 64)' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[-1] | .end == "exit 7" and .snapshot == null' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links | all(.usage.storage_write <= 67108864)' "$BATS_TEST_TMPDIR/res.json"
	jq -e '[.links[].usage.storage_write] | add >= 209715200' "$BATS_TEST_TMPDIR/res.json"
	# each link names the one before, and has its own receipts, settled (one-shot: destroyed)
	jq -e '.links | . as $l | [range(1; length)] | all($l[.].prev == $l[. - 1].lease)' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[0].prev == null' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links | all(. as $k | .receipts | all(.lease == $k.lease) and
		(map(.edge) | index("settle") != null and index("destroy") != null))' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[1:] | all(.receipts | map(.edge) | .[0:3] == ["request", "fund", "restore"])' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[:-1] | all(.receipts | map(.edge) | index("snapshot") != null)' \
		"$BATS_TEST_TMPDIR/res.json"
	run sbx-lease verify
	assert_success
}

# make -j2 of tests/chain-project.sh's project ($1 modules, $2 KiB kept, $3 KiB
# dropped by the link) natively in native/ and under --limits storage_write=$4
# --chain $5 in a --rw bind src/; every object and the binary compared
chain_build() {
	local d=$BATS_TEST_TMPDIR f
	rm -rf "$d/native" "$d/src"
	sh "$BATS_TEST_DIRNAME/chain-project.sh" "$d/native" "$1" "$2" "$3"
	sh "$BATS_TEST_DIRNAME/chain-project.sh" "$d/src" "$1" "$2" "$3"
	make -s -C "$d/native" -j2 >/dev/null
	chmod -R a+rwX "$d/src"
	run --separate-stderr sbx-run --ephemeral --limits "storage_write=$4" --chain "$5" \
		--rw "$d/src:/src" --result "$d/res.json" -- /usr/bin/make -s -C /src -j2
	[ "$status" -eq 0 ] || { echo "$stderr" | tail -n 5 >&2; links >&2; return 1; }
	for f in "$d"/native/*.o "$d/native/prog"; do
		cmp "$f" "$d/src/${f##*/}"
	done
	[ "$("$d/src/prog")" = "$("$d/native/prog")" ]
}

@test "chain: make -j2 whose compilers write over 3x the bound, 5 runs of 5: objects and binary as native (fails on main: a compiler's write crossed the bound before the tick's snapshot)" {
	for i in 1 2 3 4 5; do
		# 3 objects of 1 MiB, a 3 MiB binary: over 6 MiB under 2 MiB
		chain_build 3 1024 0 2M 16
		[ "$(nlinks)" -ge 4 ]
		jq -e '.closed == null and .exit_code == 0' "$BATS_TEST_TMPDIR/res.json"
		jq -e '.links[:-1] | all(.end == "chain: storage_write")' "$BATS_TEST_TMPDIR/res.json"
		jq -e '.links | all(.usage.storage_write <= 2097152)' "$BATS_TEST_TMPDIR/res.json"
		jq -e '[.links[].usage.storage_write] | add >= 6291456' "$BATS_TEST_TMPDIR/res.json"
	done
}

@test "chain: a generated build writing 192 MiB under storage_write=64M completes as >= 3 leases, objects and binary as native (fails on main)" {
	# 6 objects of 16 MiB, a 96 MiB binary (ld writes each array whole)
	chain_build 6 16384 0 64M 8
	[ "$(nlinks)" -ge 3 ]
	jq -e '.links[:-1] | all(.end == "chain: storage_write" and (.snapshot | length) == 64)' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[-1].end == "exit 0"' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links | all(.usage.storage_write <= 67108864)' "$BATS_TEST_TMPDIR/res.json"
	jq -e '[.links[].usage.storage_write] | add >= 201326592' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links | . as $l | [range(1; length)] | all($l[.].prev == $l[. - 1].lease)' \
		"$BATS_TEST_TMPDIR/res.json"
}

@test "chain: a take while a task waits in vfork for its child is refused at once, try again (fails on main: the take waited for the child, the supervisor with it)" {
	g="$GUESTS/snaptree/vfork_wait"
	out=$(sbx-lease request --image "$g" --escrow 10 | sbx-lease fund --amount 10 --evidence - |
		sbx-lease activate --evidence -)
	id=$(printf '%s' "$out" | jq -r .lease.id)
	sbx-run --lease "$id" -- "$g" >"$BATS_TEST_TMPDIR/out" 2>&1 &
	pid=$!
	for _ in $(seq 1 200); do
		grep -q "child napping" "$BATS_TEST_TMPDIR/out" && break
		sleep 0.05
	done
	grep -q "child napping" "$BATS_TEST_TMPDIR/out"
	run timeout 20 sbx-snap take "$id"
	if [ "$status" -eq 124 ]; then # hung, the run's supervisor with it
		kill -9 "$pid"
		false
	fi
	kill "$pid"
	wait "$pid" || true
	assert_failure
	assert_output --partial "waits for its vfork child to start a program: try again"
}

@test "chain: sbx-lease log --chain shows every link, each request naming the previous" {
	run --separate-stderr sbx-run --ephemeral --limits storage_write=16M --chain 8 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 40
	[ "$status" -eq 7 ]
	last=$(jq -r '.links[-1].lease' "$BATS_TEST_TMPDIR/res.json")
	run sbx-lease log --chain "$last"
	assert_success
	# the leases in order, oldest first, as the result lists them
	[ "$(printf '%s\n' "$output" | jq -r .lease | uniq | jq -R . | jq -sc .)" = \
	  "$(jq -c '[.links[].lease]' "$BATS_TEST_TMPDIR/res.json")" ]
	[ "$(printf '%s\n' "$output" | jq -c 'select(.edge == "request") | .request.prev')" = \
	  "$(jq -c '.links[].prev' "$BATS_TEST_TMPDIR/res.json")" ]
	run sbx-lease --format text log --chain "$last"
	assert_success
	assert_line --partial "lease $last prev $(jq -r '.links[-2].lease' "$BATS_TEST_TMPDIR/res.json")"
	# without --chain: the one lease
	run sbx-lease log "$last"
	assert_success
	[ "$(printf '%s\n' "$output" | jq -r .lease | sort -u)" = "$last" ]
}

@test "chain: --chain 1 ends on the bound as a run without a chain does" {
	run --separate-stderr sbx-run --ephemeral --limits storage_write=64M --chain 1 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 200
	[ "$status" -eq 124 ]
	jq -e '.closed == "storage_write" and (.links | length) == 1' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[0] | .end == "bound: storage_write" and .snapshot == null' \
		"$BATS_TEST_TMPDIR/res.json"
}

@test "chain: too few links: the last one ends on its bound, output so far as native" {
	native 200 >"$BATS_TEST_TMPDIR/native.out"
	run --separate-stderr sbx-run --ephemeral --limits storage_write=64M --chain 2 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 200
	[ "$status" -eq 124 ]
	[ "$(links)" = '[{"link":1,"end":"chain: storage_write"},{"link":2,"end":"bound: storage_write"}]' ]
	jq -e '.closed == "storage_write"' "$BATS_TEST_TMPDIR/res.json"
	# what it printed is the native output's beginning, seamlessly across the link
	[ -n "$output" ]
	[ "$output" = "$(head -n "$(printf '%s\n' "$output" | wc -l)" "$BATS_TEST_TMPDIR/native.out")" ]
	[ "$(printf '%s\n' "$output" | wc -l)" -gt 7 ]
}

@test "chain: threads racing writes at full speed: no link ends above its bound" {
	native 120 2 | sort >"$BATS_TEST_TMPDIR/native.out"
	run --separate-stderr sbx-run --ephemeral --limits storage_write=32M --chain 12 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 120 2
	[ "$status" -eq 7 ]
	[ "$(printf '%s\n' "$output" | sort)" = "$(cat "$BATS_TEST_TMPDIR/native.out")" ]
	[ "$(nlinks)" -ge 4 ]
	jq -e '.links | all(.usage.storage_write <= 33554432)' "$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[:-1] | all(.end == "chain: storage_write")' "$BATS_TEST_TMPDIR/res.json"
}

@test "chain: a shell asleep in wait4 when the link ends near storage_read is snapshotted, not waited for" {
	# under storage_read=8M every call stops (PTRACE_SYSCALL): the interrupt that
	# brings the shell to a boundary meets its wait's exit stop first, which used
	# to clear it; the take then waited forever (and SIGTERM could not end it)
	run --separate-stderr timeout -k 10 120 sbx-run --ephemeral --limits storage_read=8M --chain 4 \
		--result "$BATS_TEST_TMPDIR/res.json" -- \
		/bin/sh -c 'dd if=/dev/zero of=/dev/null bs=64k count=115 2>/dev/null; sleep 1; echo after'
	echo "status $status stderr $stderr"; jq -c '[.links[] | [.end, .usage.storage_read]]' "$BATS_TEST_TMPDIR/res.json" || true
	[ "$status" -eq 0 ]
	[ "$output" = after ]
	jq -e '.links[0] | .end == "chain: storage_read" and (.snapshot | length) == 64' \
		"$BATS_TEST_TMPDIR/res.json"
	jq -e '.links[-1].end == "exit 0" and (.links | all(.usage.storage_read <= 8388608))' \
		"$BATS_TEST_TMPDIR/res.json"
}

@test "chain: one write larger than a whole lease ends on the bound: the bound is a bound" {
	# 8 MiB writes under a 6 MiB bound: no fresh lease could take one
	run --separate-stderr sbx-run --ephemeral --limits storage_write=6M --chain 8 \
		--result "$BATS_TEST_TMPDIR/res.json" -- /bin/dd if=/dev/zero of=/ns/big bs=8M count=2
	[ "$status" -eq 124 ]
	jq -e '.closed == "storage_write" and (.links | length) == 1' "$BATS_TEST_TMPDIR/res.json"
}

@test "chain: --lease: the new links are requested like it, the last left Active" {
	out=$(sbx-lease request --image "$GUESTS/$W" --escrow 10 --limits storage_write=16M |
		sbx-lease fund --amount 10 --evidence - | sbx-lease activate --evidence -)
	id=$(printf '%s' "$out" | jq -r .lease.id)
	run --separate-stderr sbx-run --lease "$id" --chain 8 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 40
	[ "$status" -eq 7 ]
	[ "$(nlinks)" -ge 3 ]
	jq -e --arg id "$id" '.links[0].lease == $id' "$BATS_TEST_TMPDIR/res.json"
	for l in $(jq -r '.links[:-1][].lease' "$BATS_TEST_TMPDIR/res.json"); do
		[ "$(sbx-lease show "$l" | jq -r .lease.state)" = Settling ]
	done
	last=$(jq -r '.links[-1].lease' "$BATS_TEST_TMPDIR/res.json")
	sbx-lease show "$last" | jq -e --arg id "$id" --arg p "$(jq -r '.links[-2].lease' "$BATS_TEST_TMPDIR/res.json")" \
		'.lease.state == "Active" and .lease.prev == $p and
		 .lease.limits.storage_write == 16777216 and .lease.escrow == 10'
	sbx-lease show "$id" | jq -e '.lease.prev == null'
}

@test "chain: a link that cannot be requested ends the run with an error; the snapshot is kept" {
	out=$(sbx-lease request --image "$GUESTS/$W" --escrow 10 --limits storage_write=16M |
		sbx-lease fund --amount 10 --evidence - | sbx-lease activate --evidence -)
	id=$(printf '%s' "$out" | jq -r .lease.id)
	# 31 more live leases: the principal's 32 slots are full when the chain needs a second
	for _ in $(seq 1 31); do
		sbx-lease request --image "$GUESTS/$W" >/dev/null
	done
	run --separate-stderr sbx-run --lease "$id" --chain 8 \
		--result "$BATS_TEST_TMPDIR/res.json" -- "$GUESTS/$W" 40
	[ "$status" -eq 125 ]
	[[ "$stderr" == *"chain: link 2 after lease $id (its snapshot "*" is kept in the store's snapshots"* ]]
	[[ "$stderr" == *"32 live leases"* ]]
	digest=$(jq -r '.links[0].snapshot' "$BATS_TEST_TMPDIR/res.json")
	[ -d "$SBX_STORE/snapshots/$digest" ]
	jq -e '.exit_code == 125 and (.error | test("link 2")) and (.links | length) == 1' \
		"$BATS_TEST_TMPDIR/res.json"
	[ "$(sbx-lease show "$id" | jq -r .lease.state)" = Settling ]
	run sbx-snap verify "$digest"
	assert_success
}

@test "chain: --chain is refused with --trace, the state fd or --deterministic, and 0" {
	run sbx-run --ephemeral --chain 2 --trace "$BATS_TEST_TMPDIR/t" -- /bin/true
	[ "$status" -eq 125 ]
	assert_output --partial "--chain: not with --trace"
	run sbx-run --ephemeral --chain 0 -- /bin/true
	[ "$status" -eq 125 ]
}

@test "chain: a lease request names its prev: the same principal's lease that exists" {
	a=$(sbx-lease request --image "$GUESTS/$W" | jq -r .lease.id)
	run sbx-lease request --image "$GUESTS/$W" --prev "$a"
	assert_success
	[ "$(printf '%s' "$output" | jq -r .lease.prev)" = "$a" ]
	[ "$(printf '%s' "$output" | jq -r .receipt.request.prev)" = "$a" ]
	run sbx-lease request --image "$GUESTS/$W" --prev L00000000000000ff
	assert_failure
	assert_output --partial "prev L00000000000000ff: no such lease"
	run sbx-lease request --image "$GUESTS/$W" --prev nonsense
	assert_failure
	assert_output --partial "is not a lease id"
	run sbx-lease request --image "$GUESTS/$W" --principal other --prev "$a"
	assert_failure
	assert_output --partial "not other's"
	run sbx-lease verify
	assert_success
}

@test "chain: a lease near the end of its lifetime hands the run to the next link" {
	sbx-lease clock manual >/dev/null
	mkdir "$BATS_TEST_TMPDIR/native"
	want=$(cd "$BATS_TEST_TMPDIR/native" && "$GUESTS/snap_steps" 150 | tail -n 1)
	sbx-run --ephemeral --lifetime 8 --chain 3 --result "$BATS_TEST_TMPDIR/res.json" \
		-- "$GUESTS/snap_steps" 150 >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	id=
	for _ in $(seq 1 400); do # the first link's lease, once its guest has stepped twice
		sock=$(ls "$SBX_STORE/run/"*.sock 2>/dev/null | head -n 1)
		[ -n "$sock" ] && id=$(basename "$sock" .sock)
		[ -n "$id" ] && [ "$(cat "$SBX_STORE/ns/$id/steps.log" 2>/dev/null | wc -l)" -ge 2 ] &&
			break
		sleep 0.05
	done
	[ -n "$id" ]
	sbx-lease tick 7 >/dev/null # 7 of 8 batches: the run's next tick ends the link
	wait "$pid"
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/out")" = "$want" ]
	jq -e --arg id "$id" '(.links | length) == 2 and .links[0].lease == $id and
		.links[0].end == "chain: lifetime" and .links[1].end == "exit 0" and .status == 0' \
		"$BATS_TEST_TMPDIR/res.json"
	# the second link was requested at batch 7: its own 8 batches
	jq -e '.links[1].receipts[0].request | .deadline == 15 and .prev != null' \
		"$BATS_TEST_TMPDIR/res.json"
}

@test "chain: a shell's own /dev/null across the links, the run's stdin the host's /dev/null (fails on main: restored as a read-only copy of stdin, EBADF)" {
	# the shell holds /dev/null write-only (3) and read-write (4); tee and cat
	# write to a /dev/null of their own, one of them at each link's end
	run --separate-stderr sbx-run --ephemeral --limits storage_write=6M --chain 12 \
		--result "$BATS_TEST_TMPDIR/res.json" -- /bin/sh -c 'cd /ns && exec 3>/dev/null 4<>/dev/null
		i=0
		while [ $i -lt 24 ]; do
			head -c 1048576 /dev/zero | tee f >/dev/null && cat f >/dev/null &&
				echo kept >&3 && echo both >&4 && rm f || exit 9
			i=$((i + 1))
			echo $i
		done' </dev/null
	echo "status $status stderr $stderr"; links || true
	[ "$status" -eq 0 ]
	[ "$output" = "$(seq 1 24)" ]
	[ "$(nlinks)" -ge 3 ]
	jq -e '.links[:-1] | all(.end == "chain: storage_write")' "$BATS_TEST_TMPDIR/res.json"
}

# a 3-module project whose compilers write assembly of ~1 MiB each to the run's
# /tmp (no -pipe: cc1 writes /tmp/ccXXXXXX.s, as reads it), in $1
tmp_project() {
	mkdir -p "$1"
	for i in 1 2 3; do
		awk -v i="$i" 'BEGIN {
			printf "unsigned int t%d[] = {", i
			for (k = 0; k < 65536; k++) printf "%u,", (k * 2654435761 + i) % 4294967296
			print "};"
			printf "unsigned long mod%d(unsigned long x)\n{\n", i
			printf "\tfor (unsigned k = 0; k < sizeof t%d / sizeof *t%d; k++)\n", i, i
			printf "\t\tx = x * 31 + t%d[k];\n\treturn x;\n}\n", i
		}' >"$1/m$i.c"
	done
	printf '#include <stdio.h>\nunsigned long mod1(unsigned long), mod2(unsigned long), mod3(unsigned long);\nint main(void) { printf("%%lx\\n", mod3(mod2(mod1(1)))); return 0; }\n' >"$1/main.c"
	printf 'prog: main.o m1.o m2.o m3.o\n\t/usr/bin/gcc -o $@ $^\n%%.o: %%.c\n\t/usr/bin/gcc -O2 -c -o $@ $<\n' >"$1/Makefile"
}

@test "chain: make -j2 without -pipe, links ending while the compilers' files sit in /tmp: objects and binary as native (fails on main: the restored run's /tmp was empty)" {
	d=$BATS_TEST_TMPDIR
	tmp_project "$d/native"
	tmp_project "$d/src"
	make -s -C "$d/native" -j2 >/dev/null
	chmod -R a+rwX "$d/src"
	run --separate-stderr sbx-run --ephemeral --limits storage_write=1M --chain 24 \
		--rw "$d/src:/src" --result "$d/res.json" -- /usr/bin/make -s -C /src -j2
	[ "$status" -eq 0 ] || { echo "$stderr" | tail -n 5 >&2; links >&2; false; }
	[ "$(nlinks)" -ge 3 ]
	for f in main.o m1.o m2.o m3.o prog; do
		cmp "$d/native/$f" "$d/src/$f"
	done
	[ "$("$d/src/prog")" = "$("$d/native/prog")" ]
}

@test "chain: a shell that sent its own output to a log and /dev/null (exec 3>&1 >log 2>/dev/null) across the links: the log holds every line, the run's output only what went to 3 (fails on main: restored as the run's stdout and stderr)" {
	run --separate-stderr sbx-run --ephemeral --limits storage_write=6M --chain 12 \
		--result "$BATS_TEST_TMPDIR/res.json" -- /bin/sh -c 'cd /ns && exec 3>&1 >log 2>/dev/null
		i=0
		while [ $i -lt 24 ]; do
			head -c 1048576 /dev/zero >f && rm f || exit 9
			i=$((i + 1))
			echo "line $i"
			echo "noise $i" >&2
		done
		wc -l <log >&3' </dev/null
	echo "status $status stderr $stderr"; links || true
	[ "$status" -eq 0 ]
	[ "$output" = 24 ]
	[ -z "$stderr" ]
	[ "$(nlinks)" -ge 3 ]
}
