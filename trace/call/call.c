/* sbx_call: run one callback in a guest running this same executable, with
 * its object graph sent over fd 3 and the changed graph written back.
 *
 * Host: check the image (non-PIE ET_EXEC, build-id, fn is a function symbol),
 * encode the graph, start the guest under trace_run with ASLR off and, at its
 * exec stop, patch main with a jump to call_guest_entry (constructors run,
 * main does not). Guest: read fd 3, check again, decode, call fn, encode,
 * append the result, exit. Host: only a clean exit with a valid result is
 * written back; nothing ever runs fn on the host. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "codec/codec.h"
#include "lease/lease.h"
#include "trace/inspect/inspect.h"
#include "trace/meter/meter.h"
#include "trace/record/record.h"
#include "trace/call/call-internal.h"
#include "trace/tracee/tracee.h"

#define CALL_MAGIC "SBXC"
#define CALL_MAX_FUNCS (1u << 22)
#define JUMP_LEN 12 /* movabs rax, imm64; jmp rax */

extern char **environ;


static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void elf_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct elfinfo *x,
			size_t *cap)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || sh->sh_entsize == 0)
		return;
	size_t n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			break;
		if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		const char *name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (name && strcmp(name, "main") == 0) {
			x->main_addr = s.st_value;
			x->main_size = s.st_size;
		}
		if (x->nfuncs >= CALL_MAX_FUNCS)
			continue;
		if (x->nfuncs == *cap) {
			*cap = *cap ? *cap * 2 : 1024;
			x->funcs = common_xrealloc(x->funcs, *cap * sizeof *x->funcs);
		}
		x->funcs[x->nfuncs++] = s.st_value;
	}
}

static void elf_build_id(Elf_Scn *scn, struct elfinfo *x)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	while (d && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 &&
		    nh.n_descsz <= sizeof x->build_id) {
			memcpy(x->build_id, (char *)d->d_buf + desc_off, nh.n_descsz);
			x->build_id_len = nh.n_descsz;
		}
		off = next;
	}
}

/* What sbx_call needs from an executable, bounded and checked. */
static int elf_load(const char *path, struct elfinfo *x, struct common_err *e)
{
	GElf_Ehdr eh;
	size_t phn, cap = 0;
	Elf_Scn *scn = NULL;
	int rc = -1;

	memset(x, 0, sizeof *x);
	if (elf_version(EV_CURRENT) == EV_NONE)
		return common_errf(e, path, "libelf: %s", elf_errmsg(-1));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return common_errno(e, errno, "%s", path);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		common_errf(e, path, "not an ELF file");
		goto out;
	}
	if (gelf_getclass(elf) != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		common_errf(e, path, "not an x86-64 ELF64 executable");
		goto out;
	}
	x->is_exec = eh.e_type == ET_EXEC;
	if (elf_getphdrnum(elf, &phn) != 0) {
		common_errf(e, path, "unreadable program headers");
		goto out;
	}
	for (size_t i = 0; i < phn; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph)) {
			common_errf(e, path, "program header %zu unreadable", i);
			goto out;
		}
		if (ph.p_type == PT_LOAD && x->nload < 16) {
			x->load_lo[x->nload] = ph.p_vaddr;
			x->load_hi[x->nload++] = ph.p_vaddr + ph.p_memsz;
		}
	}
	int have_symtab = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			have_symtab = 1;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == (have_symtab ? SHT_SYMTAB : SHT_DYNSYM))
			elf_symbols(elf, scn, &sh, x, &cap);
		else if (sh.sh_type == SHT_NOTE)
			elf_build_id(scn, x);
	}
	qsort(x->funcs, x->nfuncs, sizeof *x->funcs, by_u64);
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	if (rc < 0) {
		free(x->funcs);
		x->funcs = NULL;
	}
	return rc;
}

static int is_func(const struct elfinfo *x, uint64_t addr)
{
	return addr && bsearch(&addr, x->funcs, x->nfuncs, sizeof addr, by_u64) != NULL;
}

