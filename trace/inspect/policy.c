/* --policy FILE (SPEC §6.3): JSON rules matching syscall name/class and a path glob,
 * deciding allow / deny errno / rewrite path prefix / record. First match wins.
 * The whole file is checked at load, so a bad rule is refused before the guest starts. */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/inspect/inspect.h"
#include "trace/tracee/tracee.h"

#define MAX_RULES 1024
#define MAX_PATTERN 1024
#define MAX_POLICY_BYTES (1u << 20)

enum act { ACT_ALLOW, ACT_DENY, ACT_REWRITE, ACT_RECORD };

struct rule {
	char name[64];
	unsigned char *nrs;   /* bitmap over syscall numbers, NULL: any */
	unsigned classes;     /* any of these classes, 0: any */
	int has_glob;
	regex_t glob;
	enum act act;
	int err;
	char *from, *to;      /* rewrite: path prefix and its replacement */
	size_t fromlen;
};

struct trace_policy {
	struct rule *rules;
	size_t n;
};

#define NR_MAX 1024

static int rule_err(struct common_err *e, const char *file, size_t i, const char *name,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int rule_err(struct common_err *e, const char *file, size_t i, const char *name,
		    const char *fmt, ...)
{
	char what[512];
	va_list ap;

	if (name && *name)
		snprintf(what, sizeof what, "%s: rule %zu (\"%s\")", file, i + 1, name);
	else
		snprintf(what, sizeof what, "%s: rule %zu", file, i + 1);
	common_errf(e, what, "%s", "");
	if (e) {
		va_start(ap, fmt);
		vsnprintf(e->why, sizeof e->why, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Glob → anchored POSIX ERE: "*" and "?" stay inside one path component, "**"
 * crosses components, "**" + "/" also matches no directory at all, [..] is a set. */
static int glob_to_regex(const char *g, char *out, size_t cap, const char **why)
{
	size_t o = 0;

#define EMIT(s) do { size_t l_ = strlen(s); if (o + l_ + 2 > cap) { *why = "pattern too long"; \
	return -1; } memcpy(out + o, s, l_); o += l_; } while (0)
	EMIT("^");
	for (const char *p = g; *p; p++) {
		if (p[0] == '*' && p[1] == '*') {
			p++;
			if (p[1] == '/') {
				p++;
				EMIT("(.*/)?");
			} else {
				EMIT(".*");
			}
		} else if (*p == '*') {
			EMIT("[^/]*");
		} else if (*p == '?') {
			EMIT("[^/]");
		} else if (*p == '[') {
			const char *q = p + 1;
			char set[MAX_PATTERN + 4];
			size_t s = 0;

			if (*q == '!' || *q == '^')
				q++;
			if (*q == ']')
				q++;
			while (*q && *q != ']')
				q++;
			if (!*q) {
				*why = "unterminated [ in path glob";
				return -1;
			}
			set[s++] = '[';
			p++;
			if (*p == '!' || *p == '^') {
				set[s++] = '^';
				p++;
			}
			for (; p < q; p++) {
				if (*p == '/') {
					*why = "a [..] set cannot hold '/'";
					return -1;
				}
				set[s++] = *p;
			}
			set[s++] = ']';
			set[s] = 0;
			EMIT(set);
		} else if (strchr(".^$+(){}|\\", *p)) {
			char esc[3] = {'\\', *p, 0};
			EMIT(esc);
		} else {
			char lit[2] = {*p, 0};
			EMIT(lit);
		}
	}
	EMIT("$");
#undef EMIT
	out[o] = 0;
	return 0;
}

static int parse_errno(const json_t *v, int *out)
{
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		if (n < 1 || n > 4095)
			return -1;
		*out = (int)n;
		return 0;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		for (int i = 1; i < 4096; i++) {
			const char *n = strerrorname_np(i);
			if (n && strcmp(n, s) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	return -1;
}

/* v is a string or an array of strings; call f on each; f's first failure. */
static int each_string(const json_t *v, int (*f)(struct rule *, const char *), struct rule *r,
		       const char **bad)
{
	size_t i;
	json_t *x;

	if (json_is_string(v)) {
		*bad = json_string_value(v);
		return f(r, *bad);
	}
	if (!json_is_array(v) || json_array_size(v) == 0) {
		*bad = NULL;
		return -1;
	}
	json_array_foreach(v, i, x) {
		if (!json_is_string(x)) {
			*bad = NULL;
			return -1;
		}
		*bad = json_string_value(x);
		int rc = f(r, *bad);
		if (rc < 0)
			return rc;
	}
	return 0;
}

#define UNTRAPPABLE (-2)

/* Only syscalls in some class can be trapped by the filter (sbx-run traps by class). */
static int add_syscall(struct rule *r, const char *name)
{
	const struct trace_sysinfo *si = trace_sys_by_name(name);

	if (!si || si->nr < 0 || si->nr >= NR_MAX)
		return -1;
	if (!(si->classes & ~TRACE_CLASS_REFUSED))
		return UNTRAPPABLE;
	if (!r->nrs)
		r->nrs = common_xcalloc(NR_MAX / 8, 1);
	r->nrs[si->nr / 8] |= (unsigned char)(1u << (si->nr % 8));
	return 0;
}

static int add_class(struct rule *r, const char *name)
{
	unsigned bit = trace_class_by_name(name);

	if (!bit)
		return -1;
	r->classes |= bit;
	return 0;
}

static int has_path_arg(const struct trace_sysinfo *si)
{
	for (int i = 0; i < 6; i++)
		if (si->arg[i] == TRACE_ARG_PATH)
			return 1;
	return 0;
}

/* A rewrite or a glob needs syscalls that take a path; say so at load time. */
static int rule_can_see_paths(const struct rule *r)
{
	size_t n = trace_sys_count();

	for (size_t i = 0; i < n; i++) {
		const struct trace_sysinfo *si = trace_sys_at(i);
		if (r->nrs && (si->nr < 0 || si->nr >= NR_MAX ||
			       !(r->nrs[si->nr / 8] & (1u << (si->nr % 8)))))
			continue;
		if (r->classes && !(si->classes & r->classes))
			continue;
		if (has_path_arg(si))
			return 1;
	}
	return 0;
}

static int valid_abs_path(const char *s)
{
	size_t n = strlen(s);

	return s[0] == '/' && n < 4096 && !strstr(s, "/../") &&
	       !(n >= 3 && strcmp(s + n - 3, "/..") == 0);
}

/* A rule's "path": an absolute glob, compiled. */
static int rule_glob(const json_t *v, size_t i, const char *file, struct rule *r,
		     struct common_err *e)
{
	const char *why = NULL;
	char re[4 * MAX_PATTERN + 16];

	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > MAX_PATTERN ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return rule_err(e, file, i, r->name, "field \"path\": expected a glob "
				"of 1 to %d bytes", MAX_PATTERN);
	if (json_string_value(v)[0] != '/')
		return rule_err(e, file, i, r->name, "field \"path\": glob \"%s\" is not "
				"absolute", json_string_value(v));
	if (glob_to_regex(json_string_value(v), re, sizeof re, &why) < 0)
		return rule_err(e, file, i, r->name, "field \"path\": %s", why);
	if (regcomp(&r->glob, re, REG_EXTENDED | REG_NOSUB) != 0)
		return rule_err(e, file, i, r->name, "field \"path\": bad glob \"%s\"",
				json_string_value(v));
	r->has_glob = 1;
	return 0;
}

/* A rule's "action", and the "errno" a deny has (EPERM when it names none). */
static int rule_action(const json_t *o, size_t i, const char *file, struct rule *r,
		       struct common_err *e)
{
	json_t *v = json_object_get(o, "action");
	const char *act;

	if (!v || !json_is_string(v))
		return rule_err(e, file, i, r->name, "field \"action\": expected one of allow, "
				"deny, rewrite, record");
	act = json_string_value(v);
	if (strcmp(act, "allow") == 0)
		r->act = ACT_ALLOW;
	else if (strcmp(act, "deny") == 0)
		r->act = ACT_DENY;
	else if (strcmp(act, "rewrite") == 0)
		r->act = ACT_REWRITE;
	else if (strcmp(act, "record") == 0)
		r->act = ACT_RECORD;
	else
		return rule_err(e, file, i, r->name, "field \"action\": unknown action \"%s\"",
				act);
	v = json_object_get(o, "errno");
	if (v && r->act != ACT_DENY)
		return rule_err(e, file, i, r->name, "field \"errno\": only a deny rule has one");
	r->err = EPERM;
	if (v && parse_errno(v, &r->err) < 0)
		return rule_err(e, file, i, r->name, "field \"errno\": expected an errno name "
				"(\"EACCES\") or a number from 1 to 4095");
	return 0;
}

/* A rewrite's "from" and "to": absolute paths, from without its trailing slashes. */
static int rule_rewrite(const json_t *o, size_t i, const char *file, struct rule *r,
			struct common_err *e)
{
	json_t *f = json_object_get(o, "from"), *t = json_object_get(o, "to");

	if ((f || t) && r->act != ACT_REWRITE)
		return rule_err(e, file, i, r->name, "fields \"from\"/\"to\": only a rewrite "
				"rule has them");
	if (r->act != ACT_REWRITE)
		return 0;
	if (!f || !t || !json_is_string(f) || !json_is_string(t) ||
	    strlen(json_string_value(f)) != json_string_length(f) ||
	    strlen(json_string_value(t)) != json_string_length(t) ||
	    !valid_abs_path(json_string_value(f)) || !valid_abs_path(json_string_value(t)))
		return rule_err(e, file, i, r->name, "a rewrite needs \"from\" and \"to\": "
				"absolute paths without \"..\"");
	r->from = common_xstrdup(json_string_value(f));
	r->to = common_xstrdup(json_string_value(t));
	r->fromlen = strlen(r->from);
	while (r->fromlen > 1 && r->from[r->fromlen - 1] == '/')
		r->from[--r->fromlen] = 0;
	return 0;
}

static int parse_rule(const json_t *o, size_t i, const char *file, struct rule *r,
		      struct common_err *e)
{
	static const char *const keys[] = {"name", "syscall", "class", "path", "action",
					   "errno", "from", "to", NULL};
	const char *key, *bad;
	json_t *v;

	if (!json_is_object(o))
		return rule_err(e, file, i, NULL, "expected a JSON object");
	v = json_object_get(o, "name");
	if (v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof r->name)
			return rule_err(e, file, i, NULL, "field \"name\": expected a string "
					"shorter than %zu bytes", sizeof r->name);
		snprintf(r->name, sizeof r->name, "%s", json_string_value(v));
	}
	json_object_foreach((json_t *)o, key, v) {
		int known = 0;
		for (const char *const *k = keys; *k; k++)
			known |= strcmp(*k, key) == 0;
		if (!known)
			return rule_err(e, file, i, r->name, "unknown field \"%s\"", key);
	}
	int rc;
	if ((v = json_object_get(o, "syscall")) && (rc = each_string(v, add_syscall, r, &bad)) < 0) {
		if (bad && rc == UNTRAPPABLE)
			return rule_err(e, file, i, r->name, "field \"syscall\": \"%s\" is never "
					"trapped, so no rule can see it", bad);
		return rule_err(e, file, i, r->name, bad ? "field \"syscall\": unknown syscall "
				"\"%s\"" : "field \"syscall\": expected a name or a non-empty "
				"array of names%s", bad ? bad : "");
	}
	if ((v = json_object_get(o, "class")) && each_string(v, add_class, r, &bad) < 0)
		return rule_err(e, file, i, r->name, bad ? "field \"class\": unknown class "
				"\"%s\"" : "field \"class\": expected a name or a non-empty "
				"array of names%s", bad ? bad : "");
	if ((v = json_object_get(o, "path")) && rule_glob(v, i, file, r, e) < 0)
		return -1;
	if (rule_action(o, i, file, r, e) < 0)
		return -1;
	if (rule_rewrite(o, i, file, r, e) < 0)
		return -1;
	if ((r->act == ACT_REWRITE || r->has_glob) && !rule_can_see_paths(r))
		return rule_err(e, file, i, r->name, "%s, but none of its syscalls takes a path",
				r->act == ACT_REWRITE ? "it rewrites a path" : "it matches a path");
	return 0;
}

static void rule_free(struct rule *r)
{
	free(r->nrs);
	if (r->has_glob)
		regfree(&r->glob);
	free(r->from);
	free(r->to);
}

void trace_policy_free(struct trace_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		rule_free(&p->rules[i]);
	free(p->rules);
	free(p);
}

int trace_policy_parse(const char *buf, size_t len, const char *name,
		       struct trace_policy **out, struct common_err *e)
{
	json_t *j, *rules, *v;
	struct trace_policy *p;
	const char *key;
	size_t i;

	*out = NULL;
	if (len > MAX_POLICY_BYTES)
		return common_errf(e, name, "policy larger than %u bytes", MAX_POLICY_BYTES);
	if (!(j = common_json_load(buf, len, name, e)))
		return -1;
	if (!json_is_object(j)) {
		json_decref(j);
		return common_errf(e, name, "expected a JSON object {\"rules\": [...]}");
	}
	json_object_foreach(j, key, v) {
		if (strcmp(key, "rules") != 0 && strcmp(key, "version") != 0) {
			common_errf(e, name, "unknown field \"%s\"", key);
			json_decref(j);
			return -1;
		}
	}
	v = json_object_get(j, "version");
	if (v && (!json_is_integer(v) || json_integer_value(v) != 1)) {
		json_decref(j);
		return common_errf(e, name, "field \"version\": only version 1 is known");
	}
	rules = json_object_get(j, "rules");
	if (!json_is_array(rules) || json_array_size(rules) > MAX_RULES) {
		json_decref(j);
		return common_errf(e, name, "field \"rules\": expected an array of at most %d "
				   "rules", MAX_RULES);
	}
	p = common_xcalloc(1, sizeof *p);
	p->rules = common_xcalloc(json_array_size(rules) + 1, sizeof *p->rules);
	json_array_foreach(rules, i, v) {
		if (parse_rule(v, i, name, &p->rules[i], e) < 0) {
			p->n = i + 1;
			trace_policy_free(p);
			json_decref(j);
			return -1;
		}
		p->n = i + 1;
	}
	json_decref(j);
	*out = p;
	return 0;
}

int trace_policy_load(const char *path, struct trace_policy **out, struct common_err *e)
{
	char *buf;
	size_t len;
	int r;

	*out = NULL;
	if (common_read_file(path, MAX_POLICY_BYTES, &buf, &len, e) < 0)
		return -1;
	r = trace_policy_parse(buf, len, path, out, e);
	free(buf);
	return r;
}

static int rule_selects(const struct rule *r, const struct trace_sysinfo *si, long nr)
{
	if (r->nrs && (nr < 0 || nr >= NR_MAX || !(r->nrs[nr / 8] & (1u << (nr % 8)))))
		return 0;
	if (r->classes && (!si || !(si->classes & r->classes)))
		return 0;
	if ((r->has_glob || r->act == ACT_REWRITE) && (!si || !has_path_arg(si)))
		return 0;
	return 1;
}

int trace_policy_traps(const struct trace_policy *p, const struct trace_sysinfo *sys)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (rule_selects(&p->rules[i], sys, sys->nr))
			return 1;
	return 0;
}

/* path under prefix from (equal, or followed by '/') */
static int under(const struct rule *r, const char *path)
{
	if (strcmp(r->from, "/") == 0)
		return 1;
	return strncmp(path, r->from, r->fromlen) == 0 &&
	       (path[r->fromlen] == 0 || path[r->fromlen] == '/');
}

void trace_decision_clear(struct trace_decision *d)
{
	free(d->path[0]);
	free(d->path[1]);
	memset(d, 0, sizeof *d);
}

/* The spellings of a path argument a glob is matched against, made once per call. */
struct spellings {
	int made[2];
	char fold[2][PATH_MAX], real[2][PATH_MAX];
	int has_real[2];
};

/* A glob matches the path as written, folded, or where it really leads in the
 * guest's root (any symlink or /proc/self link followed): "//x", "/a/../x",
 * "/proc/self/root/x" and a symlink to x all mean x. */
static int glob_hits(const struct rule *r, const struct trace_stop *st, int k, struct spellings *s)
{
	if (regexec(&r->glob, st->path[k], 0, NULL, 0) == 0)
		return 1;
	if (!s->made[k]) {
		s->made[k] = 1;
		trace_path_fold(st->path[k], s->fold[k]);
		s->has_real[k] = trace_path_real(st->tid, st->path[k], 1, s->real[k]) == 0;
	}
	return regexec(&r->glob, s->fold[k], 0, NULL, 0) == 0 ||
	       (s->has_real[k] && regexec(&r->glob, s->real[k], 0, NULL, 0) == 0);
}

int trace_policy_has_paths(const struct trace_policy *p)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (p->rules[i].has_glob || p->rules[i].act == ACT_REWRITE)
			return 1;
	return 0;
}

int trace_policy_decide(const struct trace_policy *p, const struct trace_stop *st,
			struct trace_decision *d)
{
	struct spellings seen;

	seen.made[0] = seen.made[1] = 0;

	for (size_t i = 0; p && i < p->n; i++) {
		const struct rule *r = &p->rules[i];
		int hit = 0;

		if (!rule_selects(r, st->sys, st->nr))
			continue;
		if (r->has_glob) {
			for (int k = 0; k < 2; k++)
				if (st->path[k] && glob_hits(r, st, k, &seen))
					hit = 1;
			if (!hit)
				continue;
		}
		if (r->act == ACT_REWRITE) {
			hit = 0;
			for (int k = 0; k < 2; k++) {
				if (!st->path[k] || !under(r, st->path[k]))
					continue;
				const char *rest = st->path[k] + (strcmp(r->from, "/") ? r->fromlen : 0);
				size_t tl = strlen(r->to);
				/* "/" + "/x" must not become "//x" */
				if (tl > 1 || *rest != '/')
					d->path[k] = common_xasprintf("%s%s", r->to, rest);
				else
					d->path[k] = common_xstrdup(rest);
				hit = 1;
			}
			if (!hit)
				continue;
		}
		if (r->act == ACT_DENY)
			d->deny_errno = r->err;
		if (r->act == ACT_RECORD)
			d->record = 1;
		if (r->name[0])
			snprintf(d->rule, sizeof d->rule, "%s", r->name);
		else
			snprintf(d->rule, sizeof d->rule, "rule %zu", i + 1);
		return 1;
	}
	return 0;
}
