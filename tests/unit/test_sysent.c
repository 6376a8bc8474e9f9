/* The syscall table agrees with the kernel headers and is self-consistent. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include "trace/trace.h"

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; \
	printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void check_nr(const char *name, long nr)
{
	const struct trace_sysinfo *s = trace_sys_by_name(name);
	CHECK(s && s->nr == nr, "%s: table %d, <sys/syscall.h> %ld", name, s ? s->nr : -1, nr);
}

int main(void)
{
	size_t n = trace_sys_count();
	CHECK(n >= 370, "table has %zu entries", n);
	for (size_t i = 0; i < n; i++) {
		const struct trace_sysinfo *s = trace_sys_at(i);
		CHECK(trace_sys_by_nr(s->nr) == s, "%s: by_nr(%d) mismatch", s->name, s->nr);
		CHECK(trace_sys_by_name(s->name) == s, "%s: by_name mismatch", s->name);
		int refused = !!(s->classes & TRACE_CLASS_REFUSED);
		CHECK(refused == (s->refuse_errno != 0), "%s: refused class and errno disagree", s->name);
		int dup = 0;
		for (size_t j = i + 1; j < n; j++)
			dup += trace_sys_at(j)->nr == s->nr;
		CHECK(!dup, "%s: duplicate number %d", s->name, s->nr);
	}
	CHECK(trace_sys_by_nr(-1) == NULL, "negative number");
	CHECK(trace_sys_by_nr(100000) == NULL, "huge number");
	CHECK(trace_sys_by_nr(0x40000000 | 2) == NULL, "x32 number");
	CHECK(trace_sys_by_name("nosuchcall") == NULL, "unknown name");
	CHECK(TRACE_SYS_openat == SYS_openat, "enum openat");
	/* boundary facts the filter relies on */
	const struct trace_sysinfo *s;
	s = trace_sys_by_name("exit_group");
	CHECK(s && !(s->classes & TRACE_CLASS_REFUSED), "exit_group never refused");
	s = trace_sys_by_name("ptrace");
	CHECK(s && s->refuse_errno == EPERM, "ptrace refused with EPERM");
	s = trace_sys_by_name("io_uring_setup");
	CHECK(s && s->refuse_errno == ENOSYS, "io_uring_setup refused with ENOSYS");
	s = trace_sys_by_name("openat");
	CHECK(s && (s->classes & TRACE_CLASS_FILE) && s->arg[1] == TRACE_ARG_PATH &&
	      s->arg[0] == TRACE_ARG_DIRFD, "openat args");
	s = trace_sys_by_name("execve");
	CHECK(s && (s->classes & TRACE_CLASS_PROCESS) && s->arg[0] == TRACE_ARG_PATH, "execve");
	/* every FILE-class syscall names at least one path argument */
	for (size_t i = 0; i < n; i++) {
		s = trace_sys_at(i);
		if (!(s->classes & TRACE_CLASS_FILE))
			continue;
		int paths = 0;
		for (int a = 0; a < 6; a++)
			paths += s->arg[a] == TRACE_ARG_PATH;
		CHECK(paths > 0, "%s: file class without a path argument", s->name);
	}
	/* storage facts: what a storing call stores is in its arguments */
	for (size_t i = 0; i < n; i++) {
		s = trace_sys_at(i);
		int out = trace_sys_arg(s, TRACE_ARG_OUTFD), in = trace_sys_arg(s, TRACE_ARG_INFD);
		int bytes = trace_sys_arg(s, TRACE_ARG_COUNT) >= 0 || trace_sys_arg(s, TRACE_ARG_LEN) >= 0 ||
			    trace_sys_arg(s, TRACE_ARG_IOV) >= 0;
		CHECK(out < 0 || ((s->classes & TRACE_CLASS_STORE) && bytes),
		      "%s: an out descriptor without the store class or a byte count", s->name);
		CHECK(!(s->classes & TRACE_CLASS_READ) || (in >= 0 && bytes),
		      "%s: a read-family call without an in descriptor and a byte count", s->name);
		CHECK((trace_sys_arg(s, TRACE_ARG_IOV) >= 0) == (trace_sys_arg(s, TRACE_ARG_IOVCNT) >= 0),
		      "%s: an iovec without its length, or the reverse", s->name);
	}
	static const char *const storing[] = { "write", "pwrite64", "writev", "pwritev", "pwritev2",
		"fallocate", "sendfile", "splice", "copy_file_range", "mmap", "mremap", "open", "openat",
		"creat", "mkdir", "mkdirat", "mknod", "mknodat", "symlink", "symlinkat", "link", "linkat",
		"setxattr", "lsetxattr", "fsetxattr" };
	for (size_t i = 0; i < sizeof storing / sizeof storing[0]; i++) {
		s = trace_sys_by_name(storing[i]);
		CHECK(s && (s->classes & TRACE_CLASS_STORE), "%s: may store, not in the store class", storing[i]);
	}
	static const char *const aio[] = { "io_setup", "io_submit", "io_getevents", "io_pgetevents",
		"io_cancel", "io_destroy", "setxattrat" };
	for (size_t i = 0; i < sizeof aio / sizeof aio[0]; i++) {
		s = trace_sys_by_name(aio[i]);
		CHECK(s && s->refuse_errno == ENOSYS, "%s: not refused with ENOSYS", aio[i]);
	}
	/* every table entry the system header also knows has the same number */
#ifdef SYS_read
	check_nr("read", SYS_read);
#endif
#ifdef SYS_write
	check_nr("write", SYS_write);
