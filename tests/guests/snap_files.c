/* Snapshot guest: one namespace file open mid-read and one mid-write. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint32_t sum(const uint8_t *p, size_t n, uint32_t h)
{
	for (size_t i = 0; i < n; i++)
		h = h * 16777619u ^ p[i];
	return h;
}

int main(void)
{
	uint8_t buf[1024];
	int in = open("input.dat", O_CREAT | O_TRUNC | O_WRONLY, 0644);
	for (int i = 0; i < 48; i++) {
		for (int j = 0; j < 1024; j++)
			buf[j] = (uint8_t)(i * 7 + j * 13);
		if (write(in, buf, sizeof buf) != sizeof buf)
			return 2;
	}
	close(in);
	in = open("input.dat", O_RDONLY);
	int out = open("output.dat", O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0600);
	uint32_t hin = 2166136261u;
	ssize_t n;
	int blocks = 0;
	while ((n = read(in, buf, 700)) > 0) {
		hin = sum(buf, (size_t)n, hin);
		for (ssize_t j = 0; j < n; j++)
			buf[j] ^= 0x5a;
		if (write(out, buf, (size_t)n) != n)
			return 3;
		blocks++;
	}
	off_t rpos = lseek(in, 0, SEEK_CUR), wpos = lseek(out, 0, SEEK_CUR);
	close(in);
	close(out);
	out = open("output.dat", O_RDONLY);
	uint32_t hout = 2166136261u;
	while ((n = read(out, buf, sizeof buf)) > 0)
		hout = sum(buf, (size_t)n, hout);
	close(out);
	printf("files: %d blocks, read to %lld, wrote to %lld, in %08x out %08x\n", blocks,
	       (long long)rpos, (long long)wpos, hin, hout);
	return 0;
}
