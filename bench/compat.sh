#!/bin/sh
# Real toolchains run unchanged: projects' own test suites, nobody here wrote
# them, run natively and under sbx-run (plain, and recording a file-level
# trace), compared case by case.
# - CPython's regression tests (Debian's libpython3.11-testsuite, `make
#   bench-deps`): processes, signals, pipes, ptys, the file system, mmap,
#   rlimits, loopback HTTP servers, and the socket-, ssl-, asyncio- and
#   multiprocessing-heavy modules (servers in threads, fork/forkserver/spawn
#   over Unix sockets). One run per module, each ended after COMPAT_TIMEOUT
#   seconds (default 1200; a hang loses that module's remaining cases only).
# - A JVM: javac compiles a small multi-class project and java runs it.
# - libuv's test suite (processes, signals, pipes, ptys, loopback TCP/UDP,
#   multicast, the file system, threads), one case per run with a timeout.
#   Build it yourself and name the runner: UV_RUN_TESTS=/path/uv_run_tests_a
#   (cmake -DLIBUV_BUILD_TESTS=ON; UV_SRC, its source tree for test/fixtures,
#   defaults to the runner's parent directory). Skipped when unset.
# - git's own test suite (t/*.sh, TAP: one case per "ok N"), a shell-driven
#   suite that copies, renames and links files, spawns many short processes and
#   talks over Unix sockets (credential-cache daemon, simple-ipc). GIT_SRC names
#   a built git tree; unset, bookworm's git source package is fetched with
#   apt-get source (a private deb-src list, nothing of the host's apt changed)
#   and built once into COMPAT_CACHE (default /var/tmp/sbx-bench-compat-cache).
#   GIT_TESTS picks its scripts by prefix, each ended after GIT_TIMEOUT s.
# test_multiprocessing_spawn needs more than one lease: every interpreter it
# spawns re-reads the standard library's .pyc files, 1.41 GiB of file reads in
# all natively (1.47 GiB with its pipes and sockets, which storage_read, the
# kernel's rchar, counts too), past storage_read's 1 GiB ceiling: in one lease
# it closes on storage_read after some 166 of its 339 passing cases. So under
# sbx (not sbx-trace: a chain takes no trace) the modules of COMPAT_CHAIN
# (default: that one) run as a user would run them, as a chain of leases
# (sbx-run --chain COMPAT_LINKS, default 4): each link's tree is snapshotted
# near the bound (multiprocessing's heap, a deleted /dev/shm file mapped
# shared, and its named semaphores are held since snapshot format 7) and
# restored into the next lease. The run's /tmp is its own tmpfs, which no
# snapshot carries, and regrtest works in a directory of TMPDIR: so TMPDIR is
# a directory of the host bound into the run, which outlives every link. On
# an AMD EPYC 2-vCPU host at load 11-15 it passed 339 of its 339 in two links
# (939 MB and 657 MB of storage_read), 354 s against 305 s natively.
# Prints, per variant, `compat: N of M native-passing cases pass under sbx`
# and every case that passes natively but not under sbx, with its first error.
# Usage: [UV_RUN_TESTS=…] bench/compat.sh   (SBX_BUILD defaults to ./build;
# COMPAT_SUITES picks from "cpython jvm libuv git"; COMPAT_MODULES overrides the
# CPython module list, COMPAT_CHAIN the modules run as a chain under sbx). Run it un-niced: a root
# invoker may lower a niceness natively, a guest (no CAP_SYS_NICE) may not.
set -eu
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
here=$(cd "$(dirname "$0")/.." && pwd)
: "${SBX_BUILD:=$here/build}"
W=$(mktemp -d /var/tmp/sbx-bench-compat.XXXXXX)
# searchable: a root invoker's set-up may not enter a 0700 directory to make mount points
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
export SBX_STORE="$W/store"
PY=/usr/bin/python3
: "${COMPAT_MODULES:=test_os test_subprocess test_signal test_pty test_shutil test_tempfile
test_posix test_fcntl test_select test_selectors test_pathlib test_mmap test_resource
test_httpservers test_urllib2_localnet test_socket test_socketserver test_ssl test_logging
test_asyncio test_multiprocessing_fork test_multiprocessing_forkserver
test_multiprocessing_spawn}"
: "${COMPAT_SUITES:=cpython jvm libuv git}" "${UV_RUN_TESTS:=}" "${UV_TIMEOUT:=120}"
: "${GIT_SRC:=}" "${GIT_TIMEOUT:=600}" "${COMPAT_CACHE:=/var/tmp/sbx-bench-compat-cache}"
: "${GIT_TESTS:=t0000 t0052 t0301 t1300 t1301 t2200 t3200 t3400 t3903 t4013 t5300 t5510 t6300 t7001
t7003 t7508 t7810}"
: "${COMPAT_TIMEOUT:=1200}" "${COMPAT_CHAIN:=test_multiprocessing_spawn}" "${COMPAT_LINKS:=4}"
# a chained module's TMPDIR (see above), searchable by the guest
mkdir -m 1777 "$W/tmp"
suite() { case " $COMPAT_SUITES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if suite cpython && ! [ -f /usr/lib/python3.11/test/test_os.py ]; then
	echo "compat: no CPython test suite (make bench-deps)" >&2; exit 1
fi
if suite libuv && [ -z "$UV_RUN_TESTS" ]; then
	echo "compat: libuv skipped: UV_RUN_TESTS is not set (the path of a uv_run_tests_a built with -DLIBUV_BUILD_TESTS=ON)" >&2
	COMPAT_SUITES=$(echo " $COMPAT_SUITES " | sed 's/ libuv / /')
fi
# git_build: bookworm's git source package, fetched and built once in COMPAT_CACHE
git_build() {
	c=$COMPAT_CACHE
	[ -x "$c/git-src/t/helper/test-tool" ] && return 0
	mkdir -p "$c/apt/lists/partial" "$c/apt/cache/archives/partial"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" >"$c/apt/sources.list"
	set -- -q -o Dir::Etc::sourcelist="$c/apt/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::lists="$c/apt/lists" -o Dir::Cache="$c/apt/cache"
	apt-get "$@" update >&2 && (cd "$c" && apt-get "$@" source --download-only git >&2) &&
		rm -rf "$c/git-src" && (cd "$c" && dpkg-source -q -x git_*.dsc git-src >&2) &&
		make -C "$c/git-src" -j2 NO_GETTEXT=YesPlease NO_TCLTK=YesPlease NO_PYTHON=YesPlease all >"$c/build.log" 2>&1
}
if suite git && [ -z "$GIT_SRC" ]; then
	if git_build; then
		GIT_SRC=$COMPAT_CACHE/git-src
	else
		echo "compat: git skipped: its source package could not be fetched or built (GIT_SRC names a built tree)" >&2
		COMPAT_SUITES=$(echo " $COMPAT_SUITES " | sed 's/ git / /')
	fi
fi
if suite git; then
	[ -x "$GIT_SRC/t/helper/test-tool" ] || { echo "compat: error: GIT_SRC: $GIT_SRC is no built git tree" >&2; exit 1; }
	GIT_CASES=$(cd "$GIT_SRC/t" && for p in $GIT_TESTS; do ls "$p"-*.sh; done)
fi
if suite libuv; then
	: "${UV_SRC:=$(dirname "$UV_RUN_TESTS")/..}"
	[ -x "$UV_RUN_TESTS" ] || { echo "compat: error: UV_RUN_TESTS: $UV_RUN_TESTS is not executable" >&2; exit 1; }
	[ -d "$UV_SRC/test/fixtures" ] || { echo "compat: error: UV_SRC: no test/fixtures in $UV_SRC" >&2; exit 1; }
	# the runner and its fixtures in a directory of their own, bound into the run
	mkdir -p "$W/uv/test"
	cp "$UV_RUN_TESTS" "$W/uv/uv_run_tests_a"
	cp -r "$UV_SRC/test/fixtures" "$W/uv/test/"
	# it refuses root unless told; the guest is never root
	UV_CASES=$(cd "$W/uv" && UV_RUN_AS_ROOT=1 ./uv_run_tests_a --list | awk '{print $1}')
fi

# cases VARIANT: "name status" lines of CPython's verbose output, sorted. A
# case with a docstring shows its first line, and its " ... status", on the
# next line; a status may come on a line of its own: a server thread (chatty in
# verbose mode), a child or a resource tracker printed between its "... " and
# its status (as natively too)
cases() {
	awk -v st='^(ok|FAIL|ERROR|skipped|expected failure)' '
	function status(rest) { if (match(rest, st)) { print cur " " substr(rest, 1, RLENGTH); cur = "" } }
	match($0, /^test[^ ]* \([^)]*\) \.\.\. /) { cur = substr($0, 1, RLENGTH - 5); doc = 0; status(substr($0, RLENGTH + 1)); next }
	/^test[^ ]* \([^)]*\)$/ { cur = $0; doc = 1; next }
	doc && (i = index($0, " ... ")) { doc = 0; status(substr($0, i + 5)); next }
	cur != "" && match($0, st "( |$)") { s = substr($0, 1, RLENGTH); sub(/ $/, "", s); print cur " " s; cur = "" }
	/^(-+|=+)$/ { cur = ""; doc = 0 }' "$W/$1.out" | sort -u
}

