#!/bin/sh
# bench/syscall.sh: what one system call costs under each way a supervisor can
# intercept it, on this host, in one interleaved run: native; a ptrace stop at
# every call (PTRACE_SYSCALL: an entry and an exit stop, the way sbx's every-call
# mode runs); seccomp RET_TRACE to a ptrace tracer (sbx's default); seccomp user
# notification answered with FLAG_CONTINUE, with and without
# SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6); and an in-process SIGSYS
# handler (seccomp RET_TRAP) that makes the call from an allowed instruction.
# Calls: getpid (the stop alone), openat of /dev/null (a path call; each
# iteration also closes it, which only the ptrace row stops), and execve (a
# static program exec'ing itself: the row includes the exec; under ptrace every
# call of the new image's start stops too).
# Prints, per call and mechanism, the median ns per call over ROUNDS, the µs it
# adds to a native call, and the ratio to native.
# Usage: bench/syscall.sh [ROUNDS]   (default 5; N_FAST, N_EXEC: calls per run)
set -eu
ROUNDS=${1:-5}
N_FAST=${N_FAST:-20000}
N_EXEC=${N_EXEC:-200}
here=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/sbx-bench-syscall.XXXXXX)
trap 'rm -rf "$W"' EXIT
cc -O2 -static -Wall -Wextra -Werror -o "$W/syscall_bench" "$here/bench/syscall_bench.c"

MECHS="native ptrace seccomp-trace unotify unotify-sync sigsys"
CALLS="getpid openat execve"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
for r in $(seq 1 "$ROUNDS"); do
	for c in $CALLS; do
		n=$N_FAST
		[ "$c" = execve ] && n=$N_EXEC
		for m in $MECHS; do
			if ! out=$("$W/syscall_bench" "$m" "$c" "$n" 2>&1); then
				echo "$m $c: not available here: $out" >&2
				continue
			fi
			echo "$out" >>"$W/rows"
		done
	done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
printf '%-8s %-14s %14s %14s %10s\n' call mechanism "ns/call" "+us/call" "x native"
for c in $CALLS; do
	base=$(awk -v c="$c" '$1 == "native" && $2 == c { print $4 }' "$W/rows" | median)
	for m in $MECHS; do
		v=$(awk -v c="$c" -v m="$m" '$1 == m && $2 == c { print $4 }' "$W/rows" | median)
		[ -n "$v" ] || continue
		awk -v c="$c" -v m="$m" -v v="$v" -v b="$base" 'BEGIN {
			printf "%-8s %-14s %14d %14.1f %10.2f\n", c, m, v, (v - b) / 1000, v / b }'
	done
done