#endif
#ifdef SYS_open
	check_nr("open", SYS_open);
#endif
#ifdef SYS_close
	check_nr("close", SYS_close);
#endif
#ifdef SYS_stat
	check_nr("stat", SYS_stat);
#endif
#ifdef SYS_fstat
	check_nr("fstat", SYS_fstat);
#endif
#ifdef SYS_lstat
	check_nr("lstat", SYS_lstat);
#endif
#ifdef SYS_poll
	check_nr("poll", SYS_poll);
#endif
#ifdef SYS_lseek
	check_nr("lseek", SYS_lseek);
#endif
#ifdef SYS_mmap
	check_nr("mmap", SYS_mmap);
#endif
#ifdef SYS_mprotect
	check_nr("mprotect", SYS_mprotect);
#endif
#ifdef SYS_munmap
	check_nr("munmap", SYS_munmap);
#endif
#ifdef SYS_brk
	check_nr("brk", SYS_brk);
#endif
#ifdef SYS_rt_sigaction
	check_nr("rt_sigaction", SYS_rt_sigaction);
#endif
#ifdef SYS_rt_sigprocmask
	check_nr("rt_sigprocmask", SYS_rt_sigprocmask);
#endif
#ifdef SYS_rt_sigreturn
	check_nr("rt_sigreturn", SYS_rt_sigreturn);
#endif
#ifdef SYS_ioctl
	check_nr("ioctl", SYS_ioctl);
#endif
#ifdef SYS_pread64
	check_nr("pread64", SYS_pread64);
#endif
#ifdef SYS_pwrite64
	check_nr("pwrite64", SYS_pwrite64);
#endif
#ifdef SYS_readv
	check_nr("readv", SYS_readv);
#endif
#ifdef SYS_writev
	check_nr("writev", SYS_writev);
#endif
#ifdef SYS_access
	check_nr("access", SYS_access);
#endif
#ifdef SYS_pipe
	check_nr("pipe", SYS_pipe);
#endif
#ifdef SYS_select
	check_nr("select", SYS_select);
#endif
#ifdef SYS_sched_yield
	check_nr("sched_yield", SYS_sched_yield);
#endif
#ifdef SYS_mremap
	check_nr("mremap", SYS_mremap);
#endif
#ifdef SYS_msync
	check_nr("msync", SYS_msync);
#endif
#ifdef SYS_mincore
	check_nr("mincore", SYS_mincore);
#endif
#ifdef SYS_madvise
	check_nr("madvise", SYS_madvise);
#endif
#ifdef SYS_shmget
	check_nr("shmget", SYS_shmget);
#endif
#ifdef SYS_shmat
	check_nr("shmat", SYS_shmat);
#endif
#ifdef SYS_shmctl
	check_nr("shmctl", SYS_shmctl);
#endif
#ifdef SYS_dup
	check_nr("dup", SYS_dup);
#endif
#ifdef SYS_dup2
	check_nr("dup2", SYS_dup2);
#endif
#ifdef SYS_pause
	check_nr("pause", SYS_pause);
#endif
#ifdef SYS_nanosleep
	check_nr("nanosleep", SYS_nanosleep);
#endif
#ifdef SYS_getitimer
	check_nr("getitimer", SYS_getitimer);
#endif
#ifdef SYS_alarm
	check_nr("alarm", SYS_alarm);
#endif
#ifdef SYS_setitimer
	check_nr("setitimer", SYS_setitimer);
#endif
#ifdef SYS_getpid
	check_nr("getpid", SYS_getpid);
#endif
#ifdef SYS_sendfile
	check_nr("sendfile", SYS_sendfile);
#endif
#ifdef SYS_socket
	check_nr("socket", SYS_socket);
#endif
#ifdef SYS_connect
	check_nr("connect", SYS_connect);
#endif
#ifdef SYS_accept
	check_nr("accept", SYS_accept);
#endif
#ifdef SYS_sendto
	check_nr("sendto", SYS_sendto);
#endif
#ifdef SYS_recvfrom
	check_nr("recvfrom", SYS_recvfrom);
#endif
#ifdef SYS_sendmsg
	check_nr("sendmsg", SYS_sendmsg);
#endif
#ifdef SYS_recvmsg
	check_nr("recvmsg", SYS_recvmsg);
#endif
#ifdef SYS_shutdown
	check_nr("shutdown", SYS_shutdown);
#endif
#ifdef SYS_bind
	check_nr("bind", SYS_bind);
#endif
#ifdef SYS_listen
	check_nr("listen", SYS_listen);
#endif
#ifdef SYS_getsockname
	check_nr("getsockname", SYS_getsockname);
#endif
#ifdef SYS_getpeername
	check_nr("getpeername", SYS_getpeername);
#endif
#ifdef SYS_socketpair
	check_nr("socketpair", SYS_socketpair);
#endif
#ifdef SYS_setsockopt
	check_nr("setsockopt", SYS_setsockopt);
#endif
#ifdef SYS_getsockopt
	check_nr("getsockopt", SYS_getsockopt);
#endif
#ifdef SYS_clone
	check_nr("clone", SYS_clone);
#endif
#ifdef SYS_fork
	check_nr("fork", SYS_fork);
#endif
#ifdef SYS_vfork
	check_nr("vfork", SYS_vfork);
#endif
#ifdef SYS_execve
	check_nr("execve", SYS_execve);
#endif
#ifdef SYS_exit
	check_nr("exit", SYS_exit);
#endif
#ifdef SYS_wait4
	check_nr("wait4", SYS_wait4);