# py VARIANT RUN...: each CPython module in a run of its own (a run's fuel
# bound is the suite's, and a hang ends one module); "MODULE<TAB>why" into
# VARIANT.mods for a module that timed out or whose run sbx-run ended. Under
# sbx RUN is sbx-run and its options ("--" comes here, after a chain's).
py() {
	v=$1
	shift
	: >"$W/$v.out"
	for m in $COMPAT_MODULES; do
		start=$(date +%s)
		chain= sep= limit=$COMPAT_TIMEOUT
		[ "$v" = native ] || sep=--
		# a chain snapshots and restores a tree at every link: twice the time
		case "$v: $COMPAT_CHAIN " in
		"sbx:"*" $m "*) chain="--chain $COMPAT_LINKS --rw $W/tmp:$W/tmp --env TMPDIR=$W/tmp"
			limit=$((2 * COMPAT_TIMEOUT)) ;;
		esac
		timeout -k 30 "$limit" "$@" $chain $sep $PY -m test -u network -v "$m" >"$W/mod.out" 2>&1 </dev/null || true
		cat "$W/mod.out" >>"$W/$v.out"
		ended "$start" "$limit" "$W/mod.out" | sed "s/^/$m\t/" >>"$W/$v.mods"
	done
}

# ended START LIMIT OUT: why a run ended early, if it did: its time limit (by
# the clock: timeout's 124 is also sbx-run's status for a closed lease), or
# sbx-run's own word (a lease closed on a bound, an error)
ended() {
	if [ $(($(date +%s) - $1)) -ge "$2" ]; then
		echo "timed out after $2 s"
	else
		grep -o -m1 'sbx-run: .*' "$3" || true
	fi
}

