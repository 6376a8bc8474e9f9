#!/bin/sh
# How far past its ceiling each dimension's hog gets before the lease closes:
# one hog per dimension at full speed (tests/guests/meter_hog) under a small
# ceiling, ROUNDS times each; prints the ceiling, the median usage at closure
# and the overshoot (usage / ceiling - 1), against the target of SPEC §4
# ("Hardening, part 2"): max(1 %, 1 MiB) for bytes, 20 ms for fuel. Storage
# is attacked along every path tests/guests/meter_store knows (fallocate, a
# MAP_SHARED mapping, vmsplice+splice, copy_file_range, 100k empty files...)
# through a read-write bind, storage_read along every read path tests/guests/
# meter_load knows, and against a guest racing its own iovec (tests/guests/
# meter_race: on a file, /dev/zero, a pipe, a stream and a datagram socket);
# "stored" is what the bind holds at the end, and
# its overshoot is taken from that: the usage of a refused call reads as the
# excess (what was held plus what the call asked for), not as bytes stored.
# Then fuel under host load: 3 CPU hogs per CPU outside the sandbox, started and
# stopped here, each loaded round next to a quiet one, with one spinner in the
# guest and one per CPU; prints the median and the worst overshoot of ROUNDS.
# And fuel with the supervisor stopped for 3 s (a spinning thread per CPU): what
# the fuel fuse holds without it.
# Shared mappings (tests/guests/meter_map): every page of a 1 GiB mapping
# dirtied, and two bytes stored into a 2 GiB sparse one (not closed: its usage is
# its two 64 KiB runs and an inode).
# Usage: bench/meter.sh [ROUNDS] [all|load|late|DIMENSION]   (default 3 all; load:
# the fuel under host load and stopped-supervisor parts only; late: the stopped-
# supervisor part only; a dimension: its rows only; SBX_BUILD defaults to ./build)
set -eu
ROUNDS=${1:-3}
PART=${2:-all}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /var/tmp/sbx-bench-meter.XXXXXX)
HOGS=
trap 'hogs_stop; rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
cp -r "$SBX_BUILD/guests" "$W/guests"
chmod -R a+rX "$W"
HOG="$W/guests/meter_hog"
mkdir "$W/w"

