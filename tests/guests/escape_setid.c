/* Leave a setuid or setgid file behind in a directory (argv[1], a --rw bind):
 * through every call that gives a file a mode, and by swapping a file in for a
 * directory that may take S_ISGID while its chmod is judged. Each attempt must
 * be refused, and no file in the directory may carry the bits afterwards. */
#include <fcntl.h>
#include <pthread.h>
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

static char swap_a[4096], swap_b[4096];
static volatile int swapping = 1;

/* a directory and a file trade names as fast as they can */
static void *swapper(void *unused)
{
	(void)unused;
	while (swapping)
		syscall(SYS_renameat2, AT_FDCWD, swap_a, AT_FDCWD, swap_b, RENAME_EXCHANGE);
	return NULL;
}

/* chmod g+s on a name that is a directory one moment and a file the next:
 * how many calls the directory took (the file must take none) */
static int chmod_race(const char *d, int tries)
{
	pthread_t t;
	int took = 0;
	snprintf(swap_a, sizeof swap_a, "%s/swap", d);
	snprintf(swap_b, sizeof swap_b, "%s/swap-file", d);
	plain(d, "swap-file");
	if (mkdir(swap_a, 0755) < 0 || pthread_create(&t, NULL, swapper, NULL)) {
		printf("cannot set up the swap: %s\n", strerror(errno));
		exit(2);
	}
	for (int i = 0; i < tries; i++)
		took += chmod(swap_a, 02775) == 0;
	swapping = 0;
	pthread_join(t, NULL);
	return took;
}

static void check_mode(const char *dir, const char *name)
{
	struct stat st;
	if (stat(at(dir, name), &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
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
	/* a directory may keep a shared group: S_ISGID, never S_ISUID */
	struct stat st;
	if (mkdir(at(d, "shared"), 0755) < 0 || chmod(path, 02775) < 0 || stat(path, &st) < 0 ||
	    (st.st_mode & 07777) != 02775) {
		printf("chmod g+s of a directory refused: %s\n", strerror(errno));
		return 2;
	}
	expect_errno("chmod 4755 of a directory", chmod(path, 04775), EPERM, 0);
	fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fchmod(fd, 02770) < 0 || fchmodat(AT_FDCWD, path, 02775, 0) < 0) {
		printf("fchmod/fchmodat g+s of a directory refused: %s\n", strerror(errno));
		return 2;
	}
	close(fd);
	printf("directory g+s: ok\n");
	int took = chmod_race(d, 2000);
	printf("chmod g+s while a file swaps in: %s\n", took > 0 ? "directory took it" : "none took");
	const char *names[] = { "chmod", "chmod-g", "fchmod", "fchmodat", "fchmodat2", "open",
				"openat", "creat", "mknod", "mknodat", "openat2", "swap", "swap-file" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		check_mode(d, names[i]);
	return finish();
}
