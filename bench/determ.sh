#!/bin/sh
# The cost of --deterministic (SPEC §9): a guest making N clock_gettime calls
# (and N/16 getrandom calls) natively (vDSO), under sbx-run, and under
# sbx-run --deterministic (vDSO hidden: every call is a trapped, emulated
# syscall); a shell step (date, ls, uuid, urandom) with and without it; and
# sbx-trace adjudicate of two diverging traces of that step.
# Prints medians of ROUNDS runs (wall seconds) and µs per emulated call.
# Then make -j2 of a 12-module project, MK rounds interleaved (native, pinned,
# sbx-run, --deterministic, and --deterministic with SBX_BUILD_BEFORE's binaries
# when that is set: before/after), how many trace heads the deterministic runs
# wrote, what the schedule did, the supervisor's CPU time (which the host's
# load inflates less than the wall time) and its stops; and one sequential
# compile (cc -O2 of a 300-function module) natively, under sbx-run and under
# --deterministic. The load average is printed with each table: on a shared
# host the ratios move with it.
# Then zlib's ./configure && make && make test (bookworm's source package, fetched
# once by tests/zlib-source.sh), ZR rounds interleaved: native, sbx-run, and
# sbx-run --deterministic, each building a pristine copy at one path; medians,
# ratios to native, and how many trace heads the deterministic runs wrote.
# Usage: bench/determ.sh [ROUNDS] [N] [MK] [ZR]   (defaults 5, 20000, 20, 5; SBX_BUILD defaults to ./build;
#   MK or ZR 0 skips that build)
set -eu
ROUNDS=${1:-5}
N=${2:-20000}
MK=${3:-20}
ZR=${4:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /var/tmp/sbx-bench-determ.XXXXXX)
chmod 755 "$W" # the guest (a user of its own) reaches the bound build trees
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
B="$SBX_BUILD/bin"
G="$SBX_BUILD/guests/determ_loop"
[ -x "$G" ] || { echo "bench/determ.sh: build the guests first (make guests)" >&2; exit 1; }

lease() {
	req=$("$B/sbx-lease" request --image "$1")
	printf '%s' "$req" | "$B/sbx-lease" fund --amount 0 --evidence - |
		"$B/sbx-lease" activate --evidence - >/dev/null
	printf '%s' "$req" | jq -r .lease.id
}
LG=$(lease "$G")
LS=$(lease /bin/sh)
mkdir "$W/in"

