/* The directory back end after a crash: the last journal receipt rolled forward into
 * its record, and after a crash of the machine every derived file rebuilt. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lease/file/file-internal.h"

/* The kernel's boot id, NULL when unknown. */
static const char *lease_boot_id(struct lease_store *s)
{
	if (s->boot[0] == '\0' && common_boot_id(s->boot) < 0)
		snprintf(s->boot, sizeof s->boot, "-");
	return strlen(s->boot) == 36 ? s->boot : NULL;
}

/* Derived files (records, slot index) are written without fsync; "boot" names the
 * boot whose page cache holds them. Any other boot may have lost some to a crash,
 * so its first locker rebuilds them from the journal before anyone reads them. */
int lease_file_boot_check(struct lease_store *s, struct common_err *e)
{
	const char *now = lease_boot_id(s);
	char line[38], *p, *buf = NULL;
	size_t len = 0;
	int r = 0;

	if (!now) {
		s->durable = 1;
		s->boot_ok = 1;
		return 0;
	}
	p = lease_path(s, "boot");
	snprintf(line, sizeof line, "%s\n", now);
	if (common_read_file(p, 64, &buf, &len, NULL) < 0 || len != 37 || memcmp(buf, line, 37) != 0) {
		r = lease_file_rebuild(s, e);
		if (r == 0)
			r = common_write_atomic(p, line, 37, 0600, e);
	}
	free(buf);
	free(p);
	if (r == 0)
		s->boot_ok = 1;
	return r;
}

/* The journal's last `want` bytes cut to whole lines: *buf holds lines ending in '\n'
 * (*len 0 when none). *from_start when they begin at a line start. A torn tail (no
 * final newline) is cut off first: its transition never reached the record and was
 * never acknowledged. */
static int journal_window(struct lease_store *s, size_t want, char **buf, size_t *len,
			  int *from_start, struct common_err *e)
{
	char *p = lease_path(s, "journal.jsonl"), *b = NULL;
	struct stat st;
	size_t n, end;
	int fd, r = -1;

	*buf = NULL;
	*len = 0;
	*from_start = 1;
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		r = errno == ENOENT ? 0 : common_errno(e, errno, "%s", p);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		common_errno(e, errno, "%s", p);
		goto out;
	}
	n = (size_t)st.st_size < want ? (size_t)st.st_size : want;
	if (n == 0) {
		r = 0;
		goto out;
	}
	b = common_xmalloc(n + 1);
	if (pread(fd, b, n, st.st_size - (off_t)n) != (ssize_t)n) {
		common_errno(e, errno ? errno : EIO, "%s: reading the tail", p);
		goto out;
	}
	b[n] = '\0';
	end = n;
	if (b[n - 1] != '\n') {
		while (end > 0 && b[end - 1] != '\n')
			end--;
		if (end == 0 && (size_t)st.st_size > n) {
			common_errf(e, p, "last line longer than %u bytes", LEASE_LINE_MAX);
			goto out;
		}
		if (ftruncate(fd, st.st_size - (off_t)(n - end)) < 0 || fsync(fd) < 0) {
			common_errno(e, errno, "%s: cutting a torn last line", p);
			goto out;
		}
	}
	b[end] = '\0';
	*from_start = (size_t)st.st_size == n;
	*buf = b;
	*len = end;
	b = NULL;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(b);
	free(p);
	return r;
}

/* The receipts journaled after the record's head, oldest first: the trailing lines of
 * one lease, each the prev of the next (a batch of lease_steps is one append). NULL
 * when they do not chain up to the record (verify reports it); *more when the window
 * did not reach back far enough. */
