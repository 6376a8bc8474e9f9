/* Guest image identity: an ELF64 x86-64 executable checked with libelf, named by SHA-256 (SPEC §5). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/front/front-internal.h"

#define IMAGE_MAX (1ull << 32)
#define PHDR_MAX 4096

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

int lease_image_validate_fd(int fd, const char *path, struct common_err *e)
{
	struct stat st;
	Elf *elf;
	int r;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return common_errf(e, path, "image is not a regular file");
	if ((uint64_t)st.st_size > IMAGE_MAX)
		return common_errf(e, path, "image larger than 4 GiB");
	if (elf_version(EV_CURRENT) == EV_NONE)
		return common_errf(e, "libelf", "initialisation failed: %s", elf_errmsg(-1));
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return common_errf(e, path, "not an ELF file: %s", elf_errmsg(-1));
	r = check_elf(elf, path, (uint64_t)st.st_size, e);
	elf_end(elf);
	return r < 0 ? -1 : 0;
}

static int image_check_fd(int fd, const char *path, char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	uint8_t d[COMMON_SHA256_LEN];

	if (lease_image_validate_fd(fd, path, e) < 0 || common_sha256_fd(fd, path, d, e) < 0)
		return -1;
	common_hex(d, sizeof d, hex);
	return 0;
}

int lease_image_check(const char *path, char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "image %s", path);
	int r = image_check_fd(fd, path, hex, e);
	close(fd);
	return r;
}

int lease_image_check_cached_fd(struct lease_store *s, int fd, const char *path,
				char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	struct stat before, after;
	char *cp;
	struct common_hashcache *c;
	int rc = 0;

	if (fstat(fd, &before) < 0 || !S_ISREG(before.st_mode))
		return image_check_fd(fd, path, hex, e);
	cp = lease_path(s, "image-hashes");
	c = common_hashcache_open(cp, "image-hashes");
	free(cp);
	if (!common_hashcache_get(c, &before, hex)) {
		rc = image_check_fd(fd, path, hex, e);
		/* kept only when nothing changed while it was checked and hashed */
		if (rc == 0 && fstat(fd, &after) == 0 && common_same_file(&before, &after))
			common_hashcache_put(c, &before, hex);
	}
	common_hashcache_close(c);
	return rc;
}

int lease_image_check_cached(struct lease_store *s, const char *path,
			     char hex[COMMON_SHA256_HEX], struct common_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "image %s", path);
	int r = lease_image_check_cached_fd(s, fd, path, hex, e);
	close(fd);
	return r;
}

int lease_image_interp(int fd, const char *path, char interp[LEASE_INTERP_MAX],
		       char arg[LEASE_INTERP_MAX], struct common_err *e)
{
	char buf[LEASE_INTERP_MAX + 1];
	ssize_t n = pread(fd, buf, LEASE_INTERP_MAX, 0);

	if (n < 2 || buf[0] != '#' || buf[1] != '!')
		return 0;
	buf[n] = 0;
	char *nl = memchr(buf, '\n', (size_t)n);
	if (!nl)
		return common_errf(e, path, "#! line longer than %d bytes", LEASE_INTERP_MAX - 1);
	*nl = 0;
	char *p = buf + 2 + strspn(buf + 2, " \t");
	size_t k = strcspn(p, " \t");
	if (k == 0 || p[0] != '/')
		return common_errf(e, path, "#! line names no absolute interpreter");
	memcpy(interp, p, k);
	interp[k] = 0;
	p += k;
	p += strspn(p, " \t");
	k = strlen(p);
	while (k && (p[k - 1] == ' ' || p[k - 1] == '\t' || p[k - 1] == '\r'))
		k--;
	memcpy(arg, p, k); /* the kernel passes the rest as one argument */
	arg[k] = 0;
	return 1;
}