#endif
#ifdef SYS_kill
	check_nr("kill", SYS_kill);
#endif
#ifdef SYS_uname
	check_nr("uname", SYS_uname);
#endif
#ifdef SYS_semget
	check_nr("semget", SYS_semget);
#endif
#ifdef SYS_semop
	check_nr("semop", SYS_semop);
#endif
#ifdef SYS_semctl
	check_nr("semctl", SYS_semctl);
#endif
#ifdef SYS_shmdt
	check_nr("shmdt", SYS_shmdt);
#endif
#ifdef SYS_msgget
	check_nr("msgget", SYS_msgget);
#endif
#ifdef SYS_msgsnd
	check_nr("msgsnd", SYS_msgsnd);
#endif
#ifdef SYS_msgrcv
	check_nr("msgrcv", SYS_msgrcv);
#endif
#ifdef SYS_msgctl
	check_nr("msgctl", SYS_msgctl);
#endif
#ifdef SYS_fcntl
	check_nr("fcntl", SYS_fcntl);
#endif
#ifdef SYS_flock
	check_nr("flock", SYS_flock);
#endif
#ifdef SYS_fsync
	check_nr("fsync", SYS_fsync);
#endif
#ifdef SYS_fdatasync
	check_nr("fdatasync", SYS_fdatasync);
#endif
#ifdef SYS_truncate
	check_nr("truncate", SYS_truncate);
#endif
#ifdef SYS_ftruncate
	check_nr("ftruncate", SYS_ftruncate);
#endif
#ifdef SYS_getdents
	check_nr("getdents", SYS_getdents);
#endif
#ifdef SYS_getcwd
	check_nr("getcwd", SYS_getcwd);
#endif
#ifdef SYS_chdir
	check_nr("chdir", SYS_chdir);
#endif
#ifdef SYS_fchdir
	check_nr("fchdir", SYS_fchdir);
#endif
#ifdef SYS_rename
	check_nr("rename", SYS_rename);
#endif
#ifdef SYS_mkdir
	check_nr("mkdir", SYS_mkdir);
#endif
#ifdef SYS_rmdir
	check_nr("rmdir", SYS_rmdir);
#endif
#ifdef SYS_creat
	check_nr("creat", SYS_creat);
#endif
#ifdef SYS_link
	check_nr("link", SYS_link);
#endif
#ifdef SYS_unlink
	check_nr("unlink", SYS_unlink);
#endif
#ifdef SYS_symlink
	check_nr("symlink", SYS_symlink);
#endif
#ifdef SYS_readlink
	check_nr("readlink", SYS_readlink);
#endif
#ifdef SYS_chmod
	check_nr("chmod", SYS_chmod);
#endif
#ifdef SYS_fchmod
	check_nr("fchmod", SYS_fchmod);
#endif
#ifdef SYS_chown
	check_nr("chown", SYS_chown);
#endif
#ifdef SYS_fchown
	check_nr("fchown", SYS_fchown);
#endif
#ifdef SYS_lchown
	check_nr("lchown", SYS_lchown);
#endif
#ifdef SYS_umask
	check_nr("umask", SYS_umask);
#endif
#ifdef SYS_gettimeofday
	check_nr("gettimeofday", SYS_gettimeofday);
#endif
#ifdef SYS_getrlimit
	check_nr("getrlimit", SYS_getrlimit);
#endif
#ifdef SYS_getrusage
	check_nr("getrusage", SYS_getrusage);
#endif
#ifdef SYS_sysinfo
	check_nr("sysinfo", SYS_sysinfo);
#endif
#ifdef SYS_times
	check_nr("times", SYS_times);
#endif
#ifdef SYS_ptrace
	check_nr("ptrace", SYS_ptrace);
#endif
#ifdef SYS_getuid
	check_nr("getuid", SYS_getuid);
#endif
#ifdef SYS_syslog
	check_nr("syslog", SYS_syslog);
#endif
#ifdef SYS_getgid
	check_nr("getgid", SYS_getgid);
#endif
#ifdef SYS_setuid
	check_nr("setuid", SYS_setuid);
#endif
#ifdef SYS_setgid
	check_nr("setgid", SYS_setgid);
#endif
#ifdef SYS_geteuid
	check_nr("geteuid", SYS_geteuid);
#endif
#ifdef SYS_getegid
	check_nr("getegid", SYS_getegid);
#endif
#ifdef SYS_setpgid
	check_nr("setpgid", SYS_setpgid);
#endif
#ifdef SYS_getppid
	check_nr("getppid", SYS_getppid);
#endif
#ifdef SYS_getpgrp
	check_nr("getpgrp", SYS_getpgrp);
#endif
#ifdef SYS_setsid
	check_nr("setsid", SYS_setsid);
#endif
#ifdef SYS_setreuid
	check_nr("setreuid", SYS_setreuid);
#endif
#ifdef SYS_setregid
	check_nr("setregid", SYS_setregid);
#endif
#ifdef SYS_getgroups
	check_nr("getgroups", SYS_getgroups);
#endif
#ifdef SYS_setgroups
	check_nr("setgroups", SYS_setgroups);
#endif
#ifdef SYS_setresuid
	check_nr("setresuid", SYS_setresuid);
#endif
#ifdef SYS_getresuid
	check_nr("getresuid", SYS_getresuid);
#endif
#ifdef SYS_setresgid
	check_nr("setresgid", SYS_setresgid);
#endif
#ifdef SYS_getresgid
	check_nr("getresgid", SYS_getresgid);
