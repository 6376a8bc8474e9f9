#include <stdio.h>
#include <string.h>
#include "hello.h"

struct step { const char *name; uint64_t (*run)(const char *, size_t); };

static const struct step steps[] = {
	{ "adler", adler_run },
	{ "crc", crc_run },
	{ "fnv", fnv_run },
	{ "sum", sum_run },
	{ "rot", rot_run },
	{ "caesar", caesar_run },
	{ "rle", rle_run },
	{ "hexd", hexd_run },
	{ "base", base_run },
	{ "words", words_run },
	{ "lines", lines_run },
	{ "upper", upper_run },
	{ "lower", lower_run },
	{ "rev", rev_run },
	{ "palin", palin_run },
	{ "fib", fib_run },
	{ "prime", prime_run },
	{ "gcd", gcd_run },
	{ "sqrt", sqrt_run },
	{ "sort", sort_run },
	{ "bsearch", bsearch_run },
	{ "stack", stack_run },
	{ "queue", queue_run },
	{ "list", list_run },
	{ "tree", tree_run },
	{ "matrix", matrix_run },
	{ "stats", stats_run },
};

int main(int argc, char **argv)
{
	const char *text = argc > 1 ? argv[1] : "hello, sandbox (world)\n";
	size_t n = strlen(text);
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		printf("%-8s %llu\n", steps[i].name, (unsigned long long)steps[i].run(text, n));
	return 0;
}