# dimension ceiling (as --limits takes it, and in units) hog arguments
cases() {
	cat <<EOF
fuel 200000 200000 fuel
memory 64M 67108864 memory
storage_write 32M 33554432 write
storage_write 32M 33554432 store:write
storage_write 32M 33554432 store:fallocate
storage_write 32M 33554432 store:mmap
storage_write 32M 33554432 store:splice
storage_write 32M 33554432 store:copy
storage_write 32M 33554432 store:sendfile
storage_write 32M 33554432 store:pwritev2
storage_write 32M 33554432 store:files
storage_write 64M 67108864 map:dirty
storage_write 64M 67108864 map:sparse
storage_write 32M 33554432 race:writev /w/f
storage_write 32M 33554432 race:pwritev2 /w/f
storage_read 32M 33554432 read /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 32M 33554432 load:big /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 32M 33554432 load:readv /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 32M 33554432 load:sendfile /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 32M 33554432 load:threads /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 1G 1073741824 load:threads /usr/lib/x86_64-linux-gnu/libc.so.6
storage_read 32M 33554432 race:readv /dev/zero
storage_read 32M 33554432 race:pipe
storage_read 32M 33554432 race:stream
storage_read 32M 33554432 race:dgram
output_bytes 1M 1048576 flood
output_values 100 100 lines
table_elements 64 64 fds
namespace_bytes 1M 1048576 ns
namespace_bytes 4M 4194304 nsburst 20000
EOF
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# host CPU hogs, outside the sandbox
hogs_start() {
	for _ in $(seq 1 "$1"); do
		sh -c 'while :; do :; done' &
		HOGS="$HOGS $!"
	done
}
hogs_stop() {
	[ -n "$HOGS" ] || return 0
	kill $HOGS 2>/dev/null || true
	wait $HOGS 2>/dev/null || true
	HOGS=
}

# fuel=200 ms with SPINNERS spinners in the guest: its usage at closure, in µs
fuel_run() {
	"$SBX_BUILD/bin/sbx-run" --ephemeral --limits fuel=200000 --result "$W/r.json" -- \
		/bin/sh -c "for i in \$(seq $1); do $HOG fuel & done; wait" >/dev/null 2>&1 || true
	jq -r .usage.fuel "$W/r.json"
}

fuel_under_load() {
	ncpu=$(nproc)
	nhog=$((3 * ncpu))
	printf '\nfuel under host load (%s hogs outside the sandbox, %s CPUs; %s rounds)\n' \
		"$nhog" "$ncpu" "$ROUNDS"
	printf '%-26s %12s %14s %10s %10s %8s\n' case ceiling "usage(median)" overshoot worst target
	for s in 1 "$ncpu"; do
		: >"$W/quiet"
		: >"$W/loaded"
		for _ in $(seq 1 "$ROUNDS"); do
			fuel_run "$s" >>"$W/quiet"
			hogs_start "$nhog"
			fuel_run "$s" >>"$W/loaded"
			hogs_stop
		done
		for c in quiet loaded; do
			u=$(median <"$W/$c")
			worst=$(sort -n "$W/$c" | tail -1)
			printf '%-26s %12s %14s %10s %10s %8s\n' "fuel($c, $s spinners)" 200000 "$u" \
				"$(awk -v u="$u" 'BEGIN { printf "%+.1f ms", (u - 200000) / 1000 }')" \
				"$(awk -v u="$worst" 'BEGIN { printf "%+.1f ms", (u - 200000) / 1000 }')" "20 ms"
		done
	done
}

# fuel=200 ms, a spinning thread per CPU, the supervisor stopped (SIGSTOP) for 3 s
# once the guest has burnt 50 ms: the fuel fuse alone holds the bound meanwhile
fuel_late_run() {
	"$SBX_BUILD/bin/sbx-run" --ephemeral --limits fuel=200000 --result "$W/r.json" -- \
		"$HOG" threads "$1" >/dev/null 2>&1 &
	pid=$!
	cpu=0
	while [ "$cpu" -lt 50000 ] && kill -0 "$pid" 2>/dev/null; do
		sleep 0.01
		cpu=$(for g in $(pgrep -f -x "$HOG threads $1"); do cat /proc/"$g"/task/*/schedstat; done \
			2>/dev/null | awk '{ s += $1 } END { printf "%d", s / 1000 }')
	done
	kill -STOP "$pid"
	sleep 3
	kill -CONT "$pid"
	wait "$pid" || true
	jq -r .usage.fuel "$W/r.json"
}

fuel_late() {
	printf '\nfuel with the supervisor stopped for 3 s (%s rounds)\n' "$ROUNDS"
	: >"$W/late"
	for _ in $(seq 1 "$ROUNDS"); do
		fuel_late_run "$(nproc)" >>"$W/late"
	done
	u=$(median <"$W/late")
	worst=$(sort -n "$W/late" | tail -1)
	printf '%-26s %12s %14s %10s %10s %8s\n' "fuel(late, $(nproc) threads)" 200000 "$u" \
		"$(awk -v u="$u" 'BEGIN { printf "%+.1f ms", (u - 200000) / 1000 }')" \
		"$(awk -v u="$worst" 'BEGIN { printf "%+.1f ms", (u - 200000) / 1000 }')" "20 ms"
}

if [ "$PART" = load ] || [ "$PART" = late ]; then
	[ "$PART" = late ] || fuel_under_load
	fuel_late
	exit 0
fi
printf '%-26s %12s %14s %10s %8s %14s\n' dimension ceiling "usage(median)" overshoot target \
	"stored(median)"
cases | while read -r dim lim units mode arg; do
	[ "$PART" = all ] || [ "$PART" = "$dim" ] || continue
	: >"$W/u"
	: >"$W/s"
	for r in $(seq 1 "$ROUNDS"); do
		rm -rf "$W/w" && mkdir "$W/w"
		case $mode in
		store:*) set -- "$W/guests/meter_store" "${mode#store:}" /w ;;
		map:*) set -- "$W/guests/meter_map" "${mode#map:}" /w ;;
		load:*) set -- "$W/guests/meter_load" "${mode#load:}" "$arg" ;;
		race:*) set -- "$W/guests/meter_race" "${mode#race:}" ${arg:+"$arg"} ;;
		*) set -- "$HOG" "$mode" ${arg:-} ;;
		esac
		"$SBX_BUILD/bin/sbx-run" --ephemeral --limits "$dim=$lim" --rw "$W/w:/w" \
			--result "$W/r.json" -- "$@" >/dev/null 2>&1 || true
		jq -r ".usage.$dim" "$W/r.json" >>"$W/u"
		du -sB1 "$W/w" | cut -f1 >>"$W/s"
	done
	u=$(median <"$W/u")
	case $mode in
	store:*) stored=$(median <"$W/s") label="$dim(${mode#store:})" ;;
	map:*) stored=$(median <"$W/s") label="$dim(map ${mode#map:})" ;;
	load:*) stored=- label="$dim(${mode#load:},$lim)" ;;
	race:*write*) stored=$(median <"$W/s") label="$dim(race ${mode#race:})" ;;
	race:*) stored=- label="$dim(race ${mode#race:})" ;;
	nsburst) stored=- label="$dim(nsburst)" ;;
	*) stored=- label=$dim ;;
	esac
	if [ "$dim" = fuel ]; then
		target="20 ms"
		over=$(awk -v u="$u" -v c="$units" 'BEGIN { printf "%+.0f ms", (u - c) / 1000 }')
	elif [ "$dim" = output_values ] || [ "$dim" = table_elements ]; then
		target="1%" # counts, not bytes
		over=$(awk -v u="$u" -v c="$units" 'BEGIN { printf "%+.1f%%", 100 * (u / c - 1) }')
	else
		target=$(awk -v c="$units" 'BEGIN { t = c / 100; if (t < 1048576) t = 1048576; printf "%.0f%%", 100 * t / c }')
		[ "$stored" = - ] && held=$u || held=$stored
		over=$(awk -v u="$held" -v c="$units" 'BEGIN { printf "%+.1f%%", 100 * (u / c - 1) }')
	fi
	printf '%-26s %12s %14s %10s %8s %14s\n' "$label" "$units" "$u" "$over" "$target" "$stored"
done
if [ "$PART" = all ]; then
	fuel_under_load
	fuel_late
fi
