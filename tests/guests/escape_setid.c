/* Leave a setuid or setgid file behind in a directory (argv[1], a --rw bind):
 * through every call that gives a file a mode. Each attempt must be refused,
 * and nothing in the directory may carry the bits afterwards. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "escape.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static char path[4096];

static const char *at(const char *dir, const char *name)
{
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return path;
}

/* a plain file to change the mode of */
static const char *plain(const char *dir, const char *name)
{
	int fd = open(at(dir, name), O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd < 0) {
		printf("cannot create %s: %s\n", path, strerror(errno));
		exit(2);
	}
	close(fd);
	return path;
}

static void check_mode(const char *dir, const char *name)
{
	struct stat st;
	if (stat(at(dir, name), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
		printf("ESCAPED: %s has mode %o\n", path, (unsigned)st.st_mode & 07777);
		escaped = 1;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		printf("usage: escape_setid DIR\n");
		return 2;
	}
	const char *d = argv[1];
	expect_errno("chmod 4755", chmod(plain(d, "chmod"), 04755), EPERM, 0);
	expect_errno("chmod 2755", chmod(plain(d, "chmod-g"), 02755), EPERM, 0);
	int fd = open(plain(d, "fchmod"), O_RDONLY);
	expect_errno("fchmod 4755", fchmod(fd, 04755), EPERM, 0);
	close(fd);
	expect_errno("fchmodat 6755", fchmodat(AT_FDCWD, plain(d, "fchmodat"), 06755, 0), EPERM, 0);
	expect_errno("fchmodat2 4755", syscall(SYS_fchmodat2, AT_FDCWD, plain(d, "fchmodat2"), 04755, 0),
		     EPERM, ENOSYS);
	expect_errno("open O_CREAT 4755", syscall(SYS_open, at(d, "open"), O_WRONLY | O_CREAT, 04755),
		     EPERM, 0);
	expect_errno("openat O_CREAT 2755", openat(AT_FDCWD, at(d, "openat"), O_WRONLY | O_CREAT, 02755),
		     EPERM, 0);
	expect_errno("creat 4755", creat(at(d, "creat"), 04755), EPERM, 0);
	expect_errno("mknod S_IFREG 4755", mknod(at(d, "mknod"), S_IFREG | 04755, 0), EPERM, 0);
	expect_errno("mknodat S_IFREG 2755", mknodat(AT_FDCWD, at(d, "mknodat"), S_IFREG | 02755, 0),
		     EPERM, 0);
	expect_errno("mknod a character device", mknod(at(d, "dev"), S_IFCHR | 0666, makedev(1, 3)),
		     EPERM, 0);
	struct { unsigned long long flags, mode, resolve; } how = { O_WRONLY | O_CREAT, 04755, 0 };
	expect_errno("openat2 O_CREAT 4755", syscall(SYS_openat2, AT_FDCWD, at(d, "openat2"), &how,
						      sizeof how), ENOSYS, 0);
	/* without the bits (or without creating) the same calls work */
	fd = openat(AT_FDCWD, at(d, "ordinary"), O_WRONLY | O_CREAT, 0755);
	if (fd < 0 || fchmod(fd, 0700) < 0 || chmod(path, 01777) < 0) {
		printf("ordinary modes refused: %s\n", strerror(errno));
		return 2;
	}
	close(fd);
	fd = open(at(d, "ordinary"), O_RDONLY, 04755); /* no O_CREAT: the mode means nothing */
	if (fd < 0) {
		printf("open without O_CREAT refused: %s\n", strerror(errno));
		return 2;
	}
	close(fd);
	const char *names[] = { "chmod", "chmod-g", "fchmod", "fchmodat", "fchmodat2", "open",
				"openat", "creat", "mknod", "mknodat", "openat2" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		check_mode(d, names[i]);
	return finish();
}
