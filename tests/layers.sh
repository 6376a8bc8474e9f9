#!/usr/bin/env bash
# Fails when an object uses a symbol of a layer above its own, or of another
# folder of its own layer (tests/layers.txt), when an object lies in no layer,
# or when an object of trace/ names a snap_ symbol; and when a source file
# includes a header the same rule forbids. Usage: tests/layers.sh BUILD_DIR [SOURCE_DIR]
set -euo pipefail
build=${1:?usage: tests/layers.sh BUILD_DIR [SOURCE_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
src=${2:-$(dirname "$here")}
folders=() ranks=()
rank=0
while read -r -a line; do
	[ ${#line[@]} -gt 0 ] || continue
	for f in "${line[@]}"; do folders+=("$f"); ranks+=("$rank"); done
	rank=$((rank + 1))
done < <(grep -v '^#' "$here/layers.txt")

folder_of() { # a path under obj/ or the tree -> REPLY: the index of the deepest listed folder holding it, or -1
	local i len=0
	REPLY=-1
	for i in "${!folders[@]}"; do
		case "$1" in "${folders[$i]}"/*)
			[ ${#folders[$i]} -gt $len ] && { REPLY=$i; len=${#folders[$i]}; } ;;
		esac
	done
}

declare -A def_folder obj_folder
objs=() failed=0
while IFS= read -r -d '' o; do
	rel=${o#"$build/obj/"}
	[ -e "$src/${rel%.o}.c" ] || continue # left behind by a source that moved
	folder_of "$rel"
	f=$REPLY
	if [ "$f" -lt 0 ]; then
		echo "layers: $rel lies in no layer of tests/layers.txt" >&2
		failed=$((failed + 1))
		continue
	fi
	objs+=("$o")
	obj_folder[$o]=$f
done < <(find "$build/obj" -name '*.o' -print0 2>/dev/null | sort -z)

# One nm for every object (a process costs ~0.1 s in a VM): "object<TAB>symbol" lines.
symbols() {
	[ ${#objs[@]} -eq 0 ] ||
		nm -A "$@" "${objs[@]}" | awk '{ match($0, /:[^:]*$/); print substr($0, 1, RSTART - 1) "\t" $NF }'
}
while IFS=$'\t' read -r o sym; do def_folder[$sym]=${obj_folder[$o]}; done \
	< <(symbols --defined-only --extern-only)

declare -A bad
while IFS=$'\t' read -r o sym; do
	rel=${o#"$build/obj/"}
	mine=${obj_folder[$o]}
	f=${def_folder[$sym]:-}
	if [ -n "$f" ] && [ "${ranks[$f]}" -gt "${ranks[$mine]}" ]; then
		echo "layers: $rel uses $sym of ${folders[$f]}, a layer above ${folders[$mine]}" >&2
		bad[$o]=1
	elif [ -n "$f" ] && [ "${ranks[$f]}" = "${ranks[$mine]}" ] && [ "$f" != "$mine" ]; then
		echo "layers: $rel uses $sym of ${folders[$f]}, beside ${folders[$mine]} in one layer" >&2
		bad[$o]=1
	elif [[ $rel == trace/* && $sym == snap_* ]]; then
		echo "layers: $rel uses $sym: trace/ never reaches snap/" >&2
		bad[$o]=1
	fi
done < <(symbols --undefined-only)
passed=0
for o in "${objs[@]}"; do
	if [ -z "${bad[$o]:-}" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
# Headers follow the same rule: a file includes only headers of its own
# folder and of lines above; trace/trace.h, the tools' view, includes no room.
while IFS= read -r -d '' s; do
	rel=${s#"$src/"}
	folder_of "$rel"
	mine=$REPLY
	while read -r inc; do
		if [ "$rel" = trace/trace.h ]; then
			[[ $inc != trace/* ]] || { echo "layers: trace/trace.h includes $inc" >&2; failed=$((failed + 1)); }
			continue
		fi
		folder_of "$inc"
		f=$REPLY
		[ "$f" -ge 0 ] || continue
		if [ "${ranks[$f]}" -gt "${ranks[$mine]}" ] ||
		   { [ "${ranks[$f]}" = "${ranks[$mine]}" ] && [ "$f" != "$mine" ]; }; then
			echo "layers: $rel includes $inc of ${folders[$f]}, not below ${folders[$mine]}" >&2
			failed=$((failed + 1))
		fi
	done < <(sed -n 's/^#include "\(.*\)"/\1/p' "$s")
done < <(cd "$src" && for f in "${folders[@]}"; do
	[ ! -d "$f" ] || find "$src/$f" -maxdepth 1 \( -name '*.c' -o -name '*.h' \) -print0; done
	[ ! -e trace/trace.h ] || printf '%s\0' "$src/trace/trace.h")
[ ${#objs[@]} -gt 0 ] || { echo "layers: no objects under $build/obj" >&2; failed=1; }
echo "layers: $passed passed, $failed failed"
[ $failed = 0 ]
