#!/bin/sh
# Codec and sbx_call figures: encode/decode/write-back throughput for a
# 10^6-node linked graph and a 256 MiB numeric array, and the sbx_call round trip
# of an empty callback against a plain fork+exec of the same binary.
# Usage: bench/codec.sh   (after make all; not part of make check)
set -eu
cd "$(dirname "$0")/.."
B=${SBX_BUILD:-$PWD/build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cc -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -fno-pie -no-pie -Wl,--build-id \
	-o "$T/codec_bench" bench/codec_bench.c "$B/libsbx.a" \
	-lseccomp -lelf -ljansson -larchive -lcrypto -lpthread
chmod 755 "$T"
echo "# $(uname -r), $(nproc) CPUs, load $(cut -d" " -f1 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
"$T/codec_bench" graph 1000000
"$T/codec_bench" array $((256 << 20))
"$T/codec_bench" call 30
