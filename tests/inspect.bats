#!/usr/bin/env bats
# Syscall inspection (SPEC §6.3): the C API (inspect_host embeds libsbx), --policy
# and --inspect-exec.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

host() { "$GUESTS/inspect_host" "$@"; }

@test "C API: deny with an errno" {
	run host deny "$GUESTS/inspect_open" /deny/x /tmp/hello.txt
	assert_success
	assert_line "open /deny/x: EACCES"
	assert_line "open /tmp/hello.txt: ok: hello"
}

@test "C API: rewrite a path through temporary memory; the guest's buffer is unchanged" {
	run host rewrite "$GUESTS/inspect_open" /tmp/hello.txt /tmp/other.txt
	assert_success
	assert_line "open /tmp/hello.txt: ok: other"
	assert_line "buffer: /tmp/hello.txt"
	assert_line "open /tmp/other.txt: ok: other"
}

@test "C API: temporary memory is read-only to the guest and gone after the call" {
	run host mem "$GUESTS/inspect_mem"
	assert_success
	assert_line "temporary page holds /tmp/g"
	assert_line "mincore during the call: mapped"
	assert_line "guest write faulted"
	assert_line "thread A opened: yes"
	assert_line "mincore after the call: ENOMEM"
	assert_line "buffer of A: /tmp/f"
	assert_line "inspect_host: stale view faults"
}

@test "C API: map of a range crossing an unreadable page comes back short with EFAULT" {
	run host short "$GUESTS/inspect_open" @short
	assert_success
	assert_line "inspect_host: short map: size=3 rc=EFAULT"
}

@test "C API: a writev whose iovec the inspector replaces" {
	run host writev "$GUESTS/inspect_writev"
	assert_success
	assert_line "HIJACKED"
	refute_line "hello world"
	assert_line "writev returned 9; own iovec: hello world"
}

@test "C API: eight concurrent threads are all inspected" {
	run host threads "$GUESTS/inspect_threads"
	assert_success
	assert_line "threads: 0 wrong results"
	assert_line --regexp "^inspect_host: calls=[0-9]+ threads=9$"
}

@test "C API: a failing callback stops the guest and fails the run" {
	run host fail "$GUESTS/inspect_open" /tmp/hello.txt
	assert_failure 125
	assert_output --partial "inspect_host: error: inspector: the callback failed"
	refute_output --partial "open /tmp/hello.txt"
}

@test "C API: a run stopped at the guest's first call still knows its guest" {
	# the guest's first report can beat init's fork event; stopped there, the
	# run must not mistake itself for one whose guest never started
	for i in $(seq 100); do
		run host fail "$GUESTS/inspect_open" /tmp/hello.txt
		assert_failure 125
		assert_output --partial "inspect_host: error: inspector: the callback failed"
	done
}

policy_setup() {
	mkdir -p src
	echo hello >src/hello.txt
	echo "other contents" >src/other.txt
}

@test "policy: the formula seed's rewrite works from the shell" {
	policy_setup
	cat >p.json <<'JSON'
{"rules": [{"name": "swap", "syscall": ["openat", "open"], "action": "rewrite",
            "from": "/src/hello.txt", "to": "/src/other.txt"}]}
JSON
	run sbx-run --ephemeral --ro "$PWD/src:/src" --policy p.json -- cat /src/hello.txt
	assert_success
	assert_output "other contents"
	# the guest's own buffer is unchanged: it prints the path it asked for
	run sbx-run --ephemeral --ro "$PWD/src:/src" --policy p.json -- "$GUESTS/inspect_open" /src/hello.txt
	assert_success
	assert_line "open /src/hello.txt: ok: other contents"
	assert_line "buffer: /src/hello.txt"
}

@test "policy: deny with an errno by path glob; other paths pass" {
	policy_setup
	cat >p.json <<'JSON'
{"rules": [{"name": "hide", "class": "file", "path": "/src/*.txt", "action": "deny", "errno": "ENOENT"},
           {"name": "log", "path": "/etc/**", "action": "record"}]}
JSON
	run sbx-run --ephemeral --ro "$PWD/src:/src" --policy p.json -- cat /src/hello.txt
	assert_failure 1
	assert_output "cat: /src/hello.txt: No such file or directory"
	run sbx-run --ephemeral --ro "$PWD/src:/src" --policy p.json -- cat /etc/hostname
	assert_success
}

@test "policy: an invalid policy is refused before the guest starts, naming the rule" {
	printf '{"rules": [{"action": "allow"}, {"name": "bad", "action": "zap"}]}' >p.json
	run sbx-run --ephemeral --policy p.json -- /bin/sh -c 'echo ran'
	assert_failure 125
	assert_output 'sbx-run: error: p.json: rule 2 ("bad"): field "action": unknown action "zap"'
	[ ! -d "$SBX_STORE/leases" ] || [ -z "$(ls "$SBX_STORE/leases")" ]
	run sbx-run --ephemeral --policy missing.json -- /bin/true
	assert_failure 125
	assert_output --partial "missing.json"
}

