#!/bin/sh
# The boundary's cost on a real build: the bundled ~30-file project
# (examples/hello), `make -j2` natively, under sbx-run recording only execs
# (`sbx`: in an Active lease; `sbx-file`: the same recording file calls too;
# `sbx-filen`: sbx-file with its lookups served by seccomp user notification,
# SBX_FILE_TRACE=notify, where sbx-file stops each with ptrace, the default since
# this bench measured notification 18-20 % slower on an AMD EPYC PVM guest;
# `sbx-eph`: --ephemeral, i.e. plus the lease's
# request/fund/activate and settle/expire/destroy), under bwrap with equivalent
# mounts (read-only /, fresh /proc, private /tmp, the project read-write, all
# namespaces unshared), under "the floor" (bench/floor.c in bwrap's namespaces:
# a ptrace tracer that follows the tree and stops at its execs, nothing else;
# what any ptrace supervisor costs at least), under proot, and under gVisor's
# runsc where installed.
# A run in an Active lease starts the guest with address randomisation off (for
# snapshots, see sbx-run(1)); an ephemeral one keeps it. Randomisation alone
# changes a build's cost on some machines (page-table work), so `native-R` is the
# native build under `setarch -R`, the baseline that isolates sbx's own cost for
# the `sbx` row.
# A ptrace stop wakes the supervisor and then the guest again; across vCPUs
# that costs far more than on one CPU on some hosts (an idle vCPU halts and
# must be woken by the hypervisor), so `pin-bwrap` and `pin-sbx` run the
# `bwrap` and `sbx` builds with every process on CPU 0: their ratio is sbx's
# own work, without the cross-CPU wakeups (bwrap, not native: both give the
# build a tmpfs /tmp for gcc's temporary files, the native build has the host's).
# Variants are interleaved round by round so machine noise hits them alike;
# prints each variant's median wall time and median user+sys CPU time of the
# whole process tree over ROUNDS (round 0 warms caches), and ratios to native.
# Every variant gets Debian's default PATH, so the build's PATH probes (gcc's
# execvp of `as`: one failed execve per directory before /usr/bin) do not
# depend on the invoking shell's PATH.
# Usage: bench/run.sh [ROUNDS]   (default 7; SBX_BUILD defaults to ./build;
# VARIANTS, a space-separated list, runs some of them; SBX_BASE, another build
# directory, adds `sbx-base` and `sbx-filebase`: the `sbx` and `sbx-file` rows
# with that build, interleaved with them, for a change's before and after in
# one run)
set -eu
ROUNDS=${1:-7}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /tmp/sbx-bench-run.XXXXXX)
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
SRC="$W/src"
cp -r "$here/examples/hello" "$SRC"
make -s -C "$SRC" clean
cc -O2 -Wall -Wextra -Werror -o "$W/floor" "$here/bench/floor.c"

# gVisor's runsc (Debian's build, ptrace platform, writing to the host like the
# others' read-write project) joins where it is installed
VARIANTS=${VARIANTS:-"native native-R sbx${SBX_BASE:+ sbx-base} sbx-file${SBX_BASE:+ sbx-filebase} sbx-filen sbx-eph bwrap floor proot pin-bwrap pin-sbx$(
	command -v runsc >/dev/null 2>&1 && echo ' runsc')"}
has() { case " $VARIANTS " in *" $1 "*) ;; *) return 1 ;; esac; }
for v in bwrap proot runsc; do
	[ "$v" != bwrap ] || ! has floor || has bwrap || command -v bwrap >/dev/null 2>&1 || {
		echo "bench/run.sh: floor runs in bwrap, which is not installed (make bench-deps)" >&2
		exit 1
	}
	! has "$v" || command -v "$v" >/dev/null 2>&1 || {
		echo "bench/run.sh: $v is not installed (make bench-deps)" >&2
		exit 1
	}
done

