/* Determinism guest: prints everything a run could see differently from one
 * run to the next (time, randomness, CPUs, /ns order and times, pids, addresses). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void *thread_main(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	struct timespec ts, mono;
	struct timeval tv;
	unsigned char rnd[16], *at;
	cpu_set_t set;
	pthread_t th;
	int stack_var = 0;

	printf("time %lld\n", (long long)time(NULL));
	clock_gettime(CLOCK_REALTIME, &ts);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	gettimeofday(&tv, NULL);
	printf("realtime %lld.%09ld monotonic %lld.%09ld tv %lld.%06ld\n", (long long)ts.tv_sec,
	       ts.tv_nsec, (long long)mono.tv_sec, mono.tv_nsec, (long long)tv.tv_sec,
	       (long)tv.tv_usec);
	srand((unsigned)(ts.tv_sec ^ ts.tv_nsec));
	printf("rand %d %d\n", rand(), rand());
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return 2;
	printf("getrandom");
	for (size_t i = 0; i < sizeof rnd; i++)
		printf(" %02x", rnd[i]);
	at = (unsigned char *)getauxval(AT_RANDOM);
	printf("\nat_random");
	for (int i = 0; at && i < 16; i++)
		printf(" %02x", at[i]);
	printf("\nvdso %s\n", getauxval(AT_SYSINFO_EHDR) ? "visible" : "hidden");
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof set, &set);
	printf("cpus %d online %ld\n", CPU_COUNT(&set), sysconf(_SC_NPROCESSORS_ONLN));
	printf("pid %d ppid %d\n", (int)getpid(), (int)getppid());
	printf("stack %p heap %p\n", (void *)&stack_var, malloc(16));
	int rc = pthread_create(&th, NULL, thread_main, NULL);
	printf("thread %s\n", rc == 0 ? "created" : strerror(rc));
	if (rc == 0)
		pthread_join(th, NULL);
	/* /ns: a few files created in scrambled order, then listed and stat'ed */
	if (argc > 1 && !strcmp(argv[1], "ns")) {
		static const char *names[] = { "m", "zz", "a", "q", "b" };
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
			int fd = open(names[i], O_CREAT | O_WRONLY | O_TRUNC, 0644);
			if (fd >= 0)
				close(fd);
		}
		DIR *d = opendir("/ns");
		struct dirent *de;
		printf("ls");
		while (d && (de = readdir(d)))
			printf(" %s", de->d_name);
		printf("\n");
		if (d)
			closedir(d);
		struct stat st;
		if (stat("/ns/m", &st) == 0)
			printf("mtime %lld ctime %lld\n", (long long)st.st_mtime, (long long)st.st_ctime);
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
			unlink(names[i]);
	}
	/* an input file decides what is opened next (bisect/adjudicate tests) */
	if (argc > 2 && !strcmp(argv[1], "input")) {
		char buf[64] = "";
		FILE *f = fopen(argv[2], "r");
		if (f) {
			if (!fgets(buf, sizeof buf, f))
				buf[0] = 0;
			fclose(f);
		}
		buf[strcspn(buf, "\n")] = 0;
		char path[128];
		snprintf(path, sizeof path, "/etc/%s", buf);
		printf("input %s exists %d\n", buf, access(path, F_OK) == 0);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("end %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	return 0;
}
