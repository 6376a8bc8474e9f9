#!/bin/sh
# Recording cost on a ~30-file `make -j2` C build: native, under sbx-run at
# each --trace-level (and without --trace), and under
# `strace -f --seccomp-bpf -e trace=%file` (which records less than we do:
# no results for most calls' effects on the build record, no hashes).
# Prints the median of N runs (default 3) and ratios to native.
# Usage: bench/trace.sh [RUNS]   (SBX_BUILD defaults to ./build)
set -eu
RUNS=${1:-3}
: "${SBX_BUILD:=$(cd "$(dirname "$0")/.." && pwd)/build}"
PATH="$SBX_BUILD/bin:$PATH"
W=$(mktemp -d /tmp/sbx-bench-trace.XXXXXX)
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
P="$W/proj"
mkdir -p "$P/include"

# the project: 29 modules + main, one shared header, one per-module header
cat > "$P/include/common.h" <<'H'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define SCALE 3
H
i=1
while [ $i -le 29 ]; do
	cat > "$P/include/m$i.h" <<H
int m$i(int x);
H
	cat > "$P/m$i.c" <<C
#include "common.h"
#include "m$i.h"
static int tab[64];
int m$i(int x)
{
	for (int k = 0; k < 64; k++)
		tab[k] = (k * SCALE + x + $i) % 97;
	char buf[32];
	snprintf(buf, sizeof buf, "%d", tab[x & 63]);
	return (int)strlen(buf) + atoi(buf);
}
C
	i=$((i + 1))
done
{
	echo '#include "common.h"'
	i=1; while [ $i -le 29 ]; do echo "#include \"m$i.h\""; i=$((i + 1)); done
	echo 'int main(void) { int s = 0;'
	i=1; while [ $i -le 29 ]; do echo "s += m$i(s);"; i=$((i + 1)); done
	echo 'printf("%d\n", s); return 0; }'
} > "$P/main.c"
cat > "$P/Makefile" <<'M'
SRCS := main.c $(wildcard m*.c)
OBJS := $(SRCS:.c=.o)
CFLAGS := -O2 -g -MMD -Iinclude
hello: $(OBJS)
	$(CC) -o $@ $(OBJS)
%.o: %.c
	$(CC) $(CFLAGS) -c $< -o $@
clean:
	rm -f hello *.o *.d
-include $(OBJS:.o=.d)
M

now() { date +%s.%N; }
# median wall seconds of RUNS clean builds of: "$@"
measure() {
	r=0
	times=""
	while [ $r -lt "$RUNS" ]; do
		make -s -C "$P" clean >/dev/null
		t0=$(now)
		"$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; echo "bench: failed: $*" >&2; exit 1; }
		t1=$(now)
		times="$times $(echo "$t1 - $t0" | bc -l)"
		r=$((r + 1))
	done
	echo $times | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}

run_sbx() { # level or "none"
	if [ "$1" = none ]; then
		sbx-run --ephemeral --rw "$P:/src" -- make -s -j2 -C /src
	else
		sbx-run --ephemeral --rw "$P:/src" --trace "$W/t.$1" --trace-level "$1" -- make -s -j2 -C /src
	fi
}

native=$(measure make -s -j2 -C "$P")
none=$(measure run_sbx none)
exec_=$(measure run_sbx exec)
file=$(measure run_sbx file)
all=$(measure run_sbx all)
strace_=$(measure strace -f --seccomp-bpf -e trace=%file -o "$W/strace.out" make -s -j2 -C "$P")

ratio() { echo "$1 / $native" | bc -l | awk '{printf "%.3f", $1}'; }
events() { [ -f "$1" ] && wc -l < "$1" | tr -d ' ' || echo -; }
echo "bench/trace.sh: 30-file make -j2, median of $RUNS runs, $(nproc) CPUs"
printf '%-34s %8s %8s %10s\n' mode seconds ratio "lines"
printf '%-34s %8s %8s %10s\n' native "$native" 1.000 -
printf '%-34s %8s %8s %10s\n' "sbx-run, no --trace" "$none" "$(ratio "$none")" -
printf '%-34s %8s %8s %10s\n' "sbx-run --trace-level exec" "$exec_" "$(ratio "$exec_")" "$(events "$W/t.exec")"
printf '%-34s %8s %8s %10s\n' "sbx-run --trace-level file" "$file" "$(ratio "$file")" "$(events "$W/t.file")"
printf '%-34s %8s %8s %10s\n' "sbx-run --trace-level all" "$all" "$(ratio "$all")" "$(events "$W/t.all")"
printf '%-34s %8s %8s %10s\n' "strace -f --seccomp-bpf %file" "$strace_" "$(ratio "$strace_")" "$(events "$W/strace.out")"
fo=$(echo "$file / $native - 1" | bc -l)
so=$(echo "$strace_ / $native - 1" | bc -l)
echo "file-level overhead / strace overhead: $(echo "$fo / $so" | bc -l | awk '{printf "%.2f", $1}') (target <= 0.5); exec-level ratio target <= 1.05"
