/* Hogs for metering tests: each exceeds one dimension until the supervisor stops it.
 * usage: meter_hog fuel|threads N|spin MS|memory|peak MIB|hold MIB|burn|write|read FILE|
 *        sip FILE|flood|lines|fds|dups|ns|nsburst N|nsdeep N [exit]|nshide [exit]|
 *        burnsay|writesay
 * burnsay and writesay print what they used so far (CPU µs, bytes written) as they go:
 * a lower bound of their usage at any moment, for a run killed midway. hold, burn,
 * dups and sip wait for a byte on stdin first: a test stops the supervisor before
 * they move. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

/* 2 MiB into a new file NAME of the working directory. */
static int put2m(const char *name)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	memset(buf, 'n', sizeof buf);
	for (int i = 0; fd >= 0 && i < (2 << 20) / (int)sizeof buf; i++)
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			return -1;
	return fd < 0 ? -1 : close(fd);
}

/* Done hiding: exit now (the last measurement must see it), or wait to be stopped
 * (a tick must see it; SIGALRM ends a run nobody stops). */
static int hold(const char *how)
{
	if (how && strcmp(how, "exit") == 0)
		return 0;
	alarm(20);
	for (;;)
		pause();
}

static void *spinner(void *arg)
{
	volatile unsigned long spin = 0;

	(void)arg;
	for (;;)
		spin++;
	return NULL;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	volatile unsigned long spin = 0;

	if (strcmp(what, "burnsay") == 0) {
		for (struct timespec t;;) {
			for (int i = 0; i < 100000; i++)
				spin++;
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
			dprintf(1, "%lld\n", (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000);
		}
	} else if (strcmp(what, "writesay") == 0) {
		int fd = open("/tmp/big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		memset(buf, 'w', sizeof buf);
		for (long long n = 0; fd >= 0; n += sizeof buf) {
			if (n % (16 << 20) == 0 && lseek(fd, 0, SEEK_SET) < 0)
				return 1; /* the same 16 MiB over and over: small in /tmp */
			if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
				return 1;
			if ((n + sizeof buf) % (1 << 20) == 0)
				dprintf(1, "%lld\n", n + (long long)sizeof buf);
		}
		return 1;
	} else if (strcmp(what, "fuel") == 0) {
		for (;;)
			spin++;
	} else if (strcmp(what, "threads") == 0 && argc > 2) {
		/* N spinning threads, the main one included: one process at full speed */
		pthread_t t;
		for (int i = 1; i < atoi(argv[2]); i++)
			if (pthread_create(&t, NULL, spinner, NULL) != 0)
				return 1;
		spinner(NULL);
	} else if (strcmp(what, "spin") == 0 && argc > 2) {
		/* a bounded spinner: MS of CPU time, then exit */
		clock_t end = clock() + (clock_t)(atol(argv[2]) * (CLOCKS_PER_SEC / 1000));
		while (clock() < end)
			spin++;
		return 0;
	} else if (strcmp(what, "memory") == 0) {
		/* touch every page; keep what we got once the address space cap says no */
		for (;;) {
			char *p = malloc(1 << 20);
			if (!p)
				pause();
			memset(p, 1, 1 << 20);
		}
	} else if (strcmp(what, "peak") == 0 && argc > 2) {
		/* touch MIB MiB and exit at once, before any sample can see it live */
		size_t n = (size_t)atol(argv[2]) << 20;
		char *p = malloc(n);
		if (!p)
			return 1;
		memset(p, 1, n);
		return p[n - 1] == 1 ? 0 : 1;
	} else if (strcmp(what, "hold") == 0 && argc > 2) {
		/* once a byte comes on stdin, touch MIB MiB and keep it: no call stops;
		 * its output is closed first, so it never makes any */
		size_t n = (size_t)atol(argv[2]) << 20;
		char *p = malloc(n);
		if (!p || close(1) < 0 || close(2) < 0 || read(0, buf, 1) != 1)
			return 1;
		memset(p, 1, n);
		return hold(NULL);
	} else if (strcmp(what, "burn") == 0) {
		/* once a byte comes on stdin, CPU at full speed */
		if (read(0, buf, 1) != 1)
			return 1;
		for (;;)
			spin++;
	} else if (strcmp(what, "dups") == 0) {
		/* once a byte comes on stdin, descriptors by dup (no stop) until refused */
		if (read(0, buf, 1) != 1)
			return 1;
		while (dup(1) >= 0)
			;
		return hold(NULL);
	} else if (strcmp(what, "sip") == 0 && argc > 2) {
		/* once a byte comes on stdin, small reads of FILE (none stops), over and over */
		int fd = open(argv[2], O_RDONLY);
		if (fd < 0 || read(0, buf, 1) != 1)
			return 1;
		for (ssize_t r;; )
			if ((r = read(fd, buf, sizeof buf)) < 0 || (r == 0 && lseek(fd, 0, SEEK_SET) < 0))
				return 1;
	} else if (strcmp(what, "write") == 0) {
		int fd = open("/tmp/big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		memset(buf, 'w', sizeof buf);
		for (long long n = 0; fd >= 0 && n < (2ll << 30); n += sizeof buf)
			if (write(fd, buf, sizeof buf) < 0)
				return 1;
		return 0;
	} else if (strcmp(what, "read") == 0 && argc > 2) {
		for (;;) {
			int fd = open(argv[2], O_RDONLY);
			if (fd < 0)
				return 1;
			while (read(fd, buf, sizeof buf) > 0)
				;
			close(fd);
		}
	} else if (strcmp(what, "flood") == 0) {
		memset(buf, 'x', sizeof buf);
		for (;;)
			if (write(1, buf, sizeof buf) < 0)
				return 1;
	} else if (strcmp(what, "lines") == 0) {
		for (unsigned long i = 0;; i++)
			if (dprintf(1, "line %lu\n", i) < 0)
				return 1;
	} else if (strcmp(what, "fds") == 0) {
		for (;;)
			if (open("/dev/null", O_RDONLY) < 0)
				pause();
	} else if (strcmp(what, "ns") == 0) {
		memset(buf, 'n', 4096);
		for (unsigned long i = 0;; i++) {
			char name[64];
			snprintf(name, sizeof name, "cell-%lu", i);
			int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, buf, 4096) != 4096)
				pause();
			close(fd);
		}
	} else if (strcmp(what, "nsburst") == 0 && argc > 2) {
		/* enough names that a walk takes several ticks, then bytes at full speed */
		static char big[1 << 20];
		memset(big, 'b', sizeof big);
		for (long i = 0; i < atol(argv[2]); i++) {
			char name[32];
			snprintf(name, sizeof name, "e%ld", i);
			int fd = open(name, O_WRONLY | O_CREAT, 0644);
			if (fd < 0)
				pause();
			close(fd);
		}
		int fd = open("big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		while (fd >= 0 && write(fd, big, sizeof big) == (ssize_t)sizeof big)
			;
		pause();
	} else if (strcmp(what, "nsdeep") == 0 && argc > 2) {
		/* deeper than any walk goes, 2 MiB at the bottom */
		for (int i = 0; i < atoi(argv[2]); i++)
			if (mkdir("d", 0755) < 0 || chdir("d") < 0)
				return 1;
		return put2m("big") < 0 ? 1 : hold(argv[3]);
	} else if (strcmp(what, "nshide") == 0) {
		/* 2 MiB in a file and a directory its owner then cannot read */
		if (mkdir("h", 0755) < 0 || chdir("h") < 0 || put2m("big") < 0 ||
		    chmod("big", 0) < 0 || chdir("..") < 0 || chmod("h", 0) < 0)
			return 1;
		return hold(argv[2]);
	}
	fprintf(stderr, "usage: meter_hog fuel|threads N|spin MS|memory|peak MIB|hold MIB|burn|write|read FILE|sip FILE|"
		"flood|lines|fds|dups|ns|nsburst N|nsdeep N [exit]|nshide [exit]|burnsay|writesay\n");
	return 2;
}