static int in_image(const struct elfinfo *x, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < x->nload; i++)
		if (addr >= x->load_lo[i] && addr <= x->load_hi[i] && x->load_hi[i] - addr >= len)
			return 1;
	return 0;
}

static int check_fn(void *arg, uint64_t addr, struct common_err *e)
{
	if (is_func(arg, addr))
		return 0;
	return common_errf(e, "function pointer", "%#llx is not a function symbol of the executable",
			   (unsigned long long)addr);
}

__attribute__((noreturn)) void call_guest_die(const char *what, const char *why)
{
	fprintf(stderr, "sbx_call guest: error: %s: %s\n", what, why);
	fflush(stderr);
	_exit(SBX_EXIT_SBX);
}

int call_elf_self(struct elfinfo *x, struct common_err *e)
{
	return elf_load("/proc/self/exe", x, e);
}

/* Guest side: decode a request image, call its callback, encode the changed
 * graph into out. Everything is checked against x, this very executable. */
int call_run_image(const void *buf, size_t len, const struct elfinfo *x, struct codec_buf *out,
		   struct common_err *e)
{
	struct codec_rd rd;
	const uint8_t *magic, *bid, *img;
	uint64_t fn, type;
	size_t bidlen;
	void *root;
	struct codec_graph *g;
	codec_rd_init(&rd, buf, len);
	if (codec_get_raw(&rd, &magic, 4) < 0 || memcmp(magic, CALL_MAGIC, 4) != 0 ||
	    codec_get_u64(&rd, &fn) < 0 || codec_get_u64(&rd, &type) < 0 ||
	    codec_get_bytes(&rd, &bid, &bidlen, sizeof x->build_id) < 0 ||
	    codec_get_raw(&rd, &img, len - rd.off) < 0)
		return common_errf(e, "state input", "not an sbx_call image");
	if (bidlen != x->build_id_len || memcmp(bid, x->build_id, bidlen) != 0)
		return common_errf(e, "/proc/self/exe", "build-id differs from the caller's");
	if (!is_func(x, fn))
		return common_errf(e, "sbx_call", "callback is not a function symbol of the executable");
	if (!in_image(x, type, sizeof(struct sbx_type)))
		return common_errf(e, "sbx_call", "type descriptor outside the executable");
	struct codec_opts o = { .check_fn = check_fn, .arg = (void *)x };
	if (codec_decode((const struct sbx_type *)(uintptr_t)type, img,
			 len - (size_t)(img - (const uint8_t *)buf), &o, &root, &g, e) < 0)
		return -1;
	((void (*)(void *))(uintptr_t)fn)(root);
	codec_buf_init(out);
	int rc = codec_encode_graph(g, &o, out, e);
	codec_graph_free(g);
	return rc;
}

/* Reached instead of main (same arguments). Never returns into libc's main path. */
static int call_guest_entry(int argc, char **argv, char **envp)
{
	struct common_err e = {0};
	struct elfinfo x;
	void *buf;
	size_t len;
	struct codec_buf out;
	(void)argc, (void)argv, (void)envp;

	int r = sbx_state_read_input(&buf, &len);
	if (r < 0)
		call_guest_die("state input (fd 3)", strerror(-r));
	if (elf_load("/proc/self/exe", &x, &e) < 0 || call_run_image(buf, len, &x, &out, &e) < 0)
		call_guest_die(e.what, e.why);
	free(buf);
	if ((r = sbx_state_write_result(out.p, out.len)) < 0)
		call_guest_die("state result (fd 3)", strerror(-r));
	fflush(NULL);
	exit(0);
}

int sbx_state_load(const struct sbx_type *type, void **root, struct codec_graph **g,
		   struct common_err *e)
{
	static struct elfinfo self; /* function pointers are checked against it */
	void *buf;
	size_t len;
	int r = sbx_state_read_input(&buf, &len);

	*g = NULL;
	if (r < 0)
		return common_errno(e, -r, "state input (fd 3)");
	if (!self.nfuncs && elf_load("/proc/self/exe", &self, e) < 0) {
		free(buf);
		return -1;
	}
	struct codec_opts o = { .check_fn = check_fn, .arg = &self };
	r = codec_decode(type, buf, len, &o, root, g, e);
	free(buf);
	return r;
}

