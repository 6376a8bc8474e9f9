/* sbx-run's program: PROGRAM resolved as the host would, its image opened once,
 * and a #! script's interpreter made the image as execve(2) would. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/run/run-internal.h"

/* PROGRAM as the host resolves it: a path, or a name searched in $PATH. */
char *trace_program_resolve(const char *prog, int *exit_code, struct common_err *e)
{
	char buf[PATH_MAX];
	*exit_code = SBX_EXIT_NOTFOUND;
	if (strchr(prog, '/')) {
		if (!realpath(prog, buf)) {
			common_errno(e, errno, "program %s", prog);
			return NULL;
		}
		if (access(buf, X_OK) < 0) {
			*exit_code = SBX_EXIT_NOEXEC;
			common_errno(e, errno, "program %s", prog);
			return NULL;
		}
		return common_xstrdup(buf);
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char *dup = common_xstrdup(path), *save = NULL;
	for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof buf, "%s/%s", *d ? d : ".", prog);
		struct stat st;
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) {
			char real[PATH_MAX];
			free(dup);
			return common_xstrdup(realpath(buf, real) ? real : buf);
		}
	}
	free(dup);
	common_errf(e, prog, "command not found in PATH");
	return NULL;
}

/* The image, opened once, above 0-2 (a closed stdin keeps them for what they are). */
int trace_image_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fd <= 2) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3), err = errno;
		close(fd);
		fd = hi;
		errno = err;
	}
	return fd;
}

/* When *image_fd is a script: hash it, and make its interpreter the image
 * (*image, *image_fd, *st) and argv the interpreter's, as execve(2) builds it.
 * The script is named as given when it has a slash (the guest resolves it in
 * its working directory), else by its host path. 0, or -1 with e set. */
int trace_script_open(struct trace_script *sc, char **image, int *image_fd, struct stat *st,
		      char *const *argv, struct common_err *e)
{
	char interp[LEASE_INTERP_MAX], arg[LEASE_INTERP_MAX];
	uint8_t d[COMMON_SHA256_LEN];
	size_t n = 0, k = 0;
	int r = lease_image_interp(*image_fd, *image, interp, arg, e);

	if (r <= 0)
		return r;
	if (common_sha256_fd(*image_fd, *image, d, e) < 0)
		return -1;
	common_hex(d, sizeof d, sc->sha);
	sc->path = *image;
	while (argv[n])
		n++;
	sc->argv = common_xcalloc(n + 3, sizeof *sc->argv);
	sc->argv[k++] = common_xstrdup(interp);
	if (arg[0])
		sc->argv[k++] = common_xstrdup(arg);
	sc->argv[k++] = common_xstrdup(strchr(argv[0], '/') ? argv[0] : sc->path);
	for (size_t i = 1; i < n; i++)
		sc->argv[k++] = common_xstrdup(argv[i]);
	char real[PATH_MAX];
	*image = common_xstrdup(realpath(interp, real) ? real : interp);
	close(*image_fd);
	*image_fd = trace_image_open(*image);
	if (*image_fd < 0 || fstat(*image_fd, st) < 0)
		return common_errno(e, errno, "interpreter %s of %s", *image, sc->path);
	if (lease_image_validate_fd(*image_fd, *image, e) < 0) {
		common_err_context(e, "interpreter of %s", sc->path);
		return -1;
	}
	return 0;
}

void trace_script_free(struct trace_script *sc)
{
	free(sc->path);
	for (size_t i = 0; sc->argv && sc->argv[i]; i++)
		free(sc->argv[i]);
	free(sc->argv);
}

/* Where the guest starts: --chdir, else the invoker's directory where a bind
 * shows it (at its own or a mapped destination, the deepest bind winning), else
 * /ns (NULL). Malloc'd. */
char *trace_run_start_dir(const struct trace_run_opts *o)
{
	char cwd[PATH_MAX], src[PATH_MAX];
	const struct trace_mount *best = NULL;
	size_t best_len = 0;

	if (o->chdir)
		return common_xstrdup(o->chdir);
	if (!getcwd(cwd, sizeof cwd))
		return NULL;
	for (size_t i = 0; i < o->nmounts; i++) {
		const struct trace_mount *m = &o->mounts[i];
		if (m->type != TRACE_MOUNT_BIND || !realpath(m->src, src) || strcmp(src, "/") == 0)
			continue;
		size_t n = strlen(src);
		if (strncmp(cwd, src, n) == 0 && (cwd[n] == 0 || cwd[n] == '/') && n >= best_len) {
			best = m;
			best_len = n;
		}
	}
	if (!best)
		return NULL;
	return common_xasprintf("%s%s", strcmp(best->dst, "/") ? best->dst : "", cwd + best_len);
}
