#!/usr/bin/env bash
# A local 3-member etcd cluster for tests and benchmarks, on free 127.0.0.1
# ports with data under DIR (which it owns):
#   etcd-cluster.sh start DIR     start, wait until healthy, print the endpoints
#   etcd-cluster.sh leader DIR    print the index (0-2) of the current leader
#   etcd-cluster.sh kill N DIR    SIGKILL member N
#   etcd-cluster.sh revive N DIR  start member N again on its data
#   etcd-cluster.sh stop DIR      stop every member (always safe to call)
set -euo pipefail
cmd=${1:?usage: etcd-cluster.sh start|leader|kill N|stop DIR}
shift
case $cmd in kill | revive) n=$1; shift ;; esac
dir=${1:?usage: etcd-cluster.sh $cmd DIR}

free_ports() { # N free local TCP ports
	python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

endpoints() { cat "$dir/endpoints"; }

# Wait for condition "$@" for at most $1 tenths of a second.
wait_for() {
	local n=$1
	shift
	until "$@" >/dev/null 2>&1; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.1
	done
}

healthy() {
	ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" --command-timeout=2s endpoint health
}

case $cmd in
start)
	mkdir -p "$dir"
	read -r -a p <<<"$(free_ports 6)"
	cluster="m0=http://127.0.0.1:${p[3]},m1=http://127.0.0.1:${p[4]},m2=http://127.0.0.1:${p[5]}"
	eps=""
	for i in 0 1 2; do
		# short heartbeat and election so that losing the leader costs well under a second
		echo etcd --name "m$i" --data-dir "$dir/m$i" \
			--listen-client-urls "http://127.0.0.1:${p[$i]}" \
			--advertise-client-urls "http://127.0.0.1:${p[$i]}" \
			--listen-peer-urls "http://127.0.0.1:${p[$((i + 3))]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${p[$((i + 3))]}" \
			--initial-cluster "$cluster" --initial-cluster-state new \
			--heartbeat-interval 50 --election-timeout 500 >"$dir/m$i.cmd"
		$(cat "$dir/m$i.cmd") >"$dir/m$i.log" 2>&1 &
		echo $! >"$dir/m$i.pid"
		eps="$eps${eps:+,}127.0.0.1:${p[$i]}"
	done
	echo "$eps" >"$dir/endpoints"
	if ! wait_for 300 healthy; then
		"$0" stop "$dir"
		echo "etcd-cluster.sh: cluster did not become healthy (logs in $dir)" >&2
		exit 1
	fi
	endpoints
	;;
leader)
	ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" --command-timeout=2s endpoint status -w json 2>/dev/null |
		python3 -c 'import json,sys
st=json.load(sys.stdin)
eps=open(sys.argv[1]).read().strip().split(",")
for s in st:
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(eps.index(s["Endpoint"].replace("http://",""))); break
else: sys.exit(1)' "$dir/endpoints"
	;;
kill)
	kill -KILL "$(cat "$dir/m$n.pid")"
	wait_for 50 sh -c "! kill -0 $(cat "$dir/m$n.pid")"
	;;
revive)
	$(cat "$dir/m$n.cmd") >>"$dir/m$n.log" 2>&1 &
	echo $! >"$dir/m$n.pid"
	;;
stop)
	for i in 0 1 2; do
		[ -f "$dir/m$i.pid" ] || continue
		pid=$(cat "$dir/m$i.pid")
		kill -TERM "$pid" 2>/dev/null || true
		wait_for 50 sh -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
		rm -f "$dir/m$i.pid"
	done
	;;
*)
	echo "etcd-cluster.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
