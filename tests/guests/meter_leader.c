/* meter_leader MIB: reads MIB MiB of /dev/zero in its main thread, then ends that
 * thread alone while a second one sleeps 2 s and ends the process: the leader
 * stays a zombie meanwhile, its reads already counted at its exit event. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *later(void *arg)
{
	(void)arg;
	sleep(2);
	exit(0);
}

int main(int argc, char **argv)
{
	static char buf[64 << 10];
	unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
	int fd = open("/dev/zero", O_RDONLY);
	pthread_t t;

	if (fd < 0)
		return 1;
	for (unsigned long i = 0; i < mib * 16; i++)
		if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			return 1;
	if (pthread_create(&t, NULL, later, NULL) != 0)
		return 1;
	syscall(SYS_exit, 0); /* this thread only */
	return 1;
}
