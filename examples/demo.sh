#!/bin/sh
# make demo: build the bundled project (examples/hello) with the system gcc from a
# read-only /usr, inside sbx-run --ephemeral on the default store; print the result
# record, its receipts, and the store's verification.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${SBX_BUILD:-$here/../build}/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$here/hello" "$work/src"
make -s -C "$work/src" clean

echo "== sbx-run --ephemeral --rw $work/src:/src -- make -C /src -j2"
"$bin/sbx-run" --ephemeral --rw "$work/src:/src" --result "$work/result.json" \
	--trace "$work/build.trace" -- make -C /src -j2
echo
echo "== the program built inside the sandbox, run on the host"
"$work/src/hello" | head -5
echo
echo "== result record (receipts summarized below)"
jq 'del(.receipts)' "$work/result.json"
echo
echo "== receipts: one per lease transition, each signed and chained"
jq -r '.receipts[] | "\(.seq)  \(.edge | . + "        " | .[:9]) \(.from // "-") -> \(.to)  \(.digest[:16])…"' \
	"$work/result.json"
echo
echo "== sbx-lease verify"
"$bin/sbx-lease" verify "$(jq -r .lease "$work/result.json")"
echo
echo "== the build record (sbx-trace files --format=text): what the build read, wrote, probed, ran"
"$bin/sbx-trace" verify --format=text --head "$(jq -r .trace.head "$work/result.json")" "$work/build.trace"
"$bin/sbx-trace" files --format=text "$work/build.trace"
timeline=${TMPDIR:-/tmp}/sbx-demo-timeline.html
"$bin/sbx-trace" timeline -o "$timeline" "$work/build.trace"
echo
echo "== the build's timeline (self-contained HTML): $timeline"
echo
echo "== build provenance (in-toto SLSA v1, DSSE-signed with the store's key): its subjects"
"$bin/sbx-trace" provenance --result "$work/result.json" -o "$work/provenance.json" "$work/build.trace"
"$bin/sbx-trace" verify-provenance "$work/provenance.json"
jq -r .payload "$work/provenance.json" | base64 -d |
	jq -r '.subject[] | "\(.digest.sha256[:16])…  \(.name)"'
