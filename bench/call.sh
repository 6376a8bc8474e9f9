#!/bin/sh
# bench/call.sh: a warm sandbox's call (sbx_sandbox_call of a trivial callback,
# in the one warm guest, and isolated in a fork of it) against a cold sbx_call
# that builds and tears down its sandbox, in microseconds per call, per round.
# Usage: bench/call.sh [ROUNDS] [CALLS]   (default 5 rounds of 200 calls;
# SBX_BUILD defaults to ./build, whose guests/call_warm is used)
set -eu
ROUNDS=${1:-5}
CALLS=${2:-200}
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
cd "$(mktemp -d /tmp/sbx-bench-call.XXXXXX)"
for r in $(seq 1 "$ROUNDS"); do
	"$SBX_BUILD/guests/call_warm" time "$CALLS"
done
cd / && rm -rf "$OLDPWD"
