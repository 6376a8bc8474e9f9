/* An open() of a FIFO that a signal with SA_RESTART interrupts is restarted by
 * the kernel and opens the FIFO: a child waits until this process is in openat,
 * signals it, then opens the writing end. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled = 1;
}

/* pid is in openat (257), at its stop or waiting in the kernel */
static int in_openat(pid_t pid)
{
	char p[64], buf[32] = "";
	snprintf(p, sizeof p, "/proc/%d/syscall", (int)pid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n > 4 && strncmp(buf, "257 ", 4) == 0;
}

static void writer(pid_t parent, const char *fifo)
{
	while (!in_openat(parent))
		usleep(1000);
	kill(parent, SIGUSR1);
	for (int i = 0; i < 20000; i++) { /* until the restarted open is there to read */
		int fd = open(fifo, O_WRONLY | O_NONBLOCK);
		if (fd >= 0) {
			_exit(write(fd, "x", 1) == 1 ? 0 : 1);
		}
		usleep(1000);
	}
	_exit(1);
}

int main(int argc, char **argv)
{
	const char *fifo = argc > 1 ? argv[1] : "/tmp/fifo";
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	pid_t parent = getpid(), c;
	char b = 0;

	if (mkfifo(fifo, 0600) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0)
		return 2;
	if ((c = fork()) == 0)
		writer(parent, fifo);
	int fd = open(fifo, O_RDONLY);
	if (fd >= 0 && read(fd, &b, 1) != 1)
		b = 0;
	printf("open: %s, read %c, handler ran: %s\n", fd >= 0 ? "ok" : strerror(errno),
	       b ? b : '-', handled ? "yes" : "no");
	waitpid(c, NULL, 0);
	return fd >= 0 ? 0 : 1;
}
