#!/usr/bin/env bash
# Fails when an object uses a symbol of a layer above its own, or of another
# folder of its own layer (tests/layers.txt), when an object lies in no layer,
# or when an object of trace/ names a snap_ symbol. Usage: tests/layers.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/layers.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
folders=() ranks=()
rank=0
while read -r -a line; do
	[ ${#line[@]} -gt 0 ] || continue
	for f in "${line[@]}"; do folders+=("$f"); ranks+=("$rank"); done
	rank=$((rank + 1))
done < <(grep -v '^#' "$here/layers.txt")

folder_of() { # an object's path under obj/ -> the index of the deepest listed folder holding it, or -1
	local i best=-1 len=0
	for i in "${!folders[@]}"; do
		case "$1" in "${folders[$i]}"/*)
			[ ${#folders[$i]} -gt $len ] && { best=$i; len=${#folders[$i]}; } ;;
		esac
	done
	echo "$best"
}

declare -A def_folder obj_folder
objs=() failed=0
while IFS= read -r -d '' o; do
	rel=${o#"$build/obj/"}
	[ -e "$src/${rel%.o}.c" ] || continue # left behind by a source that moved
	f=$(folder_of "$rel")
	if [ "$f" -lt 0 ]; then
		echo "layers: $rel lies in no layer of tests/layers.txt" >&2
		failed=$((failed + 1))
		continue
	fi
	objs+=("$o")
	obj_folder[$o]=$f
	while read -r _ sym; do def_folder[$sym]=$f; done \
		< <(nm --defined-only --extern-only "$o" | awk '{print $2, $3}')
done < <(find "$build/obj" -name '*.o' -print0 2>/dev/null | sort -z)

passed=0
for o in "${objs[@]}"; do
	rel=${o#"$build/obj/"}
	mine=${obj_folder[$o]}
	bad=0
	while read -r sym; do
		f=${def_folder[$sym]:-}
		if [ -n "$f" ] && [ "${ranks[$f]}" -gt "${ranks[$mine]}" ]; then
			echo "layers: $rel uses $sym of ${folders[$f]}, a layer above ${folders[$mine]}" >&2
			bad=1
		elif [ -n "$f" ] && [ "${ranks[$f]}" = "${ranks[$mine]}" ] && [ "$f" != "$mine" ]; then
			echo "layers: $rel uses $sym of ${folders[$f]}, beside ${folders[$mine]} in one layer" >&2
			bad=1
		elif [[ $rel == trace/* && $sym == snap_* ]]; then
			echo "layers: $rel uses $sym: trace/ never reaches snap/" >&2
			bad=1
		fi
	done < <(nm --undefined-only "$o" | awk '{print $2}')
	if [ $bad = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
[ ${#objs[@]} -gt 0 ] || { echo "layers: no objects under $build/obj" >&2; failed=1; }
echo "layers: $passed passed, $failed failed"
[ $failed = 0 ]
