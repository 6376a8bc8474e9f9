#!/usr/bin/env bash
# A local 3-member etcd cluster for tests and benchmarks, on free 127.0.0.1
# ports with data under DIR (which it owns):
#   etcd-cluster.sh start DIR     start, wait until healthy, print the endpoints
#   etcd-cluster.sh leader DIR    print the index (0-2) of the current leader
#   etcd-cluster.sh kill N DIR    SIGKILL member N
#   etcd-cluster.sh revive N DIR  start member N again on its data
#   etcd-cluster.sh stop DIR      kill every member (always safe to call)
# With ETCD_TLS=1 at start, clients must speak TLS with a certificate: the CA,
# server and client certificates (Ed25519) are made in DIR/tls.
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

# Whether process $1 has ended (a zombie has), without a process of its own.
gone() {
	local st
	{ read -r _ _ st _ <"/proc/$1/stat"; } 2>/dev/null || return 0
	[ "$st" = Z ]
}

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

ctl() {
	local tls=()
	[ -f "$dir/tls/ca.pem" ] && tls=(--cacert "$dir/tls/ca.pem" --cert "$dir/tls/client.pem" --key "$dir/tls/client.key")
	ETCDCTL_API=3 etcdctl --endpoints="$(endpoints)" --command-timeout=2s "${tls[@]}" "$@"
}

healthy() {
	ctl endpoint health
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, in $1.
make_certs() {
	local t=$1
	mkdir -p "$t"
	openssl req -x509 -newkey ed25519 -nodes -keyout "$t/ca.key" -out "$t/ca.pem" -days 2 -subj /CN=sbx-test-ca
	for who in server client; do
		openssl req -newkey ed25519 -nodes -keyout "$t/$who.key" -out "$t/$who.csr" -subj "/CN=$who"
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$t/$who.ext"
		openssl x509 -req -in "$t/$who.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
			-out "$t/$who.pem" -days 2 -extfile "$t/$who.ext"
	done
}

case $cmd in
start)
	mkdir -p "$dir"
	read -r -a p <<<"$(free_ports 6)"
	cluster="m0=http://127.0.0.1:${p[3]},m1=http://127.0.0.1:${p[4]},m2=http://127.0.0.1:${p[5]}"
	scheme=http tls=""
	if [ "${ETCD_TLS:-}" = 1 ]; then
		make_certs "$dir/tls" 2>/dev/null
		scheme=https
		tls="--cert-file $dir/tls/server.pem --key-file $dir/tls/server.key --client-cert-auth --trusted-ca-file $dir/tls/ca.pem"
	fi
	eps=""
	for i in 0 1 2; do
		# short heartbeat and election so that losing the leader costs well under a second
		echo etcd --name "m$i" --data-dir "$dir/m$i" \
			--listen-client-urls "$scheme://127.0.0.1:${p[$i]}" \
			--advertise-client-urls "$scheme://127.0.0.1:${p[$i]}" $tls \
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
	ctl endpoint status -w json 2>/dev/null |
		python3 -c 'import json,sys
st=json.load(sys.stdin)
eps=open(sys.argv[1]).read().strip().split(",")
for s in st:
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(eps.index(s["Endpoint"].split("://")[-1])); break
else: sys.exit(1)' "$dir/endpoints"
	;;
kill)
	kill -KILL "$(cat "$dir/m$n.pid")"
	wait_for 50 gone "$(cat "$dir/m$n.pid")"
	;;
revive)
	$(cat "$dir/m$n.cmd") >>"$dir/m$n.log" 2>&1 &
	echo $! >"$dir/m$n.pid"
	;;
stop)
	# the data is thrown away: SIGKILL, as a graceful stop of a member costs 2 s
	pids=""
	for i in 0 1 2; do
		[ -f "$dir/m$i.pid" ] || continue
		pid=$(cat "$dir/m$i.pid")
		kill -KILL "$pid" 2>/dev/null || true
		pids="$pids $pid"
		rm -f "$dir/m$i.pid"
	done
	for pid in $pids; do
		for ((t = 0; t < 250; t++)); do gone "$pid" && break; sleep 0.02; done
	done
	;;
*)
	echo "etcd-cluster.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
