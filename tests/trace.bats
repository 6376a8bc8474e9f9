#!/usr/bin/env bats
# sbx-run --trace and sbx-trace: real builds recorded inside the sandbox, completion
# records, attribution, chain verification, truncation, and every reader command.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

# A small C project: two modules, a header next to the sources, one under include/.
make_project() {
	mkdir -p proj/include
	cat > proj/util.h <<'EOF'
int util(int);
EOF
	cat > proj/include/lib.h <<'EOF'
#define LIBK 7
int lib(int);
EOF
	cat > proj/util.c <<'EOF'
#include "util.h"
int util(int x) { return x * 2; }
EOF
	cat > proj/lib.c <<'EOF'
#include <lib.h>
int lib(int x) { return x + LIBK; }
EOF
	cat > proj/main.c <<'EOF'
#include <stdio.h>
#include "util.h"
#include "lib.h"
int main(void) { printf("%d\n", util(lib(1))); return 0; }
EOF
	cat > proj/Makefile <<'EOF'
hello: main.o util.o lib.o
	cc -o hello main.o util.o lib.o
%.o: %.c
	cc -Iinclude -c $< -o $@
EOF
}

# A short traced run: sh reading one file and running one child.
small_trace() {
	sbx-run --ephemeral --trace "$1" -- /bin/sh -c 'cat /etc/hostname >/dev/null; /bin/true' >/dev/null
}

@test "a make -j2 build recorded in the sandbox: inputs, outputs, tools with hashes, probes" {
	make_project
	run sbx-run --ephemeral --rw "$PWD/proj:/src" --trace build.trace -- make -j2 -C /src
	assert_success
	[ -x proj/hello ]
	run sbx-trace verify --complete build.trace
	assert_success
	sbx-trace files build.trace > rec.json
	for f in /src/main.c /src/util.c /src/lib.c /src/util.h /src/include/lib.h /src/Makefile; do
		jq -e --arg f "$f" '.inputs | map(.path) | index($f)' rec.json >/dev/null ||
			fail "input $f missing"
	done
	for f in /src/main.o /src/util.o /src/lib.o /src/hello; do
		jq -e --arg f "$f" '.outputs | map(.path) | index($f)' rec.json >/dev/null ||
			fail "output $f missing"
	done
	# the compiler driver, the compiler proper, the assembler and the linker, with hashes
	for t in 'gcc' '/cc1$' '/(x86_64-linux-gnu-)?as$' '/(x86_64-linux-gnu-)?ld(\.bfd)?$' '/make$'; do
		jq -e --arg t "$t" '.tools | map(select((.path | test($t)) and (.sha256 | length) == 64)) | length > 0' \
			rec.json >/dev/null || fail "tool $t missing or without a hash"
	done
	# the include search probed a path that does not exist
	run jq -r '.probes[] | select(.errno == "ENOENT") | .path' rec.json
	assert_output --regexp '(stdio|lib|util)\.h'
	# the temporary assembler files are temporaries, not outputs
	run jq -r '.outputs[].path' rec.json
	refute_output --partial '/tmp/cc'
	# per process: the cc1 of main.c read main.c
	jq -e '.processes | map(select((.exe // "" | test("cc1$")) and (.inputs | index("/src/main.c")))) | length == 1' \
		rec.json >/dev/null
	# make format and text format
	run sbx-trace files --format=make build.trace
	assert_success
	assert_output --regexp '/src/hello.*:'
	assert_output --partial '/src/include/lib.h'
	run sbx-trace files --format=text --hash-inputs build.trace
	assert_success
	assert_output --partial 'absent paths probed'
	assert_output --partial 'tools executed'
}

@test "nothing a child does is recorded before its parent's spawn record" {
	# a child's first stop often beats its parent's fork event; the child
	# waits for it, so the bundled project's build records every spawn first
	cp -r "$BATS_TEST_DIRNAME/../examples/hello" src
	for i in 1 2 3; do
		make -s -C src clean
		run sbx-run --ephemeral --rw "$PWD/src:/src" --trace b.trace -- make -s -C /src -j2
		assert_success
		run jq -s '[.[] | select(.ev and .pid)] | .[0].pid as $g |
			reduce .[] as $e ({seen: {($g | tostring): true}, early: 0};
				if $e.ev == "spawn" then .seen[$e.child | tostring] = true
				elif .seen[$e.pid | tostring] then . else .early += 1 end) | .early' b.trace
		assert_output 0
	done
}