# the Active lease an `sbx` variant runs in, a fresh one every round, made and
# ended untimed: a build reads ~10 MB and storage_read is capped at 1 GiB per
# lease; a principal holds at most 32 live leases
lease() {
	case $1 in
	new) "$SBX_BUILD/bin/sbx-lease" request --image "$(command -v make)" |
		"$SBX_BUILD/bin/sbx-lease" fund --amount 0 --evidence - |
		"$SBX_BUILD/bin/sbx-lease" activate --evidence - > "$W/head"
		L=$(jq -r .receipt.lease "$W/head") ;;
	end) "$SBX_BUILD/bin/sbx-lease" log "$L" | tail -n 1 |
		"$SBX_BUILD/bin/sbx-lease" settle "$L" --evidence - |
		"$SBX_BUILD/bin/sbx-lease" expire --evidence - |
		"$SBX_BUILD/bin/sbx-lease" destroy --evidence - > /dev/null ;;
	esac
}

# one build of variant $1, timed into $W/t as "wall user sys"
build() {
	case $1 in
	native) set -- make -s -C "$SRC" -j2 ;;
	native-R) set -- setarch -R make -s -C "$SRC" -j2 ;;
	sbx) set -- "$SBX_BUILD/bin/sbx-run" --lease "$L" --rw "$SRC" --trace "$W/t.jsonl" \
		--trace-level exec --result "$W/result.json" -- make -s -C "$SRC" -j2 ;;
	sbx-base) set -- "${SBX_BASE:?sbx-base needs SBX_BASE}/bin/sbx-run" --lease "$L" --rw "$SRC" \
		--trace "$W/t.jsonl" --trace-level exec --result "$W/result-b.json" -- make -s -C "$SRC" -j2 ;;
	sbx-file) set -- "$SBX_BUILD/bin/sbx-run" --lease "$L" --rw "$SRC" --trace "$W/t.jsonl" \
		--trace-level file --result "$W/result-f.json" -- make -s -C "$SRC" -j2 ;;
	sbx-filebase) set -- "${SBX_BASE:?sbx-filebase needs SBX_BASE}/bin/sbx-run" --lease "$L" --rw "$SRC" \
		--trace "$W/t.jsonl" --trace-level file --result "$W/result-fb.json" -- make -s -C "$SRC" -j2 ;;
	sbx-filen) set -- env SBX_FILE_TRACE=notify "$SBX_BUILD/bin/sbx-run" --lease "$L" --rw "$SRC" \
		--trace "$W/t.jsonl" --trace-level file --result "$W/result-n.json" -- make -s -C "$SRC" -j2 ;;
	sbx-eph) set -- "$SBX_BUILD/bin/sbx-run" --ephemeral --rw "$SRC" --trace "$W/t.jsonl" \
		--trace-level exec --result "$W/result.json" -- make -s -C "$SRC" -j2 ;;
	bwrap) set -- bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind "$SRC" "$SRC" \
		--unshare-all --die-with-parent --chdir "$SRC" make -s -C "$SRC" -j2 ;;
	floor) set -- bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind "$SRC" "$SRC" \
		--ro-bind "$W/floor" /tmp/sbx-floor --unshare-all --die-with-parent --chdir "$SRC" \
		/tmp/sbx-floor make -s -C "$SRC" -j2 ;;
	proot) set -- proot -w "$SRC" make -s -C "$SRC" -j2 ;;
	runsc) set -- runsc --network=none --platform=ptrace do -force-overlay=false -cwd "$SRC" \
		-- make -s -C "$SRC" -j2 ;;
	pin-bwrap) set -- taskset -c 0 bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
		--bind "$SRC" "$SRC" --unshare-all --die-with-parent --chdir "$SRC" make -s -C "$SRC" -j2 ;;
	pin-sbx) set -- taskset -c 0 "$SBX_BUILD/bin/sbx-run" --lease "$L" --rw "$SRC" \
		--trace "$W/t.jsonl" --trace-level exec -- make -s -C "$SRC" -j2 ;;
	esac
	# wall from the ns clock (time(1)'s %e has 10 ms steps); CPU from time(1)
	t0=$(date +%s%N)
	/usr/bin/time -f "%U %S" -o "$W/t" "$@" || return
	echo "$(( ($(date +%s%N) - t0) / 1000000 )) $(cat "$W/t")" > "$W/t"
}

