#!/usr/bin/env bats
# Snapshots of whole process trees (version 4): a make -j2 build with its
# compilers running, a shell pipeline with bytes in its pipe, zombies.
load helpers
load snap_project

# request + fund (+ activate with "active") a lease of image $1; prints its id
tree_lease() {
	local out
	out=$(sbx-lease request --image "$1" --escrow 10 --limits namespace_bytes=1G |
		sbx-lease fund --amount 10 --evidence -)
	[ "$2" = active ] && out=$(printf '%s' "$out" | sbx-lease activate --evidence -)
	printf '%s' "$out" | jq -r .lease.id
}

# take --stop of lease $1 once its guest runs; sets DIGEST
take_stop() {
	for _ in $(seq 1 50); do
		run sbx-snap take "$1" --stop
		[[ $output == *"no lease guest"* || $output == *"try again"* ]] || break
		sleep 0.1
	done
	# the run's own account when the take fails (its output and errors)
	[ "$status" -eq 0 ] || tail -n 20 "$BATS_TEST_TMPDIR/src.out" >&2
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
}

@test "make -j2 snapshotted mid-build with its compilers running restores to the same objects and binary" {
	gen_project "$BATS_TEST_TMPDIR/native"
	(cd "$BATS_TEST_TMPDIR/native" && make -j2 >/dev/null)
	SRC=$(tree_lease /usr/bin/make active)
	ns="$SBX_STORE/ns/$SRC"
	gen_project "$ns"
	chmod -R a+rwX "$ns"
	sbx-run --lease "$SRC" -- /usr/bin/make -j2 >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 600); do
		[ "$(ls "$ns"/*.o 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	take_stop "$SRC"
	wait "$pid" || true
	[ ! -e "$ns/prog" ]
	run sbx-snap show "$DIGEST"
	assert_success
	# compilers were running: make, gcc drivers and their cc1 or as
	printf '%s' "$output" | jq -r '.processes[].program' | grep -q '/cc1$\|-as$'
	[ "$(printf '%s' "$output" | jq '.processes | length')" -ge 3 ]
	TGT=$(tree_lease /usr/bin/make funded)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	for f in main.o m{1..12}.o prog; do
		cmp "$BATS_TEST_TMPDIR/native/$f" "$SBX_STORE/ns/$TGT/$f"
	done
}

@test "a shell pipeline snapshotted with bytes in its pipe gives the same digest of its output" {
	want=$(cd "$BATS_TEST_TMPDIR" && "$GUESTS/snap_pipeline" | sha256sum)
	SRC=$(tree_lease "$GUESTS/snap_pipeline" active)
	sbx-run --lease "$SRC" -- "$GUESTS/snap_pipeline" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	sleep 1
	take_stop "$SRC"
	wait "$pid" || true
	run sbx-snap show "$DIGEST"
	assert_success
	# sh and its two children; the pipe between them holds bytes
	[ "$(printf '%s' "$output" | jq '.processes | length')" -ge 2 ]
	[ "$(printf '%s' "$output" | jq '[.pipes[].bytes] | max')" -gt 0 ]
	TGT=$(tree_lease "$GUESTS/snap_pipeline" funded)
	sbx-restore "$DIGEST" --lease "$TGT" >"$BATS_TEST_TMPDIR/tgt.out"
	[ "$(cat "$BATS_TEST_TMPDIR/src.out" "$BATS_TEST_TMPDIR/tgt.out" | sha256sum)" = "$want" ]
}

@test "zombies are kept across a restore: the parent's wait returns what the child ended with" {
	g="$GUESTS/snaptree/zombie"
	want=$(cd "$BATS_TEST_TMPDIR" && "$g")
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	sleep 0.5
	take_stop "$SRC"
	wait "$pid" || true
	run sbx-snap show "$DIGEST"
	assert_success
	# exit 7 and SIGTERM, not yet reaped
	assert_equal "$(printf '%s' "$output" | jq -c '[.processes[] | select(.zombie) | .wait_status]')" "[1792,15]"
	TGT=$(tree_lease "$g" funded)
	sbx-restore "$DIGEST" --lease "$TGT" >"$BATS_TEST_TMPDIR/tgt.out"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out" "$BATS_TEST_TMPDIR/tgt.out")" "$want"
	tail -n 2 "$BATS_TEST_TMPDIR/tgt.out" | tr '\n' ' ' | grep -qx 'a exited 7 b killed by 15 '
}

