#!/usr/bin/env bats
# Crash safety: SIGKILL sbx-lease at every fault point of every transition, then
# verify: the store is never inconsistent and no journaled receipt is lost.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
	sbx-lease clock manual >/dev/null
}

EDGES="request fund activate observe settle expire destroy"

# Run one edge against the head in $1 (a {"lease","receipt"} file); output on stdout.
edge() {
	local e=$1 head=$2
	case $e in
	request) sbx-lease request --image /bin/true --lifetime 1 --escrow 2 --fees fuel=1 --principal crash ;;
	fund) sbx-lease fund --amount 3 --evidence "$head" ;;
	observe) sbx-lease observe --usage fuel=1 --evidence "$head" ;;
	*) sbx-lease "$e" --evidence "$head" ;;
	esac
}

# Drive a fresh lease through the edges before $1, then kill the process at fault $2
# while it performs edge $1; check the store, then finish the lifecycle.
crash_at() {
	local target=$1 fault=$2 id="" n=0 rc
	rm -f head.json
	for e in $EDGES; do
		[ "$e" = expire ] && sbx-lease tick >/dev/null
		if [ "$e" = "$target" ]; then
			set +e
			SBX_FAULT=$fault edge "$e" head.json >out.json 2>err.txt
			rc=$?
			set -e
			# the fault point must really be reached: killed by SIGKILL
			[ "$rc" -eq 137 ] || { echo "edge $e/$fault: rc=$rc, not killed: $(cat err.txt)"; return 1; }
			run sbx-lease verify
			[ "$status" -eq 0 ] || { echo "after $fault in $e: $output"; return 1; }
			if [ -z "$id" ]; then
				# a killed request: the lease exists iff its receipt was journaled
				id=$(sbx-lease list --principal crash --state Requested | jq -r .id | tail -1)
				[ -n "$id" ] || { [ "$fault" = lease-after-journal ] && { echo "lost request receipt"; return 1; }; return 0; }
			fi
			sbx-lease show "$id" >head.json
			got=$(sbx-lease log "$id" | wc -l)
			# every fault point is after the journal append: the receipt must be there
			[ "$got" -eq $((n + 1)) ] || { echo "$e/$fault: $got receipts, want $((n + 1))"; return 1; }
			[ "$(sbx-lease log "$id" | tail -1 | jq -r .digest)" = "$(jq -r .receipt.digest head.json)" ] ||
				{ echo "head is not the last receipt"; return 1; }
		else
			edge "$e" head.json >out.json
			mv out.json head.json
		fi
		id=$(jq -r .lease.id head.json)
		n=$((n + 1))
	done
	assert_equal "$(jq -r .lease.state head.json)" Destroyed
	run sbx-lease verify
	assert_success
}

@test "SIGKILL after the journal append, at every edge" {
	for e in $EDGES; do crash_at "$e" lease-after-journal; done
}

@test "SIGKILL after the record write, at every edge" {
	for e in $EDGES; do crash_at "$e" lease-after-record; done
}

@test "SIGKILL before the record rename and before the slot-index rename" {
	for e in request fund destroy; do crash_at "$e" atomic-before-rename:1; done
	for e in request expire; do crash_at "$e" atomic-before-rename:2; done
}

@test "SIGKILL after the effects (namespace, slots)" {
	for e in request expire destroy; do crash_at "$e" lease-after-effects; done
}

@test "a torn journal tail (killed mid-append) is cut and the store verifies" {
	sbx-lease request --image /bin/true >r.json
	before=$(cat "$SBX_STORE/journal.jsonl")
	printf '{"v":1,"lease":"L00' >>"$SBX_STORE/journal.jsonl"
	run sbx-lease verify
	assert_success
	assert_equal "$(cat "$SBX_STORE/journal.jsonl")" "$before"
	run sbx-lease fund --amount 1 --evidence r.json
	assert_success
}

@test "random SIGKILLs during a stream of transitions never break the store" {
	for i in $(seq 8); do
		# its own process group, so one kill reaches every stage of the pipeline
		setsid bash -c 'sbx-lease request --image /bin/true --principal rnd |
			sbx-lease fund --amount 1 --evidence - | sbx-lease activate --evidence - |
			sbx-lease observe --usage fuel=5 --evidence - | sbx-lease settle --evidence - |
			sbx-lease expire --evidence - | sbx-lease destroy --evidence -' >/dev/null 2>&1 &
		pid=$!
		sleep "0.0$((RANDOM % 3))$((RANDOM % 10))"
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		run sbx-lease verify
		[ "$status" -eq 0 ] || { echo "iteration $i: $output"; false; }
	done
}
