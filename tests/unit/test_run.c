/* trace/run, trace/box/plan.c and filtercache.c: option parsing, config checks,
 * the boundary's verdicts, the seccomp program and exit statuses, without running
 * a guest. */
#include <fcntl.h>
#include <dirent.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trace/sv/sv.h"
#include "trace/box/box-internal.h"
#include "trace/trace.h"

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; \
	printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static int verdict(long nr, uint64_t a0, uint64_t a1)
{
	uint64_t a[6] = { a0, a1, 0, 0, 0, 0 };
	return trace_boundary_errno(1, nr, a);
}

static void test_verdicts(void)
{
	CHECK(verdict(TRACE_SYS_read, 0, 0) == 0, "read allowed");
	CHECK(verdict(TRACE_SYS_ptrace, 0, 0) == EPERM, "ptrace refused");
	CHECK(verdict(TRACE_SYS_io_uring_setup, 0, 0) == ENOSYS, "io_uring ENOSYS");
	CHECK(verdict(TRACE_SYS_mount, 0, 0) == EPERM, "mount refused");
	CHECK(verdict(TRACE_SYS_clone, SIGCHLD, 0) == 0, "fork-like clone allowed");
	CHECK(verdict(TRACE_SYS_clone, CLONE_VM | CLONE_THREAD | CLONE_SIGHAND, 0) == 0, "thread allowed");
	CHECK(verdict(TRACE_SYS_clone, CLONE_UNTRACED | SIGCHLD, 0) == EPERM, "CLONE_UNTRACED");
	CHECK(verdict(TRACE_SYS_clone, CLONE_NEWUSER, 0) == EPERM, "CLONE_NEWUSER");
	CHECK(verdict(TRACE_SYS_clone, (1ull << 40) | SIGCHLD, 0) == 0, "high bits ignored, as the kernel does");
	CHECK(verdict(TRACE_SYS_clone, (1ull << 40) | CLONE_UNTRACED, 0) == EPERM, "high bits cannot hide a flag");
	CHECK(verdict(TRACE_SYS_clone3, 0, 0) == ENOSYS, "clone3");
	CHECK(verdict(TRACE_SYS_unshare, CLONE_FILES | CLONE_FS, 0) == 0, "unshare(CLONE_FILES|CLONE_FS)");
	CHECK(verdict(TRACE_SYS_unshare, CLONE_NEWUSER, 0) == EPERM, "unshare(CLONE_NEWUSER)");
	CHECK(verdict(TRACE_SYS_unshare, CLONE_NEWTIME, 0) == EPERM, "unshare(CLONE_NEWTIME)");
	CHECK(verdict(TRACE_SYS_socket, AF_UNIX, 0) == 0, "AF_UNIX");
	CHECK(verdict(TRACE_SYS_socket, AF_INET, 0) == 0, "AF_INET (the run's loopback)");
	CHECK(verdict(TRACE_SYS_socket, AF_INET6, 0) == 0, "AF_INET6");
	uint64_t nl[6] = { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE };
	CHECK(trace_boundary_errno(1, TRACE_SYS_socket, nl) == 0, "NETLINK_ROUTE (the run's own interfaces)");
	nl[0] = (1ull << 32) | AF_NETLINK;
	nl[2] = (1ull << 32) | NETLINK_ROUTE;
	CHECK(trace_boundary_errno(1, TRACE_SYS_socket, nl) == 0, "NETLINK_ROUTE with high bits the kernel ignores");
	nl[2] = NETLINK_NETFILTER;
	CHECK(trace_boundary_errno(1, TRACE_SYS_socket, nl) == EAFNOSUPPORT, "NETLINK_NETFILTER");
	nl[2] = (1ull << 32) | NETLINK_SOCK_DIAG;
	CHECK(trace_boundary_errno(1, TRACE_SYS_socket, nl) == EAFNOSUPPORT, "NETLINK_SOCK_DIAG with high bits");
	nl[0] = AF_PACKET;
	nl[2] = NETLINK_ROUTE;
	CHECK(trace_boundary_errno(1, TRACE_SYS_socket, nl) == EAFNOSUPPORT, "AF_PACKET, protocol 0");
	CHECK(verdict(TRACE_SYS_socketpair, AF_INET6, 0) == EAFNOSUPPORT, "socketpair AF_INET6");
	CHECK(verdict(TRACE_SYS_ioctl, 0, TIOCSTI) == EPERM, "TIOCSTI");
	CHECK(verdict(TRACE_SYS_ioctl, 0, (1ull << 32) | TIOCSTI) == EPERM, "TIOCSTI high bits");
	CHECK(verdict(TRACE_SYS_ioctl, 0, TCGETS) == 0, "TCGETS");
	CHECK(verdict(TRACE_SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER) == EPERM,
	      "seccomp listener");
	CHECK(verdict(TRACE_SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0) == 0, "a guest's own filter");
	CHECK(verdict(9999, 0, 0) == ENOSYS, "unknown number");
	uint64_t m[6] = { 0 };
	m[1] = 04755;
	CHECK(trace_boundary_errno(1, TRACE_SYS_chmod, m) == EPERM, "chmod 4755");
	CHECK(trace_boundary_errno(1, TRACE_SYS_fchmod, m) == EPERM, "fchmod 4755");
	CHECK(trace_boundary_errno(1, TRACE_SYS_creat, m) == EPERM, "creat 4755");
	/* S_ISGID alone on an existing object is judged on it; never S_ISUID */
	CHECK(trace_boundary_dir_mode(TRACE_SYS_chmod, m) == -1, "chmod 4755: no directory may");
	m[1] = 02775;
	CHECK(trace_boundary_errno(1, TRACE_SYS_chmod, m) == EPERM, "chmod 2775 by the numbers");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_chmod, m) == 1, "chmod 2775: a directory may");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_fchmod, m) == 1, "fchmod 2775: a directory may");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_creat, m) == -1, "creat 2775 makes a file");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_mknod, m) == -1, "mknod 2775 makes a file");
	m[1] = 06775;
	CHECK(trace_boundary_dir_mode(TRACE_SYS_chmod, m) == -1, "chmod 6775");
	m[1] = 0775;
	CHECK(trace_boundary_dir_mode(TRACE_SYS_chmod, m) == -1, "chmod 775 is not refused at all");
	m[1] = 0;
	m[2] = 02775;
	CHECK(trace_boundary_dir_mode(TRACE_SYS_fchmodat, m) == 2, "fchmodat 2775");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_fchmodat2, m) == 2, "fchmodat2 2775");
	CHECK(trace_boundary_dir_mode(TRACE_SYS_mknodat, m) == -1, "mknodat 2775");
	m[1] = O_WRONLY | O_CREAT;
	CHECK(trace_boundary_dir_mode(TRACE_SYS_open, m) == -1, "open O_CREAT 2775");
	m[1] = 04755;
	m[2] = 0;
	m[1] = 01777;
	CHECK(trace_boundary_errno(1, TRACE_SYS_chmod, m) == 0, "chmod 1777");
	m[1] = O_WRONLY;
	m[2] = 02755;
	CHECK(trace_boundary_errno(1, TRACE_SYS_open, m) == 0, "open without O_CREAT: the mode is unused");
	m[1] = O_WRONLY | O_CREAT;
	CHECK(trace_boundary_errno(1, TRACE_SYS_open, m) == EPERM, "open O_CREAT 2755");
	m[1] = O_TMPFILE | O_RDWR;
	CHECK(trace_boundary_errno(1, TRACE_SYS_open, m) == EPERM, "open O_TMPFILE 2755");
	CHECK(trace_boundary_errno(1, TRACE_SYS_fchmodat, m) == EPERM, "fchmodat 2755");
	CHECK(trace_boundary_errno(1, TRACE_SYS_mknodat, m) == EPERM, "mknodat 2755");
	m[2] = O_CREAT;
	m[3] = 0644;
	CHECK(trace_boundary_errno(1, TRACE_SYS_openat, m) == 0, "openat O_CREAT 0644");
	m[3] = 0104755;
	CHECK(trace_boundary_errno(1, TRACE_SYS_openat, m) == EPERM, "openat O_CREAT 4755");
	CHECK(trace_boundary_errno(1, TRACE_SYS_openat2, m) == ENOSYS, "openat2");
	uint64_t id[6] = { 65534 };
	CHECK(trace_boundary_errno(1, TRACE_SYS_setuid, id) == EPERM, "setuid(65534)");
	id[0] = TRACE_GUEST_UID;
	CHECK(trace_boundary_errno(1, TRACE_SYS_setuid, id) == 0, "setuid(own)");
	id[0] = 0xffffffffu;
	id[1] = TRACE_GUEST_UID;
	id[2] = 0;
	CHECK(trace_boundary_errno(1, TRACE_SYS_setresgid, id) == EPERM, "setresgid(-1, own, 0)");
	id[2] = (1ull << 32) | TRACE_GUEST_UID; /* the kernel reads 32 bits */
	CHECK(trace_boundary_errno(1, TRACE_SYS_setresgid, id) == 0, "setresgid(-1, own, own)");
	uint64_t ch[6] = { 0, 0xffffffffu, 65534 };
	CHECK(trace_boundary_errno(1, TRACE_SYS_chown, ch) == EPERM, "chown(-1, 65534)");
	ch[2] = 0xffffffffu;
	CHECK(trace_boundary_errno(1, TRACE_SYS_chown, ch) == 0, "chown(-1, -1)");
	uint64_t z[6] = { 0 };
	CHECK(trace_boundary_errno(0, TRACE_SYS_getpid, z) == ENOSYS, "foreign arch");
	CHECK(verdict(TRACE_SYS_exit_group, 0, 0) == 0, "exit_group");
}

