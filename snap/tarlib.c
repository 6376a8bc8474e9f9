/* libarchive, loaded when a snapshot is exported or imported: sbx-run and
 * sbx-restore link snap/cli.c but would otherwise map libarchive and what it
 * needs (libxml2, ICU, libstdc++, five compressors) at every start. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "snap/snap-internal.h"

struct snap_tar_api snap_tar;

#define TAR_FN(field) { "archive_" #field, offsetof(struct snap_tar_api, field) }
static const struct {
	const char *name;
	size_t off;
} tar_fns[] = {
	TAR_FN(error_string), TAR_FN(entry_new), TAR_FN(entry_free),
	TAR_FN(entry_set_pathname), TAR_FN(entry_set_filetype), TAR_FN(entry_set_perm),
	TAR_FN(entry_set_size), TAR_FN(entry_pathname), TAR_FN(entry_filetype),
	TAR_FN(entry_hardlink), TAR_FN(entry_symlink), TAR_FN(entry_size),
	TAR_FN(write_new), TAR_FN(write_set_format_pax_restricted), TAR_FN(write_open_filename),
	TAR_FN(write_header), TAR_FN(write_data), TAR_FN(write_close), TAR_FN(write_free),
	TAR_FN(read_new), TAR_FN(read_support_format_tar), TAR_FN(read_support_format_gnutar),
	TAR_FN(read_open_filename), TAR_FN(read_next_header), TAR_FN(read_data),
	TAR_FN(read_free),
};

static pthread_once_t tar_once = PTHREAD_ONCE_INIT;
static char tar_why[256]; /* empty once libarchive is loaded */

static void tar_load(void)
{
	void *lib = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
	void *fn;

	if (!lib) {
		snprintf(tar_why, sizeof tar_why, "%s", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof tar_fns / sizeof *tar_fns; i++) {
		if (!(fn = dlsym(lib, tar_fns[i].name))) {
			snprintf(tar_why, sizeof tar_why, "%s: no symbol", tar_fns[i].name);
			return;
		}
		memcpy((char *)&snap_tar + tar_fns[i].off, &fn, sizeof fn);
	}
}

int snap_tar_load(struct common_err *e)
{
	pthread_once(&tar_once, tar_load);
	return *tar_why ? common_errf(e, "snapshot archive", "cannot load libarchive: %s", tar_why) : 0;
}