@test "a tree restores only where its ids are free: each process's pid and parent are the snapshot's" {
	g="$GUESTS/snaptree/fork_chain"
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" >/dev/null 2>&1 &
	pid=$!
	sleep 0.4
	take_stop "$SRC"
	wait "$pid" || true
	before=$(sbx-snap show "$DIGEST" | jq -c '[.processes[] | [.pid, .ppid]]')
	# five links: each the parent of the next
	[ "$(printf '%s' "$before" | jq length)" -eq 5 ]
	# the restored run re-captures its tree and checks the digest: a pid or
	# parent that differs is refused (restore re-check)
	run sbx-restore "$DIGEST" --lease "$(tree_lease "$g" funded)"
	assert_success
	assert_output --regexp '^chain [0-9]+$'
}

@test "snapshots of a guest forking all the time: taken or refused, never hung, the guest runs on" {
	g="$GUESTS/snap_forks"
	want=$(cd "$BATS_TEST_TMPDIR" && "$g")
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	sleep 0.3
	taken=0
	for _ in $(seq 1 6); do
		# a child caught waiting for its parent's fork event needs no interrupt
		run timeout 60 sbx-snap take "$SRC"
		[ "$status" -ne 124 ]
		[ "$status" -eq 0 ] && taken=$((taken + 1))
	done
	[ "$taken" -ge 1 ]
	wait "$pid"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")" "$want"
	[ "$(sbx-lease show "$SRC" | jq -r .lease.state)" = Active ]
}

@test "a refused snapshot of a tree harms nothing: every process runs on, the lease stays Active" {
	g="$GUESTS/snap_forks"
	want=$(cd "$BATS_TEST_TMPDIR" && "$g" fifo)
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" fifo >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	sleep 0.5
	for stop in "" --stop; do
		# a take that meets a fork or exec event is refused to be tried again
		for _ in $(seq 1 20); do
			run sbx-snap take "$SRC" $stop
			[[ $output == *"try again"* ]] || break
			sleep 0.1
		done
		assert_failure
		assert_output --partial "named FIFO"
		assert_output --partial "is not supported"
	done
	wait "$pid"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")" "$want"
	[ "$(sbx-lease show "$SRC" | jq -r .lease.state)" = Active ]
	sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
}

@test "a root whose fd 2 it made a copy of the run's stdin is refused by name and harms nothing" {
	script='exec 2<&0; i=0; while [ $i -lt 25 ]; do echo $i; i=$((i + 1)); sleep 0.1; done'
	want=$(sh -c "$script" </dev/null)
	SRC=$(tree_lease /bin/sh active)
	sbx-run --lease "$SRC" -- /bin/sh -c "$script" </dev/null >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	sleep 0.5
	for _ in $(seq 1 20); do
		run sbx-snap take "$SRC"
		[[ $output == *"try again"* || $output == *"no lease guest"* ]] || break
		sleep 0.1
	done
	assert_failure
	assert_output --partial "fd 2 of the root process is a copy of the run's standard input: not supported"
	wait "$pid"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")" "$want"
	[ "$(sbx-lease show "$SRC" | jq -r .lease.state)" = Active ]
	sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
}