# pywhy VARIANT: "case<TAB>last line of its traceback" for each ERROR/FAIL
pywhy() {
	awk -v dash="$(printf '%070d' 0 | tr 0 -)" -v eq="$(printf '%070d' 0 | tr 0 =)" '
	/^(ERROR|FAIL): test[^ ]* \([^)]*\)/ {
		sub(/^(ERROR|FAIL): /, ""); match($0, /^test[^ ]* \([^)]*\)/)
		cur = substr($0, 1, RLENGTH); sub_ = substr($0, RLENGTH + 2); tb = 0; last = ""; next
	}
	cur != "" && !tb && $0 == dash { tb = 1; next }
	cur != "" && ($0 == dash || $0 == eq) { out(); next }
	cur != "" && tb && NF { last = $0 }
	# a failing subtest names its parameters: the case is the test that holds it
	function out() { print cur "\t" (sub_ != "" ? "subtest " sub_ ": " : "") last; cur = "" }
	END { if (cur != "") out() }' "$W/$1.out"
}

# uv VARIANT RUN...: each libuv case by itself; "libuv NAME status" lines, and
# "libuv NAME<TAB>first error line (or skip reason)" into VARIANT.why
uv() {
	v=$1
	shift
	mkdir -p "$W/$v.uv"
	for c in $UV_CASES; do
		rc=0 start=$(date +%s)
		timeout "$UV_TIMEOUT" "$@" "$W/uv/uv_run_tests_a" "$c" >"$W/$v.uv/$c" 2>&1 </dev/null || rc=$?
		over=$(ended "$start" "$UV_TIMEOUT" "$W/$v.uv/$c")
		why=
		if head -1 "$W/$v.uv/$c" | grep -q "^ok 1 - $c # SKIP"; then
			echo "libuv $c skipped"
			why="skipped:$(head -1 "$W/$v.uv/$c" | sed 's/.*# SKIP//')"
		elif [ $rc -eq 0 ]; then
			echo "libuv $c ok"
		elif [ -n "$over" ]; then
			echo "libuv $c FAIL"
			why=$over
		else
			echo "libuv $c FAIL"
			why=$(grep -m1 'Assertion failed\|rror' "$W/$v.uv/$c" ||
				grep -v -m1 '^not ok \|^# exit code\|^# Output from process\|^#\s*$' "$W/$v.uv/$c" || true)
			why=${why:-exit $rc}
		fi
		[ -z "$why" ] || printf 'libuv %s\t%s\n' "$c" "$why" >>"$W/$v.why"
	done
}

