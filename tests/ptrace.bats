#!/usr/bin/env bats
# Tracers inside the run: the supervisor serves a guest tracer's ptrace on the
# run's own tasks (trace/sv/nest.c), so LeakSanitizer, strace and debuggers
# work, and what a nested tracer changes is still judged by sbx.
load helpers

setup() {
	sbx_setup_store
	cd "$BATS_TEST_TMPDIR"
}

teardown() {
	[ -z "${UDIR:-}" ] || rm -rf "$UDIR"
}

# the leak report, addresses and pids blanked, as natively
leak_report() { grep -v '^==[0-9]*==HINT' "$1" | sed 's/0x[0-9a-f]*/ADDR/g; s/==[0-9]*==/==PID==/g'; }

@test "LeakSanitizer prints its leak report and exits as natively (1 and 5 threads)" {
	for n in 0 4; do
		run "$GUESTS/ptrace_leak_asan" "$n"
		native=$status
		[ "$native" -ne 0 ]
		printf '%s\n' "$output" > native.txt
		run sbx-run --ephemeral -- "$GUESTS/ptrace_leak_asan" "$n"
		assert_equal "$status" "$native"
		assert_line "threads $n"
		assert_line --partial "ERROR: LeakSanitizer: detected memory leaks"
		assert_line --partial "SUMMARY: AddressSanitizer: 7 byte(s) leaked in 1 allocation(s)."
		refute_output --partial "fatal error"
		printf '%s\n' "$output" > sbx.txt
		diff <(leak_report native.txt) <(leak_report sbx.txt)
	done
}

# an unprivileged invoking user (runs as nobody); its store in a 0777 dir
as_user() {
	$SBX_AS_NOBODY SBX_STORE="$UDIR/store" PATH="$PATH" HOME="$UDIR" "$@"
}

@test "unprivileged: LeakSanitizer, strace and gdb as nobody" {
	UDIR=$(mktemp -d /tmp/sbx-unpriv.XXXXXX)
	chmod 0777 "$UDIR"
	run as_user sbx-run --ephemeral -- "$GUESTS/ptrace_leak_asan" 2
	assert_equal "$status" 1
	assert_line --partial "SUMMARY: AddressSanitizer: 7 byte(s) leaked in 1 allocation(s)."
	run as_user sbx-run --ephemeral -- sh -c 'strace -f -o /ns/LOG sh -c "echo hi"; grep -c "+++ exited with 0" /ns/LOG'
	assert_success
	assert_output "hi
1"
	run as_user sbx-run --ephemeral -- gdb -nx -batch -ex run -ex bt "$GUESTS/ptrace_crash"
	assert_success
	assert_line --regexp '^#[0-9]+ +0x[0-9a-f]+ in main \(\) at .*ptrace_crash.c:17$'
}

@test "a path a nested tracer rewrites (stopped, or at the call's entry stop) is judged as written" {
	cat > deny.json <<'JSON'
{"version": 1, "rules": [{"name": "hosts", "path": "/etc/hosts", "action": "deny", "errno": "EACCES"}]}
JSON
	for how in stop entry-poke entry-regs; do
		# untouched, the tracee opens the allowed file
		run sbx-run --ephemeral --policy deny.json -- "$GUESTS/ptrace_rewrite" /etc/hostname - "$how"
		assert_success
		assert_output "open: ok"
		# rewritten by its tracer: the policy meets the path it opens
		run sbx-run --ephemeral --policy deny.json --trace t.jsonl --trace-level file -- \
			"$GUESTS/ptrace_rewrite" /etc/hostname /etc/hosts "$how"
		assert_success
		assert_output "open: Permission denied"
		[ "$(jq -s '[.[] | select(.name == "openat" and .path == "/etc/hosts" and .action == "denied")] | length' t.jsonl)" -eq 1 ]
		[ "$(jq -s '[.[] | select(.name == "openat" and .path == "/etc/hostname")] | length' t.jsonl)" -eq 0 ]
	done
}

@test "strace -f inside the run logs the shell, its child's execve and openat, their exits" {
	run sbx-run --ephemeral -- sh -c 'strace -f -o /ns/LOG sh -c "ls /ns; echo hi"; echo strace=$?; cat /ns/LOG'
	assert_success
	assert_line "LOG"
	assert_line "hi"
	assert_line "strace=0"
	assert_line --regexp '^[0-9]+ +execve\("/usr/bin/sh", \["sh", "-c", "ls /ns; echo hi"\].* = 0$'
	# the child: its own pid, its exec and opens, its exit
	child=$(printf '%s\n' "$output" | sed -n 's/^\([0-9]*\) *execve("\/usr\/bin\/ls".*/\1/p')
	[ -n "$child" ]
	assert_line --regexp "^$child +openat\(AT_FDCWD, \"/ns\", .*\) = 3$"
	assert_line --regexp "^$child +\+\+\+ exited with 0 \+\+\+$"
	assert_line --regexp '^[0-9]+ +\+\+\+ exited with 0 \+\+\+$'
}

@test "gdb -batch inside the run: a backtrace through main at the abort and at a breakpoint" {
	run sbx-run --ephemeral -- gdb -nx -batch -ex run -ex bt "$GUESTS/ptrace_crash"
	assert_success
	assert_line "start"
	assert_line "Program received signal SIGABRT, Aborted."
	assert_line --regexp '^#[0-9]+ +0x[0-9a-f]+ in deeper \(n=0\) at .*ptrace_crash.c:9$'
	assert_line --regexp '^#[0-9]+ +0x[0-9a-f]+ in main \(\) at .*ptrace_crash.c:17$'
	run sbx-run --ephemeral -- gdb -nx -batch -ex 'break deeper' -ex run -ex bt -ex kill "$GUESTS/ptrace_crash"
	assert_success
	assert_line --regexp '^Breakpoint 1, deeper \(n=2\) at .*ptrace_crash.c:8$'
	assert_line --regexp '^#1 +0x[0-9a-f]+ in main \(\) at .*ptrace_crash.c:17$'
	assert_line --partial "killed]"
}

@test "a tracer that exits without detaching: its tracee runs on, or dies with it under EXITKILL" {
	run "$GUESTS/ptrace_leave"
	assert_output "tracee: exited 7"
	run sbx-run --ephemeral -- "$GUESTS/ptrace_leave"
	assert_success
	assert_output "tracee: exited 7"
	run "$GUESTS/ptrace_leave" exitkill
	assert_output "tracee: killed by 9"
	run sbx-run --ephemeral -- "$GUESTS/ptrace_leave" exitkill
	assert_success
	assert_output "tracee: killed by 9"
}

@test "--deterministic schedules the tasks itself: a guest's ptrace is refused there" {
	run sbx-run --ephemeral --deterministic --result r.json -- "$GUESTS/ptrace_leave"
	assert_equal "$status" 2
	assert_line "SEIZE: Operation not permitted"
	[ "$(jq .supervisor.refused r.json)" -ge 1 ]
}