r=0
while [ "$r" -le "$ROUNDS" ]; do
	for v in $VARIANTS; do
		make -s -C "$SRC" clean
		case $v in *sbx | sbx-file* | sbx-base) lease new ;; esac
		build "$v" >/dev/null 2>"$W/err" || { echo "bench/run.sh: $v failed:" >&2; cat "$W/err" >&2; exit 1; }
		case $v in *sbx | sbx-file* | sbx-base) lease end ;; esac
		[ -x "$SRC/hello" ] || { echo "bench/run.sh: $v built nothing" >&2; exit 1; }
		[ "$r" -eq 0 ] ||
			awk -v v="$v" '{printf "%s %d %d\n", v, $1, ($2 + $3) * 1000}' "$W/t" >> "$W/times"
	done
	r=$((r + 1))
done

median() {
	grep "^$1 " "$W/times" | cut -d' ' -f"$2" | sort -n |
		awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'
}
# noise on a shared machine only ever adds time: the best round is shown too
best() { grep "^$1 " "$W/times" | cut -d' ' -f"$2" | sort -n | head -n 1; }
# bwrap's init reaps without wait4 accounting: its tree's CPU time is not visible
ratio() { awk -v m="$1" -v b="$2" 'BEGIN {if (m > 0 && b > 0) printf "%.3fx", m / b; else printf "n/a"}'; }
base=$(median native 2)
bbase=$(best native 2)
cbase=$(median native 3)
printf '%-10s %9s %7s %9s %7s %9s %7s   (%s rounds, make -j2 of %s C files)\n' variant wall_ms ratio \
	best_ms ratio cpu_ms ratio "$ROUNDS" "$(ls "$here"/examples/hello/*.c | wc -l)"
for v in $VARIANTS; do
	m=$(median "$v" 2)
	b=$(best "$v" 2)
	c=$(median "$v" 3)
	printf '%-10s %9d %7s %9d %7s %9d %7s\n' "$v" "$m" "$(ratio "$m" "$base")" "$b" \
		"$(ratio "$b" "$bbase")" "$c" "$(ratio "$c" "$cbase")"
done
for v in sbx sbx-base sbx-file sbx-filebase sbx-filen sbx-eph; do
	! { has "$v" && has floor; } ||
		awk -v v="$v" -v s="$(median "$v" 2)" -v b="$(median floor 2)" \
			'BEGIN {printf "%s vs the floor (median wall): %.3fx\n", v, s / b}'
	has "$v" && has bwrap || continue
	awk -v v="$v" -v s="$(median "$v" 2)" -v b="$(median bwrap 2)" \
		'BEGIN {printf "%s vs bwrap (median wall): %+.1f%%\n", v, (s / b - 1) * 100}'
done
! { has sbx && has native-R; } ||
	awk -v s="$(median sbx 2)" -v b="$(median native-R 2)" \
		'BEGIN {printf "sbx vs native-R, both without randomisation (median wall): %+.1f%%\n", (s / b - 1) * 100}'
! { has pin-sbx && has pin-bwrap; } ||
	awk -v s="$(median pin-sbx 2)" -v b="$(median pin-bwrap 2)" \
		'BEGIN {printf "sbx vs bwrap, both on CPU 0 (median wall): %+.1f%%\n", (s / b - 1) * 100}'
[ ! -f "$W/result.json" ] ||
	printf 'stops per build of the last sbx variant: %s (refused %s)\n' \
		"$(jq .supervisor.stops "$W/result.json")" "$(jq .supervisor.refused "$W/result.json")"
[ ! -f "$W/result-b.json" ] ||
	printf 'stops per build of sbx-base: %s (refused %s)\n' \
		"$(jq .supervisor.stops "$W/result-b.json")" "$(jq .supervisor.refused "$W/result-b.json")"
for v in f fb n; do
	[ ! -f "$W/result-$v.json" ] ||
		printf 'sbx-file%s: stops %s, exit stops %s, notified by user notification %s per build\n' \
			"$(case $v in fb) echo base ;; n) echo n ;; esac)" \
			"$(jq .supervisor.stops "$W/result-$v.json")" "$(jq '.supervisor.exit_stops // "?"' "$W/result-$v.json")" \
			"$(jq '.supervisor.notified // 0' "$W/result-$v.json")"
done
# where sbx-file's stops go: the calls that stopped most, [entry, exit]
[ ! -f "$W/result-f.json" ] ||
	printf 'sbx-file stops by call: %s\n' "$(jq -r '.supervisor.by_call // {} | to_entries |
		sort_by(-(.value | add)) | .[:8] | map("\(.key) \(.value)") | join(", ")' "$W/result-f.json")"
