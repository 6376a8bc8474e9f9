/* Guest image identity: an ELF64 x86-64 executable checked with libelf, named by SHA-256 (SPEC §5). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "lease/lease-internal.h"

#define IMAGE_MAX (1ull << 32)
#define PHDR_MAX 4096
#define CACHE_ENTS 64
#define CACHE_MAX (CACHE_ENTS * 160 + 256)

static int check_elf(Elf *elf, const char *path, uint64_t size, struct common_err *e)
{
	GElf_Ehdr eh;
	GElf_Phdr ph;
	size_t nph;
	int loads = 0, interp = 0, dynamic = 0;

	if (elf_kind(elf) != ELF_K_ELF)
		return common_errf(e, path, "not an ELF file");
	if (gelf_getclass(elf) != ELFCLASS64)
		return common_errf(e, path, "not ELF64 (32-bit images are refused)");
	if (!gelf_getehdr(elf, &eh))
		return common_errf(e, path, "unreadable ELF header: %s", elf_errmsg(-1));
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return common_errf(e, path, "not little-endian");
	if (eh.e_machine != EM_X86_64)
		return common_errf(e, path, "machine %u is not x86-64", (unsigned)eh.e_machine);
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return common_errf(e, path, "ELF type %u is not an executable (ET_EXEC or ET_DYN)",
				   (unsigned)eh.e_type);
	/* e_phnum itself, not libelf's view of it (which may be clipped to the file) */
	nph = eh.e_phnum;
	if (nph == PN_XNUM && elf_getphdrnum(elf, &nph) != 0)
		return common_errf(e, path, "unreadable extended program header count");
	if (nph == 0 || nph > PHDR_MAX)
		return common_errf(e, path, "no sane program header table (%zu entries)", nph);
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
	    nph * sizeof(Elf64_Phdr) > size - eh.e_phoff)
		return common_errf(e, path, "program header table lies outside the file");
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph))
			return common_errf(e, path, "program header %zu unreadable", i);
		if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			return common_errf(e, path, "program header %zu: segment lies outside the file", i);
		if (ph.p_type == PT_LOAD) {
			loads++;
			if (ph.p_filesz > ph.p_memsz)
				return common_errf(e, path, "program header %zu: file size exceeds memory size", i);
			if (ph.p_align > 1 && (ph.p_vaddr - ph.p_offset) % ph.p_align != 0)
				return common_errf(e, path, "program header %zu: misaligned segment", i);
		} else if (ph.p_type == PT_DYNAMIC) {
			dynamic = 1;
		} else if (ph.p_type == PT_INTERP) {
			size_t n;
			char *img = elf_rawfile(elf, &n);
			if (interp++)
				return common_errf(e, path, "more than one PT_INTERP");
			if (!img || ph.p_filesz < 2 || ph.p_offset + ph.p_filesz > n)
				return common_errf(e, path, "PT_INTERP: empty or outside the file");
			if (img[ph.p_offset + ph.p_filesz - 1] != '\0' ||
			    memchr(img + ph.p_offset, '\0', ph.p_filesz - 1))
				return common_errf(e, path, "PT_INTERP: interpreter path is not one NUL-terminated string");
			if (img[ph.p_offset] != '/')
				return common_errf(e, path, "PT_INTERP: interpreter path is not absolute");
		}
	}
	if (!loads)
		return common_errf(e, path, "no PT_LOAD segment");
	if (eh.e_type == ET_EXEC && dynamic && !interp)
		return common_errf(e, path, "dynamic executable without an interpreter (PT_INTERP)");
	if (eh.e_entry == 0)
		return common_errf(e, path, "no entry point (a shared library, not an executable)");
	return 0;
}

int lease_image_check(const char *path, char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	uint8_t d[COMMON_SHA256_LEN];
	struct stat st;
	Elf *elf;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "image %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return common_errf(e, path, "image is not a regular file");
	}
	if ((uint64_t)st.st_size > IMAGE_MAX) {
		close(fd);
		return common_errf(e, path, "image larger than 4 GiB");
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		close(fd);
		return common_errf(e, "libelf", "initialisation failed: %s", elf_errmsg(-1));
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return common_errf(e, path, "not an ELF file: %s", elf_errmsg(-1));
	}
	r = check_elf(elf, path, (uint64_t)st.st_size, e);
	elf_end(elf);
	close(fd);
	if (r < 0)
		return -1;
	if (common_sha256_file(path, d, e) < 0)
		return -1;
	common_hex(d, sizeof d, hex);
	return 0;
}

/* The image-hashes file, like the recorder's exec-hashes: a header "sbx-image-hashes
 * 1 BOOT_ID", lines "DEV INO SIZE MSEC MNSEC CSEC CNSEC HEX" (newest first), a
 * trailer "sum HEX" over what precedes it. Another boot, a bad sum or a bad line
 * drops it whole. Only files on block devices: anonymous devices (tmpfs, overlay)
 * reuse their inode numbers. ctime cannot be set back, so an identity seen again
 * is the same content. */
