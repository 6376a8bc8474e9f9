/* Snapshot guest: a second thread exists, so a v1 snapshot must be refused. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *spin(void *arg)
{
	(void)arg;
	for (;;)
		sleep(1);
	return NULL;
}

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, spin, NULL);
	FILE *f = fopen("ready", "w");
	if (f)
		fclose(f);
	sleep(5);
	puts("thread guest done");
	return 0;
}
