/* libcommon: errors, JSON, hashing/signing, durable files, locking, numbers, CLI. */
#ifndef SBX_COMMON_H
#define SBX_COMMON_H

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Exit codes (SPEC §6.6), one vocabulary for every tool. */
enum {
	SBX_EXIT_OK = 0,
	SBX_EXIT_FAIL = 1,       /* a refused request (lease tools) or a failed check */
	SBX_EXIT_USAGE = 2,      /* bad command line */
	SBX_EXIT_BOUND = 124,    /* a lease bound closed the lease (run/restore) */
	SBX_EXIT_SBX = 125,      /* sbx itself failed */
	SBX_EXIT_NOEXEC = 126,   /* image not executable */
	SBX_EXIT_NOTFOUND = 127, /* image not found */
};

/* An error record: WHAT failed and WHY. Library code fills it and returns -1. */
struct common_err {
	char what[512];
	char why[1024];
};

/* Fill e (may be NULL) and return -1. */
int common_errf(struct common_err *e, const char *what, const char *whyfmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Same with WHY = strerror(errnum). */
int common_errno(struct common_err *e, int errnum, const char *whatfmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefix the WHAT of an existing error with "ctx: ". */
void common_err_context(struct common_err *e, const char *ctxfmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Tools call this once; messages print as "PROG: error: WHAT: WHY". */
void common_set_progname(const char *name);
const char *common_progname(void);
void common_report(const struct common_err *e);
void common_warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void common_die(int code, const struct common_err *e);
__attribute__((noreturn, format(printf, 3, 4)))
void common_dief(int code, const char *what, const char *whyfmt, ...);

/* Memory that never returns NULL (aborts on exhaustion, like xmalloc). */
void *common_xmalloc(size_t n);
void *common_xcalloc(size_t n, size_t m);
void *common_xrealloc(void *p, size_t n);
char *common_xstrdup(const char *s);
char *common_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Hashing (OpenSSL EVP). */
#define COMMON_SHA256_LEN 32
#define COMMON_SHA256_HEX 65
struct common_sha256 { void *ctx; };
struct evp_md_st;
const struct evp_md_st *common_sha256_md(void); /* OpenSSL's SHA-256, fetched once */
void common_sha256(const void *buf, size_t len, uint8_t out[COMMON_SHA256_LEN]);
void common_sha256_init(struct common_sha256 *h);
void common_sha256_update(struct common_sha256 *h, const void *buf, size_t len);
void common_sha256_final(struct common_sha256 *h, uint8_t out[COMMON_SHA256_LEN]);
void common_sha256_copy(struct common_sha256 *dst, const struct common_sha256 *src);
void common_sha256_free(struct common_sha256 *h); /* without a digest */
int common_sha256_file(const char *path, uint8_t out[COMMON_SHA256_LEN], struct common_err *e);
/* What fd holds, read from its start with pread (its offset stays); name for errors. */
int common_sha256_fd(int fd, const char *name, uint8_t out[COMMON_SHA256_LEN],
		     struct common_err *e);
void common_hex(const uint8_t *buf, size_t len, char *out); /* out has 2*len+1 */
int common_unhex(const char *hex, uint8_t *out, size_t len); /* exact length, lower/upper */

/* Ed25519 authority key (OpenSSL). Files hold raw 32-byte keys, hex-encoded. */
struct common_key {
	uint8_t pub[32];
	uint8_t priv[32];
	int has_priv;
};
int common_key_generate(struct common_key *k, struct common_err *e);
/* pub from priv (has_priv set): 0, or -1 when priv is no Ed25519 key. */
int common_key_derive(struct common_key *k);
int common_key_sign(const struct common_key *k, const void *msg, size_t len,
		    uint8_t sig[64], struct common_err *e);
int common_key_verify(const uint8_t pub[32], const void *msg, size_t len,
		      const uint8_t sig[64]); /* 1 valid, 0 not */

/* Files. Paths "-" mean stdin for readers. All writes are durable but
 * common_write_replace's, for caches whose readers check what they read. */
/* A directory stream on a duplicate of fd (the caller keeps fd; walks by
 * descriptor stay within the fd limit), fd's identity in *st; NULL, errno set. */
DIR *common_dir_stream(int fd, struct stat *st);
int common_read_file(const char *path, size_t max, char **buf, size_t *len,
		     struct common_err *e); /* NUL-terminated; refuses > max */
int common_read_fd(int fd, const char *name, size_t max, char **buf, size_t *len,
		   struct common_err *e);
int common_write_atomic(const char *path, const void *buf, size_t len, mode_t mode,
			struct common_err *e); /* temp + fsync + rename + fsync dir */
int common_write_replace(const char *path, const void *buf, size_t len,
			 mode_t mode); /* temp + rename, no fsync; 0 or -1 */
int common_append_durable(const char *path, const void *buf, size_t len,
			  struct common_err *e); /* O_APPEND, one write, fsync */
int common_fsync_dir(const char *dir, struct common_err *e);
int common_mkdir_p(const char *path, mode_t mode, struct common_err *e);
/* The same file, unchanged: device, inode, size, mtime and ctime all equal. */
struct stat;
int common_same_file(const struct stat *a, const struct stat *b);
int common_rm_rf(const char *path, struct common_err *e);
int common_write_all(int fd, const void *buf, size_t len);  /* -errno or 0 */
int common_write_quiet(int fd, const void *buf, size_t len); /* the same; no SIGPIPE */
ssize_t common_read_all(int fd, void *buf, size_t len);     /* bytes read, short at EOF, -errno */

/* A host file written after a guest ran: open its directory before the guest
 * starts (the path's symlinks followed then, never later); write replaces the
 * file beneath that descriptor (temporary + renameat, no symlink followed). */
struct common_outfile {
	int dirfd;          /* the directory, -1 when closed */
	char *path, *base;
};
int common_outfile_open(struct common_outfile *o, const char *path, struct common_err *e);
int common_outfile_write(struct common_outfile *o, const void *buf, size_t len, mode_t mode,
			 struct common_err *e);
/* Streaming form: a temporary's fd, then commit (fsync, rename, fsync dir; frees tmp). */
int common_outfile_begin(struct common_outfile *o, mode_t mode, char **tmp, struct common_err *e);
int common_outfile_commit(struct common_outfile *o, int fd, char *tmp, struct common_err *e);
void common_outfile_close(struct common_outfile *o);

/* Exclusive advisory lock on PATH (created 0600); returns fd or -1. */
int common_lock(const char *path, struct common_err *e);
/* The same, shared with other shared holders. */
int common_lock_shared(const char *path, struct common_err *e);
void common_unlock(int fd);

/* Fault injection for crash tests: SBX_FAULT=NAME[:N] makes the Nth (default
 * first) call of common_fault_point(NAME) raise SIGKILL. */
void common_fault_point(const char *name);
/* Failure injection: 1 when SBX_FAULT is NAME:fail (the caller then fails as it
 * would on a real error there), else 0. */
int common_fault_fails(const char *name);

/* Numbers: decimal u64, optional K/M/G/T (binary) suffix, must be <= max. */
int common_parse_u64(const char *s, uint64_t max, uint64_t *out, struct common_err *e);

/* JSON (jansson) with hostile-input discipline. */
#define COMMON_JSON_MAX (16u << 20)
json_t *common_json_load(const char *buf, size_t len, const char *name, struct common_err *e);
json_t *common_json_load_file(const char *path, size_t max, struct common_err *e);
/* Canonical encoding: sorted keys, compact, no trailing newline. malloc'd. */
char *common_json_canonical(const json_t *j);
/* Typed field access; "name" names the input for messages. */
int common_json_int(const json_t *o, const char *key, int64_t *out, const char *name,
		    struct common_err *e);
int common_json_str(const json_t *o, const char *key, const char **out, const char *name,
		    struct common_err *e);
/* Lenient reads of records already checked (or only shown): the string or the
 * integer at key, dflt when it is absent or of another type. */
const char *common_jstr(const json_t *o, const char *key, const char *dflt);
json_int_t common_jint(const json_t *o, const char *key, json_int_t dflt);
/* Print j canonically + "\n" to stdout (or pretty text when pretty). */
int common_json_print(const json_t *j, int pretty);

/* Guest-chosen bytes for a terminal (ls -b / strace style): \e \n \t…, other
 * controls as \ooo, invalid UTF-8 as \xHH, '\' as "\\" (malloc'd). */
#define COMMON_ESC_KEEP_BACKSLASH 1u /* for text that is already escaped (JSON) */
char *common_escape(const char *s, size_t len, unsigned flags);
int common_escape_print(FILE *f, const char *s); /* NULL prints nothing */

/* CLI: one row per verb of a tool; run gets the tool's parsed command line. */
struct common_verb {
	const char *name;
	int (*run)(void *cli);
	const char *usage; /* the usage line after the program name */
	int min_args, max_args; /* operands after the verb */
};
/* The row named name, or NULL with e: unknown command "NAME" (missing command). */
const struct common_verb *common_verb_find(const struct common_verb *v, size_t n,
					   const char *name, struct common_err *e);
/* "usage: PROG LINE", then "       PROG LINE" per further row, then the grammar. */
void common_verb_usage(FILE *f, const struct common_verb *v, size_t n);
/* nargs operands after verb v, or -1 with e: "VERB: needs N operands" or similar. */
int common_verb_args(const struct common_verb *v, int nargs, struct common_err *e);

/* CLI options: one table per tool, a row per option naming its typed field. The
 * one grammar: options before or after the verb and operands, "--NAME VALUE",
 * "--NAME=VALUE", "-L VALUE"; "--" ends the options; --help and -h ask for usage. */
struct common_opt;
struct common_opt_type {
	int value; /* 1: the option takes a value */
	/* the value (NULL for a flag) into o's field of cli; -1 with e ("--NAME: WHY") */
	int (*parse)(const struct common_opt *o, void *cli, const char *value,
		     struct common_err *e);
};
struct common_opt {
	const char *name;     /* --NAME */
	char letter;          /* -L, or 0 */
	const struct common_opt_type *type;
	size_t field;         /* offsetof the field in the tool's command-line struct */
	uint32_t in;          /* a bit per verb row (or tool) that takes it; 0: all */
	uint32_t need;        /* a bit per verb row that cannot go without it */
	uint64_t min, max;    /* a number's bounds (max 0: none) */
	int flag;             /* the int a flag stores (0: 1) */
};
/* const char *; int (the row's flag); uint64_t within the row's bounds; enum common_format */
/* A row of a tool whose command line is struct S: --NAME, its type, the field
 * of S it fills, the verbs or tools that take it, then .need, .letter, .min, .max,
 * .flag. */
#define COMMON_OPT(S, n, t, f, verbs, ...) \
	{ .name = n, .type = t, .field = offsetof(S, f), .in = verbs, __VA_ARGS__ }
#define COMMON_OPT_FIELD(o, cli, type) ((type *)(void *)((char *)(cli) + (o)->field))
extern const struct common_opt_type common_opt_str, common_opt_flag, common_opt_u64,
	common_opt_format;
/* Where a tool's PROGRAM [ARG...] starts: nowhere, after "--" (sbx-restore), or at
 * "--" or the first operand (sbx-run: the options end there). */
enum common_program { COMMON_PROGRAM_NONE, COMMON_PROGRAM_AFTER_DASHDASH, COMMON_PROGRAM_AT_OPERAND };
struct common_cli {
	const struct common_opt *opts;
	size_t nopts;
	const struct common_verb *verbs; /* NULL: the tool has no verbs */
	size_t nverbs;
	uint32_t tool;                   /* with no verbs: this tool's bit in the rows' in */
	enum common_program program;
};
/* The words that are not options. */
struct common_words {
	const struct common_verb *verb;  /* the first operand's row (tools with verbs) */
	char **operands;                 /* the others, in order (argv, reordered) */
	int noperands;
	char **program;                  /* NULL-terminated, or NULL when none was given */
};
/* argv into the fields of cli (the struct t's rows point into) and w. 0, 1 for
 * help, or -1 with e: "--NAME: unknown option", "--NAME: needs a value", "--NAME:
 * takes no value", "--NAME: not an option of this command", "VERB: needs --NAME",
 * a parser's error, or common_verb_find's and common_verb_args' errors. */
int common_cli_parse(const struct common_cli *t, int argc, char **argv, void *cli,
		     struct common_words *w, struct common_err *e);
/* A bad command line: the error, then usage, to stderr; returns code. */
int common_usage_error(const struct common_err *e, const char *usage, int code);
/* After a verb tool's parser returned rc: help (1) prints usage to stdout and gives
 * SBX_EXIT_OK, an error (-1) is reported before usage on stderr and gives code;
 * 0 gives -1: run the command. */
int common_cli_parsed(int rc, const struct common_err *e, void (*usage)(FILE *), int code);

/* CLI: output format shared by all tools. */
enum common_format { COMMON_FMT_JSON, COMMON_FMT_TEXT };

/* Time: CLOCK_MONOTONIC / CLOCK_REALTIME in ms and µs. */
uint64_t common_now_ms(void);
uint64_t common_mono_us(void);

/* File-hash cache (exec-hashes, image-hashes in the store): SHA-256 by file
 * identity (dev, ino, size, mtime, ctime) within one boot; block devices only.
 * An unreadable or damaged file opens as an empty cache; close saves it when
 * something was put (without fsync: it is only a cache). A NULL path gives a
 * cache in memory only. */
#define COMMON_BOOT_ID_LEN 37
int common_boot_id(char out[COMMON_BOOT_ID_LEN]); /* 0, or -1 when unreadable */
/* The running program's GNU build id (its ELF note): 0, or -1 when it has none. */
int common_build_id(uint8_t *out, size_t cap, size_t *len);
struct stat;
struct common_hashcache;
struct common_hashcache *common_hashcache_open(const char *path, const char *tag);
int common_hashcache_get(const struct common_hashcache *c, const struct stat *st,
			 char hex[COMMON_SHA256_HEX]); /* 1 on a hit */
void common_hashcache_put(struct common_hashcache *c, const struct stat *st,
			  const char hex[COMMON_SHA256_HEX]);
void common_hashcache_close(struct common_hashcache *c);

#endif
