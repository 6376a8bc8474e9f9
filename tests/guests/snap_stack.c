/* Snapshot guest: deep recursion with live locals in every frame. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint64_t dive(int depth, uint64_t acc)
{
	volatile uint8_t local[200];
	memset((void *)local, depth & 0xff, sizeof local);
	local[depth % 200] = (uint8_t)(acc >> 3);
	if (depth % 500 == 0)
		getppid();
	uint64_t below = depth ? dive(depth - 1, acc * 31 + (uint64_t)depth) : acc;
	/* the frame's own bytes must have survived everything below it */
	for (int i = 0; i < 200; i++)
		if (i != depth % 200 && local[i] != (uint8_t)(depth & 0xff))
			return 0;
	return below + local[depth % 200];
}

int main(void)
{
	uint64_t r = dive(20000, 1);
	printf("stack: depth 20000 result %llu\n", (unsigned long long)r);
	return r ? 0 : 1;
}