#endif
#ifdef SYS_getpgid
	check_nr("getpgid", SYS_getpgid);
#endif
#ifdef SYS_setfsuid
	check_nr("setfsuid", SYS_setfsuid);
#endif
#ifdef SYS_setfsgid
	check_nr("setfsgid", SYS_setfsgid);
#endif
#ifdef SYS_getsid
	check_nr("getsid", SYS_getsid);
#endif
#ifdef SYS_capget
	check_nr("capget", SYS_capget);
#endif
#ifdef SYS_capset
	check_nr("capset", SYS_capset);
#endif
#ifdef SYS_rt_sigpending
	check_nr("rt_sigpending", SYS_rt_sigpending);
#endif
#ifdef SYS_rt_sigtimedwait
	check_nr("rt_sigtimedwait", SYS_rt_sigtimedwait);
#endif
#ifdef SYS_rt_sigqueueinfo
	check_nr("rt_sigqueueinfo", SYS_rt_sigqueueinfo);
#endif
#ifdef SYS_rt_sigsuspend
	check_nr("rt_sigsuspend", SYS_rt_sigsuspend);
#endif
#ifdef SYS_sigaltstack
	check_nr("sigaltstack", SYS_sigaltstack);
#endif
#ifdef SYS_utime
	check_nr("utime", SYS_utime);
#endif
#ifdef SYS_mknod
	check_nr("mknod", SYS_mknod);
#endif
#ifdef SYS_uselib
	check_nr("uselib", SYS_uselib);
#endif
#ifdef SYS_personality
	check_nr("personality", SYS_personality);
#endif
#ifdef SYS_ustat
	check_nr("ustat", SYS_ustat);
#endif
#ifdef SYS_statfs
	check_nr("statfs", SYS_statfs);
#endif
#ifdef SYS_fstatfs
	check_nr("fstatfs", SYS_fstatfs);
#endif
#ifdef SYS_sysfs
	check_nr("sysfs", SYS_sysfs);
#endif
#ifdef SYS_getpriority
	check_nr("getpriority", SYS_getpriority);
#endif
#ifdef SYS_setpriority
	check_nr("setpriority", SYS_setpriority);
#endif
#ifdef SYS_sched_setparam
	check_nr("sched_setparam", SYS_sched_setparam);
#endif
#ifdef SYS_sched_getparam
	check_nr("sched_getparam", SYS_sched_getparam);
#endif
#ifdef SYS_sched_setscheduler
	check_nr("sched_setscheduler", SYS_sched_setscheduler);
#endif
#ifdef SYS_sched_getscheduler
	check_nr("sched_getscheduler", SYS_sched_getscheduler);
#endif
#ifdef SYS_sched_get_priority_max
	check_nr("sched_get_priority_max", SYS_sched_get_priority_max);
#endif
#ifdef SYS_sched_get_priority_min
	check_nr("sched_get_priority_min", SYS_sched_get_priority_min);
#endif
#ifdef SYS_sched_rr_get_interval
	check_nr("sched_rr_get_interval", SYS_sched_rr_get_interval);
#endif
#ifdef SYS_mlock
	check_nr("mlock", SYS_mlock);
#endif
#ifdef SYS_munlock
	check_nr("munlock", SYS_munlock);
#endif
#ifdef SYS_mlockall
	check_nr("mlockall", SYS_mlockall);
#endif
#ifdef SYS_munlockall
	check_nr("munlockall", SYS_munlockall);
#endif
#ifdef SYS_vhangup
	check_nr("vhangup", SYS_vhangup);
#endif
#ifdef SYS_modify_ldt
	check_nr("modify_ldt", SYS_modify_ldt);
#endif
#ifdef SYS_pivot_root
	check_nr("pivot_root", SYS_pivot_root);
#endif
#ifdef SYS__sysctl
	check_nr("_sysctl", SYS__sysctl);
#endif
#ifdef SYS_prctl
	check_nr("prctl", SYS_prctl);
#endif
#ifdef SYS_arch_prctl
	check_nr("arch_prctl", SYS_arch_prctl);
#endif
#ifdef SYS_adjtimex
	check_nr("adjtimex", SYS_adjtimex);
#endif
#ifdef SYS_setrlimit
	check_nr("setrlimit", SYS_setrlimit);
#endif
#ifdef SYS_chroot
	check_nr("chroot", SYS_chroot);
#endif
#ifdef SYS_sync
	check_nr("sync", SYS_sync);
#endif
#ifdef SYS_acct
	check_nr("acct", SYS_acct);
#endif
#ifdef SYS_settimeofday
	check_nr("settimeofday", SYS_settimeofday);
#endif
#ifdef SYS_mount
	check_nr("mount", SYS_mount);
#endif
#ifdef SYS_umount2
	check_nr("umount2", SYS_umount2);
#endif
#ifdef SYS_swapon
	check_nr("swapon", SYS_swapon);
#endif
#ifdef SYS_swapoff
	check_nr("swapoff", SYS_swapoff);
#endif
#ifdef SYS_reboot
	check_nr("reboot", SYS_reboot);
#endif
#ifdef SYS_sethostname
	check_nr("sethostname", SYS_sethostname);
#endif
#ifdef SYS_setdomainname
	check_nr("setdomainname", SYS_setdomainname);
#endif
#ifdef SYS_iopl
	check_nr("iopl", SYS_iopl);
#endif
#ifdef SYS_ioperm
	check_nr("ioperm", SYS_ioperm);
#endif
#ifdef SYS_create_module
	check_nr("create_module", SYS_create_module);