@test "completion records: failed open errno, creation with its fd, rename both paths, unlink ENOENT" {
	run sbx-run --ephemeral --trace ops.trace -- /bin/sh -c \
		'cat /nonexistent 2>/dev/null; : > /ns/newfile; mv /ns/newfile /ns/renamed; unlink /ns/missing 2>/dev/null; exit 0'
	assert_success
	run jq -c 'select(.ev == "sys" and .path == "/nonexistent" and (.name | test("open")))' ops.trace
	assert_output --partial '"errno":"ENOENT"'
	assert_output --partial '"result":-2'
	run jq -c 'select(.ev == "sys" and .path == "/ns/newfile" and (.name | test("open")))' ops.trace
	assert_output --partial '"created":true'
	assert_output --regexp '"fd":[0-9]+'
	run jq -c 'select(.ev == "sys" and (.name | test("^rename")) and .path == "/ns/newfile")' ops.trace
	assert_output --partial '"path2":"/ns/renamed"'
	assert_output --partial '"result":0'
	run jq -c 'select(.ev == "sys" and (.name | test("^unlink")) and .path == "/ns/missing")' ops.trace
	assert_output --partial '"errno":"ENOENT"'
	run sbx-trace files ops.trace
	assert_success
	jq -e '.outputs | map(select(.path == "/ns/renamed" and .how == "renamed" and .from == "/ns/newfile")) | length == 1' \
		<<<"$output" >/dev/null
}

@test "attribution: two concurrent runs write independent traces; a child carries its pid and ppid" {
	sbx-run --ephemeral --trace a.trace -- /bin/sh -c 'cat /etc/hostname >/dev/null; sh -c "cat /etc/passwd >/dev/null"' &
	sbx-run --ephemeral --trace b.trace -- /bin/sh -c 'cat /etc/group >/dev/null; sh -c "cat /etc/shells >/dev/null"' &
	wait
	run sbx-trace verify --complete a.trace
	assert_success
	run sbx-trace verify --complete b.trace
	assert_success
	run grep -c '/etc/group\|/etc/shells' a.trace
	assert_output 0
	run grep -c '/etc/hostname\|/etc/passwd' b.trace
	assert_output 0
	pa=$(jq -r 'select(.pid) | .pid' a.trace | sort -u)
	pb=$(jq -r 'select(.pid) | .pid' b.trace | sort -u)
	[ -z "$(comm -12 <(echo "$pa") <(echo "$pb"))" ]
	# the inner cat's open carries its own pid; its ppid is the shell that spawned it
	cat_pid=$(jq -r 'select(.ev == "sys" and .path == "/etc/passwd") | .pid' a.trace)
	cat_ppid=$(jq -r 'select(.ev == "sys" and .path == "/etc/passwd") | .ppid' a.trace)
	[ -n "$cat_pid" ]
	run jq -r --argjson c "$cat_pid" 'select(.ev == "spawn" and .child == $c) | .pid' a.trace
	assert_output "$cat_ppid"
	run jq -r --argjson c "$cat_pid" 'select(.ev == "exec" and .pid == $c) | .path' a.trace
	assert_output --regexp 'cat$'
	# every event of every spawned process names the spawning process as its parent
	for t in a.trace b.trace; do
		jq -se '[.[] | select(.ev == "spawn" and .kind != "thread") | {c: .child, p: .pid}] as $s |
			[.[] | select(.ev == "exec" or .ev == "sys") | . as $e |
			 ($s[] | select(.c == $e.pid) | .p) as $p | select($e.ppid != $p)] | length == 0' "$t" >/dev/null ||
			fail "$t: an event with the wrong ppid"
	done
}