coproc_script() {
	cat >co.sh <<'SH'
#!/bin/sh
while IFS= read -r l; do
	id=${l#*\"id\":}; id=${id%%,*}
	case "$l" in
	*'"/src/hello.txt"'*) echo "{\"id\":$id,\"action\":\"allow\",\"path\":[\"/src/other.txt\"]}" ;;
	*'"/deny/'*) echo "{\"id\":$id,\"action\":\"deny\",\"errno\":\"EACCES\"}" ;;
	*) echo "{\"id\":$id,\"action\":\"allow\"}" ;;
	esac
done
SH
	chmod +x co.sh
}

@test "co-process: JSON-lines events in, decisions out (rewrite and deny)" {
	policy_setup
	coproc_script
	run sbx-run --ephemeral --ro "$PWD/src:/src" --inspect-timeout 60000 --inspect-exec ./co.sh -- cat /src/hello.txt /deny/x
	assert_failure 1
	assert_line "other contents"
	assert_line "cat: /deny/x: Permission denied"
}

@test "co-process: malformed, late and missing replies fail the run and write nothing back" {
	run sbx-run --ephemeral --inspect-exec 'read l; echo garbage' --state-out out.img --result r.json -- /bin/cat /etc/hostname
	assert_failure 125
	assert_line --partial "inspector reply: malformed JSON"
	[ ! -e out.img ]
	assert_equal "$(jq -r .stopped r.json)" "inspector failed"
	run sbx-run --ephemeral --inspect-exec 'read l; echo "{\"id\":9,\"action\":\"allow\"}"' -- /bin/cat /etc/hostname
	assert_failure 125
	assert_output --partial '"id" must be 1'
	run sbx-run --ephemeral --inspect-exec 'read l; sleep 5' --inspect-timeout 300 -- /bin/cat /etc/hostname
	assert_failure 125
	assert_output --partial "late: no decision within 300 ms"
	run sbx-run --ephemeral --inspect-exec 'exec 0<&-; sleep 1' -- /bin/cat /etc/hostname
	assert_failure 125
	assert_output --partial "missing"
}

# A sibling thread attacks the page holding the decided path (the next page the
# process maps) by mprotect+write, /proc/self/mem and munmap+mmap MAP_FIXED
# while the main thread opens an allowed file: no try may open the denied one.
pathpage_race() {
	for m in mprotect procmem remap; do
		run ${AS:-} sbx-run --ephemeral --ro "$PWD/src:/src" "$@" --result r.json -- \
			"$GUESTS/escape_pathpage" "$m" /src/secret.txt "$N"
		assert_success
		assert_line "$m: $N of the allowed file, 0 of the denied one, $N tries"
	done
}

@test "policy: the decided path's page is out of the guest's reach (mprotect, /proc/self/mem, remap)" {
	mkdir -p src && echo secret >src/secret.txt
	cat >p.json <<'JSON'
{"rules": [{"name": "hide", "class": "file", "path": "/src/secret*", "action": "deny", "errno": "EACCES"}]}
JSON
	N=2000 pathpage_race --policy p.json
	# the remap attempts over a live page were refused and counted
	[ "$(jq .supervisor.refused r.json)" -gt 1 ]
	# an unprivileged invoker's run holds the same
	[ "$(id -u)" = 0 ] || return 0
	UDIR=$(mktemp -d /tmp/sbx-pathpage.XXXXXX)
	cp -r src p.json "$UDIR" && chmod -R a+rwX "$UDIR" && cd "$UDIR"
	AS="$SBX_AS_NOBODY SBX_STORE=$UDIR/store" N=1000 pathpage_race --policy p.json
	cd / && rm -rf "$UDIR"
}

@test "co-process: the decided path's page is out of the guest's reach (mprotect, /proc/self/mem, remap)" {
	mkdir -p src && echo secret >src/secret.txt
	cat >co.py <<'PY'
import json, sys
for line in sys.stdin:
    ev = json.loads(line)
    deny = any(p == "/src/secret.txt" for p in ev["path"] if isinstance(p, str))
    out = {"id": ev["id"], "action": "deny" if deny else "allow"}
    print(json.dumps(out), flush=True)
PY
	N=500 pathpage_race --inspect-timeout 60000 --inspect-exec "python3 $PWD/co.py"
}