#endif
#ifdef SYS_init_module
	check_nr("init_module", SYS_init_module);
#endif
#ifdef SYS_delete_module
	check_nr("delete_module", SYS_delete_module);
#endif
#ifdef SYS_get_kernel_syms
	check_nr("get_kernel_syms", SYS_get_kernel_syms);
#endif
#ifdef SYS_query_module
	check_nr("query_module", SYS_query_module);
#endif
#ifdef SYS_quotactl
	check_nr("quotactl", SYS_quotactl);
#endif
#ifdef SYS_nfsservctl
	check_nr("nfsservctl", SYS_nfsservctl);
#endif
#ifdef SYS_getpmsg
	check_nr("getpmsg", SYS_getpmsg);
#endif
#ifdef SYS_putpmsg
	check_nr("putpmsg", SYS_putpmsg);
#endif
#ifdef SYS_afs_syscall
	check_nr("afs_syscall", SYS_afs_syscall);
#endif
#ifdef SYS_tuxcall
	check_nr("tuxcall", SYS_tuxcall);
#endif
#ifdef SYS_security
	check_nr("security", SYS_security);
#endif
#ifdef SYS_gettid
	check_nr("gettid", SYS_gettid);
#endif
#ifdef SYS_readahead
	check_nr("readahead", SYS_readahead);
#endif
#ifdef SYS_setxattr
	check_nr("setxattr", SYS_setxattr);
#endif
#ifdef SYS_lsetxattr
	check_nr("lsetxattr", SYS_lsetxattr);
#endif
#ifdef SYS_fsetxattr
	check_nr("fsetxattr", SYS_fsetxattr);
#endif
#ifdef SYS_getxattr
	check_nr("getxattr", SYS_getxattr);
#endif
#ifdef SYS_lgetxattr
	check_nr("lgetxattr", SYS_lgetxattr);
#endif
#ifdef SYS_fgetxattr
	check_nr("fgetxattr", SYS_fgetxattr);
#endif
#ifdef SYS_listxattr
	check_nr("listxattr", SYS_listxattr);
#endif
#ifdef SYS_llistxattr
	check_nr("llistxattr", SYS_llistxattr);
#endif
#ifdef SYS_flistxattr
	check_nr("flistxattr", SYS_flistxattr);
#endif
#ifdef SYS_removexattr
	check_nr("removexattr", SYS_removexattr);
#endif
#ifdef SYS_lremovexattr
	check_nr("lremovexattr", SYS_lremovexattr);
#endif
#ifdef SYS_fremovexattr
	check_nr("fremovexattr", SYS_fremovexattr);
#endif
#ifdef SYS_tkill
	check_nr("tkill", SYS_tkill);
#endif
#ifdef SYS_time
	check_nr("time", SYS_time);
#endif
#ifdef SYS_futex
	check_nr("futex", SYS_futex);
#endif
#ifdef SYS_sched_setaffinity
	check_nr("sched_setaffinity", SYS_sched_setaffinity);
#endif
#ifdef SYS_sched_getaffinity
	check_nr("sched_getaffinity", SYS_sched_getaffinity);
#endif
#ifdef SYS_set_thread_area
	check_nr("set_thread_area", SYS_set_thread_area);
#endif
#ifdef SYS_io_setup
	check_nr("io_setup", SYS_io_setup);
#endif
#ifdef SYS_io_destroy
	check_nr("io_destroy", SYS_io_destroy);
#endif
#ifdef SYS_io_getevents
	check_nr("io_getevents", SYS_io_getevents);
#endif
#ifdef SYS_io_submit
	check_nr("io_submit", SYS_io_submit);
#endif
#ifdef SYS_io_cancel
	check_nr("io_cancel", SYS_io_cancel);
#endif
#ifdef SYS_get_thread_area
	check_nr("get_thread_area", SYS_get_thread_area);
#endif
#ifdef SYS_lookup_dcookie
	check_nr("lookup_dcookie", SYS_lookup_dcookie);
#endif
#ifdef SYS_epoll_create
	check_nr("epoll_create", SYS_epoll_create);
#endif
#ifdef SYS_epoll_ctl_old
	check_nr("epoll_ctl_old", SYS_epoll_ctl_old);
#endif
#ifdef SYS_epoll_wait_old
	check_nr("epoll_wait_old", SYS_epoll_wait_old);
#endif
#ifdef SYS_remap_file_pages
	check_nr("remap_file_pages", SYS_remap_file_pages);
#endif
#ifdef SYS_getdents64
	check_nr("getdents64", SYS_getdents64);
#endif
#ifdef SYS_set_tid_address
	check_nr("set_tid_address", SYS_set_tid_address);
#endif
#ifdef SYS_restart_syscall
	check_nr("restart_syscall", SYS_restart_syscall);
#endif
#ifdef SYS_semtimedop
	check_nr("semtimedop", SYS_semtimedop);
#endif
#ifdef SYS_fadvise64
	check_nr("fadvise64", SYS_fadvise64);
#endif
#ifdef SYS_timer_create
	check_nr("timer_create", SYS_timer_create);
#endif
#ifdef SYS_timer_settime
	check_nr("timer_settime", SYS_timer_settime);
#endif
#ifdef SYS_timer_gettime
	check_nr("timer_gettime", SYS_timer_gettime);
#endif
#ifdef SYS_timer_getoverrun
	check_nr("timer_getoverrun", SYS_timer_getoverrun);
#endif
#ifdef SYS_timer_delete
	check_nr("timer_delete", SYS_timer_delete);