@test "verify fails on an edited, removed or reordered line and on a wrong header" {
	small_trace t.trace
	small_trace u.trace
	run sbx-trace verify --format=text t.trace
	assert_success
	assert_output --partial 'complete'
	sed '3s/"pid":[0-9]*/"pid":1/' t.trace > edited.trace
	run sbx-trace verify edited.trace
	assert_failure
	assert_output --partial 'edited.trace:3: chain hash mismatch'
	sed '3d' t.trace > removed.trace
	run sbx-trace verify removed.trace
	assert_failure
	awk 'NR == 3 { l = $0; next } NR == 4 { print; print l; next } { print }' t.trace > swapped.trace
	run sbx-trace verify swapped.trace
	assert_failure
	{ head -n 1 u.trace; tail -n +2 t.trace; } > header.trace
	run sbx-trace verify header.trace
	assert_failure
	assert_output --partial 'header.trace:2'
	sed '1s/"level":"file"/"level":"all"/' t.trace > hdr2.trace
	run sbx-trace verify hdr2.trace
	assert_failure
	assert_output --partial 'header hash mismatch'
	# removing lines at the end is caught against the run's recorded head
	head=$(tail -n 1 t.trace | jq -r .h)
	head -n -2 t.trace > cut.trace
	run sbx-trace verify --head "$head" cut.trace
	assert_failure
	run sbx-trace verify --head "$head" t.trace
	assert_success
}

@test "a killed run leaves a valid prefix that verify reports as truncated" {
	sbx-run --ephemeral --trace k.trace -- /bin/sh -c 'cat /etc/hostname >/dev/null; exec sleep 30' &
	pid=$!
	for i in $(seq 1 100); do
		grep -q '"path":"[^"]*sleep"' k.trace 2>/dev/null && break
		sleep 0.1
	done
	kill -9 "$pid"
	wait "$pid" || true
	run sbx-trace verify k.trace
	assert_success
	assert_output --partial '"truncated":true'
	run sbx-trace verify --format=text k.trace
	assert_output --partial 'TRUNCATED'
	run sbx-trace verify --complete k.trace
	assert_failure
	assert_output --partial 'truncated'
	# an unterminated last line is still a prefix
	printf '{"ev":"sys","se' >> k.trace
	run sbx-trace verify k.trace
	assert_success
	assert_output --partial '"partial_line":true'
}

@test "trace levels: exec records only process events, all records every trapped call" {
	sbx-run --ephemeral --trace-level exec --trace e.trace -- /bin/sh -c 'cat /etc/hostname >/dev/null'
	run jq -r '.ev // empty' e.trace
	refute_output --partial sys
	assert_output --partial exec
	run jq -r 'select(.ev == "exec") | .sha256 | length' e.trace
	assert_output --partial 64
	# readlink stops only at level all (at file it is most of a compiler's path calls)
	sbx-run --ephemeral --trace-level file --trace f.trace -- /bin/sh -c 'readlink /bin >/dev/null'
	sbx-run --ephemeral --trace-level all --trace a.trace -- /bin/sh -c 'readlink /bin >/dev/null'
	run jq -r 'select(.ev == "sys") | .name' f.trace
	refute_output --partial readlink
	assert_output --partial openat
	run jq -r 'select(.ev == "sys" and .name == "readlink") | "\(.path) \(.result)"' a.trace
	assert_output '/bin 7'
	# a policy "record" rule gets the call's result where the level records only a lookup
	printf '{"rules":[{"syscall":["newfstatat","stat"],"path":"/etc/hostname","action":"record"}]}' > rec.json
	sbx-run --ephemeral --policy rec.json --trace p.trace -- /bin/sh -c 'test -e /etc/hostname; test -e /etc/nonexist; true'
	run jq -c 'select(.ev == "sys" and .path == "/etc/hostname") | [.result, .exists]' p.trace
	assert_output '[0,null]'
	run jq -c 'select(.ev == "sys" and .path == "/etc/nonexist") | [.result, .exists]' p.trace
	assert_output '[null,false]'
	run sbx-run --ephemeral --trace-level bogus --trace x.trace -- /bin/true
	assert_failure
	assert_output --partial 'exec, file or all'
}

