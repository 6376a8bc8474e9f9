#!/usr/bin/env bats
# The guest's default view of the host (trace/box/view.c): every home masked
# wherever it is, a /sys of the run's own, and the run's share of the
# invoker's per-user kernel allowances.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

teardown() {
	[ -z "${BGPID:-}" ] || { kill "$BGPID" 2>/dev/null; wait "$BGPID" 2>/dev/null; } || true
	[ -z "${VUSER:-}" ] || userdel -r "$VUSER" >/dev/null 2>&1 || true
	for d in "${VDIRS[@]}"; do rm -rf "$d"; done
	[ -z "${UDIR:-}" ] || rm -rf "$UDIR"
}

# a home at $1 holding .ssh/id_rsa, notes and src/file
make_home() {
	mkdir -p "$1/.ssh" "$1/src"
	echo "PRIVATE KEY" >"$1/.ssh/id_rsa"
	echo notes >"$1/notes"
	echo visible >"$1/src/file"
	chmod 0644 "$1/.ssh/id_rsa"
}

# the guest's view of home $1: the key, the listing, a bound file
look='cat "$H/.ssh/id_rsa" 2>&1; echo "list: $(ls -A "$H" | tr "\n" " ")"; cat "$H/src/file"'

@test "a root invoker's home outside /home, its XDG directories and other users' homes are masked; a bind below shows" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	H=/var/lib/fakejenkins-$$ X=/srv/sbx-xdg-$$ O=/srv/sbx-other-$$
	VDIRS=("$H" "$X" "$O")
	make_home "$H" && make_home "$X"
	VUSER=sbxv$$
	useradd -M -d "$O" -s /bin/sh "$VUSER" && make_home "$O"
	run env HOME="$H" XDG_CONFIG_HOME="$X" sbx-run --ephemeral --env "H=$H" --env "X=$X" \
		--env "O=$O" --ro "$H/src:$H/src" -- /bin/sh -c "$look"'; ls -A "$X" "$O"; echo done'
	assert_success
	refute_output --partial "PRIVATE KEY"
	assert_line "list: src "
	assert_line visible
	refute_line notes
	refute_line .ssh
	assert_line done
}

@test "an unprivileged invoker whose passwd home is under /srv: its key is masked, by passwd or \$HOME; a bind below shows" {
	[ "$(id -u)" = 0 ] || skip "needs root (makes a user)"
	VUSER=sbxv$$
	H=/srv/sbx-home-$$
	VDIRS=("$H")
	useradd -M -d "$H" -s /bin/sh "$VUSER"
	make_home "$H"
	chown -R "$VUSER:" "$H" && chmod 0700 "$H" "$H/.ssh" && chmod 0600 "$H/.ssh/id_rsa"
	UDIR=$(mktemp -d /var/tmp/sbx-view.XXXXXX)
	chmod 0777 "$UDIR"
	# its principal's key is made in a configuration directory of its own
	mkdir -m 0700 "$UDIR/config" && chown "$VUSER:" "$UDIR/config"
	for home in /tmp "$H"; do
		run setpriv --reuid="$VUSER" --regid="$VUSER" --clear-groups env HOME="$home" \
			XDG_CONFIG_HOME="$UDIR/config" \
			SBX_MEMORY_SAMPLED=1 SBX_STORE="$UDIR/store-${home//\//}" PATH="$PATH" \
			sbx-run --ephemeral --env "H=$H" --ro "$H/src:$H/src" -- /bin/sh -c "$look"
		assert_success
		refute_output --partial "PRIVATE KEY"
		assert_line "list: src "
		assert_line visible
	done
	# the invoker itself reads it: the mask, not the mode, keeps the guest out
	run setpriv --reuid="$VUSER" --regid="$VUSER" --clear-groups cat "$H/.ssh/id_rsa"
	assert_output "PRIVATE KEY"
}

