#!/usr/bin/env bats
# Syscall inspection (SPEC §6.3): the C API (inspect_host embeds libsbx), --policy
# and --inspect-exec.
load helpers

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
