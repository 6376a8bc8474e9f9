#!/bin/sh
# A job bigger than one lease (sbx-run --chain, issue 32 item 6): a writer of
# MIB MiB in all (default 3072: 3 GiB, in 1 MiB writes into files it creates,
# truncates and deletes in turn, checksums on stdout) natively in a directory of
# its own and under sbx-run --ephemeral --limits storage_write=LIMIT (default 1G)
# --chain 8, interleaved over ROUNDS (default 3). Prints each chain's links
# (lease, how it ended, its storage_write), whether the output equals the native
# one, and the median wall times and their ratio, with the load average.
# Usage: bench/chain.sh [ROUNDS]   (MIB, LIMIT; SBX_BUILD defaults to ./build)
set -eu
ROUNDS=${1:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
MIB=${MIB:-3072}
LIMIT=${LIMIT:-1G}
G="$SBX_BUILD/guests/snap_chainwriter"
[ -x "$G" ] || make -s -C "$here" guests >/dev/null
W=$(mktemp -d /var/tmp/sbx-bench-chain.XXXXXX)
trap 'rm -rf "$W"' EXIT
chmod 755 "$W"
export SBX_STORE="$W/store" XDG_CONFIG_HOME="$W/config"

now() { date +%s.%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "== chain: $MIB MiB written under storage_write=$LIMIT, --chain 8 ($(nproc) CPUs," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)) =="
for r in $(seq 1 "$ROUNDS"); do
	rm -rf "$W/native" && mkdir "$W/native"
	t0=$(now)
	(cd "$W/native" && "$G" "$MIB" >"$W/native.out") || [ $? = 7 ]
	t1=$(now)
	rm -rf "$W/native"
	status=0
	"$SBX_BUILD/bin/sbx-run" --ephemeral --limits "storage_write=$LIMIT" --chain 8 \
		--result "$W/res.json" -- "$G" "$MIB" >"$W/sbx.out" || status=$?
	t2=$(now)
	same=no
	cmp -s "$W/native.out" "$W/sbx.out" && same=yes
	echo "$t1 - $t0" | bc >>"$W/native.t"
	echo "$t2 - $t1" | bc >>"$W/chain.t"
	printf 'round %s: exit %s, output identical to native: %s, native %.2f s, chain %.2f s\n' \
		"$r" "$status" "$same" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)"
	jq -r '.links[] | "  link \(.link) \(.lease) prev \(.prev // "-") \(.end)" +
		" storage_write \(.usage.storage_write)"' "$W/res.json"
	rm -rf "$SBX_STORE"
done
n=$(median <"$W/native.t")
c=$(median <"$W/chain.t")
printf '{"written_mib":%s,"limit":"%s","rounds":%s,"native_s":%.2f,"chain_s":%.2f,"ratio":%.2f,"load":"%s"}\n' \
	"$MIB" "$LIMIT" "$ROUNDS" "$n" "$c" "$(echo "$c / $n" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