@test "the result counts stops by call at entry and exit: level file stops each open twice, level exec never at an exit (fails on main: no exit_stops, no by_call)" {
	sbx-run --ephemeral --trace-level file --trace f.trace --result f.json -- "$GUESTS/run_absent" 300 > out
	run cat out
	assert_output 'enoent 600'
	jq -c .supervisor f.json
	# each failed open stops at its entry and at its exit, whose errno the trace records
	jq -e '.supervisor as $s | ($s.exit_stops | type) == "number" and
		$s.by_call.openat[0] >= 600 and $s.by_call.openat[1] >= 600 and
		([$s.by_call[][1]] | add) == $s.exit_stops and ([$s.by_call[][0]] | add) <= $s.stops' f.json
	[ "$(jq -s '[.[] | select(.ev == "sys" and .name == "openat" and .errno == "ENOENT")] | length' f.trace)" -ge 600 ]
	sbx-run --ephemeral --trace-level exec --trace e.trace --result e.json -- "$GUESTS/run_absent" 300 > out
	jq -e '.supervisor.exit_stops == 0 and (.supervisor.by_call | has("openat") | not)' e.json
}

@test "--trace - writes the trace to standard output" {
	run sbx-run --ephemeral --trace - -- /bin/true
	assert_success
	echo "$output" > o.trace
	run sbx-trace verify --complete o.trace
	assert_success
}

@test "filter keeps a valid re-chained trace; stats, diff, bisect, timeline" {
	small_trace t.trace
	small_trace u.trace
	run sbx-trace filter --path '/etc/host*' t.trace
	assert_success
	echo "$output" > f.trace
	run sbx-trace verify f.trace
	assert_success
	run jq -r 'select(.ev == "sys") | .path' f.trace
	assert_output '/etc/hostname'
	run jq -c '.excerpt | keys' f.trace
	assert_output --partial 'of'
	run sbx-trace filter --class process t.trace
	assert_success
	refute_output --partial '"ev":"sys"'
	run sbx-trace stats --format=text t.trace
	assert_success
	assert_output --partial 'openat'
	run sbx-trace stats t.trace
	assert_success
	jq -e '.execs >= 3' <<<"$output" >/dev/null
	# the same command twice: equal modulo times and pids
	run sbx-trace diff --format=text t.trace u.trace
	assert_success
	assert_output --partial 'identical'
	run sbx-trace diff - u.trace < t.trace
	assert_success
	sbx-run --ephemeral --trace v.trace -- /bin/sh -c 'cat /etc/group >/dev/null; /bin/true' >/dev/null
	run sbx-trace diff v.trace t.trace
	assert_failure
	jq -e '.files.inputs.only_a | index("/etc/group")' <<<"$output" >/dev/null
	run sbx-trace adjudicate t.trace u.trace
	assert_failure
	assert_output --partial 'requires traces of --deterministic runs'
	run sbx-trace timeline -o t.html t.trace
	assert_success
	grep -q '<html' t.html
	grep -q 'hostname' t.html
	run grep -Eic '<script|https?://|src=' t.html
	assert_output 0
	# Chrome trace events for Perfetto and chrome://tracing: a named track and a
	# slice per process, files as instant events
	run sbx-trace timeline --format chrome -o t.json t.trace
	assert_success
	procs=$(sbx-trace files t.trace | jq '.processes | length')
	[ "$(jq '[.traceEvents[] | select(.ph == "X")] | length' t.json)" = "$procs" ]
	[ "$(jq '[.traceEvents[] | select(.ph == "M" and .name == "process_name")] | length' t.json)" = "$procs" ]
	jq -e '[.traceEvents[] | select(.ph == "i" and .name == "read /etc/hostname")] | length > 0' t.json
	jq -e 'all(.traceEvents[]; (.ts // 0 | type) == "number" and (.pid | type) == "number")' t.json
	run /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["displayTimeUnit"], len(d["traceEvents"]) > 0)' t.json
	assert_output "ms True"
}

@test "stats: a process that made no recorded call has the parent its spawn event names" {
	# the subshell forks and exits without a call the file level records
	sbx-run --ephemeral --trace s.trace -- /bin/sh -c '(exit 3); cat /etc/hostname >/dev/null'
	spawn=$(jq -c 'select(.ev == "spawn")' s.trace | head -1)
	child=$(jq .child <<<"$spawn")
	parent=$(jq .pid <<<"$spawn")
	[ "$(jq -s --argjson c "$child" '[.[] | select(.ev == "sys" and .pid == $c)] | length' s.trace)" -eq 0 ]
	run sbx-trace stats s.trace
	assert_success
	jq -e --argjson c "$child" --argjson p "$parent" \
		'[.processes[] | select(.pid == $c)] | length == 1 and .[0].ppid == $p and .[0].exit == 3' <<<"$output"
	run sbx-trace stats --format=text s.trace
	assert_line --regexp "^$child +$parent +0 +0 "
}