#endif
#ifdef SYS_clock_settime
	check_nr("clock_settime", SYS_clock_settime);
#endif
#ifdef SYS_clock_gettime
	check_nr("clock_gettime", SYS_clock_gettime);
#endif
#ifdef SYS_clock_getres
	check_nr("clock_getres", SYS_clock_getres);
#endif
#ifdef SYS_clock_nanosleep
	check_nr("clock_nanosleep", SYS_clock_nanosleep);
#endif
#ifdef SYS_exit_group
	check_nr("exit_group", SYS_exit_group);
#endif
#ifdef SYS_epoll_wait
	check_nr("epoll_wait", SYS_epoll_wait);
#endif
#ifdef SYS_epoll_ctl
	check_nr("epoll_ctl", SYS_epoll_ctl);
#endif
#ifdef SYS_tgkill
	check_nr("tgkill", SYS_tgkill);
#endif
#ifdef SYS_utimes
	check_nr("utimes", SYS_utimes);
#endif
#ifdef SYS_vserver
	check_nr("vserver", SYS_vserver);
#endif
#ifdef SYS_mbind
	check_nr("mbind", SYS_mbind);
#endif
#ifdef SYS_set_mempolicy
	check_nr("set_mempolicy", SYS_set_mempolicy);
#endif
#ifdef SYS_get_mempolicy
	check_nr("get_mempolicy", SYS_get_mempolicy);
#endif
#ifdef SYS_mq_open
	check_nr("mq_open", SYS_mq_open);
#endif
#ifdef SYS_mq_unlink
	check_nr("mq_unlink", SYS_mq_unlink);
#endif
#ifdef SYS_mq_timedsend
	check_nr("mq_timedsend", SYS_mq_timedsend);
#endif
#ifdef SYS_mq_timedreceive
	check_nr("mq_timedreceive", SYS_mq_timedreceive);
#endif
#ifdef SYS_mq_notify
	check_nr("mq_notify", SYS_mq_notify);
#endif
#ifdef SYS_mq_getsetattr
	check_nr("mq_getsetattr", SYS_mq_getsetattr);
#endif
#ifdef SYS_kexec_load
	check_nr("kexec_load", SYS_kexec_load);
#endif
#ifdef SYS_waitid
	check_nr("waitid", SYS_waitid);
#endif
#ifdef SYS_add_key
	check_nr("add_key", SYS_add_key);
#endif
#ifdef SYS_request_key
	check_nr("request_key", SYS_request_key);
#endif
#ifdef SYS_keyctl
	check_nr("keyctl", SYS_keyctl);
#endif
#ifdef SYS_ioprio_set
	check_nr("ioprio_set", SYS_ioprio_set);
#endif
#ifdef SYS_ioprio_get
	check_nr("ioprio_get", SYS_ioprio_get);
#endif
#ifdef SYS_inotify_init
	check_nr("inotify_init", SYS_inotify_init);
#endif
#ifdef SYS_inotify_add_watch
	check_nr("inotify_add_watch", SYS_inotify_add_watch);
#endif
#ifdef SYS_inotify_rm_watch
	check_nr("inotify_rm_watch", SYS_inotify_rm_watch);
#endif
#ifdef SYS_migrate_pages
	check_nr("migrate_pages", SYS_migrate_pages);
#endif
#ifdef SYS_openat
	check_nr("openat", SYS_openat);
#endif
#ifdef SYS_mkdirat
	check_nr("mkdirat", SYS_mkdirat);
#endif
#ifdef SYS_mknodat
	check_nr("mknodat", SYS_mknodat);
#endif
#ifdef SYS_fchownat
	check_nr("fchownat", SYS_fchownat);
#endif
#ifdef SYS_futimesat
	check_nr("futimesat", SYS_futimesat);
#endif
#ifdef SYS_newfstatat
	check_nr("newfstatat", SYS_newfstatat);
#endif
#ifdef SYS_unlinkat
	check_nr("unlinkat", SYS_unlinkat);
#endif
#ifdef SYS_renameat
	check_nr("renameat", SYS_renameat);
#endif
#ifdef SYS_linkat
	check_nr("linkat", SYS_linkat);
#endif
#ifdef SYS_symlinkat
	check_nr("symlinkat", SYS_symlinkat);
#endif
#ifdef SYS_readlinkat
	check_nr("readlinkat", SYS_readlinkat);
#endif
#ifdef SYS_fchmodat
	check_nr("fchmodat", SYS_fchmodat);
#endif
#ifdef SYS_faccessat
	check_nr("faccessat", SYS_faccessat);
#endif
#ifdef SYS_pselect6
	check_nr("pselect6", SYS_pselect6);
#endif
#ifdef SYS_ppoll
	check_nr("ppoll", SYS_ppoll);
#endif
#ifdef SYS_unshare
	check_nr("unshare", SYS_unshare);
#endif
#ifdef SYS_set_robust_list
	check_nr("set_robust_list", SYS_set_robust_list);
#endif
#ifdef SYS_get_robust_list
	check_nr("get_robust_list", SYS_get_robust_list);
#endif
#ifdef SYS_splice
	check_nr("splice", SYS_splice);
#endif
#ifdef SYS_tee
	check_nr("tee", SYS_tee);
#endif
#ifdef SYS_sync_file_range
	check_nr("sync_file_range", SYS_sync_file_range);
#endif
#ifdef SYS_vmsplice
	check_nr("vmsplice", SYS_vmsplice);
#endif
#ifdef SYS_move_pages
	check_nr("move_pages", SYS_move_pages);
