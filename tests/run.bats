#!/usr/bin/env bats
# sbx-run: the boundary as users see it: guests, pipelines, exit statuses,
# mounts, environment, leases and one-shot mode, result records, unprivileged runs.
load helpers
bats_require_minimum_version 1.5.0

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

teardown() {
	[ -z "${UDIR:-}" ] || rm -rf "$UDIR"
}

# an unprivileged invoking user (runs as nobody); its store and files in a 0777 dir
as_user() {
	local d="$UDIR"
	$SBX_AS_NOBODY SBX_STORE="$d/store" PATH="$PATH" HOME="$d" "$@"
}

@test "runs /bin/sh -c as root: uid 1000 in /ns, hostname sbx, fresh namespaces" {
	run sbx-run --ephemeral -- /bin/sh -c 'echo hi; id -u; id -g; pwd; hostname; echo $$'
	assert_success
	assert_output "hi
1000
1000
/ns
sbx
2"
}

@test "dynamic and static guests; exit status propagates" {
	run sbx-run --ephemeral -- "$GUESTS/run_hello" 3 a
	assert_equal "$status" 3
	assert_output "hello from the guest
arg1=3
arg2=a"
	run sbx-run --ephemeral -- "$GUESTS/run_hello_static" 0 b
	assert_success
	assert_line "arg2=b"
}

@test "signals: killed by N exits 128+N" {
	run sbx-run --ephemeral -- "$GUESTS/run_signal" 9
	assert_equal "$status" 137
	run sbx-run --ephemeral -- "$GUESTS/run_signal" 15
	assert_equal "$status" 143
	run sbx-run --ephemeral -- /bin/sh -c 'kill -SEGV $$'
	assert_equal "$status" 139
}

@test "stdin, stdout and stderr are the guest's alone" {
	run bash -c 'printf x | sbx-run --ephemeral -- cat | wc -c'
	assert_success
	assert_output "1"
	run bash -c 'sbx-run --ephemeral -- sh -c "echo out; echo err >&2" 2>/dev/null'
	assert_output "out"
	run bash -c 'sbx-run --ephemeral -- sh -c "echo out; echo err >&2" 2>&1 >/dev/null'
	assert_output "err"
	run bash -c 'seq 1 1000 | sbx-run --ephemeral -- sort -rn | head -1'
	assert_output "1000"
}

@test "shell pipelines inside the sandbox" {
	run sbx-run --ephemeral -- /bin/sh -c 'seq 1 100 | grep 7 | wc -l; ls / | grep -c usr'
	assert_success
	assert_output "19
1"
}

@test "job control, signals and threads behave as without sbx" {
	run sbx-run --ephemeral -- "$GUESTS/run_stopcont"
	assert_success
	assert_line "child continued and exited"
	run sbx-run --ephemeral -- "$GUESTS/run_alarm"
	assert_success
	assert_output "alarm=1 chld=1"
	run sbx-run --ephemeral -- "$GUESTS/run_threads"
	assert_success
	assert_output "threads sum=56
exec from a thread"
}

@test "guest view: no extra fds, no_new_privs, seccomp, no capabilities" {
	run sbx-run --ephemeral -- "$GUESTS/run_fds"
	assert_success
	assert_line "uid=1000 gid=1000 cwd=/ns nnp=1 extra_fds=0"
	assert_line --regexp "^CapEff:\s+0000000000000000$"
	assert_line --regexp "^CapBnd:\s+0000000000000000$"
	assert_line --regexp "^Seccomp:\s+2$"
}

@test "make -j2 of the bundled project in a --rw bind; outputs owned by the invoker" {
	cp -r "$BATS_TEST_DIRNAME/../examples/hello" src
	run sbx-run --ephemeral --rw "$PWD/src:/src" -- make -C /src -j2
	assert_success
	[ -x src/hello ]
	run src/hello
	assert_line --partial "crc"
	[ "$(stat -c %u src/hello)" = "$(id -u)" ]
	[ "$(stat -c %u src/main.o)" = "$(id -u)" ]
}

@test "parents killed as they fork: their children still run and the run ends" {
	# a parent killed at its fork reports no fork event; its child, held until
	# that event, is let go a tick later (the guest waits for every child to go)
	run timeout 120 sbx-run --ephemeral -- "$GUESTS/run_forkkill" 100
	assert_success
	assert_output --regexp '^forkkill: 100 rounds'
}

