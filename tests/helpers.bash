# Shared bats set-up: a temporary store, the freshly built tools on PATH.
# bats-support and bats-assert, whose files only define functions: sourced here, as
# their load.bash forks a dirname for each file, for every test (~0.1 s each time)
for f in /usr/lib/bats/bats-support/src/*.bash /usr/lib/bats/bats-assert/src/*.bash; do
	source "$f"
done

: "${SBX_BUILD:=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/build}"
export SBX_BUILD
export PATH="$SBX_BUILD/bin:$PATH"
GUESTS="$SBX_BUILD/guests"

# Every directory on the path lets other users through (o+x).
sbx_reachable() {
	local d=$1 m dirs=()
	while [ "$d" != / ] && [ -n "$d" ]; do
		dirs+=("$d")
		[[ $d == */* ]] || break
		d=${d%/*}
	done
	[ ${#dirs[@]} -gt 0 ] || return 0
	m=$(stat -c %a "${dirs[@]}") || return 1
	for m in $m; do [ $((0$m & 1)) = 1 ] || return 1; done
}

# A copy of directory $1 under /var/tmp that everyone can reach; prints its path.
sbx_copy() {
	local copy
	copy="/var/tmp/sbx-$2.$(printf %s "$SBX_BUILD" | sha256sum | cut -c1-12)"
	mkdir -p "$copy" && cp -a -u "$1/." "$copy/" && chmod 755 "$copy" && echo "$copy"
}

# Guests run inside the sandbox, whose /tmp, /home, /root and every home are
# private, as a user of their own; tools also run as nobody (the unprivileged
# tests). A build tree there, or under a directory others cannot traverse (a
# 0700 home), is copied to /var/tmp.
if ! sbx_reachable "$SBX_BUILD"; then
	PATH="$(sbx_copy "$SBX_BUILD/bin" bin):$PATH"
	GUESTS=$(sbx_copy "$GUESTS" guests)
fi
case "$GUESTS" in
/tmp/* | /home/* | /root/* | "${HOME:-/root}"/*) GUESTS=$(sbx_copy "$GUESTS" guests) ;;
esac

# Tools run as nobody (the unprivileged tests). Nobody cannot make a memory cgroup
# here, and a run without one is held by samples with a warning that
# SBX_MEMORY_SAMPLED=1 quiets; the test of that warning runs without it.
# (An unprivileged make check is nobody already.)
# Nobody's principal keys (sbx-lease(1), PRINCIPALS) live in a directory of its
# own, never the invoker's configuration.
if [ "$(id -u)" = 0 ]; then
	SBX_NOBODY_CONFIG=/var/tmp/sbx-nobody-config
	[ -d "$SBX_NOBODY_CONFIG" ] || { mkdir -p -m 700 "$SBX_NOBODY_CONFIG" &&
		chown 65534:65534 "$SBX_NOBODY_CONFIG"; }
	SBX_AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups env SBX_MEMORY_SAMPLED=1 XDG_CONFIG_HOME=$SBX_NOBODY_CONFIG"
else
	SBX_AS_NOBODY=env
fi

# Whether this user can make a cgroup with controller $1 (its cgroup v1 hierarchy
# writable, or v2 with the controller delegated), as sbx-run does.
sbx_cgroup_has() {
	local rel mnt re="(^|,)$1(,|\$)"
	rel=$(awk -F: -v re="$re" '$2 ~ re { print $3 }' /proc/self/cgroup)
	mnt=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk -v re="$re" '$2 ~ re { print $1; exit }')
	[ -n "$rel" ] && [ -n "$mnt" ] && [ -w "$mnt$rel" ] && return 0
	rel=$(awk -F: '$1 == 0 { print $3 }' /proc/self/cgroup)
	mnt=$(findmnt -rn -t cgroup2 -o TARGET | head -n 1)
	[ -n "$mnt" ] && grep -qw "$1" "$mnt$rel/cgroup.subtree_control" 2>/dev/null
}
sbx_memcg() { sbx_cgroup_has memory; }
# the run's cgroup counts the tree's CPU time, so sbx-run's fuse can end it at the
# fuel bound: cgroup v2 always, v1 with a writable cpuacct hierarchy beside memory
sbx_fusecg() {
	local rel mnt
	sbx_memcg || return 1
	rel=$(awk -F: '$1 == 0 { print $3 }' /proc/self/cgroup)
	mnt=$(findmnt -rn -t cgroup2 -o TARGET | head -n 1)
	[ -n "$mnt" ] && grep -qw memory "$mnt$rel/cgroup.subtree_control" 2>/dev/null && return 0
	sbx_cgroup_has cpuacct
}
# make check where none can be made (unprivileged, say) runs its guests sampled
sbx_memcg || export SBX_MEMORY_SAMPLED=1

sbx_setup_store() {
	export SBX_STORE="$BATS_TEST_TMPDIR/store"
	export XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/config" # principal keys: never the user's
	unset XDG_STATE_HOME
}

setup() {
	sbx_setup_store
}

# A 3-member etcd cluster for the file (setup_file), always stopped (teardown_file).
sbx_etcd_start() {
	export SBX_TEST_ETCD="$BATS_FILE_TMPDIR/etcd"
	"$BATS_TEST_DIRNAME/etcd-cluster.sh" start "$SBX_TEST_ETCD" >/dev/null
}

sbx_etcd_stop() {
	[ -z "${SBX_TEST_ETCD:-}" ] || "$BATS_TEST_DIRNAME/etcd-cluster.sh" stop "$SBX_TEST_ETCD"
}

# The store URL of prefix $1 on the test cluster.
sbx_etcd_url() {
	echo "etcd://$(cat "$SBX_TEST_ETCD/endpoints")/$1"
}

sbx_etcdctl() {
	local t="$SBX_TEST_ETCD/tls" tls=()
	[ -f "$t/ca.pem" ] && tls=(--cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key")
	ETCDCTL_API=3 etcdctl --endpoints="$(cat "$SBX_TEST_ETCD/endpoints")" --command-timeout=2s "${tls[@]}" "$@"
}

# After a SIGKILL of sbx-run: until the kernel released every run claim of the
# store. Children sbx-run forked and had not yet closed the claim in (the
# sandbox while it is set up, a socket probe) die of their parent-death signal
# a moment after it, and hold the claim until then.
sbx_runs_released() {
	local f
	for f in "$SBX_STORE"/run/*.lock; do
		for _ in $(seq 1 200); do
			{ [ ! -e "$f" ] || flock -n -s "$f" true; } && break
			sleep 0.05
		done
	done
}