@test "an epoll set shared by processes whose watches no one of them holds, or a memfd opened twice, is refused by name and harms nothing" {
	g="$GUESTS/snap_forks"
	for kind in split-epoll twin-epoll memfd-twice; do
		case $kind in
		split-epoll) why="fd 3 of the root process: an epoll set held by several processes watches descriptors that no one of them holds all of is not supported" ;;
		twin-epoll) why="epoll set watches two files under descriptor 40 (added by different processes): not supported" ;;
		memfd-twice) why="memfd twice is open more than once" ;;
		esac
		want=$(cd "$BATS_TEST_TMPDIR" && "$g" $kind)
		SRC=$(tree_lease "$g" active)
		sbx-run --lease "$SRC" -- "$g" $kind >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
		pid=$!
		sleep 0.5
		for stop in "" --stop; do
			# a take that meets a fork or exec event is refused to be tried again
			for _ in $(seq 1 20); do
				run sbx-snap take "$SRC" $stop
				[[ $output == *"try again"* ]] || break
				sleep 0.1
			done
			assert_failure
			assert_output --partial "$why"
		done
		wait "$pid"
		assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")" "$want"
		[ "$(sbx-lease show "$SRC" | jq -r .lease.state)" = Active ]
		sbx-lease log "$SRC" | jq -r .edge | { ! grep -qx snapshot; }
	done
}

@test "a kernel object or SysV segment in a child process alone, or one eventfd both hold, is snapshotted and the tree runs on" {
	g="$GUESTS/snap_forks"
	for kind in eventfd shm shared-eventfd; do
		want=$(cd "$BATS_TEST_TMPDIR" && "$g" $kind)
		SRC=$(tree_lease "$g" active)
		sbx-run --lease "$SRC" -- "$g" $kind >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
		pid=$!
		sleep 0.5
		for _ in $(seq 1 20); do
			run sbx-snap take "$SRC"
			[[ $output == *"try again"* ]] || break
			sleep 0.1
		done
		assert_success
		D=$(printf '%s' "$output" | jq -r .digest)
		run sbx-snap show "$D"
		assert_success
		[ "$(printf '%s' "$output" | jq '.processes | length')" -ge 1 ]
		# the eventfd both hold is captured once, with its two holders (and a
		# third when the take finds one of the loop's short children alive)
		[ $kind != shared-eventfd ] || assert_regex "$(printf '%s' "$output" |
			jq -c '[.shared_objects[] | [.kind, (.holders | length)]]')" '^\[\["eventfd",[23]\]\]$'
		wait "$pid"
		assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")" "$want"
	done
}

@test "shared anonymous memory of four processes is captured once and shared again after a restore" {
	g="$GUESTS/snap_shm_big"
	want=$(cd "$BATS_TEST_TMPDIR" && "$g")
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	# the area is filled and the children forked within the first second
	sleep 1.5
	take_stop "$SRC"
	wait "$pid" || true
	run sbx-snap show "$DIGEST"
	assert_success
	[ "$(printf '%s' "$output" | jq '.processes | length')" -eq 4 ]
	assert_equal "$(printf '%s' "$output" | jq -c '[.shared_memory[] | [.kind, .size]]')" \
		'[["anonymous",33554432]]'
	# 32 MiB of non-zero pages once, not four times
	bytes=$(printf '%s' "$output" | jq .bytes)
	[ "$bytes" -gt 33554432 ] && [ "$bytes" -lt 50331648 ]
	TGT=$(tree_lease "$g" funded)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	assert_equal "$(cat "$BATS_TEST_TMPDIR/src.out")$output" "$want"
}

@test "an unprivileged invoker snapshots a tree with bytes in a pipe and restores it" {
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	U=$(mktemp -d /var/tmp/sbx-tree.XXXXXX)
	chmod 0777 "$U"
	g="$GUESTS/snaptree/fork_pipe"
	want=$(cd "$BATS_TEST_TMPDIR" && "$g")
	run $SBX_AS_NOBODY env SBX_STORE="$U/store" PATH="$PATH" G="$g" U="$U" bash -c '
		lease() {
			out=$(sbx-lease request --image "$G" --escrow 10 --limits namespace_bytes=256M |
				sbx-lease fund --amount 10 --evidence -) || exit 1
			[ "$1" = active ] && out=$(printf "%s" "$out" | sbx-lease activate --evidence -)
			printf "%s" "$out" | jq -r .lease.id
		}
		SRC=$(lease active)
		sbx-run --lease "$SRC" -- "$G" >"$U/src.out" 2>/dev/null &
		sleep 0.8
		D=$(sbx-snap take "$SRC" --stop | jq -r .digest) || exit 2
		wait
		sbx-snap show "$D" | jq -c "[(.processes | length), ([.pipes[].bytes] | max)]" >"$U/shape"
		sbx-restore "$D" --lease "$(lease funded)" >"$U/tgt.out" || exit 3'
	assert_success
	# three processes, a pipe holding bytes: as the invoker saw them
	[ "$(jq '.[0]' "$U/shape")" -eq 3 ]
	[ "$(jq '.[1]' "$U/shape")" -gt 0 ]
	assert_equal "$(cat "$U/src.out" "$U/tgt.out")" "$want"
	rm -rf "$U"
}

