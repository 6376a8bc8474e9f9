/* The smallest static guest: one line out, as plain `cc -static` builds it. */
#include <stdio.h>

int main(void)
{
	puts("hello");
	return 0;
}