static void test_filter(void)
{
	struct sock_fprog p;
	struct common_err e;
	CHECK(trace_filter_build(0, &p, &e) == 0, "filter builds");
	CHECK(p.len > 10 && p.len < 4096, "filter length %u", p.len);
	/* the arch check is first: load arch, compare with AUDIT_ARCH_X86_64 */
	CHECK(p.filter[0].code == (BPF_LD | BPF_W | BPF_ABS) && p.filter[0].k == 4, "arch load first");
	free(p.filter);
	CHECK(trace_filter_build(TRACE_CLASS_FILE | TRACE_CLASS_READ, &p, &e) == 0, "filter with classes");
	free(p.filter);
	int fd = fileno(tmpfile());
	CHECK(trace_filter_export(0, fd, &e) == 0 && lseek(fd, 0, SEEK_END) > 0, "export");
}

static int same_prog(const struct sock_fprog *a, const struct sock_fprog *b)
{
	return a->len == b->len && memcmp(a->filter, b->filter, a->len * sizeof *a->filter) == 0;
}

static int one_entry(const char *dir, char *path, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && n++ == 0)
			snprintf(path, cap, "%s/%s", dir, de->d_name);
	if (d)
		closedir(d);
	return n == 1;
}

static void test_filter_cache(void)
{
	char dir[] = "/tmp/sbx-test-bpf.XXXXXX", cache[64], path[512];
	struct sock_fprog built, got, other;
	struct common_err e;
	uint8_t id[64];
	size_t idlen;
	CHECK(common_build_id(id, sizeof id, &idlen) == 0 && idlen >= 8, "the test has a build id");
	CHECK(mkdtemp(dir) != NULL, "temp dir");
	snprintf(cache, sizeof cache, "%s/filters", dir);
	CHECK(trace_filter_build(TRACE_CLASS_FILE, &built, &e) == 0, "reference program");
	CHECK(trace_filter_get(cache, TRACE_CLASS_FILE, &got, &e) == 0 && same_prog(&got, &built),
	      "a miss builds the same program");
	free(got.filter);
	CHECK(one_entry(cache, path, sizeof path), "and keeps it");
	/* a kept program is used as it is: plant another (valid) one under that name */
	CHECK(trace_filter_build(0, &other, &e) == 0 && !same_prog(&other, &built), "another program");
	size_t body = other.len * sizeof *other.filter;
	uint8_t *img = malloc(40 + body);
	memcpy(img, "sbx-bpf\n", 8);
	common_sha256(other.filter, body, img + 8);
	memcpy(img + 40, other.filter, body);
	FILE *f = fopen(path, "w");
	fwrite(img, 1, 40 + body, f);
	fclose(f);
	CHECK(trace_filter_get(cache, TRACE_CLASS_FILE, &got, &e) == 0 && same_prog(&got, &other),
	      "a hit is read, not rebuilt");
	free(got.filter);
	/* damaged entries: a flipped instruction byte, a torn tail, a bad magic, a FIFO */
	for (int k = 0; k < 4; k++) {
		unlink(path);
		if (k == 3) {
			CHECK(mkfifo(path, 0600) == 0, "fifo");
		} else {
			f = fopen(path, "w");
			img[k == 2 ? 0 : 40 + body / 2] ^= 1;
			fwrite(img, 1, k == 1 ? 40 + body - 3 : 40 + body, f);
			img[k == 2 ? 0 : 40 + body / 2] ^= 1;
			fclose(f);
		}
		CHECK(trace_filter_get(cache, TRACE_CLASS_FILE, &got, &e) == 0 && same_prog(&got, &built),
		      "damaged entry %d: rebuilt", k);
		free(got.filter);
		struct sock_fprog again;
		CHECK(trace_filter_get(cache, TRACE_CLASS_FILE, &again, &e) == 0 &&
		      same_prog(&again, &built), "damaged entry %d: replaced", k);
		free(again.filter);
	}
	/* other classes, another name; an old build's leftovers are bounded */
	CHECK(trace_filter_get(cache, 0, &got, &e) == 0 && same_prog(&got, &other), "classes 0");
	free(got.filter);
	for (int i = 0; i < 70; i++) {
		snprintf(path, sizeof path, "%s/old%02d", cache, i);
		fclose(fopen(path, "w"));
	}
	CHECK(trace_filter_get(cache, TRACE_CLASS_READ, &got, &e) == 0 && one_entry(cache, path, sizeof path),
	      "over 64 entries: dropped, the new one kept");
	free(got.filter);
	CHECK(trace_filter_get(NULL, 0, &got, &e) == 0 && same_prog(&got, &other), "no cache dir");
	free(got.filter);
	free(img);
	free(built.filter);
	free(other.filter);
	common_rm_rf(dir, &e);
}

