#!/bin/sh
# What a run killed midway is charged against what its guest had used (SPEC §4.2,
# "Hardening, part 2" item 9): tests/guests/meter_hog burnsay / writesay print
# their own usage as they go (CPU µs, bytes written: a lower bound of it at any
# moment); for flood, what sbx-run delivered is that lower bound. sbx-run on an
# Active lease is SIGKILLed once the guest used THRESHOLD, and the next store
# write settles the lease. Prints per round the last the guest said, the lease's
# last observation before the settlement and what the settlement charged, and the
# medians of charged - said (negative: the guest used more than it was charged)
# and of said - observed (the observations' lag).
# Usage: bench/crash.sh [ROUNDS]   (default 5; SBX_BUILD defaults to ./build)
set -eu
ROUNDS=${1:-5}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /var/tmp/sbx-bench-crash.XXXXXX)
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
cd "$W"
L="$SBX_BUILD/bin/sbx-lease"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# what the guest used, at least: what it said last, or (flood) what sbx-run delivered
last_said() { if [ "$MODE" = flood ]; then stat -c %s said; else tail -n2 said | head -n1; fi; }

# one round: dimension, hog mode, threshold; prints "said observed charged"
round() {
	MODE=$2
	id=$("$L" request --image "$SBX_BUILD/guests/meter_hog" --limits storage_write=1G |
		"$L" fund --amount 0 --evidence - | "$L" activate --evidence - | jq -r .lease.id)
	"$SBX_BUILD/bin/sbx-run" --lease "$id" -- "$SBX_BUILD/guests/meter_hog" "$2" >said 2>/dev/null &
	pid=$!
	i=0
	while [ $i -lt 3000 ]; do
		v=$(last_said)
		case $v in '' | *[!0-9]*) ;; *) [ "$v" -gt "$3" ] && break ;; esac
		sleep 0.005
		i=$((i + 1))
	done
	kill -9 $pid
	wait $pid 2>/dev/null || true
	obs=$("$L" show "$id" | jq -r ".lease.usage.$1 // 0")
	"$L" request --image /bin/true >/dev/null
	echo "$(last_said) $obs $("$L" log "$id" | tail -n1 | jq -r ".usage.$1")"
}

printf '%-14s %12s %12s %12s %14s %14s\n' dimension said observed charged "charged-said" "said-observed"
for c in "fuel burnsay 300000" "storage_write writesay 300000000" "output_bytes flood 300000000"; do
	set -- $c
	: >rows
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		round "$1" "$2" "$3" | tee -a rows | while read -r s o ch; do
			printf '%-14s %12s %12s %12s %14s %14s\n' "$1" "$s" "$o" "$ch" $((ch - s)) $((s - o))
		done
		r=$((r + 1))
	done
	printf '%-14s %12s %12s %12s %14s %14s\n' "$1 median" - - - \
		"$(awk '{ print $3 - $1 }' rows | median)" "$(awk '{ print $1 - $2 }' rows | median)"
done
