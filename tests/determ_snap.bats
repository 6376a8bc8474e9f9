#!/usr/bin/env bats
# Deterministic snapshots (SPEC §8, §9): sbx-run --deterministic --snapshot-at-step
# carries the determinism record, sbx-restore --trace-from continues the run's
# trace, and sbx-trace adjudicate starts from the latest such snapshot.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

# request + fund (+ activate with "active") a lease; prints its id
lease_new() {
	local image=$1 mode=$2 out
	out=$(sbx-lease request --image "$image" --escrow 10 --limits namespace_bytes=64M |
		sbx-lease fund --amount 10 --evidence -)
	[ "$mode" = active ] && out=$(printf '%s' "$out" | sbx-lease activate --evidence -)
	printf '%s' "$out" | jq -r .lease.id
}

# The head of a trace: its last event's chain value.
head_of() {
	tail -n 1 "$1" | jq -r .h
}

# The only snapshot of lease $1.
snap_of() {
	sbx-snap list "$1" | jq -r 'if length == 1 then .[0].digest else error("not one snapshot") end'
}

# A sequential guest: a shell loop of clock reads, random bytes and child
# processes, then a read of /in/f.
SCRIPT='i=0; while [ $i -lt 6 ]; do echo "step $i $(date +%s.%N)"; head -c 4 /dev/urandom | od -An -tx1; i=$((i+1)); done; stat -c "%n %i %Y %Z" /tmp /in/f; cat /in/f; echo done'

sh_run() {
	sbx-run --lease "$1" --deterministic --env-clear --env PATH=/usr/bin:/bin --ro "$PWD/in:/in" "${@:2}" \
		-- /bin/sh -c "$SCRIPT"
}

# A 12-module C project (and main.c) with a Makefile, in $1 (as tests/determ.bats).
gen_project() {
	mkdir -p "$1"
	for i in $(seq 1 12); do
		printf 'int f%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * %d; return s; }\n' \
			"$i" "$i" >"$1/m$i.c"
	done
	{
		printf '#include <stdio.h>\n'
		for i in $(seq 1 12); do printf 'int f%d(int);\n' "$i"; done
		printf 'int main(void) { long s = 0;\n'
		for i in $(seq 1 12); do printf 's += f%d(%d);\n' "$i" "$i"; done
		printf 'printf("%%ld\\n", s); return 0; }\n'
	} >"$1/main.c"
	{
		printf 'OBJ = main.o'
		for i in $(seq 1 12); do printf ' m%d.o' "$i"; done
		printf '\nprog: $(OBJ)\n\tcc -o $@ $(OBJ)\n%%.o: %%.c\n\tcc -O1 -c $< -o $@\n'
	} >"$1/Makefile"
}

# make -j2 of a fresh copy of proj in src, lease $1, trace $2, more sbx-run options after
make_run() {
	rm -rf src
	cp -a proj src
	sbx-run --lease "$1" --deterministic --rw "$PWD/src:/src" --trace "$2" "${@:3}" -- make -C /src -j2 >"$2.out" 2>&1
}

@test "a sequential guest snapshotted at step K and restored writes the uninterrupted run's trace from K on, byte for byte (fails on main: no --snapshot-at-step)" {
	mkdir in && echo passwd >in/f
	id=$(lease_new /bin/sh active)
	sh_run "$id" --trace a.trace >a.out
	# the snapshot neither moves nor changes the run it is taken of
	sh_run "$id" --trace s.trace --snapshot-at-step 40 --result s.json >s.out
	cmp a.trace s.trace
	cmp a.out s.out
	d=$(snap_of "$id")
	run sbx-snap verify "$d"
	assert_success
	k=$(sbx-snap show "$d" | jq .trace_seq)
	[ "$k" -ge 40 ] && [ "$k" -lt "$(jq -s 'length - 2' a.trace)" ]
	# the snapshot names the chain value after its K events
	assert_equal "$(sbx-snap show "$d" | jq -r .trace_head)" "$(sed -n "$((k + 1))p" a.trace | jq -r .h)"
	tgt=$(lease_new /bin/sh funded)
	sbx-restore "$d" --lease "$tgt" --env-clear --env PATH=/usr/bin:/bin --ro "$PWD/in:/in" \
		--trace r.trace --trace-from a.trace --result r.json >r.out
	# the same events from K on (clock, random bytes, pids, inode numbers), the same head
	cmp a.trace r.trace
	run sbx-trace verify --complete r.trace
	assert_success
	# and what the guest printed after the snapshot is what the run printed
	[ "$(wc -l <r.out)" -ge 3 ] && [ "$(wc -l <r.out)" -lt "$(wc -l <a.out)" ]
	assert_equal "$(tail -n "$(wc -l <r.out)" a.out)" "$(cat r.out)"
	jq -e '.exit_code == 0 and .determinism.emulated > 0' r.json
	# a trace of another run is refused before anything changes
	sed '$d' a.trace | head -n 5 >short.trace
	tgt2=$(lease_new /bin/sh funded)
	run sbx-restore "$d" --lease "$tgt2" --env-clear --env PATH=/usr/bin:/bin --ro "$PWD/in:/in" \
		--trace r2.trace --trace-from short.trace
	assert_failure
	assert_output --partial 'the snapshot was taken after'
	# without --trace-from the restored trace could not continue the chain: refused
	run sbx-restore "$d" --lease "$tgt2" --ro "$PWD/in:/in" --trace r3.trace
	assert_failure
	assert_output --partial 'give the trace it wrote with --trace-from FILE'
	[ "$(sbx-lease show "$tgt2" | jq -r .lease.state)" = Funded ]
}
