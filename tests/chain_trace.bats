#!/usr/bin/env bats
# sbx-run --chain N --trace FILE: one trace across the chain's links, one hash
# chain; each link after the first begins with a link event naming its lease,
# the lease before and the snapshot restored (sbx-run(1), A chain of leases).
# Each test fails on main, which refused --chain with --trace.
load helpers
bats_require_minimum_version 1.5.0

# Three writers at once, 8 MiB each (24 MiB of stores, alive across a link),
# then six small copies and reads, one after another
STORES='for i in 1 2 3; do dd if=/dev/zero of=/ns/f$i bs=256k count=32 status=none & done; wait;
for i in 1 2 3 4 5 6; do dd if=/etc/passwd of=/ns/c$i status=none;
head -c 100 /etc/hostname >/dev/null; done; ls /ns >/ns/list; echo done'
# A 6 MiB file made, then read by four processes at once: 24 MiB of reads
READS='dd if=/dev/zero of=/ns/big bs=1M count=6 status=none; for i in 1 2 3 4; do
(dd if=/ns/big of=/dev/null bs=64k status=none; head -c 10 /etc/passwd >/dev/null) & done; wait;
echo done'

# A trace's events without what differs between two runs of one tree (ids,
# times, sequence, pointers, descriptors, results that are ids), one a line, sorted.
events() {
	jq -c 'select(.ev == "sys" or .ev == "exec" or .ev == "exit" or .ev == "spawn") |
		[.ev, .name, .path, .path2, .errno, .kind, .exit, .signal, .argv, .sha256,
		 .created, .exists, .action]' "$1" | sort
}

# traced LEVEL LIMITS SCRIPT: the script chained (--chain 8) and unchained, each
# traced at LEVEL into chained.trace and plain.trace, results in *.json
traced() {
	local d=$BATS_TEST_TMPDIR
	run --separate-stderr sbx-run --ephemeral --limits "$2" --chain 8 --trace "$d/chained.trace" \
		--trace-level "$1" --result "$d/chained.json" -- /bin/sh -c "$3"
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$output" = done ]
	run --separate-stderr sbx-run --ephemeral --trace "$d/plain.trace" --trace-level "$1" \
		--result "$d/plain.json" -- /bin/sh -c "$3"
	[ "$status" -eq 0 ] && [ "$output" = done ]
}

# The chained trace verifies whole, ending at the result's head, with one link
# event per link after the first, each naming that link's lease, the one before
# and the snapshot that ended it.
chained_ok() {
	local d=$BATS_TEST_TMPDIR n
	n=$(jq '.links | length' "$d/chained.json")
	[ "$n" -ge "$1" ] || { jq -c '[.links[] | .end]' "$d/chained.json" >&2; return 1; }
	run sbx-trace verify --complete --head "$(jq -r .trace.head "$d/chained.json")" "$d/chained.trace"
	assert_success
	jq -e '.complete == true' <<<"$output"
	jq -e --arg p "$d/chained.trace" '.trace.path == $p' "$d/chained.json"
	[ "$(jq -c 'select(.ev == "link")' "$d/chained.trace" | wc -l)" -eq $((n - 1)) ]
	jq -s -e --slurpfile r "$d/chained.json" '[.[] | select(.ev == "link")] as $k |
		$r[0].links as $l | [range(1; $l | length)] |
		all($k[. - 1].link == . + 1 and $k[. - 1].lease == $l[.].lease and
		    $k[. - 1].prev == $l[. - 1].lease and $k[. - 1].snapshot == $l[. - 1].snapshot and
		    ($k[. - 1].pids | length) > 0)' "$d/chained.trace"
	# the header binds the first link's lease; the whole run is one trace
	[ "$(head -n 1 "$d/chained.trace" | jq -r .lease)" = "$(jq -r '.links[0].lease' "$d/chained.json")" ]
}

@test "chain+trace: a tree crossing storage_write: one trace that verifies, with every process's events of every link as unchained" {
	traced file storage_write=16M "$STORES"
	chained_ok 2
	local d=$BATS_TEST_TMPDIR
	jq -e '.links[:-1] | all(.end == "chain: storage_write")' "$d/chained.json"
	jq -e '.links | all(.usage.storage_write <= 16777216)' "$d/chained.json"
	diff <(events "$d/chained.trace") <(events "$d/plain.trace")
	# the distinct files opened: nine stored, three of them by writers alive across a link
	[ "$(jq -r 'select(.ev == "sys" and (.name | test("open")) and .result >= 0) | .path' \
		"$d/chained.trace" | sort -u | grep -Ec '^/ns/(f[1-3]|c[1-6])$')" -eq 9 ]
	# every writer's exit, after the link, under the id it had before it
	run sbx-trace files "$d/chained.trace"
	jq -e '[.processes[] | select(.argv[0] == "dd" and .argv[2] == "of=/ns/f1")] |
		length == 1 and .[0].exit == 0' <<<"$output"
	# one event more than unchained per link event
	[ $(($(grep -c . "$d/chained.trace") - $(grep -c . "$d/plain.trace"))) -eq \
		$(($(jq '.links | length' "$d/chained.json") - 1)) ]
	# a restored process is one process: its events after the link carry its first ids
	diff <(sbx-trace files "$d/chained.trace" | jq '.processes | length') \
		<(sbx-trace files "$d/plain.trace" | jq '.processes | length')
	run sbx-trace files "$d/chained.trace"
	jq -e '[.processes[] | select(.exit == null)] | length == 0' <<<"$output"
	# sbx-trace diff: every process's events as unchained; only the end's count
	# differs (by the link events), and the build records are equal
	run sbx-trace diff "$d/chained.trace" "$d/plain.trace"
	jq -e '.processes.differing == 1 and .first_difference.process == "run" and
		.first_difference.a.ev == "end" and ([.files[][]] | map(length) | add) == 0' <<<"$output"
}

