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
# file-ptrace: level file with a ptrace stop for each lookup (SBX_FILE_TRACE=ptrace), as
# before user notification served them
MODES=${MODES:-"native none exec file file-ptrace all strace"}
cmd() { # the command line of a mode
	case $1 in
	native) echo "make -s -j2 -C $P" ;;
	none) echo "sbx-run --ephemeral --rw $P:/src -- make -s -j2 -C /src" ;;
	exec|file|all) echo "sbx-run --ephemeral --rw $P:/src --trace $W/t.$1 --trace-level $1 -- make -s -j2 -C /src" ;;
	file-ptrace) echo "env SBX_FILE_TRACE=ptrace sbx-run --ephemeral --rw $P:/src --trace $W/t.$1 --trace-level file -- make -s -j2 -C /src" ;;
	strace) echo "strace -f --seccomp-bpf -e trace=%file -o $W/strace.out make -s -j2 -C $P" ;;
	esac
}
# Round-robin: each round runs every mode once, so a change in the machine's
# load hits all modes alike. Per mode: wall seconds and task-clock CPU seconds
# of the whole process tree (perf stat), which load disturbs less than wall.
r=0
while [ $r -lt "$RUNS" ]; do
	for m in $MODES; do
		make -s -C "$P" clean >/dev/null
		t0=$(now)
		# shellcheck disable=SC2046
		perf stat -x, -e task-clock -o "$W/perf" $(cmd $m) >/dev/null 2>"$W/err" ||
			{ cat "$W/err" >&2; echo "bench: failed: $(cmd $m)" >&2; exit 1; }
		t1=$(now)
		echo "$(echo "$t1 - $t0" | bc -l) $(awk -F, '/task-clock/ {printf "%.3f", $1 / 1000}' "$W/perf")" >> "$W/times.$m"
	done
	r=$((r + 1))
done
med() { sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
wall() { cut -d' ' -f1 "$W/times.$1" | med; }
cpu() { cut -d' ' -f2 "$W/times.$1" | med; }
div() { echo "$1 / $2" | bc -l | awk '{printf "%.3f", $1}'; }
events() { [ -f "$1" ] && wc -l < "$1" | tr -d ' ' || echo -; }
nw=$(wall native)
nc=$(cpu native)
echo "bench/trace.sh: 30-file make -j2, median of $RUNS round-robin rounds, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-32s %8s %7s %8s %7s %8s\n' mode wall_s ratio cpu_s ratio lines
for m in $MODES; do
	case $m in
	native) name=native lines=- ;;
	none) name="sbx-run, no --trace" lines=- ;;
	strace) name="strace -f --seccomp-bpf %file" lines=$(events "$W/strace.out") ;;
	file-ptrace) name="sbx-run --trace-level file, ptrace" lines=$(events "$W/t.$m") ;;
	*) name="sbx-run --trace-level $m" lines=$(events "$W/t.$m") ;;
	esac
	printf '%-32s %8s %7s %8s %7s %8s\n' "$name" "$(wall $m)" "$(div "$(wall $m)" "$nw")" \
		"$(cpu $m)" "$(div "$(cpu $m)" "$nc")" "$lines"
done
ov() { echo "($1 / $2 - 1) / ($3 / $2 - 1)" | bc -l | awk '{printf "%.2f", $1}'; }
echo "file-level overhead / strace overhead: wall $(ov "$(wall file)" "$nw" "$(wall strace)")," \
	"cpu $(ov "$(cpu file)" "$nc" "$(cpu strace)") (target <= 0.5);" \
	"exec level: wall $(div "$(wall exec)" "$nw"), cpu $(div "$(cpu exec)" "$nc") (target <= 1.05)"
