/* A thread flips an openat path buffer between an allowed file and a forbidden
 * one (argv[1], default /etc/shadow) while the main thread opens it argv[2]
 * times (10^5), holding each value for argv[3] spins (0): no open of the
 * forbidden file may succeed. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>
#include "escape.h"

static char path[256];
static const char *allowed = "/ns/allowed";
static const char *forbidden = "/etc/shadow";
static atomic_int stop;
static long hold;

static void spin(void)
{
	for (volatile long i = 0; i < hold; i++)
		;
}

static void *flipper(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		strcpy(path, forbidden);
		spin();
		strcpy(path, allowed);
		spin();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long n = 100000;
	if (argc > 1)
		forbidden = argv[1];
	if (argc > 2)
		n = atol(argv[2]);
	if (argc > 3)
		hold = atol(argv[3]);
	int fd = open(allowed, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		return 2;
	close(fd);
	/* anything opened that is not the allowed file is the forbidden one (a
	 * policy may deny even a stat of the forbidden file) */
	struct stat as;
	if (stat(allowed, &as) < 0)
		return 2;
	strcpy(path, allowed);
	pthread_t t;
	pthread_create(&t, NULL, flipper, NULL);
	long ok = 0, bad = 0;
	for (long i = 0; i < n; i++) {
		int f = openat(AT_FDCWD, path, O_RDONLY);
		if (f < 0)
			continue;
		struct stat st;
		fstat(f, &st);
		if (st.st_ino != as.st_ino || st.st_dev != as.st_dev)
			bad++;
		else
			ok++;
		close(f);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("opens: %ld of the allowed file, %ld of the forbidden one, %ld attempts\n", ok, bad, n);
	if (bad)
		escaped = 1;
	else
		printf("contained: no open of %s succeeded\n", forbidden);
	return finish();
}