# median wall time of ROUNDS runs of "$@"
median() {
	i=0
	: >"$W/times"
	while [ $i -lt "$ROUNDS" ]; do
		/usr/bin/time -f %e -o "$W/t" "$@" >/dev/null 2>&1
		cat "$W/t" >>"$W/times"
		i=$((i + 1))
	done
	sort -n "$W/times" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

nat=$(median "$G" "$N")
run=$(median "$B/sbx-run" --lease "$LG" -- "$G" "$N")
det=$(median "$B/sbx-run" --lease "$LG" --deterministic -- "$G" "$N")
calls=$((N + (N + 15) / 16))
echo "loop of $N clock_gettime + $((calls - N)) getrandom:"
echo "  native        ${nat} s"
echo "  sbx-run       ${run} s"
echo "  deterministic ${det} s"
awk -v r="$run" -v d="$det" -v c="$calls" \
	'BEGIN { printf "  %.1f us per emulated call (deterministic - sbx-run) / calls\n", (d - r) * 1e6 / c }'

STEP='date; ls /ns; cat /proc/sys/kernel/random/uuid; head -c 16 /dev/urandom >/tmp/r; od -An -tx1 /tmp/r; cat /in/f'
echo a >"$W/in/f"
s_run=$(median "$B/sbx-run" --lease "$LS" --env-clear --ro "$W/in:/in" --trace "$W/x.trace" -- /bin/sh -c "$STEP")
s_det=$(median "$B/sbx-run" --lease "$LS" --env-clear --ro "$W/in:/in" --deterministic --trace "$W/a.trace" -- /bin/sh -c "$STEP")
echo b >"$W/in/f"
"$B/sbx-run" --lease "$LS" --env-clear --ro "$W/in:/in" --deterministic --trace "$W/b.trace" -- /bin/sh -c "$STEP" >/dev/null
adj=$(median sh -c "'$B/sbx-trace' adjudicate --env-clear '$W/a.trace' '$W/b.trace'; [ \$? = 11 ]")
echo "shell step (date, ls, uuid, urandom, cat), traced at level file:"
echo "  sbx-run       ${s_run} s"
echo "  deterministic ${s_det} s"
echo "  adjudicate    ${adj} s  ($(wc -l <"$W/a.trace") trace lines)"

# make -j2 of a generated 12-module project: native, native pinned to one CPU
# (what one-at-a-time costs without any tracer), sbx-run, and sbx-run
# --deterministic (the parallel schedule), and the same with the binaries
# before the change (SBX_BUILD_BEFORE, optional); rounds interleaved, medians,
# ratios to native, and whether every deterministic run wrote one trace head
# (with SBX_BUILD_BEFORE, the before runs' heads too: the same lease, so the
# same head when the change keeps every trace), and the stops of each.
P="$W/proj"
mkdir "$P"
i=1
while [ $i -le 12 ]; do
	printf 'int f%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * %d; return s; }\n' \
		$i $i >"$P/m$i.c"
	i=$((i + 1))
done
printf 'int main(void) { return 0; }\n' >"$P/main.c"
# the sequential program: one compile of a module of 300 functions (about a
# second natively), one process, no ordered event but its exit
i=1
while [ $i -le 300 ]; do
	printf 'int g%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += (i * %d) ^ (s >> 3); return s; }\n' \
		$i $i >>"$P/big.c"
	i=$((i + 1))
done
printf 'OBJ = main.o m1.o m2.o m3.o m4.o m5.o m6.o m7.o m8.o m9.o m10.o m11.o m12.o\nprog: $(OBJ)\n\tcc -o $@ $(OBJ)\n%%.o: %%.c\n\tcc -O1 -c $< -o $@\n' >"$P/Makefile"
sleep 1 # the sources lie in the lease's past
LM=$(lease "$(command -v make)")
LC=$(lease "$(command -v cc)")
MODES="native pinned run det"
CMODES="cnat crun cdet"
[ -n "${SBX_BUILD_BEFORE:-}" ] && MODES="$MODES before" && CMODES="$CMODES cbefore"
for m in $MODES $CMODES; do : >"$W/mk.$m"; done
: >"$W/mk.svcpu"; : >"$W/mk.bsvcpu"; : >"$W/mk.stops"; : >"$W/mk.bstops"; : >"$W/mk.cstops"; : >"$W/mk.cbstops"
: >"$W/mk.heads"; : >"$W/mk.load"
# one timed build of a fresh copy of the project at one path; $1 the times file
build() {
	out=$1
	shift
	rm -rf "$W/src"
	cp -a "$P" "$W/src"
	/usr/bin/time -f '%e %U %S' -o "$W/t" "$@" >/dev/null 2>&1
	cut -d' ' -f1 "$W/t" >>"$out"
}
# the deterministic runs, after and before the change (SBX_BUILD_BEFORE)
mk_det() {
	build "$W/mk.det" "$B/sbx-run" --lease "$LM" --deterministic --rw "$W/src:/src" \
		--trace "$W/mk.trace" --result "$W/mk.json" -- make -C /src -j2
	tail -n 1 "$W/mk.trace" | jq -r .h >>"$W/mk.heads"
	# the supervisor's CPU: sbx-run's and its children's, less the guest tree's
	awk -v g="$(jq .usage.cpu_us "$W/mk.json")" '{ printf "%.3f\n", $2 + $3 - g / 1e6 }' "$W/t" >>"$W/mk.svcpu"
	jq -r '"\(.supervisor.stops) \(.determinism.stops.free + .determinism.stops.ordered)"' "$W/mk.json" >>"$W/mk.stops"
}
mk_before() {
	[ -n "${SBX_BUILD_BEFORE:-}" ] || return 0
	build "$W/mk.before" "$SBX_BUILD_BEFORE/bin/sbx-run" --lease "$LM" --deterministic \
		--rw "$W/src:/src" --trace "$W/mk.trace" --result "$W/mk.bjson" -- make -C /src -j2
	tail -n 1 "$W/mk.trace" | jq -r .h >>"$W/mk.heads"
	awk -v g="$(jq .usage.cpu_us "$W/mk.bjson")" '{ printf "%.3f\n", $2 + $3 - g / 1e6 }' "$W/t" >>"$W/mk.bsvcpu"
	jq -r '"\(.supervisor.stops) \(.determinism.stops.free + .determinism.stops.ordered)"' "$W/mk.bjson" >>"$W/mk.bstops"
}
seq_det() {
	build "$W/mk.cdet" "$B/sbx-run" --lease "$LC" --deterministic --rw "$W/src:/src" \
		--chdir /src --result "$W/c.json" -- cc -O2 -c big.c -o big.o
	jq -r '"\(.supervisor.stops) \(.determinism.stops.free + .determinism.stops.ordered)"' "$W/c.json" >>"$W/mk.cstops"
}
seq_before() {
	[ -n "${SBX_BUILD_BEFORE:-}" ] || return 0
	build "$W/mk.cbefore" "$SBX_BUILD_BEFORE/bin/sbx-run" --lease "$LC" --deterministic \
		--rw "$W/src:/src" --chdir /src --result "$W/c.json" -- cc -O2 -c big.c -o big.o
	jq -r '"\(.supervisor.stops) \(.determinism.stops.free + .determinism.stops.ordered)"' "$W/c.json" >>"$W/mk.cbstops"
}
i=0
while [ $i -lt "$MK" ]; do
	cut -d' ' -f1 /proc/loadavg >>"$W/mk.load"
	build "$W/mk.native" make -C "$W/src" -j2
	build "$W/mk.pinned" taskset -c 0 make -C "$W/src" -j2
	build "$W/mk.run" "$B/sbx-run" --lease "$LM" --rw "$W/src:/src" -- make -C /src -j2
	# before and after alternate which goes first: a build's time depends on its place in the round
	if [ $((i % 2)) -eq 0 ]; then mk_det; mk_before; else mk_before; mk_det; fi
	build "$W/mk.cnat" sh -c "cd '$W/src' && cc -O2 -c big.c -o big.o"
	build "$W/mk.crun" "$B/sbx-run" --lease "$LC" --rw "$W/src:/src" \
		--chdir /src -- cc -O2 -c big.c -o big.o
	if [ $((i % 2)) -eq 0 ]; then seq_det; seq_before; else seq_before; seq_det; fi
	i=$((i + 1))
done
med() {
	sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs"
if [ "$MK" -gt 0 ]; then
	mn=$(med "$W/mk.native")
	echo "make -j2, 12 modules ($MK rounds interleaved; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load average $(med "$W/mk.load") median, $(sort -n "$W/mk.load" | head -1)-$(sort -n "$W/mk.load" | tail -1)):"
	for m in $MODES; do
		v=$(med "$W/mk.$m")
		awk -v m="$m" -v v="$v" -v n="$mn" 'BEGIN { printf "  %-14s %s s  %.2fx native\n", m, v, v / n }'
	done
	echo "  deterministic trace heads: $(sort -u "$W/mk.heads" | wc -l) distinct in $(wc -l <"$W/mk.heads") runs"
	echo "  last deterministic run's schedule: $(jq -c '.determinism.stops | del(.parked_by)' "$W/mk.json")"
	echo "  its parked ms by what waited: $(jq -r '.determinism.stops.parked_by | to_entries |
		sort_by(-.value) | map("\(.key) \(.value / 1000 | floor)") | join(", ")' "$W/mk.json")"
	echo "  deterministic: supervisor CPU $(med "$W/mk.svcpu") s median;" \
		"seccomp stops and schedule resumes $(sort -n "$W/mk.stops" | uniq -c | sort -rn | head -1 | sed 's/^ *[0-9]* //')"
	[ -s "$W/mk.bstops" ] && echo "  before: supervisor CPU $(med "$W/mk.bsvcpu") s median;" \
		"seccomp stops and schedule resumes $(sort -n "$W/mk.bstops" | uniq -c | sort -rn | head -1 | sed 's/^ *[0-9]* //')"
	cn=$(med "$W/mk.cnat")
	echo "sequential: cc -O2 -c of a 300-function module, one process"
	for m in $CMODES; do
		v=$(med "$W/mk.$m")
		awk -v m="$m" -v v="$v" -v n="$cn" 'BEGIN { printf "  %-14s %s s  %.2fx native\n", m, v, v / n }'
	done
fi

# zlib: ./configure && make && make test of a pristine copy at one path
[ "$ZR" -gt 0 ] || exit 0
if ! Z=$("$here/tests/zlib-source.sh"); then
	echo "zlib: skipped (its source could not be fetched)"
	exit 0
fi
LZ=$(lease /bin/sh)
ZB='cd /src && ./configure && make && make test'
: >"$W/z.native"; : >"$W/z.run"; : >"$W/z.det"; : >"$W/z.heads"
zbuild() {
	out=$1
	shift
	rm -rf "$W/src"
	cp -a "$Z" "$W/src"
	/usr/bin/time -f %e -o "$W/t" "$@" >"$W/z.log" 2>&1 || { echo "zlib build failed:" >&2; tail -n 5 "$W/z.log" >&2; exit 1; }
	cat "$W/t" >>"$out"
}
i=0
while [ $i -lt "$ZR" ]; do
	zbuild "$W/z.native" sh -c "cd '$W/src' && ./configure && make && make test"
	zbuild "$W/z.run" "$B/sbx-run" --lease "$LZ" --env-clear --env PATH=/usr/bin:/bin --rw "$W/src:/src" \
		-- /bin/sh -c "$ZB"
	zbuild "$W/z.det" "$B/sbx-run" --lease "$LZ" --deterministic --env-clear --env PATH=/usr/bin:/bin \
		--rw "$W/src:/src" --trace "$W/z.trace" -- /bin/sh -c "$ZB"
	tail -n 1 "$W/z.trace" | jq -r .h >>"$W/z.heads"
	i=$((i + 1))
done
zn=$(med "$W/z.native")
echo "zlib configure && make && make test ($ZR rounds interleaved; $cpu; load $(cut -d' ' -f1-3 /proc/loadavg)):"
for m in native run det; do
	v=$(med "$W/z.$m")
	awk -v m="$m" -v v="$v" -v n="$zn" 'BEGIN { printf "  %-14s %s s  %.2fx native\n", m, v, v / n }'
done
echo "  deterministic trace heads: $(sort -u "$W/z.heads" | wc -l) distinct in $ZR runs"