@test "mounts: defaults read-only, --ro readable only, --rw writable, private /tmp" {
	mkdir ro rw
	echo data > ro/f
	run sbx-run --ephemeral --ro "$PWD/ro:/data" --rw "$PWD/rw" -- /bin/sh -c \
		"cat /data/f; (echo x > /data/g) 2>/dev/null || echo ro-refused; echo y > $PWD/rw/h && echo rw-ok;
		 echo z > /tmp/private && echo tmp-ok; touch /usr/x 2>/dev/null || echo usr-ro"
	assert_success
	assert_output --partial "data"
	assert_line "ro-refused"
	assert_line "rw-ok"
	assert_line "tmp-ok"
	assert_line "usr-ro"
	[ "$(cat rw/h)" = "y" ]
	[ ! -e ro/g ]
	[ ! -e /tmp/private ]
}

@test "--mount lists replace the defaults; /ns is always there" {
	run sbx-run --ephemeral --mount bind:/:/ --mount tmpfs::/scratch:size=1m -- /bin/sh -c \
		'ls /proc 2>/dev/null | wc -l; echo a > /scratch/a && cat /scratch/a; echo b > /ns/b && echo ns-ok'
	assert_success
	assert_output "0
a
ns-ok"
	run sbx-run --ephemeral --mount bind:/:/ --mount proc::/proc -- /bin/sh -c 'echo $$; ls -d /proc/1'
	assert_success
	assert_output "2
/proc/1"
}

@test "bad mount and environment arguments are refused before the guest starts" {
	run sbx-run --ephemeral --rw /nonexistent:/x -- /bin/echo ran
	assert_equal "$status" 125
	refute_output --partial "ran"
	assert_output --partial "mount source /nonexistent"
	run sbx-run --ephemeral --ro /etc:relative -- /bin/echo ran
	assert_equal "$status" 125
	assert_output --partial "not an absolute path"
	run sbx-run --ephemeral --ro /etc:/x --ro /usr:/x -- /bin/echo ran
	assert_equal "$status" 125
	assert_output --partial "duplicate target /x"
	run sbx-run --ephemeral --mount tmpfs::/tmp -- /bin/echo ran
	assert_equal "$status" 125
	assert_output --partial "must supply /"
	run sbx-run --ephemeral --env =x -- /bin/echo ran
	assert_equal "$status" 125
	assert_output --partial "not NAME or NAME=VALUE"
	run sbx-run --ephemeral --env '1A=x' -- /bin/echo ran
	assert_equal "$status" 125
	run sbx-run --ephemeral --ro /etc:/ns/x -- /bin/echo ran
	assert_equal "$status" 125
	run sbx-run --ephemeral --ro /etc:/etc/hostname/deep -- /bin/echo ran
	assert_equal "$status" 125
	assert_output --partial "/etc/hostname is not a directory"
	run sbx-run --ephemeral --bogus -- /bin/echo ran
	assert_equal "$status" 125
	# nothing was left behind: every one-shot lease got destroyed or never existed
	run bash -c 'sbx-lease list | jq -r ".[]?.state // .state" 2>/dev/null | grep -vc Destroyed'
	assert_output "0"
}

@test "options end at PROGRAM or --; each is parsed once, a bad value named before the guest starts" {
	run sbx-run --ephemeral /bin/echo --lease x --trace-level
	assert_success
	assert_output "--lease x --trace-level"
	run sbx-run --ephemeral --trace-level most -- /bin/echo ran
	assert_equal "$status" 125
	assert_line --index 0 "sbx-run: error: --trace-level: unknown level \"most\" (exec, file or all)"
	run sbx-run --ephemeral --trace t.trace --trace-level=exec -- /bin/echo ran
	assert_success
	assert_output ran
	[ "$(head -n 1 t.trace | jq -r .level)" = exec ]
	run sbx-run --ephemeral --trace-level
	assert_equal "$status" 125
	assert_line --index 0 "sbx-run: error: --trace-level: needs a value"
	run sbx-run --ephemeral --deterministic=yes -- /bin/echo ran
	assert_equal "$status" 125
	assert_line --index 0 "sbx-run: error: --deterministic: takes no value"
	run sbx-run --ephemeral --
	assert_equal "$status" 125
	assert_line --index 0 "sbx-run: error: PROGRAM: missing (-- PROGRAM [ARG...])"
}