# Re-chain edited lines the way a writer would (sbx-trace verify then accepts them).
rechain() {
	local prev="" line body h first=1
	while IFS= read -r line; do
		body="${line%,\"h\":*}}"
		if [ $first = 1 ]; then
			h=$( (printf 'sbx/trace/v1\0'; printf '%s' "$body") | sha256sum | cut -c1-64)
			first=0
		else
			h=$( (printf '%s' "$prev" | xxd -r -p; printf '%s' "$body") | sha256sum | cut -c1-64)
		fi
		printf '%s,"h":"%s"}\n' "${body%\}}" "$h"
		prev=$h
	done
}

@test "bisect finds the first divergent line with O(log n) comparisons" {
	small_trace t.trace
	n=$(wc -l < t.trace)
	sed '6s/"pid":[0-9]*/"pid":1/' t.trace | rechain > d.trace
	run sbx-trace verify d.trace
	assert_success
	run sbx-trace bisect t.trace d.trace
	assert_failure
	jq -e '.first_divergent_line == 6 and .agreed_events == 4' <<<"$output" >/dev/null
	# ceil(log2(n)) + 1 comparisons at most
	max=$(awk -v n="$n" 'BEGIN { c = 0; while (2 ^ c < n) c++; print c + 1 }')
	jq -e --argjson m "$max" '.comparisons <= $m' <<<"$output" >/dev/null
	run sbx-trace bisect --format=text t.trace d.trace
	assert_output --partial 'first divergent line 6'
	run sbx-trace bisect t.trace t.trace
	assert_success
	# a re-chained forgery verifies alone, but not against the run's recorded head
	run sbx-trace verify --head "$(tail -n 1 t.trace | jq -r .h)" d.trace
	assert_failure
}

@test "hostile traces: garbage, overlong lines, wrong types give clear errors" {
	printf 'hello\n' > g.trace
	run sbx-trace verify g.trace
	assert_failure
	assert_output --partial 'sbx-trace: error: g.trace:1: not an sbx trace'
	: > empty.trace
	run sbx-trace files empty.trace
	assert_failure
	assert_output --partial 'empty'
	head -c 300000 /dev/zero | tr '\0' a > long.trace
	run sbx-trace stats long.trace
	assert_failure
	assert_output --partial 'longer than'
	run sbx-trace verify /nonexistent.trace
	assert_failure
	assert_output --partial 'No such file'
	run sbx-trace bogus x
	assert_failure 2
	run sbx-trace files --format=xml x
	assert_failure 2
	run sbx-trace files --format=xml x
	assert_line --index 0 "sbx-trace: error: --format: unknown format \"xml\" (json, text, make, html or chrome)"
	small_trace t.trace
	run sbx-trace files - < t.trace
	assert_success
}

@test "exec hashes: kept in the store across runs, renewed when a file changes, a damaged cache ignored" {
	mkdir w && cd w # bound below: the store (in the test directory) must stay out of view
	cp /bin/true mytrue
	hash_of() { jq -r "select(.ev == \"exec\" and .path == \"$PWD/mytrue\") | .sha256" "$1"; }
	sbx-run --ephemeral --ro "$PWD" --trace-level exec --trace 1.trace -- "$PWD/mytrue"
	[ -f "$SBX_STORE/exec-hashes" ]
	assert_equal "$(hash_of 1.trace)" "$(sha256sum mytrue | cut -d' ' -f1)"
	grep -q "$(sha256sum mytrue | cut -d' ' -f1)" "$SBX_STORE/exec-hashes"
	# same inode, new bytes of the same size: ctime moves, the cached hash is not used
	printf 'x' | dd of=mytrue bs=1 seek=1000 conv=notrunc status=none
	sbx-run --ephemeral --ro "$PWD" --trace-level exec --trace 2.trace -- "$PWD/mytrue"
	assert_equal "$(hash_of 2.trace)" "$(sha256sum mytrue | cut -d' ' -f1)"
	# a damaged cache (bad sum) is dropped whole and rewritten
	sed -i 's/^\(.* \)[0-9a-f]\{64\}$/\1'"$(printf '%064d' 0)"'/' "$SBX_STORE/exec-hashes"
	sbx-run --ephemeral --ro "$PWD" --trace-level exec --trace 3.trace -- "$PWD/mytrue"
	assert_equal "$(hash_of 3.trace)" "$(sha256sum mytrue | cut -d' ' -f1)"
	head -c 100 /dev/urandom > "$SBX_STORE/exec-hashes"
	sbx-run --ephemeral --ro "$PWD" --trace-level exec --trace 4.trace -- "$PWD/mytrue"
	assert_equal "$(hash_of 4.trace)" "$(sha256sum mytrue | cut -d' ' -f1)"
	run grep -c . "$SBX_STORE/exec-hashes"
	assert_output 3
}

