#!/usr/bin/env bats
# Deterministic snapshots (SPEC §8, §9): sbx-run --deterministic --snapshot-at-step
# carries the determinism record, sbx-restore --trace-from continues the run's
# trace, and sbx-trace adjudicate starts from the latest such snapshot.
load helpers
load determ_project

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

# request + fund (+ activate with "active") a lease of namespace_bytes $3 (64M);
# prints its id
lease_new() {
	local image=$1 mode=$2 out
	out=$(sbx-lease request --image "$image" --escrow 10 --limits "namespace_bytes=${3:-64M}" |
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

@test "make -j2 of a generated project: snapshotted at step K, restored, the parallel build writes the uninterrupted run's trace and head (fails on main)" {
	gen_project proj
	id=$(lease_new "$(command -v make)" active)
	make_run "$id" a.trace --result a.json
	make_run "$id" s.trace --snapshot-at-step 40
	cmp a.trace s.trace
	d=$(snap_of "$id")
	k=$(sbx-snap show "$d" | jq .trace_seq)
	# the compilers run after the snapshot: what is restored is the parallel build
	spawn=$(jq -s '[.[] | select(.ev == "spawn")][0].seq' a.trace)
	[ "$k" -ge 40 ] && [ "$k" -lt "$spawn" ]
	rm -rf src
	cp -a proj src
	tgt=$(lease_new "$(command -v make)" funded)
	sbx-restore "$d" --lease "$tgt" --rw "$PWD/src:/src" --trace r.trace --trace-from a.trace \
		--result r.json >r.out 2>&1
	assert_equal "$(head_of r.trace)" "$(head_of a.trace)"
	cmp a.trace r.trace
	[ "$(src/prog)" = 2717 ]
	jq -e '.exit_code == 0 and .determinism.unscheduled == 0 and
		.determinism.stops.free > .determinism.stops.ordered' r.json
}

@test "adjudicate starts from the latest snapshot before the disputed step and names the right trace; without one, from the beginning (fails on main)" {
	mkdir in && echo passwd >in/f
	id=$(lease_new /bin/sh active)
	sh_run "$id" --trace a.trace --snapshot-at-step 20 >/dev/null
	sh_run "$id" --trace a2.trace --snapshot-at-step 40 >/dev/null
	echo nosuch >in/f
	sh_run "$id" --trace b.trace >/dev/null
	cmp a.trace a2.trace
	line=$(sbx-trace bisect a.trace b.trace | jq .first_divergent_line)
	latest=$(sbx-snap list "$id" | jq -r '.[].digest' | while read -r d; do
		echo "$(sbx-snap show "$d" | jq .trace_seq) $d"; done | sort -n | tail -n 1)
	[ "${latest% *}" -lt "$((line - 1))" ]
	# the input is B's: B is right, found from the later snapshot
	run sbx-trace adjudicate --env-clear --env PATH=/usr/bin:/bin a.trace b.trace
	assert_failure 11
	jq -e --arg d "${latest#* }" --argjson k "${latest% *}" '.verdict == "b" and .replay.from == "snapshot" and
		.replay.snapshot == $d and .replay.step == $k and .b.path == "/in/f" and .replay.event == .b and
		.replay.stopped == "disputed step reached"' <<<"$output"
	run sbx-trace adjudicate --format text --env-clear --env PATH=/usr/bin:/bin a.trace b.trace
	assert_failure 11
	assert_output --partial "re-executed from snapshot ${latest#* }, after event ${latest% *}"
	# A's input again: A is right
	echo passwd >in/f
	run sbx-trace adjudicate --env-clear --env PATH=/usr/bin:/bin a.trace b.trace
	assert_failure 10
	jq -e '.verdict == "a" and .replay.from == "snapshot"' <<<"$output"
	# a lease without a deterministic snapshot: from the beginning, and it says so
	id2=$(lease_new /bin/sh active)
	sh_run "$id2" --trace c.trace >/dev/null
	echo nosuch >in/f
	sh_run "$id2" --trace d.trace >/dev/null
	run sbx-trace adjudicate --format text --env-clear --env PATH=/usr/bin:/bin c.trace d.trace
	assert_failure 11
	assert_output --partial 're-executed from the start'
}

@test "adjudicate on make -j2 starts from the snapshot and says B is right (fails on main)" {
	gen_project proj
	cp -a proj projb
	sed -i 's/\* 5;/* 50;/' projb/m5.c
	id=$(lease_new "$(command -v make)" active)
	make_run "$id" a.trace --snapshot-at-step 40
	rm -rf proj && mv projb proj
	make_run "$id" b.trace
	rm -rf src
	cp -a proj src
	run sbx-trace adjudicate --allow-rw --timeout 900000 a.trace b.trace
	assert_failure 11
	jq -e --arg d "$(snap_of "$id")" '.verdict == "b" and .b.path == "/src/m5.c" and
		.replay.from == "snapshot" and .replay.snapshot == $d and .replay.stopped == "disputed step reached"' <<<"$output"
}

# make -j2 of proj (generated with -pipe) built in the lease's /ns, whose
# files a snapshot holds (the run's own /tmp it does not): lease $1, trace $2,
# more sbx-run options after; /ns emptied first (every run of a lease shares it).
ns_make_run() {
	rm -rf "${SBX_STORE:?}/ns/$1"
	sbx-run --lease "$1" --deterministic --ro "$PWD/proj:/in" --trace "$2" "${@:3}" \
		-- make -C /ns -f /in/Makefile VPATH=/in -j2 >"$2.out" 2>&1
}

# The processes alive in snapshot $1's own tree.
alive() {
	sbx-snap show "$1" | jq '[.processes[] | select(.zombie | not)] | length'
}

@test "make -j2 snapshotted mid-build, compilers running: restored, the parallel build writes the uninterrupted run's trace, head and program (fails on main)" {
	gen_project proj -pipe
	id=$(lease_new "$(command -v make)" active 512M)
	ns_make_run "$id" a.trace --result a.json
	cp "$SBX_STORE/ns/$id/prog" prog.a
	# half-way through the build: compilers started long before
	n=$(jq -s 'length' a.trace)
	spawn=$(jq -s '[.[] | select(.ev == "spawn")][2].seq' a.trace)
	k=$((n / 2))
	[ "$k" -gt "$spawn" ]
	ns_make_run "$id" s.trace --snapshot-at-step "$k" --result s.json
	# taking it neither moves nor changes the run
	cmp a.trace s.trace
	d=$(snap_of "$id")
	seq=$(sbx-snap show "$d" | jq .trace_seq)
	[ "$seq" -ge "$k" ] && [ "$seq" -lt "$((n - 2))" ]
	assert_equal "$(sbx-snap show "$d" | jq -r .trace_head)" "$(sed -n "$((seq + 1))p" a.trace | jq -r .h)"
	# the snapshot's own tree: make and at least one compiler alive
	[ "$(alive "$d")" -ge 2 ]
	tgt=$(lease_new "$(command -v make)" funded 512M)
	sbx-restore "$d" --lease "$tgt" --ro "$PWD/proj:/in" --trace r.trace --trace-from a.trace \
		--result r.json >r.out 2>&1
	assert_equal "$(head_of r.trace)" "$(head_of a.trace)"
	cmp a.trace r.trace
	cmp prog.a "$SBX_STORE/ns/$tgt/prog"
	[ "$("$SBX_STORE/ns/$tgt/prog")" = 2717 ]
	jq -e '.exit_code == 0 and .determinism.unscheduled == 0' r.json
}

@test "adjudicate on make -j2 restores a snapshot taken mid-build, processes alive, and says B is right (fails on main)" {
	gen_project proj -pipe
	cp -a proj proja
	sed -i 's/\* 5;/* 50;/' proj/m5.c
	id=$(lease_new "$(command -v make)" active 512M)
	ns_make_run "$id" b.trace
	mv proj projb && mv proja proj
	ns_make_run "$id" a.trace
	line=$(sbx-trace bisect a.trace b.trace | jq .first_divergent_line)
	spawn=$(jq -s '[.[] | select(.ev == "spawn")][2].seq' a.trace)
	k=$(((spawn + line) / 2))
	[ "$k" -gt "$spawn" ]
	ns_make_run "$id" a2.trace --snapshot-at-step "$k"
	cmp a.trace a2.trace
	d=$(snap_of "$id")
	seq=$(sbx-snap show "$d" | jq .trace_seq)
	[ "$seq" -lt "$((line - 1))" ]
	[ "$(alive "$d")" -ge 2 ]
	# the input is B's: B is right, found by a replay from the snapshot (the
	# lease's /ns as the runs began: empty)
	rm -rf proj && mv projb proj
	mkdir ns0
	run sbx-trace adjudicate --ns "$PWD/ns0" --timeout 900000 a.trace b.trace
	assert_failure 11
	jq -e --arg d "$d" --argjson k "$seq" '.verdict == "b" and .b.path == "/in/m5.c" and
		.replay.from == "snapshot" and .replay.snapshot == $d and .replay.step == $k and
		.replay.stopped == "disputed step reached"' <<<"$output"
}

# The image of snapshot $1 with its determinism record passed through the
# Python expression $2 (r: the record's bytes; returns new bytes, or None for a
# length field that claims more than there is), stored as a new snapshot; its digest.
forge() {
	python3 - "$SBX_STORE/snapshots" "$1" "$2" <<'PY'
import hashlib, json, os, struct, sys
top, d, expr = sys.argv[1], sys.argv[2], sys.argv[3]
src = os.path.join(top, d)
img = b"".join(open(os.path.join(src, c), "rb").read() for c in sorted(os.listdir(src)) if c.isdigit())
tag = b"determinism/v1"
at = img.rindex(struct.pack("<I", len(tag)) + tag) + 4 + len(tag)
(n,) = struct.unpack_from("<Q", img, at)
r = img[at + 8:at + 8 + n]
new = eval(expr)
img = img[:at] + (struct.pack("<Q", n + 64) + r if new is None else struct.pack("<Q", len(new)) + new)
h = hashlib.sha256(img).hexdigest()
out = os.path.join(top, h)
if os.path.exists(out):
    print(h)
    sys.exit(0)
os.mkdir(out)
chunks = [img[i:i + 65536] for i in range(0, len(img), 65536)]
for i, c in enumerate(chunks):
    open(os.path.join(out, "%06d" % i), "wb").write(c)
open(os.path.join(out, "manifest"), "wb").write(bytes.fromhex(h) + struct.pack("<QI", len(img), len(chunks)))
meta = json.load(open(os.path.join(src, "meta.json")))
meta.update(digest=h, bytes=len(img), chunks=len(chunks))
json.dump(meta, open(os.path.join(out, "meta.json"), "w"))
print(h)
PY
}

@test "a snapshot whose determinism record is truncated or corrupt is refused by verify and restore, nothing changed (fails on main)" {
	mkdir in && echo passwd >in/f
	id=$(lease_new /bin/sh active)
	sh_run "$id" --trace a.trace --snapshot-at-step 20 >/dev/null
	d=$(snap_of "$id")
	# the record taken apart and put back as it is: the same image (the forging is sound)
	[ "$(forge "$d" 'r')" = "$d" ]
	tgt=$(lease_new /bin/sh funded)
	# cut short: its last task is missing bytes
	cut=$(forge "$d" 'r[:-7]')
	run sbx-snap verify "$cut"
	assert_failure 1
	assert_output --partial 'determinism record is truncated'
	run sbx-restore "$cut" --lease "$tgt" --ro "$PWD/in:/in"
	assert_failure 1
	assert_output --partial 'determinism record is truncated'
	# a PRNG position past its block, and an unknown version
	bad=$(forge "$d" 'r[:-36] + struct.pack("<I", 99) + r[-32:]')
	run sbx-snap verify "$bad"
	assert_failure 1
	assert_output --partial 'determinism record is corrupt'
	ver=$(forge "$d" 'struct.pack("<I", 7) + r[4:]')
	run sbx-restore "$ver" --lease "$tgt" --ro "$PWD/in:/in"
	assert_failure 1
	assert_output --partial 'determinism record is corrupt'
	# a length beyond the image
	long=$(forge "$d" 'None')
	run sbx-snap verify "$long"
	assert_failure 1
	assert_output --partial 'determinism record exceeds its bound or the input'
	# nothing changed: the target is still Funded and uncharged
	[ "$(sbx-lease show "$tgt" | jq -r .lease.state)" = Funded ]
	[ "$(sbx-lease log "$tgt" | jq -s 'flatten | length')" -eq 2 ]
}