@test "chain+trace: a tree crossing storage_read: the trace verifies, events as unchained" {
	traced file storage_read=8M "$READS"
	chained_ok 3
	local d=$BATS_TEST_TMPDIR
	jq -e '.links[:-1] | all(.end == "chain: storage_read")' "$d/chained.json"
	diff <(events "$d/chained.trace") <(events "$d/plain.trace")
	[ "$(jq -c 'select(.ev == "sys" and .path == "/ns/big" and .result >= 0)' "$d/chained.trace" |
		wc -l)" -eq 5 ]
}

@test "chain+trace: levels exec and all across links" {
	local d=$BATS_TEST_TMPDIR
	traced exec storage_write=16M "$STORES"
	chained_ok 2
	diff <(events "$d/chained.trace") <(events "$d/plain.trace")
	[ "$(jq -c 'select(.ev == "exec")' "$d/chained.trace" | wc -l)" -eq 17 ]
	traced all storage_write=16M "$STORES"
	chained_ok 2
	# every open, execve and exit as unchained (calls in flight at the snapshot
	# are made again by the next link: recorded once, there)
	sel='select((.ev == "sys" and (.name | test("^open|^exec"))) or .ev == "exit" or .ev == "exec")'
	diff <(jq -c "$sel | [.ev, .name, .path, .errno, .exit]" "$d/chained.trace" | sort) \
		<(jq -c "$sel | [.ev, .name, .path, .errno, .exit]" "$d/plain.trace" | sort)
}

@test "chain+trace: a link section changed, removed or re-chained with another lease is refused" {
	local d=$BATS_TEST_TMPDIR
	traced file storage_write=16M "$STORES"
	chained_ok 2
	n=$(grep -n '"ev":"link"' "$d/chained.trace" | head -n 1 | cut -d: -f1)
	# a byte of the link event (the snapshot it names)
	# (another digit: a digest that starts with 0 was left as it was, 1 run in 16)
	sed -e "${n}s/\"snapshot\":\"0/\"snapshot\":\"1/" -e t \
		-e "${n}s/\"snapshot\":\"./\"snapshot\":\"0/" "$d/chained.trace" >"$d/t1"
	run cmp -s "$d/t1" "$d/chained.trace"
	assert_failure
	run sbx-trace verify "$d/t1"
	assert_failure
	assert_output --partial "chain hash mismatch"
	# the link event removed, and an event of the next link's section
	sed "${n}d" "$d/chained.trace" >"$d/t2"
	run sbx-trace verify "$d/t2"
	assert_failure
	sed "$((n + 3))s/\"seq\":/\"seq\": /" "$d/chained.trace" >"$d/t3"
	run sbx-trace verify "$d/t3"
	assert_failure
	# re-chained whole (a forger can hash) with a link naming another lease before
	# it, or out of order: the structure is refused
	rechain() {
		python3 -c '
import hashlib, json, sys
h, out = None, []
for i, line in enumerate(open(sys.argv[1])):
    o = json.loads(line); del o["h"]
    if o.get("ev") == "link":
        exec(sys.argv[2])
    c = json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    h = hashlib.sha256((b"sbx/trace/v1\0" if h is None else h) + c).digest()
    out.append(c[:-1].decode() + ",\"h\":\"" + h.hex() + "\"}")
print("\n".join(out))' "$d/chained.trace" "$1"
	}
	rechain 'pass' >"$d/t4"
	run sbx-trace verify --complete "$d/t4" # the re-chainer itself is faithful
	assert_success
	rechain 'o["prev"] = "L0000000000000000"' >"$d/t5"
	run sbx-trace verify "$d/t5"
	assert_failure
	assert_output --partial 'field "prev": not the lease before'
	rechain 'o["link"] = 3' >"$d/t6"
	run sbx-trace verify "$d/t6"
	assert_failure
	assert_output --partial 'field "link": 3, expected 2'
	rechain 'o["pids"] = [[1, 2], [3, 2]]' >"$d/t7"
	run sbx-trace verify "$d/t7"
	assert_failure
	assert_output --partial 'field "pids": id 2 twice'
	# and the result's head catches a trace cut after a link
	head -n "$n" "$d/chained.trace" >"$d/t8"
	run sbx-trace verify --head "$(jq -r .trace.head "$d/chained.json")" "$d/t8"
	assert_failure
}

@test "chain+trace: filter keeps the link events and follows a restored process across them" {
	local d=$BATS_TEST_TMPDIR
	traced file storage_write=16M "$STORES"
	chained_ok 2
	root=$(jq -r 'select(.ev == "exec") | .pid' "$d/chained.trace" | head -n 1)
	run --separate-stderr sbx-trace filter --pid "$root" "$d/chained.trace"
	assert_success
	printf '%s\n' "$output" >"$d/x"
	run sbx-trace verify --complete "$d/x"
	assert_success
	[ "$(grep -c '"ev":"link"' "$d/x")" -ge 1 ]
	# the tree's events of every link: all nine files stored
	[ "$(jq -r 'select(.ev == "sys" and (.name | test("open")) and .result >= 0) | .path' "$d/x" |
		sort -u | grep -Ec '^/ns/(f[1-3]|c[1-6])$')" -eq 9 ]
}
