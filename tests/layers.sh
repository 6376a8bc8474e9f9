#!/usr/bin/env bash
# Fails when an object of a layer uses a symbol defined in a layer above it
# (tests/layers.txt). Usage: tests/layers.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/layers.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t layers < <(grep -v '^#' "$here/layers.txt" | grep .)

rank_of() { # an object's path under obj/ -> the deepest layer folder holding it, or -1
	local i best=-1 len=0
	for i in "${!layers[@]}"; do
		case "$1" in "${layers[$i]}"/*)
			[ ${#layers[$i]} -gt $len ] && { best=$i; len=${#layers[$i]}; } ;;
		esac
	done
	echo "$best"
}

declare -A def_rank obj_rank
objs=()
while IFS= read -r -d '' o; do
	r=$(rank_of "${o#"$build/obj/"}")
	[ "$r" -ge 0 ] || continue
	objs+=("$o")
	obj_rank[$o]=$r
	while read -r _ sym; do def_rank[$sym]=$r; done \
		< <(nm --defined-only --extern-only "$o" | awk '{print $2, $3}')
done < <(find "$build/obj" -name '*.o' -print0 2>/dev/null | sort -z)

passed=0 failed=0
for o in "${objs[@]}"; do
	rel=${o#"$build/obj/"}
	mine=${obj_rank[$o]}
	bad=0
	while read -r sym; do
		r=${def_rank[$sym]:-}
		if [ -n "$r" ] && [ "$r" -gt "$mine" ]; then
			echo "layers: $rel uses $sym of ${layers[$r]}, a layer above ${layers[$mine]}" >&2
			bad=1
		fi
	done < <(nm --undefined-only "$o" | awk '{print $2}')
	if [ $bad = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
[ ${#objs[@]} -gt 0 ] || { echo "layers: no objects under $build/obj" >&2; failed=1; }
echo "layers: $passed passed, $failed failed"
[ $failed = 0 ]
