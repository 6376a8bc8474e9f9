/* A program for a debugger: main calls deeper() three levels down, which
 * aborts (built -g -O0 by tests/guests/ptrace.mk, so the frames stay). */
#include <stdio.h>
#include <stdlib.h>

static void deeper(int n)
{
	if (n == 0)
		abort();
	deeper(n - 1);
}

int main(void)
{
	printf("start\n");
	fflush(stdout);
	deeper(2);
	return 0;
}