@test "exec of a #! script records the interpreter and the script; failed PATH probes are no exec events" {
	mkdir w && cd w # bound below: the store (in the test directory) must stay out of view
	printf '#!/bin/sh\nexit 0\n' > s.sh
	chmod +x s.sh
	sbx-run --ephemeral --ro "$PWD" --env "PATH=/nonexistent:$PWD" --trace-level exec --trace a.trace \
		-- /bin/sh -c "s.sh one two; true"
	run jq -c "select(.ev == \"exec\" and .argv[1] == \"$PWD/s.sh\") | [.path, .argv]" a.trace
	assert_output "[\"/usr/bin/dash\",[\"/bin/sh\",\"$PWD/s.sh\",\"one\",\"two\"]]"
	run jq -r 'select(.ev == "exec") | .path' a.trace
	assert_output "/usr/bin/dash
/usr/bin/dash"
}

@test "level exec: a failed exec does not stop, a successful one is recorded; level file and a policy still stop at each" {
	# 300 execs that fail (a PATH probe's ENOENT) and 3 that run, in one process
	mkdir w && cd w # bound below: the store (in the test directory) must stay out of view
	cat > ex.py <<'EOF'
import os
for i in range(300):
    try:
        os.execv("/nonexistent/probe", ["probe"])
    except OSError:
        pass
for i in range(3):
    if os.fork() == 0:
        os.execv("/bin/true", ["true", str(i)])
    os.wait()
EOF
	sbx-run --ephemeral --ro "$PWD" --trace-level exec --trace e.trace --result e.json -- /usr/bin/python3 "$PWD/ex.py"
	[ "$(jq .supervisor.stops e.json)" -lt 100 ]
	run jq -r 'select(.ev == "exec") | .argv | join(" ")' e.trace
	assert_output "/usr/bin/python3 $PWD/ex.py
true 0
true 1
true 2"
	# the exec call stops where a class asks for it: level file records each probe
	sbx-run --ephemeral --ro "$PWD" --trace-level file --trace f.trace --result f.json -- /usr/bin/python3 "$PWD/ex.py"
	[ "$(jq .supervisor.stops f.json)" -ge 300 ]
	[ "$(jq -r 'select(.ev == "sys" and .name == "execve" and .path == "/nonexistent/probe") | .path' f.trace |
		wc -l)" -eq 300 ]
	printf '{"rules":[{"syscall":["execve"],"path":"/nonexistent/probe","action":"deny"}]}' > deny.json
	sbx-run --ephemeral --ro "$PWD" --policy deny.json --trace-level exec --result p.json -- /usr/bin/python3 "$PWD/ex.py"
	[ "$(jq .supervisor.refused p.json)" -ge 300 ]
}

@test "exec argv: thousands of arguments across pages and an overlong one are recorded exactly" {
	long=$(head -c 5000 /dev/zero | tr '\0' a)
	sbx-run --ephemeral --trace-level exec --trace a.trace -- /bin/sh -c "exec /bin/echo \$(seq 1 3000) $long" >/dev/null
	run jq -r 'select(.ev == "exec" and .path == "/usr/bin/echo") | .argv | length' a.trace
	assert_output 3002
	run jq -r 'select(.ev == "exec" and .path == "/usr/bin/echo") | .argv[1:3001] | join(" ")' a.trace
	assert_output "$(seq 1 3000 | tr '\n' ' ' | sed 's/ $//')"
	run jq -r 'select(.ev == "exec" and .path == "/usr/bin/echo") | .argv[3001] | length' a.trace
	assert_output 5000
}