int sbx_state_store(struct codec_graph *g, struct common_err *e)
{
	struct elfinfo self;
	struct codec_buf out;
	int r;

	if (elf_load("/proc/self/exe", &self, e) < 0)
		return -1;
	struct codec_opts o = { .check_fn = check_fn, .arg = &self };
	codec_buf_init(&out);
	r = codec_encode_graph(g, &o, &out, e);
	free(self.funcs);
	if (r == 0 && (r = sbx_state_write_result(out.p, out.len)) < 0)
		r = common_errno(e, -r, "state result (fd 3)");
	codec_buf_free(&out);
	return r;
}

struct callctx {
	const struct elfinfo *x;
	uint64_t entry;           /* what main jumps to in the guest */
	struct trace_inspector *in;
	struct trace_metering *meter;
	struct trace_rec *rec;
	int patched;
	char patch_err[256];
};

/* The first exec is this executable: its text gets the jump. /proc/PID/mem
 * writes through page protections (process_vm_writev cannot). */
static int h_exec(void *ctx, struct trace_supervisor *sv, pid_t pid, pid_t ppid, const char *path)
{
	struct callctx *c = ctx;
	(void)ppid;
	(void)path;
	if (c->patched)
		return 0;
	c->patched = 1;
	uint8_t jump[JUMP_LEN] = { 0x48, 0xb8 };
	memcpy(jump + 2, &c->entry, 8);
	jump[10] = 0xff;
	jump[11] = 0xe0;
	ssize_t n = trace_mem_poke(pid, c->x->main_addr, jump, sizeof jump);
	if (n != (ssize_t)sizeof jump) {
		snprintf(c->patch_err, sizeof c->patch_err, "patching main in /proc/%d/mem: %s",
			 (int)pid, strerror(n < 0 ? (int)-n : EIO));
		trace_sv_stop(sv, "sbx_call: patch failed");
		return -1;
	}
	return 0;
}