@test "environment: a clean default, --env-clear, --env K=V and K, --env-inherit adds" {
	export SBX_TEST_VAR=inherited
	run sbx-run --ephemeral -- /bin/sh -c 'echo "[$SBX_TEST_VAR]"'
	assert_output "[]"
	run sbx-run --ephemeral --env SBX_TEST_VAR -- /bin/sh -c 'echo $SBX_TEST_VAR'
	assert_output "inherited"
	run sbx-run --ephemeral --env-clear -- /usr/bin/env
	assert_success
	assert_output ""
	run sbx-run --ephemeral --env-clear --env A=1 --env B=x=y --env NOT_SET_ANYWHERE -- /usr/bin/env
	assert_output "A=1
B=x=y"
	run sbx-run --ephemeral --env-inherit --env SBX_TEST_VAR=over -- /bin/sh -c 'echo $SBX_TEST_VAR; echo ${PATH:+path}'
	assert_output "over
path"
}

@test "exit statuses: 127 not found, 126 not executable, 125 sbx error" {
	run -127 sbx-run --ephemeral -- /nonexistent/prog
	run -127 sbx-run --ephemeral -- no-such-command-xyz
	printf 'data' > notexec
	run sbx-run --ephemeral -- ./notexec
	assert_equal "$status" 126
	# executable but not an image (nor a #! script): refused before the store is created
	printf 'data' > script; chmod +x script
	run sbx-run --store "$BATS_TEST_TMPDIR/fresh" --ephemeral -- ./script
	assert_equal "$status" 126
	assert_output --partial "not an ELF file"
	assert [ ! -e "$BATS_TEST_TMPDIR/fresh" ]
	run sbx-run --lease Lnosuchlease -- /bin/true
	assert_equal "$status" 125
	run sbx-run -- /bin/true
	assert_equal "$status" 125
	assert_output --partial "exactly one of --lease ID and --ephemeral"
}

@test "--ephemeral result record holds every receipt; the store verifies" {
	run sbx-run --ephemeral --result res.json -- /bin/sh -c 'exit 4'
	assert_equal "$status" 4 || { cat res.json; false; }
	# metering may add observe receipts while the guest runs
	run jq -r '[.receipts[].edge] | join(",") | gsub(",observe"; "")' res.json
	assert_output "request,fund,activate,settle,expire,destroy"
	run jq -r '[.receipts[].seq] == [range(.receipts | length)]' res.json
	assert_output "true"
	run jq -r '.status, .exit_code, .image.sha256 == (.receipts[0].request.image.sha256)' res.json
	assert_output "4
4
true"
	id=$(jq -r .lease res.json)
	run sbx-lease show "$id"
	assert_output --partial '"Destroyed"'
	run sbx-lease verify
	assert_success
}

@test "--result-fd writes the record to a descriptor, not to the guest's stdout" {
	run bash -c 'sbx-run --ephemeral --result-fd 3 -- /bin/echo guest 3>rec.json'
	assert_success
	assert_output "guest"
	run jq -r .exit_code rec.json
	assert_output "0"
}

@test "--lease runs an Active lease's image only" {
	req=$(sbx-lease request --image /bin/sh)
	id=$(jq -r .lease.id <<<"$req")
	run sbx-run --lease "$id" -- /bin/sh -c 'echo no'
	assert_equal "$status" 125
	assert_output --partial "state is Requested, run needs Active"
	sbx-lease fund --amount 0 --evidence - <<<"$req" | sbx-lease activate --evidence - >/dev/null
	run sbx-run --lease "$id" --result r.json -- /bin/sh -c 'echo yes > /ns/mark; echo yes'
	assert_success
	assert_output "yes"
	[ "$(cat "$SBX_STORE/ns/$id/mark")" = "yes" ]
	run sbx-run --lease "$id" -- /bin/true
	assert_equal "$status" 125
	assert_output --partial "is not lease $id's image"
}