@test "provenance: a DSSE-signed in-toto SLSA statement of a real build, verified independently; one changed byte refuses it" {
	mkdir w && cp -r "$BATS_TEST_DIRNAME/../examples/hello/." w/
	make -s -C w clean >/dev/null
	sbx-run --ephemeral --rw "$PWD/w:/src" --trace t.jsonl --result r.json -- make -s -C /src -j2 >/dev/null
	run sbx-trace provenance --result r.json -o p.json t.jsonl
	assert_success
	run sbx-trace verify-provenance p.json
	assert_success
	n=$(jq -r .payload p.json | base64 -d | jq '.subject | length')
	[ "$n" -gt 5 ]
	assert_output "{\"ok\":true,\"subjects\":$n}"
	# an independent DSSE and Ed25519 implementation (Python's cryptography)
	cat >check.py <<'PY'
import base64, hashlib, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
env = json.load(open(sys.argv[1]))
pub = Ed25519PublicKey.from_public_bytes(bytes.fromhex(open(sys.argv[2]).read().strip()))
body = base64.b64decode(env["payload"], validate=True)
t = env["payloadType"].encode()
pae = b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)
pub.verify(base64.b64decode(env["signatures"][0]["sig"]), pae)
st = json.loads(body)
assert st["_type"] == "https://in-toto.io/Statement/v1"
assert st["predicateType"] == "https://slsa.dev/provenance/v1"
for s in st["subject"]:
    host = sys.argv[3] + s["name"][len("/src"):]
    assert hashlib.sha256(open(host, "rb").read()).hexdigest() == s["digest"]["sha256"], s["name"]
deps = st["predicate"]["buildDefinition"]["resolvedDependencies"]
assert any(d["uri"].endswith("/usr/bin/make") and "digest" in d for d in deps)
print("verified", len(st["subject"]))
PY
	run /usr/bin/python3 check.py p.json "$SBX_STORE/authority.pub" "$PWD/w"
	assert_success
	assert_output "verified $n"
	jq -r .payload p.json | base64 -d | jq -e '.predicate.buildDefinition.internalParameters.lease == "'"$(jq -r .lease r.json)"'"'
	jq -r .payload p.json | base64 -d | jq -e '.predicate.buildDefinition.internalParameters.last_receipt_digest == "'"$(jq -r '.receipts[-1].digest' r.json)"'"'
	# one byte of the payload changed: both verifiers refuse
	jq -c ".payload = \"$(jq -r .payload p.json | base64 -d | sed 's/adler\.o/adlfr.o/' | base64 -w0)\"" p.json >bad.json
	run sbx-trace verify-provenance bad.json
	assert_failure
	assert_output --partial "the signature does not verify"
	run /usr/bin/python3 check.py bad.json "$SBX_STORE/authority.pub" "$PWD/w"
	assert_failure
	run sbx-trace verify-provenance r.json
	assert_failure
	assert_output --partial "not a DSSE envelope"
	# an output the guest names through ".." is no subject: the host path it would
	# map to lies outside the bind (here a host file the build never wrote)
	mkdir -p ns && echo host >ns/y
	sbx-run --ephemeral --rw "$PWD/w:/src" --trace d.jsonl -- /bin/sh -c 'echo guest >/src/../ns/y'
	run sbx-trace provenance -o d.json d.jsonl
	assert_success
	[ "$(jq -r .payload d.json | base64 -d | jq '.subject | length')" = 0 ]
}

@test "sbx-trace takes its options before or after the command; -- ends them" {
	small_trace t.trace
	run sbx-trace stats t.trace --format json
	assert_success
	after=$output
	run sbx-trace --format json stats t.trace
	assert_success
	assert_output "$after"
	run sbx-trace --format=text verify -- t.trace --complete
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: verify: takes 1 operand, not 2"
	run sbx-trace --complete --format=text verify t.trace
	assert_success
	run sbx-trace --hash-inputs stats t.trace
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: --hash-inputs: not an option of this command"
	run sbx-trace --format html stats t.trace
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: --format: unknown format \"html\" for stats"
	run sbx-trace --frob stats t.trace
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: --frob: unknown option"
	assert_output --partial "usage: sbx-trace"
	run sbx-trace --format
	assert_failure 2
	assert_line --index 0 "sbx-trace: error: --format: needs a value"
}