@test "an unprivileged invoker snapshots trees sharing memory (a memfd, shared anonymous memory, deleted and named /dev/shm files) and restores them" {
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	# name:processes,objects (no map_files for nobody: a file mapped only keeps its extent)
	for spec in memfd_shared:2,1 shm_anon_fork:2,1 shm_deleted_fork:3,1 shm_named:2,3; do
		name=${spec%%:*}
		U=$(mktemp -d /var/tmp/sbx-tree.XXXXXX)
		chmod 0777 "$U"
		g="$GUESTS/snaptree/$name"
		want=$(cd "$BATS_TEST_TMPDIR" && "$g")
		run $SBX_AS_NOBODY env SBX_STORE="$U/store" PATH="$PATH" G="$g" U="$U" bash -c '
			lease() {
				out=$(sbx-lease request --image "$G" --escrow 10 --limits namespace_bytes=256M |
					sbx-lease fund --amount 10 --evidence -) || exit 1
				[ "$1" = active ] && out=$(printf "%s" "$out" | sbx-lease activate --evidence -)
				printf "%s" "$out" | jq -r .lease.id
			}
			SRC=$(lease active)
			sbx-run --lease "$SRC" -- "$G" >"$U/src.out" 2>/dev/null &
			sleep 0.8
			D=$(sbx-snap take "$SRC" --stop | jq -r .digest) || exit 2
			wait
			sbx-snap show "$D" | jq -c "[(.processes | length), (.shared_memory | length)]" >"$U/shape"
			sbx-restore "$D" --lease "$(lease funded)" >"$U/tgt.out" || exit 3'
		assert_success
		assert_equal "$(cat "$U/shape")" "[${spec#*:}]"
		assert_equal "$(cat "$U/src.out" "$U/tgt.out")" "$want"
		rm -rf "$U"
	done
}

@test "an unprivileged invoker snapshots trees sharing kernel objects (socket pairs split or kept by both, an epoll set) and restores them" {
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	for name in shared_socketpair shared_epoll; do
		case $name in
		shared_socketpair) shape='[2,["unix-socket","unix-socket","unix-socket","unix-socket"]]' ;;
		shared_epoll) shape='[2,["epoll","eventfd"]]' ;;
		esac
		U=$(mktemp -d /var/tmp/sbx-tree.XXXXXX)
		chmod 0777 "$U"
		g="$GUESTS/snaptree/$name"
		want=$(cd "$BATS_TEST_TMPDIR" && "$g")
		run $SBX_AS_NOBODY env SBX_STORE="$U/store" PATH="$PATH" G="$g" U="$U" bash -c '
			lease() {
				out=$(sbx-lease request --image "$G" --escrow 10 --limits namespace_bytes=256M |
					sbx-lease fund --amount 10 --evidence -) || exit 1
				[ "$1" = active ] && out=$(printf "%s" "$out" | sbx-lease activate --evidence -)
				printf "%s" "$out" | jq -r .lease.id
			}
			SRC=$(lease active)
			sbx-run --lease "$SRC" -- "$G" >"$U/src.out" 2>/dev/null &
			sleep 0.8
			D=$(sbx-snap take "$SRC" --stop | jq -r .digest) || exit 2
			wait
			sbx-snap show "$D" |
				jq -c "[(.processes | length), [.shared_objects[].kind]]" >"$U/shape"
			sbx-restore "$D" --lease "$(lease funded)" >"$U/tgt.out" || exit 3'
		assert_success
		assert_equal "$(cat "$U/shape")" "$shape"
		assert_equal "$(cat "$U/src.out" "$U/tgt.out")" "$want"
		rm -rf "$U"
	done
}