# gitsuite VARIANT RUN...: each git test script by itself, its trash under
# $W/gt (the tree stays read-only); "git SCRIPT N status" lines, and "git SCRIPT
# N<TAB>first line of the failing case's body" (or the timeout) into VARIANT.why
gitsuite() {
	v=$1
	shift
	mkdir -p "$W/$v.git"
	for t in $GIT_CASES; do
		rm -rf "$W/gt"
		mkdir -p "$W/gt"
		start=$(date +%s)
		(cd "$GIT_SRC/t" && timeout -k 30 "$GIT_TIMEOUT" "$@" /usr/bin/env HARNESS_ACTIVE=t \
			/bin/sh "$GIT_SRC/t/$t" --root="$W/gt") >"$W/$v.git/$t" 2>&1 </dev/null || true
		over=$(ended "$start" "$GIT_TIMEOUT" "$W/$v.git/$t")
		awk -v t="$t" -v over="$over" -v why="$W/$v.why" '
		/^ok [0-9]+ # skip/ { print "git " t " " $2 " skipped"; next }
		/^ok [0-9]+ - / { print "git " t " " $2 " ok"; next }
		/^not ok [0-9]+ - / { print "git " t " " $3 " FAIL"; fail = $3; next }
		fail != "" { sub(/^#[ \t]*/, ""); if ($0 != "") { print "git " t " " fail "\t" $0 >>why; fail = "" } }
		END { if (over != "") print "git " t "\t" over >>why }' "$W/$v.git/$t"
	done
	rm -rf "$W/gt"
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
	: >"$W/$v.cases"
	: >"$W/$v.why"
	: >"$W/$v.mods"
	case $v in
	native)
		if suite cpython; then
			py "$v" env HOME="$W"
		fi
		if suite jvm; then
			sh -c "$(jvm | sed "s|/j|$W/j|g")" >"$W/$v.jvm" 2>&1 || true
		fi
		if suite libuv; then
			(cd "$W/uv" && uv "$v" env UV_RUN_AS_ROOT=1) >>"$W/$v.cases"
		fi
		if suite git; then
			gitsuite "$v" env >>"$W/$v.cases"
		fi ;;
	sbx | sbx-trace)
		set -- "$SBX_BUILD/bin/sbx-run" --ephemeral --env HOME=/tmp
		[ "$v" = sbx ] || set -- "$@" --trace "$W/t.jsonl" --trace-level file
		if suite cpython; then
			py "$v" "$@"
		fi
		if suite jvm; then
			"$@" --rw "$W/j:/j" -- /bin/sh -c "$(jvm)" >"$W/$v.jvm" 2>&1 || true
		fi
		if suite libuv; then
			# the guest starts in the bound directory, as the runner expects
			(cd "$W/uv" && uv "$v" "$@" --rw "$W/uv:$W/uv" --env UV_RUN_AS_ROOT=1 --) >>"$W/$v.cases"
		fi
		if suite git; then
			gitsuite "$v" "$@" --rw "$W/gt:$W/gt" --chdir "$GIT_SRC/t" -- >>"$W/$v.cases"
		fi ;;
	esac
	if suite cpython; then
		cases "$v" >>"$W/$v.cases"
		pywhy "$v" >>"$W/$v.why"
	fi
	if suite jvm; then
		if grep -qx "sum 5" "$W/$v.jvm"; then echo "jvm-javac-java (A) ok"; else echo "jvm-javac-java (A) FAIL"; fi >>"$W/$v.cases"
	fi
	sort -o "$W/$v.cases" "$W/$v.cases"
}

for v in native sbx sbx-trace; do
	# not $start: py, uv and git time each of their runs in it
	variant_start=$(date +%s)
	run_variant "$v"
	echo "$v: $(grep -c ' ok$' "$W/$v.cases") cases ok of $(wc -l <"$W/$v.cases") in $(( $(date +%s) - variant_start )) s"
done
grep ' ok$' "$W/native.cases" | sed 's/ ok$//' >"$W/native.ok"
m=$(wc -l <"$W/native.ok")
for v in sbx sbx-trace; do
	grep ' ok$' "$W/$v.cases" | sed 's/ ok$//' >"$W/$v.ok"
	n=$(comm -12 "$W/native.ok" "$W/$v.ok" | wc -l)
	echo "compat ($v): $n of $m native-passing cases pass under sbx"
	comm -23 "$W/native.ok" "$W/$v.ok" | while IFS= read -r c; do
		why=$(awk -F '\t' -v c="$c" '$1 == c { print "  (" $2 ")"; exit }' "$W/$v.why")
		# a case the run never reported: its module or script timed out, or the run ended
		[ -n "$why" ] || why=$(echo "$c" | sed -n 's/.*(test\.\([^.]*\).*/\1/p' | {
			read -r m && awk -F '\t' -v m="$m" '$1 == m { print "  (" $2 ")"; exit }' "$W/$v.mods"; } || true)
		[ -n "$why" ] || why=$(echo "$c" | sed -n 's/^\(git [^ ]*\) .*/\1/p' | {
			read -r m && awk -F '\t' -v m="$m" '$1 == m { print "  (" $2 ")"; exit }' "$W/$v.why"; } || true)
		# a case skipped under the variant: the reason unittest gave
		[ -n "$why" ] || why=$(grep -F -m1 "$c ... skipped" "$W/$v.out" | sed 's/.* \.\.\. \(skipped.*\)/  (\1)/' || true)
		why=${why:-  (not reported)}
		echo "  not under $v: $c$why"
	done
done