@test "a lease is one sandbox: a second concurrent run on it is refused by name" {
	id=$(sbx-lease request --image /bin/sh |
		sbx-lease fund --amount 0 --evidence - | sbx-lease activate --evidence - | jq -r .lease.id)
	sbx-run --lease "$id" -- /bin/sh -c 'echo started > /ns/started; while [ ! -e /ns/go ]; do sleep 0.05; done' \
		>first.out 2>first.err &
	first=$!
	for _ in $(seq 200); do [ -e "$SBX_STORE/ns/$id/started" ] && break; sleep 0.05; done
	[ -e "$SBX_STORE/ns/$id/started" ]
	run sbx-run --lease "$id" -- /bin/sh -c 'echo second'
	assert_equal "$status" 125
	assert_output --partial "lease $id is already running (sbx-run pid $first): a lease is one sandbox"
	refute_output --partial second
	# the first run keeps its control socket and its meter
	[ -S "$SBX_STORE/run/$id.sock" ]
	touch "$SBX_STORE/ns/$id/go"
	wait "$first"
	# once it has ended, the lease runs again
	run sbx-run --lease "$id" -- /bin/sh -c 'echo again'
	assert_success
	assert_output again
}

@test "the control socket: owner-only, answers status while the guest runs" {
	sbx-run --ephemeral -- /bin/sleep 30 &
	pid=$!
	for i in $(seq 1 50); do
		sock=$(ls "$SBX_STORE"/run/*.sock 2>/dev/null | head -1)
		[ -n "$sock" ] && break
		sleep 0.1
	done
	[ -S "$sock" ]
	[ "$(stat -c %a "$SBX_STORE/run")" = "700" ]
	run python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"op\":\"status\"}\n"); print(s.recv(4096).decode().strip())' "$sock"
	assert_output --partial '"running":true'
	assert_output --partial '"lease":"L'
	run python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"garbage\n"); print(s.recv(4096).decode().strip())' "$sock"
	assert_output --partial '"error"'
	# SIGTERM sent to sbx-run reaches the guest; the socket goes with the run
	kill -TERM $pid
	st=0
	wait $pid || st=$?
	[ "$st" = 143 ]
	[ ! -e "$sock" ]
}

@test "unprivileged: the same core behaviour as nobody" {
	UDIR=$(mktemp -d /tmp/sbx-unpriv.XXXXXX)
	cp -r "$BATS_TEST_DIRNAME/../examples/hello" "$UDIR/src"
	chmod -R a+rwX "$UDIR"
	run as_user sbx-run --ephemeral -- /bin/sh -c 'id -u; pwd; echo x > /ns/f && cat /ns/f'
	assert_success
	assert_output "1000
/ns
x"
	run as_user bash -c 'printf x | sbx-run --ephemeral -- cat | wc -c'
	assert_output "1"
	run as_user sbx-run --ephemeral -- "$GUESTS/run_signal" 15
	assert_equal "$status" 143
	run as_user sbx-run --ephemeral -- "$GUESTS/escape_clone"
	assert_success
	assert_line "RESULT: contained"
	run as_user sbx-run --ephemeral --rw "$UDIR/src:/src" -- make -s -C /src -j2 adler.o crc.o fnv.o
	assert_success
	[ "$(stat -c %u "$UDIR/src/crc.o")" = "65534" ]
	run as_user sbx-run --ephemeral -- "$GUESTS/escape_forkrace" 400
	assert_success
	assert_output "forkrace: 400 rounds"
	for g in escape_write escape_mount escape_kernel escape_ptrace; do
		run as_user sbx-run --ephemeral -- "$GUESTS/$g"
		assert_success
		assert_line "RESULT: contained"
	done
}

@test "a missing kernel feature is named and nothing runs unsandboxed" {
	# user namespaces exhausted (a child user namespace with its limit at 0)
	run unshare -U -r sh -c 'echo 0 > /proc/sys/user/max_user_namespaces &&
		exec sbx-run --ephemeral -- /bin/echo RAN'
	assert_equal "$status" 125
	assert_output --partial "user namespace"
	refute_output --partial "RAN"
	# ptrace unavailable: the child is already traced (by strace)
	run strace -f -o /dev/null sbx-run --ephemeral -- /bin/echo RAN
	assert_equal "$status" 125
	assert_output --partial "ptrace"
	refute_output --partial "RAN"
}

@test "a low RLIMIT_NOFILE: the image fd fits under it, the guest sees only 0-2" {
	run bash -c 'ulimit -n 64; sbx-run --ephemeral -- /bin/sh -c "ls /proc/self/fd | wc -l; ulimit -n"'
	assert_success
	# ls's own directory fd is the fourth entry
	assert_output "4
64"
}

@test "a single-file --rw bind is writable, a --ro one is not, and nothing else changes on the host" {
	echo old >f && echo keep >g
	run sbx-run --ephemeral --rw "$PWD/f:/f" --ro "$PWD/g:/g" -- /bin/sh -c 'echo new >/f && echo more >>/f && cat /f; echo x >/g'
	assert_failure
	assert_line new
	assert_line --partial "/g: Read-only file system"
	[ "$(cat f)" = "new
more" ]
	[ "$(cat g)" = keep ]
}

@test "a mount at a destination the host tree lacks works, and nothing is created on the host" {
	mkdir -p src && echo here >src/x
	dst=/opt/sbx-mnt-$$/deep
	before=$(ls -A /opt /usr/local | sha256sum)
	run sbx-run --ephemeral --ro "$PWD/src:$dst" --rw "$PWD/src:/usr/local/sbx-$$" -- \
		/bin/sh -c "cat $dst/x /usr/local/sbx-$$/x; mkdir /opt/other"
	assert_failure
	assert_line here
	assert_line --partial "Read-only file system"
	[ ! -e /opt/sbx-mnt-$$ ] && [ ! -e /usr/local/sbx-$$ ]
	[ "$(ls -A /opt /usr/local | sha256sum)" = "$before" ]
	[ "$(id -u)" = 0 ] || return 0
	UDIR=$(mktemp -d /tmp/sbx-unpriv.XXXXXX)
	chmod 0777 "$UDIR"
	cp -r src "$UDIR/src" && chmod -R a+rX "$UDIR/src"
	run as_user sbx-run --ephemeral --ro "$UDIR/src:$dst" -- /bin/cat "$dst/x"
	assert_success
	assert_output here
}

@test "#! scripts run as the kernel runs them: the interpreter is the image, the script is named beside it" {
	mkdir w && cd w
	printf '#!/bin/sh\necho "sh: $0 $*"\n' >s.sh
	printf '#!/usr/bin/env python3\nimport sys; print("py:", " ".join(sys.argv))\n' >p.py
	printf '#!/bin/sh -eu\necho "flags: $-"\n' >f.sh
	chmod +x s.sh p.py f.sh
	run sbx-run --ephemeral --rw "$PWD:$PWD" --result r.json -- ./s.sh a b
	assert_success
	assert_output "sh: ./s.sh a b"
	[ "$(jq -r .image.path r.json)" = "$(readlink -f /bin/sh)" ]
	[ "$(jq -r .script.sha256 r.json)" = "$(sha256sum s.sh | cut -d' ' -f1)" ]
	[ "$(jq -r '.receipts[0].request.image.script.sha256' r.json)" = "$(sha256sum s.sh | cut -d' ' -f1)" ]
	run sbx-run --ephemeral --rw "$PWD:$PWD" -- ./p.py x
	assert_success
	assert_output "py: ./p.py x"
	run sbx-run --ephemeral --rw "$PWD:$PWD" -- ./f.sh
	assert_output --regexp "^flags: .*e"
	# found in PATH: the script by its host path, visible through a bind at that path
	run env PATH="$PWD:$PATH" sbx-run --ephemeral --ro "$PWD:$PWD" -- s.sh c
	assert_success
	assert_output "sh: $PWD/s.sh c"
	# a named lease names the script exactly
	id=$(sbx-lease request --image ./s.sh | sbx-lease fund --amount 0 --evidence - |
		sbx-lease activate --evidence - | jq -r .lease.id)
	run sbx-run --lease "$id" --ro "$PWD:$PWD" -- "$PWD/s.sh" d
	assert_success
	assert_output "sh: $PWD/s.sh d"
	cp s.sh t.sh && echo "echo changed" >>t.sh
	run sbx-run --lease "$id" --ro "$PWD:$PWD" -- "$PWD/t.sh"
	assert_failure 125
	assert_output --partial "is not the script lease $id names"
	# an interpreter that is itself a script is refused by name
	printf '#!%s\n' "$PWD/s.sh" >n.sh && chmod +x n.sh
	run sbx-run --ephemeral -- "$PWD/n.sh"
	assert_failure 126
	assert_output --partial "interpreter of $PWD/n.sh: $PWD/s.sh: not an ELF file"
}

@test "the working directory: the invoker's where a bind shows it, --chdir, else /ns" {
	mkdir -p w/sub && printf 'all:\n\t@echo "made in $$(pwd)"\n' >w/Makefile
	cd w
	run sbx-run --ephemeral --rw "$PWD:$PWD" -- make
	assert_success
	assert_output "made in $PWD"
	cd sub
	run sbx-run --ephemeral --rw "$(dirname "$PWD"):/src" -- pwd
	assert_output /src/sub
	run sbx-run --ephemeral --chdir /usr/bin -- pwd
	assert_output /usr/bin
	run sbx-run --ephemeral -- pwd
	assert_output /ns
	run sbx-run --ephemeral --chdir /nonexistent -- pwd
	assert_failure 125
	assert_output --partial "chdir /nonexistent"
	run sbx-run --ephemeral --chdir relative -- pwd
	assert_failure 125
	assert_output --partial "not an absolute path"
}

@test "native errors: ids the guest may not take or give fail with EPERM; its hostname resolves" {
	run sbx-run --ephemeral -- /usr/bin/python3 -c '
import os, subprocess
open("/ns/f", "w").close()
for what, f in [("setuid", lambda: os.setuid(65534)), ("setgid", lambda: os.setgid(0)),
                ("setresuid", lambda: os.setresuid(-1, 0, -1)), ("chown", lambda: os.chown("/ns/f", -1, 65534)),
                ("fchown", lambda: os.fchown(os.open("/ns/f", os.O_RDONLY), 0, -1)),
                ("subprocess", lambda: subprocess.run(["true"], user=65534))]:
    try:
        f(); print(what, "ok")
    except OSError as e:
        print(what, os.strerror(e.errno))
os.setgid(os.getgid()); os.chown("/ns/f", os.getuid(), -1); print("own ids: ok")'
	assert_success
	for w in setuid setgid setresuid chown fchown subprocess; do
		assert_line "$w Operation not permitted"
	done
	assert_line "own ids: ok"
	run sbx-run --ephemeral -- /bin/sh -c 'getent hosts "$(hostname)"; cat /etc/hostname'
	assert_success
	assert_line --regexp '^127\.0\.1\.1 +sbx$'
	assert_line sbx
}

@test "a JVM runs: java -version and a javac + java round trip of two classes" {
	command -v javac >/dev/null || skip "no JDK (make deps installs one)"
	mkdir j
	printf 'public class A { public static void main(String[] a) { System.out.println("sum " + B.add(2, 3)); } }\n' >j/A.java
	printf 'public class B { static int add(int x, int y) { return x + y; } }\n' >j/B.java
	run sbx-run --ephemeral -- java -version
	assert_success
	assert_output --partial "OpenJDK"
	run sbx-run --ephemeral --rw "$PWD/j:/j" -- /bin/sh -c 'cd /j && javac A.java B.java && java -cp /j A'
	assert_success
	assert_output "sum 5"
}

@test "a sanitizer build runs: ASan and UBSan reserve their shadow memory under a memory bound" {
	command -v clang >/dev/null || skip "no clang (make deps installs it)"
	mkdir w
	printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { int *p = malloc(64 * sizeof *p); p[63] = 42; printf("asan ok %%d\\n", p[63]); free(p); return 0; }\n' >w/a.c
	clang -fsanitize=address,undefined -g -o w/a w/a.c
	# LeakSanitizer stops the world with ptrace, which the supervisor holds
	run sbx-run --ephemeral --limits memory=256M --env ASAN_OPTIONS=detect_leaks=0 -- "$PWD/w/a"
	assert_success
	assert_output "asan ok 42"
	# and it still finds what it is for: a heap overflow
	printf '#include <stdlib.h>\nint main(void) { volatile int *p = malloc(4); p[4] = 1; return 0; }\n' >w/b.c
	clang -fsanitize=address -g -o w/b w/b.c
	run sbx-run --ephemeral --limits memory=256M --env ASAN_OPTIONS=detect_leaks=0 -- "$PWD/w/b"
	assert_failure 1
	assert_output --partial "heap-buffer-overflow"
}