@test "a Unix listener whose socket file outlives its run (in a bound directory) is bound again over it on restore" {
	d="$BATS_TEST_TMPDIR/keep"
	mkdir -p "$d"
	chmod 777 "$d"
	cat >"$d/l.py" <<'PY'
import socket, time
l = socket.socket(socket.AF_UNIX)
l.bind('/keep/sock')
l.listen(4)
for s in range(40):
    print('step', s, flush=True)
    time.sleep(0.05)
c = socket.socket(socket.AF_UNIX)
c.connect('/keep/sock')
a, _ = l.accept()
c.send(b'reached')
print(a.recv(16).decode(), flush=True)
PY
	SRC=$(tree_lease /usr/bin/python3 active)
	sbx-run --lease "$SRC" --rw "$d:/keep" -- /usr/bin/python3 /keep/l.py >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 200); do
		grep -q "step 2" "$BATS_TEST_TMPDIR/src.out" && break
		sleep 0.05
	done
	take_stop "$SRC"
	wait "$pid" || true
	[ -S "$d/sock" ]
	TGT=$(tree_lease /usr/bin/python3 funded)
	run sbx-restore "$DIGEST" --lease "$TGT" --rw "$d:/keep"
	assert_success
	[[ $output == *reached* ]]
}

@test "a deleted /dev/shm file still linked under another name is refused by name, never restored as deleted" {
	SRC=$(tree_lease /usr/bin/python3 active)
	sbx-run --lease "$SRC" -- /usr/bin/python3 -c '
import ctypes, mmap, os, time
os.mkdir("/dev/shm/sub")
fd = os.open("/dev/shm/a", os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 4096)
os.link("/dev/shm/a", "/dev/shm/sub/b")
os.unlink("/dev/shm/a")
# mapped only: no descriptor is left to say it is linked (map_files does)
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
p = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
os.close(fd)
ctypes.memset(p, 1, 1)
print("mapped", flush=True)
time.sleep(30)' >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 200); do
		grep -q mapped "$BATS_TEST_TMPDIR/src.out" && break
		sleep 0.05
	done
	run sbx-snap take "$SRC"
	assert_failure
	[[ $output == *"/dev/shm/a (deleted)"* ]]
	[ "$(sbx-lease show "$SRC" | jq -r .lease.state)" = Active ]
	kill "$pid" 2>/dev/null || true
	wait "$pid" || true
}

# writes a nested directory, a symlink, a FIFO and a 1 MiB file to $T (the
# run's /tmp), closes them all but one held by path, waits in $T/d, then prints
# what it reads back (checksums, kinds, modes)
TMP_GUEST='T=${T:-/tmp}
mkdir -p "$T/d/e/f" && chmod 750 "$T/d/e"
yes "tmpfs line" | head -c 1048576 >"$T/d/e/big"
printf small >"$T/d/small" && chmod 604 "$T/d/small"
ln -s e/big "$T/d/link" && mkfifo -m 640 "$T/d/fifo"
cd "$T/d" && exec 3<small && : >"$NS/ready"
sleep 4
sha256sum e/big small link; cat <&3; echo
stat -c "%n %a %F" . e e/f e/big small link fifo
readlink link; ls -A "$T/d"'

@test "files a tree left in the run's /tmp (a nested directory, a symlink, a FIFO, 1 MiB) come back after a restore" {
	mkdir -p "$BATS_TEST_TMPDIR/t"
	want=$(T="$BATS_TEST_TMPDIR/t" NS="$BATS_TEST_TMPDIR" sh -c "$TMP_GUEST")
	SRC=$(tree_lease /bin/sh active)
	ns="$SBX_STORE/ns/$SRC"
	mkdir -p "$ns" && chmod a+rwx "$ns"
	sbx-run --lease "$SRC" -- /bin/sh -c "NS=\$PWD; $TMP_GUEST" >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 300); do
		[ -e "$ns/ready" ] && break
		sleep 0.1
	done
	take_stop "$SRC"
	wait "$pid" || true
	# d, d/e, d/e/f, d/e/big, d/small, d/link, d/fifo
	run sbx-snap show "$DIGEST"
	assert_success
	printf '%s' "$output" | jq -e '.tmpfs.entries == 7 and .tmpfs.bytes == 1048581'
	TGT=$(tree_lease /bin/sh funded)
	run sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	[ "$(cat "$BATS_TEST_TMPDIR/src.out"; printf '%s\n' "$output")" = "$want" ] ||
		{ diff <(echo "$want") <(cat "$BATS_TEST_TMPDIR/src.out"; printf '%s\n' "$output") >&2; false; }
}

