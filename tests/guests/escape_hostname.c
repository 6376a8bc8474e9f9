/* The UTS and IPC namespaces are the run's own: sethostname changes only ours. */
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>
#include "escape.h"

int main(void)
{
	char h[64];
	gethostname(h, sizeof h);
	printf("hostname inside: %s\n", h);
	if (sethostname("sbx-escaped", 11) == 0)
		printf("sethostname succeeded inside (private UTS namespace)\n");
	else
		printf("contained: sethostname (%s)\n", strerror(errno));
	int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	printf("private SysV shm id %d\n", id);
	return finish();
}
