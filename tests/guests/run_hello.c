/* Prints a greeting and its arguments; exits with argv[1] when numeric. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	printf("hello from the guest\n");
	for (int i = 1; i < argc; i++)
		printf("arg%d=%s\n", i, argv[i]);
	return argc > 1 ? atoi(argv[1]) : 0;
}
