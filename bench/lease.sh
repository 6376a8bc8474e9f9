#!/bin/sh
# Lease transitions per second on one store: in-process (sequential, 2 parallel
# clients) and through the sbx-lease CLI; then the median wall time of
# `sbx-run --ephemeral -- /bin/true` (two batched commits: request/fund/activate,
# settle/expire/destroy) on the sequential store; then the same in-process
# figures (sequential, 8 parallel clients) against a local 3-member etcd cluster
# (tests/etcd-cluster.sh) when etcd is installed. With several builds (say main's
# and yours) every figure is taken for each in turn, interleaved, so that both see
# the same disk and load. Needs `make all` in each build first.
# Usage: bench/lease.sh [LEASES [BUILD…]]   (BUILD defaults to $SBX_BUILD, else build)
set -eu
cd "$(dirname "$0")/.."
N=${1:-100}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- "${SBX_BUILD:-build}"
tmp=$(mktemp -d /tmp/sbx-lease-bench.XXXXXX)
trap 'tests/etcd-cluster.sh stop "$tmp/etcd" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
k=0
for b; do
	k=$((k + 1))
	${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -o "$tmp/lease_bench$k" \
		bench/lease_bench.c "$b/libsbx.a" -lseccomp -lelf -ljansson -larchive -lcrypto -lpthread
done
# each build in turn: "$@" with $B the build, $k its number, "[build] " before its output
each() {
	k=0
	for B in $BUILDS; do
		k=$((k + 1))
		[ "$nb" -gt 1 ] && printf '[%s] ' "$B"
		"$@"
	done
}
BUILDS="$*"
nb=$#
echo "store on $(df -P "$tmp" | awk 'NR==2 {print $1}'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/lease_bench1" "$tmp/disk" 0 0
seq_run() { "$tmp/lease_bench$k" "$tmp/seq$k" "$N" 1; }
par_run() { "$tmp/lease_bench$k" "$tmp/par$k" "$((N / 2))" 2; }
each seq_run
each par_run
if [ -d /dev/shm ] && shm=$(mktemp -d /dev/shm/sbx-lease-bench.XXXXXX 2>/dev/null); then
	shm_run() { printf 'tmpfs (CPU-bound ceiling, no real fsync) '; "$tmp/lease_bench$k" "$shm/seq$k" "$N" 1; }
	each shm_run
	rm -rf "$shm"
fi
cli_run() {
	export SBX_STORE="$tmp/cli$k"
	L="$B/bin/sbx-lease"
	$L request --image /bin/true | $L fund --amount 1 --evidence - | $L activate --evidence - >"$tmp/head"
	n=100
	t0=$(date +%s.%N)
	i=1
	while [ $i -le $n ]; do
		$L observe --usage fuel=$i --evidence "$tmp/head" >"$tmp/next"
		mv "$tmp/next" "$tmp/head"
		i=$((i + 1))
	done
	t1=$(date +%s.%N)
	echo "$t0 $t1 $n" | awk '{printf "CLI sequential (one exec per transition): %d transitions in %.3f s = %.0f transitions/s\n", $3, $2 - $1, $3 / ($2 - $1)}'
	if $L verify >/dev/null; then echo "verify: ok"; else echo "verify: FAILED"; fi
	unset SBX_STORE
}
each cli_run
# one run of sbx-run --ephemeral per build and round, the builds interleaved
if [ -x "$1/bin/sbx-run" ]; then
	for i in $(seq 21); do
		k=0
		for B in $BUILDS; do
			k=$((k + 1))
			t0=$(date +%s%N)
			SBX_STORE="$tmp/seq$k" "$B/bin/sbx-run" --ephemeral -- /bin/true
			t1=$(date +%s%N)
			echo "$k $(((t1 - t0) / 1000))"
		done
	done >"$tmp/eph"
	eph_show() {
		awk -v k="$k" '$1 == k {print $2}' "$tmp/eph" | sort -n | awk -v n="$N" '{a[NR] = $1} END {printf "sbx-run --ephemeral -- /bin/true on a store of %d leases: median %.1f ms over %d runs\n", n, a[int((NR + 1) / 2)] / 1000, NR}'
		if SBX_STORE="$tmp/seq$k" "$B/bin/sbx-lease" verify >/dev/null; then echo "verify: ok"; else echo "verify: FAILED"; fi
	}
	each eph_show
fi
if command -v etcd >/dev/null; then
	eps=$(tests/etcd-cluster.sh start "$tmp/etcd")
	echo "etcd: 3 members on this machine (data on $(df -P "$tmp" | awk 'NR==2 {print $1}'))"
	etcd_seq() { SBX_HOST_DIR="$tmp/host$k" "$tmp/lease_bench$k" "etcd://$eps/seq$k" "$N" 1; }
	etcd_par() {
		SBX_HOST_DIR="$tmp/host$k" "$tmp/lease_bench$k" "etcd://$eps/par$k" "$((N / 8 > 0 ? N / 8 : 1))" 8
		if SBX_HOST_DIR="$tmp/host$k" SBX_STORE="etcd://$eps/par$k" "$B/bin/sbx-lease" verify >/dev/null
		then echo "verify: ok"; else echo "verify: FAILED"; fi
	}
	each etcd_seq
	each etcd_par
fi
