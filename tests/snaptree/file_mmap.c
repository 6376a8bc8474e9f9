/* snaptree guest: mappings of files: a private writable mapping of a file
 * changed page by page (copy-on-write pages differ from the file), a private
 * read-only one, and the file itself rewritten in between. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fdguest.h"

int main(void)
{
	int fd = open("mapped.bin", O_CREAT | O_TRUNC | O_RDWR, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 16 * 4096) == 0);
	for (int i = 0; i < 16; i++) {
		char page[4096];
		memset(page, 'a' + i, sizeof page);
		CHECK(pwrite(fd, page, sizeof page, i * 4096) == sizeof page);
	}
	uint8_t *p = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	const uint8_t *ro = mmap(NULL, 8 * 4096, PROT_READ, MAP_PRIVATE, fd, 8 * 4096);
	CHECK(p != MAP_FAILED && ro != MAP_FAILED);
	for (int s = 0; s < STEPS; s++) {
		p[(s % 16) * 4096 + s] ^= (uint8_t)(s + 1);
		mix(p, 16 * 4096);
		mix(ro, 4096);
		step_done(s, "mapped");
	}
	printf("end %c %c\n", p[4096], ro[0]);
	return 0;
}
