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
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env SBX_STORE="$d/store" PATH="$PATH" HOME="$d" "$@"
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
	# executable but not an image: refused before the store is created
	printf '#!/bin/sh\necho hi\n' > script; chmod +x script
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
