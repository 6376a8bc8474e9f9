#!/usr/bin/env bats
# Level file's lookups served by seccomp user notification (SBX_FILE_TRACE=notify,
# trace/sv/notify.c): the supervisor opens or looks up the very path it records,
# as the guest's kernel would, and what it cannot serve so goes to the ptrace stop.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

contained() {
	run sbx-run --ephemeral --trace t.jsonl --trace-level file --result r.json -- "$@"
	assert_success
	assert_line "RESULT: contained"
	refute_output --partial "ESCAPED"
}

count() { jq -s "[.[] | select($1)] | length" t.jsonl; }

traced() {
	[ "$(count ".ev == \"sys\" and .name == \"$1\" and .path == \"$2\" and .errno == \"$3\"")" -gt 0 ]
}

notified() { jq -r '.supervisor.notified // 0' r.json; }

@test "a thread swapping the path buffer cannot part the recorded path from the file opened" {
	mkdir w
	echo AAAA > w/a
	echo BBBB > w/b
	SBX_FILE_TRACE=notify run sbx-run --ephemeral --rw "$PWD/w:/w" --trace t.jsonl --trace-level file \
		--result r.json -- "$GUESTS/escape_notify" swap /w/a /w/b 3000
	assert_success
	assert_line "RESULT: contained"
	ha=$(sha256sum < w/a | cut -d' ' -f1)
	hb=$(sha256sum < w/b | cut -d' ' -f1)
	# every open the trace names /w/a holds A's bytes, every /w/b one B's: the
	# path was read once, and that string was opened
	[ "$(count ".name == \"openat\" and .path == \"/w/a\" and .sha256 == \"$ha\"")" -gt 0 ]
	[ "$(count ".name == \"openat\" and .path == \"/w/b\" and .sha256 == \"$hb\"")" -gt 0 ]
	[ "$(count ".name == \"openat\" and ((.path == \"/w/a\" and .sha256 != \"$ha\") or (.path == \"/w/b\" and .sha256 != \"$hb\"))")" -eq 0 ]
	[ "$(notified)" -gt 3000 ]
	# the forbidden file's flips are judged on what is opened: never read, and
	# recorded as refused exactly when it was the path tried
	SBX_FILE_TRACE=notify contained "$GUESTS/escape_toctou" /etc/shadow 3000
	assert_line --partial " 0 of the forbidden one"
	[ "$(count '.name == "openat" and .path == "/etc/shadow" and .result >= 0')" -eq 0 ]
	[ "$(count '.name == "openat" and .path == "/ns/allowed" and .result < 0')" -eq 0 ]
}

@test "an open of a denied path and O_CREAT in a read-only bind fail as the kernel says" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	SBX_FILE_TRACE=notify contained "$GUESTS/escape_read"
	assert_line "contained: read /etc/shadow (Permission denied)"
	traced openat /etc/shadow EACCES
	[ "$(notified)" -gt 0 ]
	mkdir ro
	SBX_FILE_TRACE=notify run sbx-run --ephemeral --ro "$PWD/ro:/data" --trace t.jsonl --trace-level file \
		--result r.json -- "$GUESTS/escape_write" /data
	assert_success
	assert_line "RESULT: contained"
	[ -z "$(ls ro)" ]
	traced openat /data/sbx-escape EROFS
	[ "$(notified)" -gt 0 ]
	# a read-only open and an access check of the bind, served: what the kernel says
	SBX_FILE_TRACE=notify run sbx-run --ephemeral --ro "$PWD/ro:/data" --result r.json -- \
		/bin/sh -c 'test -w /data && echo writable; test -r /data && echo readable; cat /data/none'
	assert_failure
	assert_line readable
	refute_line writable
	assert_line --partial "No such file or directory"
}

@test "/proc/self/fd, /dev/fd and symlinks into /proc name the guest's own objects" {
	mkdir w
	SBX_FILE_TRACE=notify run sbx-run --ephemeral --rw "$PWD/w:/w" --trace t.jsonl --trace-level file \
		--result r.json -- "$GUESTS/escape_notify" procfd /w
	assert_success
	assert_line "RESULT: contained"
	refute_output --partial ESCAPED
	assert_line "contained: a symlink to /proc/self/fd/N"
	assert_line "contained: /dev/fd/N"
	assert_line "contained: O_PATH"
	assert_line "contained: a moved directory's descriptor"
	[ "$(notified)" -gt 0 ]
	# handed back to the ptrace stop, recorded as any: opened, hashed
	[ "$(count '.name == "openat" and (.path | startswith("/proc/self/fd/")) and .result >= 0 and .sha256')" -gt 0 ]
}

@test "threads killed in the middle of their notified calls leave the run whole" {
	SBX_FILE_TRACE=notify run sbx-run --ephemeral --trace t.jsonl --trace-level file --result r.json -- \
		"$GUESTS/escape_notify" dying 40
	assert_success
	assert_line "rounds: 40"
	assert_line "RESULT: contained"
	[ "$(notified)" -gt 40 ]
	run sbx-trace verify t.jsonl
	assert_success
}

@test "the trace and the guest's view are the ptrace stops' own: same events, paths, results, hashes" {
	mkdir w
	echo AAAA > w/a
	echo BBBB > w/b
	printf 'int f(void) { return 1; }\n' > w/m.c
	chmod 0640 w/b
	script='cd /w; cat a ./b ../w/a; ls -la /w /etc/hostname >/dev/null
		stat -c "%n %u %g %a %s %F %h %i" /etc/passwd /w /w/a /w/b /tmp /dev/null /bin/sh /nonexist 2>&1
		stat -L -c "%n %F %i" /bin/sh 2>&1
		for f in /etc/shadow /bin/sh /w/a /w /nonexist/x /dev/null; do
			test -r $f && echo "r $f"; test -w $f && echo "w $f"; test -x $f && echo "x $f"; done
		cat /proc/self/fd/0 </w/a; gcc -c -o /w/m.o /w/m.c && echo built; rm -f /w/m.o'
	norm='select(.ev == "sys") | [.name, (.path // "" | gsub("/tmp/cc[A-Za-z0-9]+[.]"; "/tmp/cc.")),
		.path2, .result, .errno, .exists, (if (.path // "" | startswith("/proc/")) then null else .sha256 end),
		.action, .fd, .created]'
	for m in ptrace notify; do
		SBX_FILE_TRACE=$m run sbx-run --ephemeral --rw "$PWD/w:/w" --trace $m.jsonl --trace-level file \
			--result r.json -- /bin/sh -c "$script"
		assert_success
		echo "$output" > $m.out
		jq -c "$norm" $m.jsonl | sort > $m.events
		[ "$m" = ptrace ] || [ "$(notified)" -gt 100 ]
	done
	diff ptrace.out notify.out
	diff ptrace.events notify.events
	[ "$(wc -l < notify.events)" -gt 100 ]
}
