#!/bin/sh
# The boundary's cost on a real build: the bundled ~30-file project
# (examples/hello), `make -j2` natively, under sbx-run recording only execs,
# under bwrap with equivalent mounts (read-only /, fresh /proc, private /tmp,
# the project read-write, all namespaces unshared) and under proot.
# Variants are interleaved round by round so machine noise hits them alike;
# prints each variant's median wall time over ROUNDS and its ratio to native.
# Usage: bench/run.sh [ROUNDS]   (default 5; SBX_BUILD defaults to ./build)
set -eu
ROUNDS=${1:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /tmp/sbx-bench-run.XXXXXX)
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
SRC="$W/src"
cp -r "$here/examples/hello" "$SRC"
make -s -C "$SRC" clean

native() { make -s -C "$SRC" -j2; }
sbx() {
	"$SBX_BUILD/bin/sbx-run" --ephemeral --rw "$SRC" --trace "$W/t.jsonl" --trace-level exec \
		--result "$W/result.json" -- make -s -C "$SRC" -j2
}
bwrap_() {
	bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind "$SRC" "$SRC" \
		--unshare-all --die-with-parent --chdir "$SRC" make -s -C "$SRC" -j2
}
proot_() { proot -w "$SRC" make -s -C "$SRC" -j2; }

VARIANTS="native sbx bwrap_ proot_"
for v in $VARIANTS; do
	command -v "${v%_}" >/dev/null 2>&1 || [ "$v" = sbx ] || {
		echo "bench/run.sh: ${v%_} is not installed (make bench-deps)" >&2
		exit 1
	}
done

now_ms() { date +%s%3N; }
r=0
while [ "$r" -le "$ROUNDS" ]; do
	for v in $VARIANTS; do
		make -s -C "$SRC" clean
		t0=$(now_ms)
		$v >/dev/null 2>"$W/err" || { echo "bench/run.sh: $v failed:" >&2; cat "$W/err" >&2; exit 1; }
		t1=$(now_ms)
		[ -x "$SRC/hello" ] || { echo "bench/run.sh: $v built nothing" >&2; exit 1; }
		# round 0 warms the page cache and is not counted
		[ "$r" -eq 0 ] || echo "$v $((t1 - t0))" >> "$W/times"
	done
	r=$((r + 1))
done

median() { grep "^$1 " "$W/times" | cut -d' ' -f2 | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
base=$(median native)
printf '%-8s %10s %8s   (%s rounds, make -j2 of %s C files)\n' variant median_ms ratio "$ROUNDS" \
	"$(ls "$here"/examples/hello/*.c | wc -l)"
for v in $VARIANTS; do
	m=$(median "$v")
	printf '%-8s %10d %8s\n' "${v%_}" "$m" "$(awk -v m="$m" -v b="$base" 'BEGIN {printf "%.3fx", m / b}')"
done
sbxm=$(median sbx)
bwm=$(median bwrap_)
awk -v s="$sbxm" -v b="$bwm" 'BEGIN {printf "sbx vs bwrap: %+.1f%%\n", (s / b - 1) * 100}'
printf 'sbx stops per build: %s (refused %s)\n' "$(jq .supervisor.stops "$W/result.json")" \
	"$(jq .supervisor.refused "$W/result.json")"