static json_t *tail_chain(const char *buf, size_t len, int from_start, const json_t *pair,
			  int *more)
{
	const char *head = pair ? lease_jstr(json_object_get(pair, "lease"), "head") : NULL;
	json_t *chain = json_array(), *r;
	size_t end = len, start;
	const char *id = NULL, *want = NULL;

	*more = 0;
	while (json_array_size(chain) < LEASE_LAG_MAX) {
		start = end - 1;
		while (start > 0 && buf[start - 1] != '\n')
			start--;
		if (start == 0 && !from_start) {
			*more = 1;
			break;
		}
		r = common_json_load(buf + start, end - 1 - start, "journal.jsonl", NULL);
		if (!id)
			id = lease_jstr(r, "lease");
		if (!lease_id_valid(id) || !lease_jstr(r, "digest") || !lease_jstr(r, "lease") ||
		    strcmp(lease_jstr(r, "lease"), id) != 0 ||
		    (want && strcmp(lease_jstr(r, "digest"), want) != 0)) {
			json_decref(r);
			break;
		}
		json_array_insert_new(chain, 0, r);
		want = lease_jstr(r, "prev");
		if (head ? want && strcmp(want, head) == 0 : lease_jint(r, "seq") == 0)
			return chain;
		if (start == 0)
			break;
		end = start;
	}
	json_decref(chain);
	return NULL;
}

/* Where the last line of buf starts; -1 when the window cut it (too long). */
static ssize_t last_line(const char *buf, size_t len, int from_start)
{
	size_t start = len - 1;

	while (start > 0 && buf[start - 1] != '\n')
		start--;
	return start == 0 && !from_start ? -1 : (ssize_t)start;
}

int lease_file_recover(struct lease_store *s, struct common_err *e)
{
	json_t *pair = NULL, *rec = NULL, *np = NULL, *chain = NULL, *r = NULL, *last;
	const char *id, *head;
	char *buf = NULL;
	size_t len, want = LEASE_LINE_MAX + 1, i;
	ssize_t start;
	int ret = -1, from_start, more;

	/* Nothing was appended since this process's own complete commit (else what it
	 * kept is forgotten). */
	if (lease_file_cache_fresh(s))
		return 0;
again:
	if (journal_window(s, want, &buf, &len, &from_start, e) < 0)
		return -1;
	if (len == 0) {
		ret = 0;
		goto out;
	}
	start = last_line(buf, len, from_start);
	if (start < 0) {
		common_errf(e, "journal.jsonl", "last line longer than %u bytes", LEASE_LINE_MAX);
		goto out;
	}
	r = common_json_load(buf + start, len - 1 - (size_t)start, "journal.jsonl", NULL);
	id = lease_jstr(r, "lease");
	/* Not a receipt, or an unreadable record: not ours to repair; verify reports
	 * it, and the rest of the store stays usable. */
	if (!lease_id_valid(id) || !lease_jstr(r, "digest") || lease_file_pair_read(s, id, &pair, NULL) < 0) {
		ret = 0;
		goto out;
	}
	head = pair ? lease_jstr(json_object_get(pair, "lease"), "head") : NULL;
	if (head && strcmp(head, lease_jstr(r, "digest")) == 0) {
		/* The common case: the record is current; only the idempotent effects may lag. */
		ret = lease_file_effects(s, json_object_get(pair, "lease"), e);
		goto out;
	}
	chain = tail_chain(buf, len, from_start, pair, &more);
	if (!chain && more && want < LEASE_LAG_MAX * (LEASE_LINE_MAX + 1)) {
		json_decref(pair);
		json_decref(r);
		pair = r = NULL;
		free(buf);
		buf = NULL;
		want = LEASE_LAG_MAX * (LEASE_LINE_MAX + 1);
		goto again;
	}
	if (!chain) {
		ret = 0;
		goto out;
	}
	/* Rolling forward needs receipts that really are ours. */
	rec = pair ? json_incref(json_object_get(pair, "lease")) : NULL;
	json_array_foreach(chain, i, last) {
		json_t *next;
		if (lease_receipt_verify(s, last, "journal.jsonl", NULL) < 0 ||
		    lease_fold(rec, last, &next, NULL) < 0) {
			ret = 0;
			goto out;
		}
		json_decref(rec);
		rec = next;
	}
	last = json_array_get(chain, json_array_size(chain) - 1);
	np = json_pack("{s:O, s:O}", "lease", rec, "receipt", last);
	if (lease_file_pair_write(s, id, np, e) < 0)
		goto out;
	ret = lease_file_effects(s, rec, e);
out:
	if (ret == 0)
		lease_file_journal_note(s);
	free(buf);
	json_decref(r);
	json_decref(chain);
	json_decref(np);
	json_decref(rec);
	json_decref(pair);
	return ret;
}
