/* JSON on jansson with hostile-input discipline: bounded, duplicate keys refused,
 * typed access with messages naming the input and field; canonical output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"

json_t *common_json_load(const char *buf, size_t len, const char *name, struct common_err *e)
{
	json_error_t je;
	json_t *j;

	if (len > COMMON_JSON_MAX) {
		common_errf(e, name, "JSON larger than %u bytes", COMMON_JSON_MAX);
		return NULL;
	}
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		char what[600];
		snprintf(what, sizeof what, "%s:%d", name, je.line);
		common_errf(e, what, "%s", je.text);
	}
	return j;
}

json_t *common_json_load_file(const char *path, size_t max, struct common_err *e)
{
	char *buf;
	size_t len;
	json_t *j;

	if (common_read_file(path, max, &buf, &len, e) < 0)
		return NULL;
	j = common_json_load(buf, len, strcmp(path, "-") ? path : "<stdin>", e);
	free(buf);
	return j;
}

char *common_json_canonical(const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

	if (!s)
		abort();
	return s;
}

static json_t *field(const json_t *o, const char *key, const char *name, struct common_err *e)
{
	json_t *v;
	char what[600];

	if (!json_is_object(o)) {
		common_errf(e, name, "expected a JSON object");
		return NULL;
	}
	v = json_object_get(o, key);
	if (!v) {
		snprintf(what, sizeof what, "%s: field \"%s\"", name, key);
		common_errf(e, what, "missing");
	}
	return v;
}

static int type_err(const char *key, const char *name, const char *want, struct common_err *e)
{
	char what[600];

	snprintf(what, sizeof what, "%s: field \"%s\"", name, key);
	return common_errf(e, what, "expected %s", want);
}

int common_json_int(const json_t *o, const char *key, int64_t *out, const char *name,
		    struct common_err *e)
{
	json_t *v = field(o, key, name, e);

	if (!v)
		return -1;
	if (!json_is_integer(v))
		return type_err(key, name, "integer", e);
	*out = json_integer_value(v);
	return 0;
}

int common_json_str(const json_t *o, const char *key, const char **out, const char *name,
		    struct common_err *e)
{
	json_t *v = field(o, key, name, e);

	if (!v)
		return -1;
	if (!json_is_string(v))
		return type_err(key, name, "string", e);
	*out = json_string_value(v);
	return 0;
}

const char *common_jstr(const json_t *o, const char *key, const char *dflt)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : dflt;
}

json_int_t common_jint(const json_t *o, const char *key, json_int_t dflt)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

int common_json_print(const json_t *j, int pretty)
{
	char *s = json_dumps(j, (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_SORT_KEYS |
				       JSON_ENCODE_ANY);
	int r;

	if (!s)
		return -1;
	r = printf("%s\n", s) < 0 ? -1 : 0;
	free(s);
	if (fflush(stdout) != 0)
		r = -1;
	return r;
}
