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
	request) sbx-lease request --image /bin/true --lifetime 1 --escrow 2 --fees fuel=1 --principal "$PRINCIPAL" ;;
	fund) sbx-lease fund --amount 3 --evidence "$head" ;;
	observe) sbx-lease observe --usage fuel=1 --evidence "$head" ;;
	*) sbx-lease "$e" --evidence "$head" ;;
	esac
}

# Walk one lease through the whole lifecycle; at each edge named in $2.. the process
# is killed at fault point $1, the store must verify, the receipt must be journaled
# and be the lease's head, and the walk goes on from that head.
crash_walk() {
	local fault=$1 id="" n=0 rc
	shift
	local crash=" $* "
	WALK=$((${WALK:-0} + 1))
	PRINCIPAL=crash$WALK
	rm -f head.json
	# the principal's first use (its key made, then recorded in the store: atomic
	# writes of their own before the journal) comes first, in a lease of its own
	local warm
	warm=$(sbx-lease request --image /bin/true --principal "$PRINCIPAL" | jq -r .lease.id)
	for e in $EDGES; do
		[ "$e" = expire ] && sbx-lease tick >/dev/null
		if [ "${crash#* $e }" = "$crash" ]; then
			edge "$e" head.json >out.json
			mv out.json head.json
			n=$((n + 1))
			continue
		fi
		set +e
		SBX_FAULT=$fault edge "$e" head.json >out.json 2>err.txt
		rc=$?
		set -e
		# the fault point must really be reached: killed by SIGKILL
		[ "$rc" -eq 137 ] || { echo "$e/$fault: rc=$rc, not killed: $(cat err.txt)"; return 1; }
		run sbx-lease verify
		[ "$status" -eq 0 ] || { echo "after $fault in $e: $output"; return 1; }
		[ -n "$id" ] || id=$(sbx-lease list --principal "$PRINCIPAL" | jq -r .id | grep -vx "$warm")
		[ -n "$id" ] || { echo "$e/$fault: lost the request receipt"; return 1; }
		sbx-lease log "$id" >log.json
		# every fault point is after the journal append: the receipt is there (verify
		# above proved the record's head is the last journal receipt); go on from it
		[ "$(wc -l <log.json)" -eq $((n + 1)) ] || { echo "$e/$fault: $(wc -l <log.json) receipts, want $((n + 1))"; return 1; }
		[ "$(tail -1 log.json | jq -r .edge)" = "$e" ] || { echo "$e/$fault: last receipt is not $e"; return 1; }
		tail -1 log.json >head.json
		n=$((n + 1))
	done
	assert_equal "$(jq -r 'if .receipt then .lease.state else .to end' head.json)" Destroyed
	run sbx-lease verify
	assert_success
}

@test "SIGKILL after the journal append, at every edge" {
	crash_walk lease-after-journal $EDGES
}

@test "SIGKILL after the record write, at every edge" {
	crash_walk lease-after-record $EDGES
}

@test "SIGKILL before the record rename, and before the slot-index rename" {
	crash_walk atomic-before-rename:1 $EDGES
	crash_walk atomic-before-rename:2 request expire
}

@test "SIGKILL after the effects (namespace, slots), at every edge" {
	crash_walk lease-after-effects $EDGES
}