static struct trace_config base(void)
{
	static const char *argv[] = { "true", NULL };
	struct trace_config c = { .argv = argv, .image = "/bin/true", .state_fd = -1,
				  .stdout_fd = -1, .stderr_fd = -1 };
	return c;
}

/* root's rw bind of the lease namespace is cut through an id-map helper's user
 * namespace; the helper's exit is left off the start-up path, and reaped before a
 * supervisor would wait for any child (a stray child would be taken for a guest
 * task): none is left after trace_plan_reap, nor after a plan freed unreleased */
static void test_plan_helpers(void)
{
	struct common_err e;
	struct trace_config c = base();
	struct trace_plan p;
	char dir[] = "/tmp/test_run_ns.XXXXXX";
	if (geteuid() != 0 || !mkdtemp(dir)) {
		printf("test_plan_helpers: skipped (needs root)\n");
		return;
	}
	c.ns_dir = dir;
	for (int k = 0; k < 2; k++) {
		CHECK(trace_plan_build(&c, &p, &e) == 0, "plan with the lease namespace: %s", e.why);
		int helpers = 0;
		for (size_t i = 0; i < p.nm; i++)
			helpers += p.m[i].idmap_helper > 0;
		CHECK(helpers == 1, "one id-map helper, not yet reaped (%d)", helpers);
		if (k == 0)
			trace_plan_reap(&p);
		else
			trace_plan_free(&p);
		errno = 0;
		CHECK(waitpid(-1, NULL, WNOHANG | __WALL) < 0 && errno == ECHILD,
		      "no child left after %s", k ? "the plan freed" : "trace_plan_reap");
		if (k == 0)
			trace_plan_free(&p);
	}
	rmdir(dir);
}

