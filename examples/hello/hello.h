/* hello: a small bundled C project built by sbx-run demos and benches. */
#ifndef HELLO_H
#define HELLO_H
#include <stddef.h>
#include <stdint.h>

uint64_t adler_run(const char *s, size_t n);
uint64_t crc_run(const char *s, size_t n);
uint64_t fnv_run(const char *s, size_t n);
uint64_t sum_run(const char *s, size_t n);
uint64_t rot_run(const char *s, size_t n);
uint64_t caesar_run(const char *s, size_t n);
uint64_t rle_run(const char *s, size_t n);
uint64_t hexd_run(const char *s, size_t n);
uint64_t base_run(const char *s, size_t n);
uint64_t words_run(const char *s, size_t n);
uint64_t lines_run(const char *s, size_t n);
uint64_t upper_run(const char *s, size_t n);
uint64_t lower_run(const char *s, size_t n);
uint64_t rev_run(const char *s, size_t n);
uint64_t palin_run(const char *s, size_t n);
uint64_t fib_run(const char *s, size_t n);
uint64_t prime_run(const char *s, size_t n);
uint64_t gcd_run(const char *s, size_t n);
uint64_t sqrt_run(const char *s, size_t n);
uint64_t sort_run(const char *s, size_t n);
uint64_t bsearch_run(const char *s, size_t n);
uint64_t stack_run(const char *s, size_t n);
uint64_t queue_run(const char *s, size_t n);
uint64_t list_run(const char *s, size_t n);
uint64_t tree_run(const char *s, size_t n);
uint64_t matrix_run(const char *s, size_t n);
uint64_t stats_run(const char *s, size_t n);

#endif