# a command alone at the journal keeps the record and the slot index in memory
# and writes them when it closes the store: killed there, between the two, or
# after both
@test "SIGKILL in the close's write of the record and slot index, at every edge" {
	crash_walk lease-flush-after-record $EDGES
	crash_walk lease-after-flush $EDGES
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

# sbx-run --ephemeral journals request, fund, activate as one append and settle,
# expire, destroy as another (observations in between): a kill after any append
# loses none of its receipts.
@test "SIGKILL of sbx-run --ephemeral after each journal append" {
	# observations add appends to a run that takes longer (a loaded host): a run
	# that ends before its kill is retried one append earlier until a kill has
	# come after the closing append
	pass=1 tries=0 closed=""
	while [ $((tries += 1)) -le 40 ]; do
		sbx-lease list | jq -r .id | sort >before.txt
		set +e
		SBX_FAULT=lease-after-journal:$pass sbx-run --ephemeral -- /bin/true >out.txt 2>err.txt
		rc=$?
		set -e
		if [ "$rc" -eq 0 ]; then
			[ -z "$closed" ] || break
			pass=$((pass - 1))
			continue
		fi
		[ "$rc" -eq 137 ] || { echo "pass $pass: rc=$rc: $(cat err.txt)"; return 1; }
		id=$(sbx-lease list | jq -r .id | sort | comm -13 before.txt -)
		# consistent; the one thing verify may name is the killed run's open lease
		sbx-lease verify 2>/dev/null >v.json || true
		jq -e .store v.json >/dev/null || { echo "pass $pass: verify gave no report"; return 1; }
		other=$(jq -r '.problems[]' v.json | grep -vc "^lease $id: its run died without closing it" || true)
		[ "$other" -eq 0 ] || { echo "pass $pass: $(cat v.json)"; return 1; }
		[ -n "$id" ] || { echo "pass $pass: lost the request receipt"; return 1; }
		state=$(sbx-lease show "$id" | jq -r .lease.state)
		n=$(sbx-lease log "$id" | wc -l)
		if [ "$pass" -eq 1 ]; then
			assert_equal "$state $n" "Active 3"
		fi
		# a kill after the closing append lost none of its receipts
		if [ "$state" = Destroyed ]; then
			[ "$n" -ge 6 ]
			closed=$pass
		fi
		# the operator's way back: the lease closed and destroyed, the store clean
		sbx-lease recover >/dev/null
		sbx-lease verify >/dev/null || { echo "pass $pass: not clean after recover"; return 1; }
		assert_equal "$(sbx-lease show "$id" | jq -r .lease.state)" Destroyed
		pass=$((pass + 1))
	done
	[ -n "$closed" ] && [ "$closed" -ge 2 ]
}

# The open is one append of three receipts and each observation during the run
# one of its own; the close's append holds the run's last observation with settle,
# expire and destroy (an append and an fdatasync of the run's bound fewer).
@test "sbx-run --ephemeral: the last observation is in the closing append" {
	# a loaded host's run may observe during its run (an append more): a run that
	# ends before its kill is tried again one append earlier
	pass=1 tries=0
	while [ $((tries += 1)) -le 40 ]; do
		sbx-lease list | jq -r .id | sort >before.txt
		set +e
		SBX_FAULT=lease-after-journal:$pass sbx-run --ephemeral -- /bin/true >out.txt 2>err.txt
		rc=$?
		set -e
		[ "$rc" -ne 0 ] || { pass=$((pass - 1)); continue; }
		[ "$rc" -eq 137 ] || { echo "pass $pass: rc=$rc: $(cat err.txt)"; return 1; }
		id=$(sbx-lease list | jq -r .id | sort | comm -13 before.txt -)
		[ "$(sbx-lease show "$id" | jq -r .lease.state)" = Destroyed ] && break
		sbx-lease recover >/dev/null
		pass=$((pass + 1))
	done
	sbx-lease log "$id" >log.json
	n=$(wc -l <log.json)
	# receipts of the close's append: those before it are the open's and one per
	# observation append
	assert_equal "$((n - 3 - (pass - 2)))" 4
	assert_equal "$(jq -r .edge log.json | tail -n4 | tr '\n' ' ')" "observe settle expire destroy "
	assert_equal "$(jq -r 'select(.edge == "settle") | .reason' log.json)" caller
	sbx-lease verify >/dev/null
}

@test "SIGKILL of sbx-run --ephemeral after its guest ended, before the closing append: settled from the run's bound" {
	set +e
	SBX_FAULT=run-before-close sbx-run --ephemeral -- /bin/true >out.txt 2>err.txt
	rc=$?
	set -e
	[ "$rc" -eq 137 ] || { echo "rc=$rc, not killed: $(cat err.txt)"; return 1; }
	id=$(sbx-lease list --state Active | jq -r .id)
	[ -n "$id" ]
	run sbx-lease verify
	assert_failure
	assert_output --partial "lease $id: its run died without closing it"
	sbx-lease recover >/dev/null
	sbx-lease verify
	# the bound made durable before the guest ran stands for what it used
	assert_equal "$(sbx-lease log "$id" | jq -r .edge | tail -n4 | tr '\n' ' ')" "observe settle expire destroy "
	[ "$(sbx-lease show "$id" | jq -r .lease.usage.fuel)" -gt 0 ]
	assert_equal "$(sbx-lease log "$id" | jq -r 'select(.edge == "settle") | .reason')" run-died
}

# a background run a failed test left is ended (its guest dies with it)
teardown() {
	[ -z "${RUN_PID:-}" ] || kill -9 "$RUN_PID" 2>/dev/null || true
}

# sbx-run --ephemeral in the background until its lease is Active and claimed (the
# request and the claim are one step under the host lock): sets RUN_PID and ID.
run_bg() {
	sbx-run "$@" >run.out 2>run.err &
	RUN_PID=$!
	ID=""
	for _ in $(seq 1 500); do
		ID=$(sbx-lease list --state Active | jq -r .id)
		[ -n "$ID" ] && [ -e "$SBX_STORE/run/$ID.lock" ] && return 0
		kill -0 "$RUN_PID" 2>/dev/null || { cat run.err; return 1; }
		sleep 0.05
	done
	return 1
}

@test "recover: a SIGKILLed sbx-run --ephemeral is settled, expired and destroyed" {
	run_bg --ephemeral -- /bin/sleep 1000
	kill -9 "$RUN_PID"
	wait "$RUN_PID" || true
	sbx_runs_released
	[ -d "$SBX_STORE/ns/$ID" ]
	run sbx-lease verify
	assert_failure
	assert_output --partial "lease $ID: its run died without closing it"
	assert_output --partial "sbx-lease recover"
	sbx-lease recover >rec.json
	assert_equal "$(jq -c '.recovered' rec.json)" "[{\"from\":\"Active\",\"lease\":\"$ID\",\"to\":\"Destroyed\"}]"
	sbx-lease verify
	[ ! -e "$SBX_STORE/ns/$ID" ]
	[ ! -e "$SBX_STORE/run/$ID.lock" ] && [ ! -e "$SBX_STORE/run/$ID.sock" ]
	# through the ordinary edges, each with its receipt, from the run's durable bound
	assert_equal "$(sbx-lease log "$ID" | jq -r .edge | tail -3 | tr '\n' ' ')" "settle expire destroy "
	assert_equal "$(sbx-lease log "$ID" | jq -r 'select(.edge == "settle") | .reason')" run-died
	# idempotent
	n=$(sbx-lease log "$ID" | wc -l)
	sbx-lease recover >rec2.json
	assert_equal "$(jq -c .recovered rec2.json)" "[]"
	assert_equal "$(sbx-lease log "$ID" | wc -l)" "$n"
	sbx-lease verify
}

@test "recover: a one-shot lease killed after its request, before its run claimed it" {
	# the request journal append is the first fault point of sbx-run --ephemeral
	run env SBX_FAULT=lease-after-journal:1 sbx-run --ephemeral -- /bin/true
	assert_equal "$status" 137
	id=$(sbx-lease list | jq -r .id)
	run sbx-lease verify
	assert_failure
	assert_output --partial "lease $id: its run died without closing it"
	sbx-lease recover >/dev/null
	sbx-lease verify
	assert_equal "$(sbx-lease show "$id" | jq -r .lease.state)" Destroyed
	[ ! -e "$SBX_STORE/ns/$id" ]
}

@test "recover leaves a live run alone, and its run still closes the lease" {
	run_bg --ephemeral -- /bin/sleep 1000
	sbx-lease recover >rec.json
	assert_equal "$(jq -c .recovered rec.json)" "[]"
	assert_equal "$(sbx-lease show "$ID" | jq -r .lease.state)" Active
	[ -d "$SBX_STORE/ns/$ID" ]
	kill -TERM "$RUN_PID"
	wait "$RUN_PID" || true
	assert_equal "$(sbx-lease show "$ID" | jq -r .lease.state)" Destroyed
	assert_equal "$(sbx-lease log "$ID" | jq -r 'select(.edge == "settle") | .reason')" caller
	sbx-lease verify
}

@test "recover settles a leased run that died; the lease stays the renter's to expire" {
	id=$(sbx-lease request --image /bin/sleep | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	sbx-run --lease "$id" -- /bin/sleep 1000 >run.out 2>run.err &
	RUN_PID=$!
	for _ in $(seq 1 500); do
		[ -e "$SBX_STORE/run/$id.lock" ] && break
		sleep 0.05
	done
	kill -9 "$RUN_PID"
	wait "$RUN_PID" || true
	sbx_runs_released
	run sbx-lease verify
	assert_failure
	sbx-lease recover >rec.json
	assert_equal "$(jq -c .recovered rec.json)" "[{\"from\":\"Active\",\"lease\":\"$id\",\"to\":\"Settling\"}]"
	sbx-lease verify
	[ -d "$SBX_STORE/ns/$id" ]
}

@test "show and list report what a passed deadline decided, without a request" {
	r=$(sbx-lease request --image /bin/true --lifetime 2 | jq -r .lease.id)
	a=$(sbx-lease request --image /bin/true --lifetime 2 | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	sbx-lease tick 2 >/dev/null
	assert_equal "$(sbx-lease show "$r" | jq -r .lease.state)" Expired
	assert_equal "$(sbx-lease list | jq -r 'select(.id == "'"$a"'") | .state')" Expired
	assert_equal "$(sbx-lease list --state Active | wc -l)" 0
	# by the ordinary edge, with its receipt
	assert_equal "$(sbx-lease log "$a" | tail -1 | jq -r '.edge + " " + .from')" "expire Active"
	assert_equal "$(sbx-lease show "$r" | jq -r .receipt.edge)" expire
	sbx-lease verify
}