static void test_config(void)
{
	struct common_err e;
	struct trace_config c = base();
	CHECK(trace_config_check(&c, &e) == 0, "minimal config");
	struct trace_mount m[2] = { { TRACE_MOUNT_BIND, "/etc", "/data", NULL, 0 },
				    { TRACE_MOUNT_BIND, "/usr", "/data", NULL, 0 } };
	c.mounts = m;
	c.nmounts = 2;
	CHECK(trace_config_check(&c, &e) < 0 && strstr(e.why, "duplicate target"), "duplicate");
	m[1].dst = "relative";
	CHECK(trace_config_check(&c, &e) < 0, "relative target");
	m[1].dst = "/a/../b";
	CHECK(trace_config_check(&c, &e) < 0, "dot-dot target");
	m[1].dst = "/ns/x";
	CHECK(trace_config_check(&c, &e) < 0 && strstr(e.why, "/ns"), "under /ns");
	m[1].dst = "/b";
	m[1].src = "/nonexistent-src";
	CHECK(trace_config_check(&c, &e) < 0 && strstr(e.what, "mount source"), "missing source");
	m[1].src = "/usr";
	CHECK(trace_config_check(&c, &e) == 0, "two good binds");
	m[1].type = TRACE_MOUNT_TMPFS;
	m[1].opts = "size=1m;rm -rf";
	CHECK(trace_config_check(&c, &e) < 0, "tmpfs options filtered");
	m[1].opts = "mode=0755,size=64m";
	CHECK(trace_config_check(&c, &e) == 0, "tmpfs options");
	c.replace_defaults = 1;
	CHECK(trace_config_check(&c, &e) < 0 && strstr(e.why, "must supply /"), "replace needs /");
	m[0].dst = "/";
	CHECK(trace_config_check(&c, &e) == 0, "replace with /");
	static const char *bad_env[] = { "A=1", "NOEQ", NULL };
	c = base();
	c.envp = bad_env;
	CHECK(trace_config_check(&c, &e) < 0 && strstr(e.why, "NAME=VALUE"), "env entry");
	c = base();
	c.argv = NULL;
	CHECK(trace_config_check(&c, &e) < 0, "no argv");
}

