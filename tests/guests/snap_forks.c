/* Snapshot guest: forks all the time. 150 rounds 10 ms apart, each forking a
 * child that exits at once with a status the parent folds into a digest;
 * argument "fifo", "eventfd" or "shm": a child holds a named FIFO open for
 * reading and writing (then removed), an eventfd, or an attached SysV segment
 * meanwhile;
 * "shared-eventfd": an eventfd made before the fork, held by both;
 * "memfd-twice": a memfd opened a second time through /proc;
 * "split-epoll", "twin-epoll": an epoll set made before the fork, held by
 * both, to which each adds an eventfd of its own (under different
 * descriptor numbers, or the same one) (a snapshot is refused for "fifo",
 * "memfd-twice", "split-epoll" and "twin-epoll"). Prints the digest. */
#define _GNU_SOURCE /* memfd_create */
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* An eventfd of this process's own, at descriptor at, added to the set ep. */
static int own_watch(int ep, int at)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = eventfd(0, 0);
	return fd < 0 || dup2(fd, at) != at ? -1 : epoll_ctl(ep, EPOLL_CTL_ADD, at, &ev);
}

int main(int argc, char **argv)
{
	pid_t holder = -1;
	int shared = argc > 1 && !strcmp(argv[1], "shared-eventfd") ? eventfd(1, 0) : -1;
	int twin = argc > 1 && !strcmp(argv[1], "twin-epoll");
	int ep = argc > 1 && (twin || !strcmp(argv[1], "split-epoll")) ? epoll_create1(0) : -1;
	if (argc > 1 && !strcmp(argv[1], "memfd-twice")) {
		char p[64];
		snprintf(p, sizeof p, "/proc/self/fd/%d", memfd_create("twice", 0));
		if (open(p, O_RDWR) < 0)
			return 2;
	}
	if (argc > 1 && (holder = fork()) == 0) {
		int id;
		/* unreachable by its path: refused (one still named is held) */
		if (!strcmp(argv[1], "fifo") && (mkfifo("fifo", 0600) < 0 || open("fifo", O_RDWR) < 0 ||
						 unlink("fifo") < 0))
			_exit(2);
		if (!strcmp(argv[1], "eventfd") && eventfd(3, 0) < 0)
			_exit(2);
		if (!strcmp(argv[1], "shm") && ((id = shmget(IPC_PRIVATE, 8192, 0600)) < 0 ||
						shmat(id, NULL, 0) == (void *)-1 ||
						shmctl(id, IPC_RMID, NULL) < 0))
			_exit(2);
		if (ep >= 0 && own_watch(ep, 40) < 0)
			_exit(2);
		sleep(4);
		_exit(0);
	}
	if (ep >= 0 && own_watch(ep, twin ? 40 : 50) < 0)
		return 2;
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 150; i++) {
		pid_t kid = fork();
		if (kid == 0)
			_exit(i % 251);
		int st;
		if (kid < 0 || waitpid(kid, &st, 0) != kid)
			return 1;
		h = (h ^ (uint64_t)WEXITSTATUS(st)) * 1099511628211ull;
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	if (holder > 0)
		kill(holder, SIGKILL), waitpid(holder, NULL, 0);
	if (shared >= 0)
		close(shared);
	printf("forks %016llx\n", (unsigned long long)h);
	return 0;
}