@test "a refused clone3 is in the trace and the refusal count; the C library falls back to clone" {
	run sbx-run --ephemeral --trace t.jsonl --trace-level exec --result r.json -- "$GUESTS/escape_pathpage" mprotect /ns/x 1
	assert_success
	run jq -s '[.[] | select(.name == "clone3" and .action == "denied" and .errno == "ENOSYS")] | length' t.jsonl
	assert_output 1
	[ "$(jq .supervisor.refused r.json)" -eq 1 ]
}

# A co-process that denies /DATA/secret.txt by name, as written or resolved.
coproc_secret() {
	mkdir -p data && echo topsecret >data/secret.txt && echo fine >data/fine.txt
	cat >co.py <<'PY'
import json, sys
log = open(sys.argv[1], "a") if len(sys.argv) > 1 else None
for line in sys.stdin:
    ev = json.loads(line)
    if log:
        print(ev["name"], json.dumps(ev.get("real")), file=log, flush=True)
    names = [p for p in ev["path"] + ev.get("real", []) if isinstance(p, str)]
    deny = "/DATA/secret.txt" in names
    print(json.dumps({"id": ev["id"], "action": "deny" if deny else "allow"}), flush=True)
PY
}

@test "co-process: a denied file is not reached by another spelling, a symlink, a dirfd or /proc/self/root" {
	coproc_secret
	run sbx-run --ephemeral --ro "$PWD/data:/DATA" --inspect-timeout 60000 --inspect-exec "python3 $PWD/co.py" -- /bin/sh -c '
		mkdir "$(printf "/tmp/\377")"; ln -s /DATA/secret.txt /tmp/l; ln -s /DATA /tmp/d
		for p in "$(printf "/tmp/\377")/../../DATA/secret.txt" /tmp/l /tmp/d/secret.txt \
			/proc/self/root/DATA/secret.txt /proc/self/cwd/../DATA/secret.txt; do
			cat "$p" 2>/dev/null && echo "ESCAPED: $p"
		done
		python3 -c "
import os
fd = os.open(\"/tmp\", os.O_RDONLY)
try:
    os.open(\"../DATA/secret.txt\", os.O_RDONLY, dir_fd=fd); print(\"ESCAPED: dirfd\")
except OSError as e:
    print(\"dirfd:\", e.strerror)
"
		cat /DATA/fine.txt /tmp/d/fine.txt; cat /tmp/l/../fine.txt'
	refute_output --partial ESCAPED
	assert_line "dirfd: Operation not permitted"
	assert_line "fine"
	assert_line --partial "/tmp/l/../fine.txt: Not a directory"
	[ "$(echo "$output" | grep -c '^fine$')" -eq 2 ]
}

@test "co-process: --inspect-classes names what it is sent; read events come when asked" {
	coproc_secret
	run sbx-run --ephemeral --ro "$PWD/data:/DATA" --inspect-classes file,read \
		--inspect-timeout 60000 --inspect-exec "python3 $PWD/co.py $PWD/events" -- /bin/cat /DATA/fine.txt
	assert_success
	assert_output "fine"
	run grep -c '^read ' events
	[ "$output" -ge 1 ]
	# the resolved form of each path comes with it
	grep -qx 'openat \["/DATA/fine.txt", null\]' events
	run sbx-run --ephemeral --inspect-classes file,bogus --inspect-exec cat -- /bin/true
	assert_failure 125
	assert_output --partial 'sbx-run: error: --inspect-classes: unknown class "bogus"'
	run sbx-run --ephemeral --inspect-classes refused --inspect-exec cat -- /bin/true
	assert_failure 125
}

@test "policy: a decided open that a signal interrupts is restarted by the kernel and opens its file" {
	printf '{"rules": [{"name": "hide", "class": "file", "path": "/src/secret*", "action": "deny"}]}' >p.json
	run sbx-run --ephemeral --policy p.json -- "$GUESTS/run_fifo_restart"
	assert_success
	assert_output "open: ok, read x, handler ran: yes"
}

@test "policy: a guest at its descriptor limit gets EMFILE for a decided call, and the run goes on" {
	mkdir -p data && echo fine >data/fine.txt
	printf '{"rules": [{"name": "hide", "class": "file", "path": "/src/secret*", "action": "deny"}]}' >p.json
	run sbx-run --ephemeral --ro "$PWD/data:/DATA" --policy p.json -- /usr/bin/python3 -c '
import os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
fds = []
try:
    while True:
        fds.append(os.open("/DATA/fine.txt", os.O_RDONLY))
except OSError as e:
    print("open at the limit:", e.strerror)
os.close(fds.pop())
print("after one close:", os.read(os.open("/DATA/fine.txt", os.O_RDONLY), 10).decode().strip())'
	assert_success
	assert_output "open at the limit: Too many open files
after one close: fine"
}