# the guest's /sys, as the invoker $1 ("" or the as-nobody prefix); the write's
# error is dropped: stdout and stderr are two relay pipes (sbx-run(1)), so the
# shell's message can land inside "read-only" under load
sys_run() {
	run $1 env SBX_STORE="$UDIR/store$2" PATH="$PATH" sbx-run --ephemeral -- /bin/sh -c '
		echo "net: $(ls /sys/class/net | tr "\n" " ")"
		echo "virtual: $(ls /sys/devices/virtual/net | tr "\n" " ")"
		cat /sys/class/net/*/address
		ls /sys/fs/cgroup /sys/class/dmi /sys/firmware /sys/block 2>&1
		echo "nproc: $(nproc) $(/usr/bin/python3 -c "import os; print(os.cpu_count())")"
		{ echo x > /sys/x; } 2>/dev/null || echo "read-only"'
}

@test "the guest's /sys is its own: lo alone, no hardware address, no cgroup tree, no DMI or firmware; CPUs still counted" {
	UDIR=$(mktemp -d /var/tmp/sbx-view.XXXXXX)
	chmod 0777 "$UDIR"
	n=$(nproc)
	for as in "" "$SBX_AS_NOBODY"; do
		[ -n "$as" ] || [ "$(id -u)" = 0 ] || continue
		sys_run "$as" "${as:+-nobody}"
		assert_success
		assert_line "net: lo "
		assert_line "virtual: lo "
		assert_line "00:00:00:00:00:00"
		for i in /sys/class/net/*; do
			i=${i##*/}
			[ "$i" = lo ] && continue
			refute_output --partial "$i"
			refute_output --partial "$(cat "/sys/class/net/$i/address")"
		done
		assert_line "ls: cannot access '/sys/fs/cgroup': No such file or directory"
		assert_line "ls: cannot access '/sys/firmware': No such file or directory"
		assert_line "ls: cannot access '/sys/block': No such file or directory"
		assert_line "nproc: $n $n"
		assert_line "read-only"
	done
}

# A guest that takes inotify instances until the kernel refuses, then holds
# them; the invoker's own inotify_init on the host, meanwhile, as $1.
inotify_hold() {
	local as=$1 out="$UDIR/out$2"
	$as env SBX_STORE="$UDIR/store$2" PATH="$PATH" sbx-run --ephemeral -- /usr/bin/python3 -c '
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while libc.inotify_init() >= 0:
    n += 1
print("held", n, "then errno", ctypes.get_errno(), flush=True)
time.sleep(600)' >"$out" 2>&1 &
	BGPID=$!
	for _ in $(seq 1 300); do grep -q held "$out" && break; sleep 0.1; done
	cat "$out"
	grep -q held "$out"
	run $as /usr/bin/python3 -c '
import ctypes
libc = ctypes.CDLL(None)
print("host inotify_init:", "ok" if libc.inotify_init() >= 0 else "refused")
n = 1
while libc.inotify_init() >= 0:
    n += 1
print("host took", n)'
	kill "$BGPID"
	wait "$BGPID" || true
	BGPID=
}

@test "a guest holding every inotify instance it can get leaves the invoker's inotify_init working, root and unprivileged; root's guest takes none of root's" {
	UDIR=$(mktemp -d /var/tmp/sbx-view.XXXXXX)
	chmod 0777 "$UDIR"
	max=$(cat /proc/sys/user/max_inotify_instances)
	for as in "" "$SBX_AS_NOBODY"; do
		[ -n "$as" ] || [ "$(id -u)" = 0 ] || continue
		inotify_hold "$as" "${as:+-nobody}"
		assert_line "host inotify_init: ok"
		# root's guest runs as a host uid of its own: nothing it holds is root's
		[ -n "$as" ] || [ "$(awk '/^host took/ { print $3 }' <<<"$output")" -gt $((max - max / 4)) ]
		held=$(awk '/^held/ { print $2 }' "$UDIR/out${as:+-nobody}")
		[ "$held" -gt 0 ] && [ "$held" -le $((max / 4)) ]
	done
}

@test "the run's per-user counters and pending-signal and message-queue limits are a quarter of the invoker's" {
	run sbx-run --ephemeral -- /bin/bash -c '
		cd /proc/sys/user && for f in max_inotify_instances max_inotify_watches max_user_namespaces; do
			echo "$f $(cat $f)"; done; echo "sigpending $(ulimit -i)"; echo "msgqueue $(ulimit -q)"'
	assert_success
	for f in max_inotify_instances max_inotify_watches max_user_namespaces; do
		assert_line "$f $(($(cat /proc/sys/user/$f) / 4))"
	done
	assert_line "sigpending $(($(ulimit -i) / 4))"
	assert_line "msgqueue $(($(ulimit -q) / 4))"
}

@test "where the kernel refuses a new sysfs (a host /sys partly covered), the guest's /sys still holds no host interface" {
	[ "$(id -u)" = 0 ] || skip "needs root (covers part of /sys in a mount namespace)"
	n=$(nproc)
	run unshare -m sh -c 'mount -t tmpfs none /sys/firmware && exec sbx-run --ephemeral -- /bin/sh -c \
		"ls /sys/class/net /sys/firmware 2>&1; echo nproc: \$(nproc) \$(ls /sys/devices/system/cpu | grep -c \"^cpu[0-9]\")"'
	assert_success
	assert_line "ls: cannot access '/sys/class/net': No such file or directory"
	assert_line "ls: cannot access '/sys/firmware': No such file or directory"
	assert_line "nproc: $n $(ls /sys/devices/system/cpu | grep -c '^cpu[0-9]')"
	refute_output --partial eth0
}
