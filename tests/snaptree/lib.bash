# The snaptree suite (tests/snaptree.bats): each guest tests/snaptree/NAME.c
# runs natively to its end, then under sbx-run in a lease of its own, is
# snapshotted with --stop at a random point, restored into a new lease, and
# what it printed before the snapshot plus what the restored run printed must
# be what the native run printed, with the same exit status.
#
# A guest's contract: it runs 1-4 s natively (beside its sandboxed run), its work spread over that time
# (small sleeps between steps), in a directory of its own (under sbx: /ns),
# and prints deterministic output on stdout: the same bytes on every run,
# whatever the scheduling (one writer, or writers ordered by waits).
# SNAPTREE_DELAY=SECONDS fixes the point of the snapshot (after the guest's
# control socket appears); the chosen one is printed when a case fails.

# request + fund (+ activate with "active") a lease of image $1; prints its id
snaptree_lease() {
	local out
	out=$(sbx-lease request --image "$1" --escrow 10 --limits namespace_bytes=256M |
		sbx-lease fund --amount 10 --evidence -)
	[ "$2" = active ] && out=$(printf '%s' "$out" | sbx-lease activate --evidence -)
	printf '%s' "$out" | jq -r .lease.id
}

snaptree_case() {
	local name=$1 g="$GUESTS/snaptree/$1" t="$BATS_TEST_TMPDIR" src tgt pid digest
	local want st_native=0 st_src=0 st_tgt=0 delay npid
	mkdir -p "$t/native"
	# the native run goes on beside the sandboxed one (a guest mostly sleeps):
	# the suite takes half the time
	(cd "$t/native" && "$g" >"$t/native.out"; echo $? >"$t/native.st") &
	npid=$!
	src=$(snaptree_lease "$g" active)
	sbx-run --lease "$src" -- "$g" >"$t/src.out" 2>"$t/src.err" &
	pid=$!
	for _ in $(seq 1 200); do
		[ -S "$SBX_STORE/run/$src.sock" ] && break
		sleep 0.02
	done
	delay=${SNAPTREE_DELAY:-0.$((RANDOM % 9 + 1))$((RANDOM % 10))}
	echo "# snaptree $name: snapshot after ${delay}s"
	sleep "$delay"
	# the control socket comes before the guest's first exec
	for _ in $(seq 1 50); do
		run sbx-snap take "$src" --stop
		[[ $output == *"no lease guest"* || $output == *"try again"* ]] || break
		sleep 0.1
	done
	wait "$pid" || st_src=$?
	if [ "$status" -ne 0 ]; then
		wait "$npid"
		echo "# take failed: $output"
		cat "$t/src.err"
		return 1
	fi
	digest=$(printf '%s' "$output" | jq -r .digest)
	[ "$(sbx-lease show "$src" | jq -r .lease.state)" = Active ]
	tgt=$(snaptree_lease "$g" funded)
	sbx-restore "$digest" --lease "$tgt" >"$t/tgt.out" 2>"$t/tgt.err" || st_tgt=$?
	wait "$npid"
	want=$(cat "$t/native.out")
	st_native=$(cat "$t/native.st")
	if [ "$(cat "$t/src.out" "$t/tgt.out")" != "$want" ] || [ "$st_tgt" -ne "$st_native" ]; then
		echo "# exit: native $st_native, source $st_src, restored $st_tgt"
		diff <(printf '%s\n' "$want") <(cat "$t/src.out" "$t/tgt.out") | head -n 40
		echo "# source stderr:"; head -c 4000 "$t/src.err"
		echo "# restore stderr:"; head -c 4000 "$t/tgt.err"
		return 1
	fi
}
