/* Snapshot guest: a heap hash table of 100,000 entries, built step by step. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct node { uint64_t key, val; struct node *next; };
#define NB 65536
static struct node *tab[NB];

int main(void)
{
	const int n = 100000;
	for (int i = 0; i < n; i++) {
		struct node *x = malloc(sizeof *x);
		x->key = (uint64_t)i * 2654435761u + 17;
		x->val = x->key ^ (x->key >> 7);
		x->next = tab[x->key % NB];
		tab[x->key % NB] = x;
		if (i % 1000 == 0)
			getppid(); /* a step boundary */
	}
	uint64_t sum = 0;
	int found = 0;
	for (int i = 0; i < n; i++) {
		uint64_t k = (uint64_t)i * 2654435761u + 17;
		for (struct node *x = tab[k % NB]; x; x = x->next)
			if (x->key == k) {
				found += x->val == (k ^ (k >> 7));
				sum += x->val;
				break;
			}
		if (i % 5000 == 0)
			getppid();
	}
	printf("heap: %d/%d entries ok, sum %llu\n", found, n, (unsigned long long)sum);
	return found == n ? 0 : 1;
}