static int cache_ident(const struct stat *st, char *out, size_t n)
{
	return snprintf(out, n, "%llu %llu %llu %lld %ld %lld %ld ",
			(unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			(unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
			st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

static int hex_run(const char *p)
{
	return strspn(p, "0123456789abcdef") == 64;
}

/* The cache's entry lines (between header and trailer), NULL when unusable. */
static char *cache_load(const char *path, const char *head, size_t *n)
{
	char *buf = NULL, hex[COMMON_SHA256_HEX], *sum;
	struct common_sha256 c;
	uint8_t d[COMMON_SHA256_LEN];
	size_t len = 0, hl = strlen(head);

	if (common_read_file(path, CACHE_MAX, &buf, &len, NULL) < 0)
		return NULL;
	if (len < hl + 69 || memcmp(buf, head, hl) != 0)
		goto bad;
	sum = buf + len - 69;
	if (memcmp(sum, "sum ", 4) != 0 || sum[68] != '\n' || sum[-1] != '\n')
		goto bad;
	common_sha256_init(&c);
	common_sha256_update(&c, buf, (size_t)(sum - buf));
	common_sha256_final(&c, d);
	common_hex(d, sizeof d, hex);
	if (memcmp(hex, sum + 4, 64) != 0)
		goto bad;
	*n = (size_t)(sum - buf) - hl;
	memmove(buf, buf + hl, *n);
	buf[*n] = '\0';
	for (char *l = buf; *l; l = strchr(l, '\n') + 1) {
		char *nl = strchr(l, '\n'), *sp = strrchr(l, ' ');
		if (!nl || !sp || sp > nl || nl - sp != 65 || !hex_run(sp + 1))
			goto bad;
	}
	return buf;
bad:
	free(buf);
	return NULL;
}

static void cache_save(const char *path, const char *head, const char *entry, const char *old,
		       size_t oldlen, const char *ident)
{
	struct common_sha256 c;
	uint8_t d[COMMON_SHA256_LEN];
	char hex[COMMON_SHA256_HEX], *buf = common_xmalloc(CACHE_MAX + 1), *tmp;
	size_t len, kept = 1, il = strlen(ident);
	const char *l;
	int fd, ok;

	len = (size_t)snprintf(buf, CACHE_MAX, "%s%s", head, entry);
	for (l = old; l && l < old + oldlen && kept < CACHE_ENTS; l = strchr(l, '\n') + 1) {
		size_t ll = (size_t)(strchr(l, '\n') + 1 - l);
		if (strncmp(l, ident, il) == 0)
			continue;
		memcpy(buf + len, l, ll);
		len += ll;
		kept++;
	}
	common_sha256_init(&c);
	common_sha256_update(&c, buf, len);
	common_sha256_final(&c, d);
	common_hex(d, sizeof d, hex);
	len += (size_t)snprintf(buf + len, CACHE_MAX + 1 - len, "sum %s\n", hex);
	/* only a cache: not fsynced, and a failure costs the next run its hashing */
	tmp = common_xasprintf("%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	ok = fd >= 0 && common_write_all(fd, buf, len) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok || rename(tmp, path) < 0)
		unlink(tmp);
	free(tmp);
	free(buf);
}

static int same_ident(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int lease_image_check_cached(struct lease_store *s, const char *path,
			     char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	const char *boot = lease_boot_id(s);
	char head[64], ident[160], entry[240], *cp, *old = NULL, *hit;
	struct stat before, after;
	size_t oldlen = 0;

	if (!boot || stat(path, &before) < 0 || !S_ISREG(before.st_mode) || major(before.st_dev) == 0)
		return lease_image_check(path, hex, e);
	snprintf(head, sizeof head, "sbx-image-hashes 1 %s\n", boot);
	cache_ident(&before, ident, sizeof ident);
	cp = lease_path(s, "image-hashes");
	old = cache_load(cp, head, &oldlen);
	hit = old ? strstr(old, ident) : NULL;
	if (hit && (hit == old || hit[-1] == '\n')) {
		memcpy(hex, hit + strlen(ident), 64);
		hex[64] = '\0';
		free(old);
		free(cp);
		return 0;
	}
	if (lease_image_check(path, hex, e) < 0) {
		free(old);
		free(cp);
		return -1;
	}
	/* kept only when nothing changed while it was checked and hashed */
	if (stat(path, &after) == 0 && same_ident(&before, &after)) {
		snprintf(entry, sizeof entry, "%s%s\n", ident, hex);
		cache_save(cp, head, entry, old, oldlen, ident);
	}
	free(old);
	free(cp);
	return 0;
}
