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
# a private copy of the tools: a rebuild during the bench does not disturb it
mkdir -p "$W/bin"
cp "$SBX_BUILD/bin/sbx-run" "$W/bin/"
PATH="$W/bin:$PATH"
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
	printf '%s\n' 'printf("%d\n", s); return 0; }'
} > "$P/main.c"
cat > "$P/Makefile" <<'M'
SRCS := $(wildcard *.c)
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
# "wall cpu": medians of RUNS clean builds of "$@"; cpu = task-clock of the
# whole process tree (perf stat), which a loaded machine disturbs less than wall
measure() {
	r=0
	: > "$W/times"
	while [ $r -lt "$RUNS" ]; do
		make -s -C "$P" clean >/dev/null
		t0=$(now)
		perf stat -x, -e task-clock -o "$W/perf" "$@" >/dev/null 2>"$W/err" ||
			{ cat "$W/err" >&2; echo "bench: failed: $*" >&2; exit 1; }
		t1=$(now)
		cpu=$(awk -F, '/task-clock/ {printf "%.3f", $1 / 1000}' "$W/perf")
		echo "$(echo "$t1 - $t0" | bc -l) $cpu" >> "$W/times"
		r=$((r + 1))
	done
	w=$(cut -d' ' -f1 "$W/times" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}')
	c=$(cut -d' ' -f2 "$W/times" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}')
	echo "$w $c"
}

native=$(measure make -s -j2 -C "$P")
none=$(measure sbx-run --ephemeral --rw "$P:/src" -- make -s -j2 -C /src)
exec_=$(measure sbx-run --ephemeral --rw "$P:/src" --trace "$W/t.exec" --trace-level exec -- make -s -j2 -C /src)
file=$(measure sbx-run --ephemeral --rw "$P:/src" --trace "$W/t.file" --trace-level file -- make -s -j2 -C /src)
all=$(measure sbx-run --ephemeral --rw "$P:/src" --trace "$W/t.all" --trace-level all -- make -s -j2 -C /src)
strace_=$(measure strace -f --seccomp-bpf -e trace=%file -o "$W/strace.out" make -s -j2 -C "$P")

nw=${native% *}
nc=${native#* }
div() { echo "$1 / $2" | bc -l | awk '{printf "%.3f", $1}'; }
events() { [ -f "$1" ] && wc -l < "$1" | tr -d ' ' || echo -; }
row() { # name "wall cpu" lines
	w=${2% *}
	c=${2#* }
	printf '%-32s %8s %7s %8s %7s %8s\n' "$1" "$w" "$(div "$w" "$nw")" "$c" "$(div "$c" "$nc")" "$3"
}
echo "bench/trace.sh: 30-file make -j2, median of $RUNS runs, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-32s %8s %7s %8s %7s %8s\n' mode wall_s ratio cpu_s ratio lines
row native "$native" -
row "sbx-run, no --trace" "$none" -
row "sbx-run --trace-level exec" "$exec_" "$(events "$W/t.exec")"
row "sbx-run --trace-level file" "$file" "$(events "$W/t.file")"
row "sbx-run --trace-level all" "$all" "$(events "$W/t.all")"
row "strace -f --seccomp-bpf %file" "$strace_" "$(events "$W/strace.out")"
fw=${file% *}; sw=${strace_% *}; fc=${file#* }; sc=${strace_#* }
echo "file-level overhead / strace overhead: wall $(echo "($fw / $nw - 1) / ($sw / $nw - 1)" | bc -l | awk '{printf "%.2f", $1}')," \
	"cpu $(echo "($fc / $nc - 1) / ($sc / $nc - 1)" | bc -l | awk '{printf "%.2f", $1}') (target <= 0.5); exec-level wall ratio target <= 1.05"
