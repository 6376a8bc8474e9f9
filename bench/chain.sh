#!/bin/sh
# A job bigger than one lease (sbx-run --chain, issue 32 item 6), twice, natively
# and under sbx-run --ephemeral --limits storage_write=LIMIT (default 1G) --chain 8:
#  - a generated build (tests/chain-project.sh: MODULES modules, default 24, each
#    object holding a PAD_KIB KiB array, default 131072: 3 GiB of objects in all)
#    made with make -j2 in a --rw bind, BUILD_ROUNDS times (default 1); every object
#    and the binary compared with the native build's;
#  - a writer of MIB MiB in all (default 3072: 3 GiB, in 1 MiB writes into files
#    it creates, truncates and deletes in turn, checksums on stdout) in a directory
#    of its own, interleaved over ROUNDS (default 3); its output compared.
# Prints each chain's links (lease, how it ended, its storage_write), whether the
# outputs are identical to the native ones, and the median wall times and their
# ratio, with the load average.
# Usage: bench/chain.sh [ROUNDS]   (MIB, LIMIT, MODULES, PAD_KIB, BUILD_ROUNDS;
# SBX_BUILD defaults to ./build)
set -eu
ROUNDS=${1:-3}
BUILD_ROUNDS=${BUILD_ROUNDS:-1}
MODULES=${MODULES:-24}
PAD_KIB=${PAD_KIB:-131072}
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

links() {
	jq -r '.links[] | "  link \(.link) \(.lease) prev \(.prev // "-") \(.end)" +
		" storage_write \(.usage.storage_write)"' "$W/res.json"
}

echo "== chain: make -j2 of $MODULES modules of $PAD_KIB KiB objects under storage_write=$LIMIT," \
	"--chain 8 ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)) =="
for r in $(seq 1 "$BUILD_ROUNDS"); do
	rm -rf "$W/native" "$W/src"
	sh "$here/tests/chain-project.sh" "$W/native" "$MODULES" 64 "$PAD_KIB"
	sh "$here/tests/chain-project.sh" "$W/src" "$MODULES" 64 "$PAD_KIB"
	chmod -R a+rwX "$W/src"
	t0=$(now)
	make -s -C "$W/native" -j2 >/dev/null
	t1=$(now)
	status=0
	"$SBX_BUILD/bin/sbx-run" --ephemeral --limits "storage_write=$LIMIT" --chain 8 \
		--rw "$W/src:/src" --result "$W/res.json" -- /usr/bin/make -s -C /src -j2 \
		>/dev/null || status=$?
	t2=$(now)
	same=yes
	for f in "$W"/native/*.o "$W/native/prog"; do
		cmp -s "$f" "$W/src/${f##*/}" || same=no
	done
	printf 'build round %s: exit %s, %s links, %s MiB written, every object and the binary' \
		"$r" "$status" "$(jq '.links | length' "$W/res.json")" \
		"$(jq '[.links[].usage.storage_write] | add / 1048576 | floor' "$W/res.json")"
	printf ' identical to native: %s, native %.2f s, chain %.2f s\n' "$same" \
		"$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)"
	links
	printf '{"build_round":%s,"links":%s,"identical":"%s","native_s":%.2f,"chain_s":%.2f,"load":"%s"}\n' \
		"$r" "$(jq '.links | length' "$W/res.json")" "$same" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "$t2 - $t1" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
	rm -rf "$SBX_STORE" "$W/native" "$W/src"
done
[ "$ROUNDS" -gt 0 ] || exit 0

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
	links
	rm -rf "$SBX_STORE"
done
n=$(median <"$W/native.t")
c=$(median <"$W/chain.t")
printf '{"written_mib":%s,"limit":"%s","rounds":%s,"native_s":%.2f,"chain_s":%.2f,"ratio":%.2f,"load":"%s"}\n' \
	"$MIB" "$LIMIT" "$ROUNDS" "$n" "$c" "$(echo "$c / $n" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
