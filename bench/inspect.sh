#!/bin/sh
# Cost of syscall inspection: N openat calls inspected by the C API
# (inspect_host), by a --policy file and by an --inspect-exec co-process, next to
# the same loop natively, under strace --seccomp-bpf, and one bare seccomp ptrace
# stop measured in the same run. Prints µs per inspected call.
# usage: bench/inspect.sh [N]   (SBX_BUILD: the build dir, default ./build)
set -eu
N=${1:-200000}
B=${SBX_BUILD:-$(pwd)/build}
G=$B/guests
T=$(mktemp -d /tmp/sbx-bench-inspect.XXXXXX)
trap 'rm -rf "$T"' EXIT
export SBX_STORE=$T/store

# a bare stop: seccomp RET_TRACE on openat, PTRACE_CONT, nothing else
cat >"$T/bare.c" <<'C'
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void loop(long n) { for (long i = 0; i < n; i++) { int fd = openat(AT_FDCWD, "/nonexistent", O_RDONLY); if (fd >= 0) close(fd); } }
int main(int argc, char **argv)
{
	long n = atol(argv[1]);
	double t0 = now(), native, traced;
	loop(n);
	native = now() - t0;
	pid_t p = fork();
	if (p == 0) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {4, f};
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
		loop(n);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	ptrace(PTRACE_SETOPTIONS, p, 0, PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL);
	t0 = now();
	ptrace(PTRACE_CONT, p, 0, 0);
	while (waitpid(p, &st, 0) == p && !WIFEXITED(st) && !WIFSIGNALED(st))
		ptrace(PTRACE_CONT, p, 0, 0);
	traced = now() - t0;
	printf("%.6f %.6f\n", native, traced);
	return 0;
}
C
# a co-process in C, so the protocol is measured, not a shell loop
cat >"$T/coproc.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
	char line[65536];
	setvbuf(stdout, NULL, _IONBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		char *id = strstr(line, "\"id\":");
		printf("{\"id\":%lld,\"action\":\"allow\"}\n", id ? atoll(id + 5) : 0LL);
	}
	return 0;
}
C
cc -O2 -o "$T/bare" "$T/bare.c"
cc -O2 -o "$T/coproc" "$T/coproc.c"
printf '{"rules": [{"name": "probe", "syscall": "openat", "path": "/nonexistent", "action": "deny", "errno": "ENOENT"}]}\n' >"$T/p.json"

secs() { # command... -> wall seconds
	s=$(date +%s%N)
	"$@" >/dev/null 2>&1 || echo "bench/inspect.sh: $1 failed" >&2
	e=$(date +%s%N)
	echo "$(( (e - s) / 1000 ))" | awk '{printf "%.3f", $1 / 1e6}'
}

set -- $("$T/bare" "$N")
native=$1
bare=$(awk -v t="$2" -v n="$native" -v c="$N" 'BEGIN { printf "%.2f", (t - n) * 1e6 / c }')
capi=$(secs "$G/inspect_host" count "$G/inspect_loop" "$N")
policy=$(secs "$B/bin/sbx-run" --ephemeral --policy "$T/p.json" -- "$G/inspect_loop" "$N")
coproc=$(secs "$B/bin/sbx-run" --ephemeral --inspect-exec "$T/coproc" -- "$G/inspect_loop" "$N")
strace_s=$(secs strace -f --seccomp-bpf -e trace=openat -o /dev/null "$G/inspect_loop" "$N")

per() { awk -v t="$1" -v n="$native" -v c="$N" 'BEGIN { printf "%.2f", (t - n) * 1e6 / c }'; }
echo "openat calls: $N   native loop: ${native}s"
printf '%-34s %10s %14s %10s\n' mode "wall (s)" "µs per call" "× bare"
printf '%-34s %10s %14s %10s\n' "bare seccomp ptrace stop" "-" "$bare" "1.00"
for m in "C API (inspect_host count):$capi" "policy file (--policy):$policy" \
	"co-process (--inspect-exec):$coproc" "strace -f --seccomp-bpf:$strace_s"; do
	name=${m%:*}
	t=${m##*:}
	u=$(per "$t")
	printf '%-34s %10s %14s %10s\n' "$name" "$t" "$u" "$(awk -v u="$u" -v b="$bare" 'BEGIN { printf "%.2f", u / b }')"
done