/* The input memfd: [u64 LE 8+n][n bytes] (SPEC §6.4). */
static int state_input(struct trace_state *st, const struct codec_buf *in, struct common_err *e)
{
	uint8_t hdr[8];
	uint64_t n = in->len + 8;

	for (int i = 0; i < 8; i++)
		hdr[i] = (uint8_t)(n >> (8 * i));
	st->memfd = memfd_create("sbx-call", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (st->memfd < 0)
		return common_errno(e, errno, "memfd_create for sbx_call");
	if (common_write_all(st->memfd, hdr, 8) < 0 ||
	    common_write_all(st->memfd, in->p, in->len) < 0) {
		int err = errno;
		trace_state_close(st);
		return common_errno(e, err, "filling the sbx_call memfd");
	}
	st->result_off = n;
	return 0;
}

/* The checked result bytes after the guest is gone (malloc'd). */
static int state_result(struct trace_state *st, uint8_t **out, size_t *len, struct common_err *e)
{
	struct stat sb;

	if (trace_state_finish(st, NULL, e) < 0)
		return -1;
	if (fstat(st->memfd, &sb) < 0)
		return common_errno(e, errno, "state result: fstat");
	*len = (size_t)((uint64_t)sb.st_size - st->result_off - 8);
	*out = common_xmalloc(*len ? *len : 1);
	ssize_t n = pread(st->memfd, *out, *len, (off_t)(st->result_off + 8));
	if (n != (ssize_t)*len) {
		free(*out);
		*out = NULL;
		return common_errf(e, "state result", "short read");
	}
	return 0;
}

/* --trace of a call: at level file, its header naming this executable by hash. */
static struct trace_rec *call_rec_open(const char *path, const char *exe, const char **argv,
				       const char *const *envp, struct common_err *e)
{
	struct trace_rec_info ri = {
		.image_path = exe, .image_sha256 = "", .argv = (char *const *)argv,
		.envp = (char *const *)envp, .level = TRACE_LEVEL_FILE,
	};
	uint8_t dg[COMMON_SHA256_LEN];
	char hex[COMMON_SHA256_HEX];

	if (common_sha256_file(exe, dg, e) < 0)
		return NULL;
	common_hex(dg, sizeof dg, hex);
	ri.image_sha256 = hex;
	return trace_rec_open(path, -1, &ri, e);
}

/* How the call ended, as its error: a failed patch, the inspector's failure, a
 * closing bound, then the guest's own end; 0 for a guest that exited with 0. */
static int call_verdict(const struct callctx *c, const struct trace_result *res,
			const char *exe, struct common_err *e)
{
	const struct common_err *f = c->in ? trace_inspector_failure(c->in) : NULL;

	if (!f && c->meter)
		f = trace_metering_failure(c->meter);
	if (c->patch_err[0])
		return common_errf(e, "sbx_call", "%s", c->patch_err);
	if (f)
		return common_errf(e, "sbx_call: inspector", "%s: %s", f->what, f->why);
	if (c->meter && trace_metering_closed(c->meter))
		return common_errf(e, "sbx_call", "a bound closed the call: %s",
				   trace_metering_closed(c->meter));
	if (res->exec_failed)
		return common_errno(e, res->exec_failed, "sbx_call: executing %s", exe);
	if (res->stop_reason[0])
		return common_errf(e, "sbx_call", "guest stopped: %s", res->stop_reason);
	if (!res->exited)
		return common_errf(e, "sbx_call", "guest killed by signal %d (%s)", res->signal,
				   strsignal(res->signal));
	if (res->status != 0)
		return common_errf(e, "sbx_call", "guest exited with status %d", res->status);
	return 0;
}

int call_run_guest(const struct sbx_sandbox *sb, const char *exe, const struct elfinfo *x,
		   int state_fd, int serve, struct common_err *e)
{
	struct callctx c = { .x = x, .entry = (uint64_t)(uintptr_t)(serve ? &call_guest_serve :
								       &call_guest_entry) };
	struct trace_result res;
	struct lease_store *s = NULL;
	uint64_t limits[TRACE_DIMS], base[TRACE_DIMS];
	char *ns = NULL, *filters = NULL;
	json_t *rec = NULL;
	struct trace_policy *pol = NULL;
	int rc = -1;
	struct trace_inspector_opts io = {
		.fn = sb->inspect, .fn_arg = sb->inspect_arg, .fn_classes = sb->inspect_classes,
	};
	struct trace_metering_opts mo = { .limits = sb->limits, .ns_dir = sb->ns_dir };

	if (sb->policy) {
		if (trace_policy_load(sb->policy, &pol, e) < 0)
			goto out;
		io.policy = pol;
	}
	io.inspect_exec = sb->inspect_exec;
	if (sb->lease) {
		/* as sbx-run --lease: Active, this very image, its bounds and namespace */
		char sha[COMMON_SHA256_HEX];
		if (lease_image_check(exe, sha, e) < 0 || lease_store_open(sb->store, &s, e) < 0 ||
		    lease_load(s, sb->lease, &rec, e) < 0)
			goto out;
		json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
		const char *state = json_string_value(json_object_get(l, "state"));
		const char *want = json_string_value(json_object_get(json_object_get(l, "image"),
								      "sha256"));
		if (!state || strcmp(state, "Active") != 0) {
			common_errf(e, "lease", "cannot call in lease %s: state is %s, a call needs Active",
				    sb->lease, state ? state : "unknown");
			goto out;
		}
		if (!want || strcmp(want, sha) != 0) {
			common_errf(e, "image", "%s (sha256 %s) is not lease %s's image", exe, sha,
				    sb->lease);
			goto out;
		}
		if (trace_metering_lease_bounds(s, sb->lease, limits, base, e) < 0)
			goto out;
		if (sb->limits) /* the caller may only narrow the lease's bounds */
			for (int d = 0; d < TRACE_DIMS; d++)
				if (sb->limits[d] < limits[d])
					limits[d] = sb->limits[d];
		ns = lease_ns_dir(s, sb->lease);
		if (common_mkdir_p(ns, 0700, e) < 0)
			goto out;
		filters = common_xasprintf("%s/filters", lease_store_dir(s));
		mo.store = s;
		mo.lease = sb->lease;
		mo.limits = limits;
		mo.base = base;
		mo.ns_dir = ns;
	}
	if (io.fn || mo.limits || io.policy || io.inspect_exec) {
		c.meter = trace_metering_new(&mo);
		if (trace_inspector_new(&io, &c.in, e) < 0)
			goto out;
	}
	const char *argv[] = { exe, NULL };
	const char *const *envp = sb->envp ? sb->envp : (const char *const *)environ;
	if (sb->trace_path && !(c.rec = call_rec_open(sb->trace_path, exe, argv, envp, e)))
		goto out;
	struct trace_layer layers[TRACE_LAYERS] = {
		[TRACE_LAYER_INSPECT] = trace_inspector_layer(c.in),
		[TRACE_LAYER_METER] = trace_meter_layer(c.meter),
		[TRACE_LAYER_RECORD] = trace_rec_layer(c.rec),
		[TRACE_LAYER_AFTER] = { .ctx = &c, .on_exec = h_exec }, /* patched once recorded */
	};
	struct trace_config cfg = {
		.argv = argv, .envp = envp, .image = exe,
		.mounts = sb->mounts, .nmounts = sb->nmounts,
		.replace_defaults = sb->replace_defaults, .ns_dir = ns ? ns : sb->ns_dir,
		.rlimit_as = sb->rlimit_as, .rlimit_nofile = sb->rlimit_nofile,
		.trace_classes = (c.in ? trace_inspector_classes(c.in) : 0) |
				 (c.meter ? trace_metering_classes(c.meter) : 0) |
				 (c.rec ? trace_classes(TRACE_LEVEL_FILE) : 0),
		.state_fd = state_fd, .no_aslr = 1, .stdout_fd = -1, .stderr_fd = -1,
		.filter_cache = filters, .layers = layers,
	};
	if (trace_run(&cfg, &res, e) < 0)
		goto out;
	if (c.meter && trace_metering_finish(c.meter, e) < 0)
		goto out;
	if (c.rec) {
		struct trace_rec *r = c.rec;
		c.rec = NULL;
		if (trace_rec_close(r, res.wstatus, NULL, e) < 0)
			goto out;
	}
	rc = call_verdict(&c, &res, exe, e);
out:
	if (c.rec)
		trace_rec_abort(c.rec);
	trace_inspector_free(c.in);
	trace_metering_free(c.meter);
	trace_policy_free(pol);
	json_decref(rec);
	free(ns);
	free(filters);
	if (s)
		lease_store_close(s);
	return rc;
}

/* Host side: this executable, as a guest can run it: non-PIE, the file that
 * runs (same build-id), a main long enough to patch. */
int call_exe_check(struct call_exe *ce, struct common_err *e)
{
	struct elfinfo self = {0};
	struct elfinfo *x = &ce->x;

	memset(x, 0, sizeof *x);
	ssize_t n = readlink("/proc/self/exe", ce->exe, sizeof ce->exe - 1);
	if (n <= 0)
		return common_errno(e, errno, "sbx_call: /proc/self/exe");
	ce->exe[n] = '\0';
	if (n > 10 && strcmp(ce->exe + n - 10, " (deleted)") == 0)
		return common_errf(e, ce->exe, "the running executable was replaced or deleted on disk");
	if (elf_load(ce->exe, x, e) < 0)
		return -1;
	struct stat a, b;
	if (!x->is_exec) {
		common_errf(e, ce->exe, "position-independent executable (ET_DYN): sbx_call needs "
			    "a non-PIE ET_EXEC image (link with -no-pie)");
	} else if (stat(ce->exe, &a) == 0 && stat("/proc/self/exe", &b) == 0 &&
		   a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		/* the very file that is running: same build-id by definition */
		self.build_id_len = x->build_id_len;
		memcpy(self.build_id, x->build_id, x->build_id_len);
	} else if (elf_load("/proc/self/exe", &self, e) < 0) {
		x->is_exec = 0;
	}
	int ok = x->is_exec;
	if (ok && (!x->build_id_len || x->build_id_len != self.build_id_len ||
		   memcmp(x->build_id, self.build_id, x->build_id_len) != 0)) {
		common_errf(e, ce->exe, x->build_id_len ? "build-id differs from the running program "
			    "(replaced on disk?)" : "no GNU build-id note");
		ok = 0;
	}
	if (ok && (!x->main_addr || x->main_size < JUMP_LEN)) {
		common_errf(e, ce->exe, "no main symbol of at least %d bytes to patch", JUMP_LEN);
		ok = 0;
	}
	free(self.funcs);
	if (!ok) {
		free(x->funcs);
		x->funcs = NULL;
	}
	return ok ? 0 : -1;
}

/* Host side: check that fn and type belong to the checked executable and encode
 * the request image (magic, fn, type, build-id, graph) into in; *g is the graph
 * the result is written back into. */
int call_request(void (*fn)(void *), const struct sbx_type *type, void *root,
		 const struct call_exe *ce, struct codec_buf *in, struct codec_graph **g,
		 struct common_err *e)
{
	const struct elfinfo *x = &ce->x;
	struct codec_buf img;

	*g = NULL;
	codec_buf_init(in);
	if (!is_func(x, (uint64_t)(uintptr_t)fn))
		return common_errf(e, "sbx_call", "callback %p is not a function symbol of %s",
				   (void *)(uintptr_t)fn, ce->exe);
	if (!in_image(x, (uint64_t)(uintptr_t)type, sizeof *type))
		return common_errf(e, "sbx_call", "type descriptor is not part of %s", ce->exe);
	struct codec_opts o = { .check_fn = check_fn, .arg = (void *)x };
	codec_buf_init(&img);
	if (codec_encode(type, root, &o, &img, g, e) < 0) {
		codec_buf_free(&img);
		return -1;
	}
	codec_put_raw(in, CALL_MAGIC, 4);
	codec_put_u64(in, (uint64_t)(uintptr_t)fn);
	codec_put_u64(in, (uint64_t)(uintptr_t)type);
	codec_put_bytes(in, x->build_id, x->build_id_len);
	codec_put_raw(in, img.p, img.len);
	codec_buf_free(&img);
	return 0;
}

/* The result image into the caller's objects, checked as the request was. */
int call_writeback(const struct call_exe *ce, struct codec_graph *g, const uint8_t *res, size_t len,
		   struct common_err *e)
{
	struct codec_opts o = { .check_fn = check_fn, .arg = (void *)&ce->x };
	return codec_writeback(g, res, len, &o, e);
}

int sbx_call(const struct sbx_sandbox *sb, void (*fn)(void *), const struct sbx_type *type,
	     void *root)
{
	static const struct sbx_sandbox none;
	struct common_err scratch, *e = sb && sb->err ? sb->err : &scratch;
	struct call_exe ce;
	struct codec_buf in;
	struct codec_graph *g = NULL;
	struct trace_state st = { .memfd = -1 };
	uint8_t *res = NULL;
	size_t reslen = 0;
	int rc = -1;

	if (!sb)
		sb = &none;
	codec_buf_init(&in);
	if (call_exe_check(&ce, e) < 0)
		return -1;
	if (call_request(fn, type, root, &ce, &in, &g, e) < 0)
		goto out;
	if (state_input(&st, &in, e) < 0)
		goto out;
	codec_buf_free(&in);
	if (call_run_guest(sb, ce.exe, &ce.x, st.memfd, 0, e) < 0 ||
	    state_result(&st, &res, &reslen, e) < 0 || call_writeback(&ce, g, res, reslen, e) < 0)
		goto out;
	rc = 0;
out:
	free(res);
	trace_state_close(&st);
	codec_graph_free(g);
	codec_buf_free(&in);
	free(ce.x.funcs);
	return rc;
}
