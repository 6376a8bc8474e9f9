#!/bin/sh
# Start-up of a one-shot sandbox: the median wall time over RUNS (default 20)
# interleaved rounds of /bin/true natively, under bwrap (namespaces only, when
# installed) and under `sbx-run --ephemeral -- /bin/true` on a store of 100 leases,
# for each build given (default ./build; give main's and yours to compare them in
# one run). The timer is `date` around each run: the native row shows its floor.
# Usage: bench/startup.sh [BUILD…]   (each BUILD made with `make all`)
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- "${SBX_BUILD:-build}"
RUNS=${RUNS:-20}
tmp=$(mktemp -d /tmp/sbx-startup-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
for b; do
	n=$((n + 1))
	${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -o "$tmp/lease_bench$n" \
		bench/lease_bench.c "$b/libsbx.a" -lseccomp -lelf -ljansson -larchive -lcrypto -lpthread
	"$tmp/lease_bench$n" "$tmp/store$n" 100 1 >/dev/null
done
# µs of one run of the command; "failed" when it does not exit 0
us() {
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || { echo failed; return; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000))
}
bwrap_ok=$(command -v bwrap >/dev/null && bwrap --ro-bind / / --unshare-all /bin/true 2>/dev/null && echo 1 || echo 0)
for r in $(seq "$RUNS"); do
	echo "native $(us /bin/true)"
	[ "$bwrap_ok" = 0 ] || echo "bwrap $(us bwrap --ro-bind / / --unshare-all /bin/true)"
	n=0
	for b; do
		n=$((n + 1))
		echo "sbx-run($b) $(SBX_STORE="$tmp/store$n" us "$b/bin/sbx-run" --ephemeral -- /bin/true)"
	done
done >"$tmp/times"
if grep -q failed "$tmp/times"; then
	echo "startup: a run failed:" >&2
	grep failed "$tmp/times" >&2
	exit 1
fi
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for label in $(awk '!seen[$1]++ {print $1}' "$tmp/times"); do
	awk -v l="$label" '$1 == l {print $2}' "$tmp/times" | sort -n |
		awk -v l="$label" '{a[NR] = $1} END {printf "%s %.1f\n", l, a[int((NR + 1) / 2)] / 1000}'
done | awk '{m[NR] = $2; l[NR] = $1; if ($1 == "bwrap") bw = $2}
	END {for (i = 1; i <= NR; i++) printf "%-40s median %6.1f ms%s\n", l[i], m[i],
		bw && l[i] ~ /^sbx-run/ ? sprintf("  (%.1f× bwrap)", m[i] / bw) : ""}'
echo "(median of $RUNS interleaved runs each; sbx-run on a store of 100 leases)"