#endif
#ifdef SYS_utimensat
	check_nr("utimensat", SYS_utimensat);
#endif
#ifdef SYS_epoll_pwait
	check_nr("epoll_pwait", SYS_epoll_pwait);
#endif
#ifdef SYS_signalfd
	check_nr("signalfd", SYS_signalfd);
#endif
#ifdef SYS_timerfd_create
	check_nr("timerfd_create", SYS_timerfd_create);
#endif
#ifdef SYS_eventfd
	check_nr("eventfd", SYS_eventfd);
#endif
#ifdef SYS_fallocate
	check_nr("fallocate", SYS_fallocate);
#endif
#ifdef SYS_timerfd_settime
	check_nr("timerfd_settime", SYS_timerfd_settime);
#endif
#ifdef SYS_timerfd_gettime
	check_nr("timerfd_gettime", SYS_timerfd_gettime);
#endif
#ifdef SYS_accept4
	check_nr("accept4", SYS_accept4);
#endif
#ifdef SYS_signalfd4
	check_nr("signalfd4", SYS_signalfd4);
#endif
#ifdef SYS_eventfd2
	check_nr("eventfd2", SYS_eventfd2);
#endif
#ifdef SYS_epoll_create1
	check_nr("epoll_create1", SYS_epoll_create1);
#endif
#ifdef SYS_dup3
	check_nr("dup3", SYS_dup3);
#endif
#ifdef SYS_pipe2
	check_nr("pipe2", SYS_pipe2);
#endif
#ifdef SYS_inotify_init1
	check_nr("inotify_init1", SYS_inotify_init1);
#endif
#ifdef SYS_preadv
	check_nr("preadv", SYS_preadv);
#endif
#ifdef SYS_pwritev
	check_nr("pwritev", SYS_pwritev);
#endif
#ifdef SYS_rt_tgsigqueueinfo
	check_nr("rt_tgsigqueueinfo", SYS_rt_tgsigqueueinfo);
#endif
#ifdef SYS_perf_event_open
	check_nr("perf_event_open", SYS_perf_event_open);
#endif
#ifdef SYS_recvmmsg
	check_nr("recvmmsg", SYS_recvmmsg);
#endif
#ifdef SYS_fanotify_init
	check_nr("fanotify_init", SYS_fanotify_init);
#endif
#ifdef SYS_fanotify_mark
	check_nr("fanotify_mark", SYS_fanotify_mark);
#endif
#ifdef SYS_prlimit64
	check_nr("prlimit64", SYS_prlimit64);
#endif
#ifdef SYS_name_to_handle_at
	check_nr("name_to_handle_at", SYS_name_to_handle_at);
#endif
#ifdef SYS_open_by_handle_at
	check_nr("open_by_handle_at", SYS_open_by_handle_at);
#endif
#ifdef SYS_clock_adjtime
	check_nr("clock_adjtime", SYS_clock_adjtime);
#endif
#ifdef SYS_syncfs
	check_nr("syncfs", SYS_syncfs);
#endif
#ifdef SYS_sendmmsg
	check_nr("sendmmsg", SYS_sendmmsg);
#endif
#ifdef SYS_setns
	check_nr("setns", SYS_setns);
#endif
#ifdef SYS_getcpu
	check_nr("getcpu", SYS_getcpu);
#endif
#ifdef SYS_process_vm_readv
	check_nr("process_vm_readv", SYS_process_vm_readv);
#endif
#ifdef SYS_process_vm_writev
	check_nr("process_vm_writev", SYS_process_vm_writev);
#endif
#ifdef SYS_kcmp
	check_nr("kcmp", SYS_kcmp);
#endif
#ifdef SYS_finit_module
	check_nr("finit_module", SYS_finit_module);
#endif
#ifdef SYS_sched_setattr
	check_nr("sched_setattr", SYS_sched_setattr);
#endif
#ifdef SYS_sched_getattr
	check_nr("sched_getattr", SYS_sched_getattr);
#endif
#ifdef SYS_renameat2
	check_nr("renameat2", SYS_renameat2);
#endif
#ifdef SYS_seccomp
	check_nr("seccomp", SYS_seccomp);
#endif
#ifdef SYS_getrandom
	check_nr("getrandom", SYS_getrandom);
#endif
#ifdef SYS_memfd_create
	check_nr("memfd_create", SYS_memfd_create);
#endif
#ifdef SYS_kexec_file_load
	check_nr("kexec_file_load", SYS_kexec_file_load);
#endif
#ifdef SYS_bpf
	check_nr("bpf", SYS_bpf);
#endif
#ifdef SYS_execveat
	check_nr("execveat", SYS_execveat);
#endif
#ifdef SYS_userfaultfd
	check_nr("userfaultfd", SYS_userfaultfd);
#endif
#ifdef SYS_membarrier
	check_nr("membarrier", SYS_membarrier);
#endif
#ifdef SYS_mlock2
	check_nr("mlock2", SYS_mlock2);
#endif
#ifdef SYS_copy_file_range
	check_nr("copy_file_range", SYS_copy_file_range);
#endif
#ifdef SYS_preadv2
	check_nr("preadv2", SYS_preadv2);
#endif
#ifdef SYS_pwritev2
	check_nr("pwritev2", SYS_pwritev2);
#endif
#ifdef SYS_pkey_mprotect
	check_nr("pkey_mprotect", SYS_pkey_mprotect);
#endif
#ifdef SYS_pkey_alloc
	check_nr("pkey_alloc", SYS_pkey_alloc);
#endif
#ifdef SYS_pkey_free
	check_nr("pkey_free", SYS_pkey_free);
