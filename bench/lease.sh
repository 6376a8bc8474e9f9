#!/bin/sh
# Lease transitions per second on one store: in-process (sequential, 2 parallel
# clients) and through the sbx-lease CLI; then the median wall time of
# `sbx-run --ephemeral -- /bin/true` (two batched commits: request/fund/activate,
# settle/expire/destroy) on the sequential store; then the same in-process
# figures (sequential, 8 parallel clients) against a local 3-member etcd
# cluster (tests/etcd-cluster.sh) when etcd is installed. Needs `make all` first.
# Usage: bench/lease.sh [LEASES]
set -eu
cd "$(dirname "$0")/.."
B=${SBX_BUILD:-build}
N=${1:-100}
tmp=$(mktemp -d /tmp/sbx-lease-bench.XXXXXX)
trap 'tests/etcd-cluster.sh stop "$tmp/etcd" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -o "$tmp/lease_bench" bench/lease_bench.c \
	"$B/libsbx.a" -lseccomp -lelf -ljansson -larchive -lcrypto -lpthread
echo "store on $(df -P "$tmp" | awk 'NR==2 {print $1}'), $(nproc) cores"
"$tmp/lease_bench" "$tmp/disk" 0 0
"$tmp/lease_bench" "$tmp/seq" "$N" 1
"$tmp/lease_bench" "$tmp/par" "$((N / 2))" 2
if [ -d /dev/shm ] && shm=$(mktemp -d /dev/shm/sbx-lease-bench.XXXXXX 2>/dev/null); then
	printf 'tmpfs (CPU-bound ceiling, no real fsync) '
	"$tmp/lease_bench" "$shm/seq" "$N" 1
	rm -rf "$shm"
fi
export SBX_STORE="$tmp/cli"
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
$L verify >/dev/null && echo "verify: ok"
if [ -x "$B/bin/sbx-run" ]; then
	for i in $(seq 21); do
		t0=$(date +%s%N)
		SBX_STORE="$tmp/seq" "$B/bin/sbx-run" --ephemeral -- /bin/true
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000))
	done | sort -n | awk -v n="$N" '{a[NR] = $1} END {printf "sbx-run --ephemeral -- /bin/true on a store of %d leases: median %.1f ms over %d runs\n", n, a[int((NR + 1) / 2)] / 1000, NR}'
	SBX_STORE="$tmp/seq" $L verify >/dev/null && echo "verify: ok"
fi
if command -v etcd >/dev/null; then
	eps=$(tests/etcd-cluster.sh start "$tmp/etcd")
	echo "etcd: 3 members on this machine (data on $(df -P "$tmp" | awk 'NR==2 {print $1}'))"
	SBX_HOST_DIR="$tmp/host" "$tmp/lease_bench" "etcd://$eps/seq" "$N" 1
	SBX_HOST_DIR="$tmp/host" "$tmp/lease_bench" "etcd://$eps/par" "$((N / 8 > 0 ? N / 8 : 1))" 8
	SBX_HOST_DIR="$tmp/host" SBX_STORE="etcd://$eps/par" $L verify >/dev/null && echo "verify: ok"
fi
