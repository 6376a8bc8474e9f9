/* trace/call: what sbx_call and the warm sandbox share (not installed). */
#ifndef SBX_CALL_INTERNAL_H
#define SBX_CALL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "codec/codec.h"
#include "sbx.h"

struct elfinfo {
	int is_exec;
	uint8_t build_id[64];
	size_t build_id_len;
	uint64_t main_addr, main_size;
	uint64_t *funcs; /* sorted STT_FUNC addresses */
	size_t nfuncs;
	uint64_t load_lo[16], load_hi[16];
	size_t nload;
};

/* the calling executable, checked for a call */
struct call_exe {
	char exe[4096];
	struct elfinfo x;
};

/* Host: this executable, checked as a guest image (ce->x.funcs is malloc'd). */
int call_exe_check(struct call_exe *ce, struct common_err *e);
/* Host: check fn and type against ce and encode the request into in (*g: the graph). */
int call_request(void (*fn)(void *), const struct sbx_type *type, void *root,
		 const struct call_exe *ce, struct codec_buf *in, struct codec_graph **g,
		 struct common_err *e);
/* Host: the result image into the caller's objects. */
int call_writeback(const struct call_exe *ce, struct codec_graph *g, const uint8_t *res, size_t len,
		   struct common_err *e);
/* Host: run this executable as a guest with state_fd as its fd 3, main patched to
 * the one-call entry or (serve) to the warm sandbox's loop; returns when it ends. */
int call_run_guest(const struct sbx_sandbox *sb, const char *exe, const struct elfinfo *x,
		   int state_fd, int serve, struct common_err *e);

/* Guest: load this executable's facts. */
int call_elf_self(struct elfinfo *x, struct common_err *e);
/* Guest: decode a request, call its callback, encode the changed graph into out. */
int call_run_image(const void *buf, size_t len, const struct elfinfo *x, struct codec_buf *out,
		   struct common_err *e);
/* Guest: the warm sandbox's loop, reached instead of main. */
int call_guest_serve(int argc, char **argv, char **envp);
/* Guest: report on stderr and exit with SBX_EXIT_SBX. */
__attribute__((noreturn)) void call_guest_die(const char *what, const char *why);

#endif