#endif
#ifdef SYS_statx
	check_nr("statx", SYS_statx);
#endif
#ifdef SYS_io_pgetevents
	check_nr("io_pgetevents", SYS_io_pgetevents);
#endif
#ifdef SYS_rseq
	check_nr("rseq", SYS_rseq);
#endif
#ifdef SYS_pidfd_send_signal
	check_nr("pidfd_send_signal", SYS_pidfd_send_signal);
#endif
#ifdef SYS_io_uring_setup
	check_nr("io_uring_setup", SYS_io_uring_setup);
#endif
#ifdef SYS_io_uring_enter
	check_nr("io_uring_enter", SYS_io_uring_enter);
#endif
#ifdef SYS_io_uring_register
	check_nr("io_uring_register", SYS_io_uring_register);
#endif
#ifdef SYS_open_tree
	check_nr("open_tree", SYS_open_tree);
#endif
#ifdef SYS_move_mount
	check_nr("move_mount", SYS_move_mount);
#endif
#ifdef SYS_fsopen
	check_nr("fsopen", SYS_fsopen);
#endif
#ifdef SYS_fsconfig
	check_nr("fsconfig", SYS_fsconfig);
#endif
#ifdef SYS_fsmount
	check_nr("fsmount", SYS_fsmount);
#endif
#ifdef SYS_fspick
	check_nr("fspick", SYS_fspick);
#endif
#ifdef SYS_pidfd_open
	check_nr("pidfd_open", SYS_pidfd_open);
#endif
#ifdef SYS_clone3
	check_nr("clone3", SYS_clone3);
#endif
#ifdef SYS_close_range
	check_nr("close_range", SYS_close_range);
#endif
#ifdef SYS_openat2
	check_nr("openat2", SYS_openat2);
#endif
#ifdef SYS_pidfd_getfd
	check_nr("pidfd_getfd", SYS_pidfd_getfd);
#endif
#ifdef SYS_faccessat2
	check_nr("faccessat2", SYS_faccessat2);
#endif
#ifdef SYS_process_madvise
	check_nr("process_madvise", SYS_process_madvise);
#endif
#ifdef SYS_epoll_pwait2
	check_nr("epoll_pwait2", SYS_epoll_pwait2);
#endif
#ifdef SYS_mount_setattr
	check_nr("mount_setattr", SYS_mount_setattr);
#endif
#ifdef SYS_quotactl_fd
	check_nr("quotactl_fd", SYS_quotactl_fd);
#endif
#ifdef SYS_landlock_create_ruleset
	check_nr("landlock_create_ruleset", SYS_landlock_create_ruleset);
#endif
#ifdef SYS_landlock_add_rule
	check_nr("landlock_add_rule", SYS_landlock_add_rule);
#endif
#ifdef SYS_landlock_restrict_self
	check_nr("landlock_restrict_self", SYS_landlock_restrict_self);
#endif
#ifdef SYS_memfd_secret
	check_nr("memfd_secret", SYS_memfd_secret);
#endif
#ifdef SYS_process_mrelease
	check_nr("process_mrelease", SYS_process_mrelease);
#endif
#ifdef SYS_futex_waitv
	check_nr("futex_waitv", SYS_futex_waitv);
#endif
#ifdef SYS_set_mempolicy_home_node
	check_nr("set_mempolicy_home_node", SYS_set_mempolicy_home_node);
#endif
#ifdef SYS_cachestat
	check_nr("cachestat", SYS_cachestat);
#endif
#ifdef SYS_fchmodat2
	check_nr("fchmodat2", SYS_fchmodat2);
#endif
#ifdef SYS_map_shadow_stack
	check_nr("map_shadow_stack", SYS_map_shadow_stack);
#endif
#ifdef SYS_futex_wake
	check_nr("futex_wake", SYS_futex_wake);
#endif
#ifdef SYS_futex_wait
	check_nr("futex_wait", SYS_futex_wait);
#endif
#ifdef SYS_futex_requeue
	check_nr("futex_requeue", SYS_futex_requeue);
#endif
#ifdef SYS_statmount
	check_nr("statmount", SYS_statmount);
#endif
#ifdef SYS_listmount
	check_nr("listmount", SYS_listmount);
#endif
#ifdef SYS_lsm_get_self_attr
	check_nr("lsm_get_self_attr", SYS_lsm_get_self_attr);
#endif
#ifdef SYS_lsm_set_self_attr
	check_nr("lsm_set_self_attr", SYS_lsm_set_self_attr);
#endif
#ifdef SYS_lsm_list_modules
	check_nr("lsm_list_modules", SYS_lsm_list_modules);
#endif
#ifdef SYS_mseal
	check_nr("mseal", SYS_mseal);
#endif
#ifdef SYS_setxattrat
	check_nr("setxattrat", SYS_setxattrat);
#endif
#ifdef SYS_getxattrat
	check_nr("getxattrat", SYS_getxattrat);
#endif
#ifdef SYS_listxattrat
	check_nr("listxattrat", SYS_listxattrat);
#endif
#ifdef SYS_removexattrat
	check_nr("removexattrat", SYS_removexattrat);
#endif
#ifdef SYS_open_tree_attr
	check_nr("open_tree_attr", SYS_open_tree_attr);
#endif
#ifdef SYS_file_getattr
	check_nr("file_getattr", SYS_file_getattr);
#endif
#ifdef SYS_file_setattr
	check_nr("file_setattr", SYS_file_setattr);
#endif
	printf("test_sysent: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