@test "an unprivileged invoker's tree gets the files it left in the run's /tmp back after a restore" {
	[ "$(id -u)" = 0 ] || skip "needs root (runs the unprivileged case as nobody)"
	U=$(mktemp -d /var/tmp/sbx-tree.XXXXXX)
	chmod 0777 "$U"
	mkdir -p "$BATS_TEST_TMPDIR/t"
	want=$(T="$BATS_TEST_TMPDIR/t" NS="$BATS_TEST_TMPDIR" sh -c "$TMP_GUEST")
	run $SBX_AS_NOBODY env SBX_STORE="$U/store" PATH="$PATH" U="$U" G="$TMP_GUEST" bash -c '
		lease() {
			out=$(sbx-lease request --image /bin/sh --escrow 10 --limits namespace_bytes=256M |
				sbx-lease fund --amount 10 --evidence -) || exit 1
			[ "$1" = active ] && out=$(printf "%s" "$out" | sbx-lease activate --evidence -)
			printf "%s" "$out" | jq -r .lease.id
		}
		SRC=$(lease active)
		sbx-run --lease "$SRC" -- /bin/sh -c "NS=\$PWD; $G" >"$U/src.out" 2>/dev/null &
		for _ in $(seq 1 300); do
			[ -e "$U/store/ns/$SRC/ready" ] && break
			sleep 0.1
		done
		D=$(sbx-snap take "$SRC" --stop | jq -r .digest) || exit 2
		wait
		sbx-restore "$D" --lease "$(lease funded)" >"$U/tgt.out" || exit 3'
	assert_success
	assert_equal "$(cat "$U/src.out" "$U/tgt.out")" "$want"
	rm -rf "$U"
}

@test "a run's /tmp nested deeper than a snapshot holds is refused by name and the guest runs on" {
	SRC=$(tree_lease /bin/sh active)
	ns="$SBX_STORE/ns/$SRC"
	mkdir -p "$ns" && chmod a+rwx "$ns"
	sbx-run --lease "$SRC" -- /bin/sh -c 'NS=$PWD; cd /tmp && for i in $(seq 1 130); do
		mkdir d && cd d; done; : >"$NS/ready"; sleep 4; echo alive' >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 300); do
		[ -e "$ns/ready" ] && break
		sleep 0.1
	done
	run sbx-snap take "$SRC" --stop
	assert_failure
	assert_output --partial "directories nested deeper than 128"
	wait "$pid"
	grep -qx alive "$BATS_TEST_TMPDIR/src.out"
}

@test "bench/snap.sh's tree guest, held by a mark in the run's /tmp, goes on after a restore that brings the mark back" {
	g="$BATS_TEST_TMPDIR/snap_tree"
	cc -O2 -fno-pie -no-pie -o "$g" "$BATS_TEST_DIRNAME/../bench/snap_tree.c"
	SRC=$(tree_lease "$g" active)
	sbx-run --lease "$SRC" -- "$g" 3 1 >"$BATS_TEST_TMPDIR/src.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 600); do
		grep -q ready "$BATS_TEST_TMPDIR/src.out" && break
		sleep 0.1
	done
	run sbx-snap take "$SRC"
	assert_success
	DIGEST=$(printf '%s' "$output" | jq -r .digest)
	kill "$pid"
	wait "$pid" || true
	[ "$(sbx-snap show "$DIGEST" | jq .tmpfs.entries)" -ge 1 ] # the mark
	TGT=$(tree_lease "$g" funded)
	run timeout 60 sbx-restore "$DIGEST" --lease "$TGT"
	assert_success
	[[ $output == *resumed* ]]
	[ "${lines[-1]}" = ok ]
}