/* One option on sbx-run's command line (value NULL: a flag) into o: 1, or -1 with e. */
static int run_opt(struct trace_run_opts *o, const char *name, const char *value,
		   struct common_err *e)
{
	char opt[64];
	char *argv[] = { "sbx-run", opt, (char *)value, "--", "x", NULL };

	snprintf(opt, sizeof opt, "--%s", name);
	if (!value)
		memmove(&argv[2], &argv[3], 3 * sizeof argv[0]);
	return trace_run_parse(value ? 5 : 4, argv, 0, o, NULL, e) == 0 ? 1 : -1;
}

static void test_opts(void)
{
	struct trace_run_opts o = { .result_fd = -1 };
	struct common_err e;
	CHECK(run_opt(&o, "ro", "/etc:/data", &e) == 1 && o.nmounts == 1 &&
	      strcmp(o.mounts[0].dst, "/data") == 0 && !o.mounts[0].rw, "--ro");
	CHECK(run_opt(&o, "rw", "/tmp", &e) == 1 && o.nmounts == 2 &&
	      strcmp(o.mounts[1].dst, "/tmp") == 0 && o.mounts[1].rw, "--rw default target");
	CHECK(run_opt(&o, "rw", "/nonexistent-xyz:/x", &e) == -1, "--rw missing source");
	CHECK(run_opt(&o, "ro", "/etc:rel", &e) == -1, "--ro relative");
	CHECK(!o.replace_defaults, "binds keep the defaults");
	CHECK(run_opt(&o, "mount", "tmpfs::/scratch:size=1m", &e) == 1 && o.replace_defaults &&
	      o.mounts[2].type == TRACE_MOUNT_TMPFS && strcmp(o.mounts[2].opts, "size=1m") == 0, "--mount tmpfs");
	CHECK(run_opt(&o, "mount", "bind:/usr:/u:rw", &e) == 1 && o.mounts[3].rw, "--mount bind rw");
	CHECK(run_opt(&o, "mount", "bind:/usr:/v:bogus", &e) == -1, "--mount bad bind opts");
	CHECK(run_opt(&o, "mount", "weird:/a:/b", &e) == -1, "--mount unknown type");
	CHECK(run_opt(&o, "mount", "bind:/a", &e) == -1, "--mount too few fields");
	CHECK(run_opt(&o, "mount", "proc::/proc", &e) == 1, "--mount proc");
	CHECK(run_opt(&o, "env", "A=1", &e) == 1 && o.nenv_set == 1, "--env");
	CHECK(run_opt(&o, "env", "=1", &e) == -1, "--env empty name");
	CHECK(run_opt(&o, "env", "A", &e) == 1 && o.nenv_set == 2, "--env NAME passes it");
	CHECK(run_opt(&o, "env", "9A=1", &e) == -1, "--env name starting with a digit");
	CHECK(run_opt(&o, "env", "A B", &e) == -1, "--env name with a space");
	CHECK(run_opt(&o, "result-fd", "1", &e) == -1, "--result-fd must be above 2");
	CHECK(run_opt(&o, "result-fd", "999", &e) == -1, "--result-fd must be open");
	CHECK(run_opt(&o, "max-procs", "1", &e) == -1, "--max-procs too small");
	CHECK(run_opt(&o, "max-procs", "64", &e) == 1 && o.max_procs == 64, "--max-procs");
	CHECK(run_opt(&o, "lifetime", "12x", &e) == -1, "--lifetime number");
	CHECK(run_opt(&o, "ephemeral", NULL, &e) == 1 && o.ephemeral, "--ephemeral");
	for (size_t i = 0; i < o.nmounts; i++) {
		free((char *)o.mounts[i].src);
		free((char *)o.mounts[i].dst);
		free((char *)o.mounts[i].opts);
	}
	free(o.mounts);
	free(o.env_set);
}

