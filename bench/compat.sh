#!/bin/sh
# Real toolchains run unchanged: projects' own test suites, nobody here wrote
# them, run natively and under sbx-run (plain, and recording a file-level
# trace), compared case by case.
# - CPython's regression tests (Debian's libpython3.11-testsuite, `make
#   bench-deps`): processes, signals, pipes, ptys, the file system, mmap,
#   rlimits and loopback HTTP servers.
# - A JVM: javac compiles a small multi-class project and java runs it.
# Prints, per variant, `compat: N of M native-passing cases pass under sbx`
# and every case that passes natively but not under sbx.
# Usage: bench/compat.sh   (SBX_BUILD defaults to ./build)
set -eu
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /var/tmp/sbx-bench-compat.XXXXXX)
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
PY=/usr/bin/python3
MODULES="test_os test_subprocess test_signal test_pty test_shutil test_tempfile test_posix
test_fcntl test_select test_selectors test_pathlib test_mmap test_resource test_httpservers
test_urllib2_localnet"
[ -f /usr/lib/python3.11/test/test_os.py ] ||
	{ echo "compat: no CPython test suite (make bench-deps)" >&2; exit 1; }

# cases VARIANT: "name status" lines of the suite's verbose output, sorted
cases() {
	sed -n 's/^\(test[^ ]* ([^)]*)\) \.\.\. \(ok\|FAIL\|ERROR\|skipped\|expected failure\).*/\1 \2/p' "$W/$1.out" |
		sort -u >"$W/$1.cases"
}

jvm() {
	mkdir -p "$W/j"
	printf 'public class A { public static void main(String[] a) { System.out.println("sum " + B.add(2, 3)); } }\n' >"$W/j/A.java"
	printf 'public class B { static int add(int x, int y) { return x + y; } }\n' >"$W/j/B.java"
	echo 'cd /j && rm -f *.class && javac A.java B.java && java -cp /j A'
}

run_variant() {
	v=$1
	cd "$W"
	case $v in
	native)
		HOME=$W $PY -m test -v $MODULES >"$W/$v.out" 2>&1 || true
		sh -c "$(jvm | sed "s|/j|$W/j|g")" >"$W/$v.jvm" 2>&1 || true ;;
	sbx | sbx-trace)
		set -- "$SBX_BUILD/bin/sbx-run" --ephemeral --env HOME=/tmp
		[ "$v" = sbx ] || set -- "$@" --trace "$W/t.jsonl" --trace-level file
		"$@" -- $PY -m test -v $MODULES >"$W/$v.out" 2>&1 || true
		"$@" --rw "$W/j:/j" -- /bin/sh -c "$(jvm)" >"$W/$v.jvm" 2>&1 || true ;;
	esac
	cases "$v"
	if grep -qx "sum 5" "$W/$v.jvm"; then echo "jvm-javac-java (A) ok"; else echo "jvm-javac-java (A) FAIL"; fi >>"$W/$v.cases"
}

for v in native sbx sbx-trace; do
	start=$(date +%s)
	run_variant "$v"
	echo "$v: $(grep -c ' ok$' "$W/$v.cases") cases ok of $(wc -l <"$W/$v.cases") in $(( $(date +%s) - start )) s"
done
grep ' ok$' "$W/native.cases" | sed 's/ ok$//' >"$W/native.ok"
m=$(wc -l <"$W/native.ok")
for v in sbx sbx-trace; do
	grep ' ok$' "$W/$v.cases" | sed 's/ ok$//' >"$W/$v.ok"
	n=$(comm -12 "$W/native.ok" "$W/$v.ok" | wc -l)
	echo "compat ($v): $n of $m native-passing cases pass under sbx"
	comm -23 "$W/native.ok" "$W/$v.ok" | sed "s/^/  not under $v: /"
done
