/* The directory back end's reading side: the journal line by line, the ids of the
 * records. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lease ids with a record file, sorted (a record this process left unwritten is
 * written first: a new lease has no file before). */
int lease_file_ids(struct lease_store *s, char ***ids, size_t *n, struct common_err *e)
{
	char *p;
	DIR *d;
	struct dirent *de;
	size_t cap = 0;

	*ids = NULL;
	*n = 0;
	if (lease_file_flush(s, e) < 0)
		return -1;
	p = lease_path(s, "leases");
	if (!(d = opendir(p))) {
		int r = errno == ENOENT ? 0 : common_errno(e, errno, "%s", p);
		free(p);
		return r;
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char id[LEASE_ID_LEN + 1];
		if (l != LEASE_ID_LEN + 5 || strcmp(de->d_name + LEASE_ID_LEN, ".json") != 0)
			continue;
		memcpy(id, de->d_name, LEASE_ID_LEN);
		id[LEASE_ID_LEN] = '\0';
		if (!lease_id_valid(id))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*ids = common_xrealloc(*ids, cap * sizeof **ids);
		}
		(*ids)[(*n)++] = common_xstrdup(id);
	}
	closedir(d);
	free(p);
	if (*n)
		qsort(*ids, *n, sizeof **ids, cmp_str);
	return 0;
}

int lease_file_journal_each(struct lease_store *s, int (*fn)(void *, size_t, const char *, size_t),
			void *arg, struct common_err *e)
{
	char *p = lease_path(s, "journal.jsonl"), *buf, *line, *nl;
	size_t len, no = 0;
	int rc = 0;

	if (access(p, F_OK) < 0 && errno == ENOENT) {
		free(p);
		return 0;
	}
	if (common_read_file(p, LEASE_JOURNAL_MAX, &buf, &len, e) < 0) {
		free(p);
		return -1;
	}
	free(p);
	for (line = buf; line < buf + len && rc == 0; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		rc = fn(arg, ++no, line, (size_t)(nl - line));
	}
	free(buf);
	return rc;
}

struct file_receipts {
	lease_line_fn fn;
	void *arg;
};

static int file_receipt_line(void *arg, size_t no, const char *line, size_t len)
{
	struct file_receipts *f = arg;
	char name[64];

	snprintf(name, sizeof name, "journal.jsonl:%zu", no);
	return f->fn(f->arg, name, line, len);
}

/* Every journal line in order: callers pick the lease and seq they want. */
int lease_file_receipts(struct lease_store *s, const char *id, int64_t after, lease_line_fn fn,
			void *arg, struct common_err *e)
{
	struct file_receipts f = { fn, arg };

	(void)id;
	(void)after;
	return lease_file_journal_each(s, file_receipt_line, &f, e);
}