static void test_exit_codes(void)
{
	struct trace_result r;
	memset(&r, 0, sizeof r);
	r.exited = 1;
	r.status = 3;
	CHECK(trace_result_exit_code(&r) == 3, "status");
	r.exited = 0;
	r.signal = 9;
	CHECK(trace_result_exit_code(&r) == 137, "128+N");
	r.exec_failed = ENOENT;
	CHECK(trace_result_exit_code(&r) == 127, "not found");
	r.exec_failed = EACCES;
	CHECK(trace_result_exit_code(&r) == 126, "not executable");
	memset(&r, 0, sizeof r);
	CHECK(trace_result_exit_code(&r) == SBX_EXIT_SBX, "nothing ran");
}

static int listed(char **v, const char *path)
{
	for (size_t i = 0; v[i]; i++)
		if (strcmp(v[i], path) == 0)
			return 1;
	return 0;
}

/* The default view's homes: the rule, the invoker's directories, nesting, binds. */
static void test_view_homes(void)
{
	CHECK(trace_view_maskable("/var/lib/jenkins"), "a home under /var/lib");
	CHECK(trace_view_maskable("/srv/ci"), "a home under /srv");
	CHECK(trace_view_maskable("/var/cache/man"), "man's home");
	CHECK(!trace_view_maskable("/"), "never /");
	CHECK(!trace_view_maskable("/usr/sbin"), "daemon's home is a system tree");
	CHECK(!trace_view_maskable("/bin"), "bin's home");
	CHECK(!trace_view_maskable("/dev"), "sys's home");
	CHECK(!trace_view_maskable("/var"), "above /var/tmp");
	CHECK(!trace_view_maskable("/var/lib"), "above /var/lib/dpkg");
	CHECK(trace_view_maskable("/usrx"), "a sibling name is not inside /usr");
	CHECK(!trace_view_maskable("/run/ircd"), "the run's own /run");
	CHECK(!trace_view_maskable("relative"), "relative");
	setenv("HOME", "/var/cache", 1);
	setenv("XDG_CONFIG_HOME", "/var/cache/apt", 1);
	setenv("XDG_DATA_HOME", "/usr/share", 1);
	setenv("XDG_STATE_HOME", "/", 1);
	setenv("XDG_RUNTIME_DIR", "/nonexistent-sbx-view", 1);
	struct trace_config c = base();
	char **v = trace_view_homes(&c);
	CHECK(listed(v, "/var/cache"), "$HOME masked");
	CHECK(!listed(v, "/var/cache/apt"), "inside a masked home: one mask");
	CHECK(!listed(v, "/usr/share") && !listed(v, "/") && !listed(v, "/usr/sbin"),
	      "system trees never");
	CHECK(!listed(v, "/nonexistent-sbx-view"), "a missing directory");
	struct stat st;
	CHECK(stat("/root", &st) < 0 || listed(v, "/root"), "/root");
	trace_view_free(v);
	/* a sibling sorted between a home and what lies in it (D, D-x, D/z) */
	char d[PATH_MAX], dx[PATH_MAX + 4], dz[PATH_MAX + 4], tmpl[] = "build/view-home.XXXXXX";
	if (mkdtemp(tmpl) && realpath(tmpl, d) && trace_view_maskable(d) &&
	    strncmp(d, "/home/", 6) && strncmp(d, "/root/", 6)) {
		snprintf(dx, sizeof dx, "%s-x", d);
		snprintf(dz, sizeof dz, "%s/z", d);
		mkdir(dx, 0700);
		mkdir(dz, 0700);
		setenv("HOME", d, 1);
		setenv("XDG_CONFIG_HOME", dx, 1);
		setenv("XDG_DATA_HOME", dz, 1);
		v = trace_view_homes(&c);
		CHECK(listed(v, d) && listed(v, dx) && !listed(v, dz), "nested once, a sibling apart");
		trace_view_free(v);
		rmdir(dz);
		rmdir(dx);
	}
	rmdir(tmpl);
	struct trace_mount m = { .type = TRACE_MOUNT_BIND, .src = "/tmp", .dst = "/var/cache" };
	c.mounts = &m;
	c.nmounts = 1;
	setenv("HOME", "/var/cache", 1);
	v = trace_view_homes(&c);
	CHECK(!listed(v, "/var/cache"), "a mount at the home replaces the mask");
	trace_view_free(v);
}

int main(void)
{
	test_verdicts();
	test_filter();
	test_filter_cache();
	test_config();
	test_opts();
	test_exit_codes();
	test_view_homes();
	test_plan_helpers();
	printf("test_run: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
