/* sbx-trace files: the build record of a trace as JSON, text or make rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/record/cmd/cmd-internal.h"

/* Make syntax: spaces, '#', ':' escaped with a backslash, '$' doubled,
 * control bytes as the wildcard '?'. */
static void make_word(const char *s)
{
	putchar(' ');
	for (; *s; s++) {
		if (*s == '$')
			fputs("$$", stdout);
		else if (*s == ' ' || *s == '#' || *s == ':' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			fputs("?", stdout); /* make matches the byte; the terminal never sees it */
		else
			putchar(*s);
	}
}

static void text_list(json_t *o, const char *key, const char *title, const char *extra)
{
	json_t *a = json_object_get(o, key), *v;
	size_t i;

	printf("%s (%zu):\n", title, json_array_size(a));
	json_array_foreach(a, i, v) {
		const char *x = extra ? json_string_value(json_object_get(v, extra)) : NULL;
		const char *from = json_string_value(json_object_get(v, "from"));
		fputs("  ", stdout);
		common_escape_print(stdout, json_string_value(json_object_get(v, "path")));
		if (from) {
			fputs(" (renamed from ", stdout);
			common_escape_print(stdout, from);
			putchar(')');
		}
		if (x) {
			fputs("  ", stdout);
			common_escape_print(stdout, x);
		}
		if (json_object_get(v, "runs"))
			printf("  x%lld", (long long)json_integer_value(json_object_get(v, "runs")));
		putchar('\n');
	}
}

int trace_cmd_files(const char *path, enum trace_fmt f, int hash_inputs, struct common_err *e)
{
	json_t *o = trace_buildrec(path, hash_inputs, e), *v, *run;
	size_t i;

	if (!o)
		return -1;
	run = json_object_get(o, "run");
	if (f == TRACE_FMT_JSON) {
		common_json_print(o, 0);
	} else if (f == TRACE_FMT_MAKE) {
		int any = 0;
		json_array_foreach(json_object_get(o, "outputs"), i, v)
			if (strcmp(json_string_value(json_object_get(v, "how")), "mkdir") != 0) {
				make_word(json_string_value(json_object_get(v, "path")) );
				any = 1;
			}
		if (!any)
			fputs(" .sbx-no-outputs", stdout);
		putchar(':');
		json_array_foreach(json_object_get(o, "inputs"), i, v) {
			fputs(" \\\n ", stdout);
			make_word(json_string_value(json_object_get(v, "path")));
		}
		putchar('\n');
	} else {
		fputs("run: ", stdout);
		common_escape_print(stdout, json_string_value(json_object_get(run, "trace")));
		printf(", level %s, %s\n", json_string_value(json_object_get(run, "level")),
		       json_is_true(json_object_get(run, "complete")) ? "complete"
								   : "TRUNCATED (the run was killed)");
		text_list(o, "inputs", "inputs read", hash_inputs ? "sha256" : NULL);
		text_list(o, "outputs", "outputs written", "how");
		text_list(o, "deleted", "deleted", NULL);
		text_list(o, "temporaries", "temporaries (written, then deleted)", NULL);
		text_list(o, "probes", "absent paths probed", "errno");
		text_list(o, "dirs", "directories listed", NULL);
		text_list(o, "tools", "tools executed", "sha256");
		printf("processes (%zu):\n", json_array_size(json_object_get(o, "processes")));
		json_array_foreach(json_object_get(o, "processes"), i, v) {
			json_t *st = json_object_get(v, "exit");
			const char *exe = json_string_value(json_object_get(v, "exe"));
			printf("  %lld <- %lld  ", (long long)json_integer_value(json_object_get(v, "pid")),
			       (long long)json_integer_value(json_object_get(v, "ppid")));
			common_escape_print(stdout, exe ? exe : "(no exec)");
			printf("  %s %lld, %zu in, %zu out\n",
			       st ? "exit" : json_object_get(v, "signal") ? "signal" : "running",
			       (long long)json_integer_value(st ? st : json_object_get(v, "signal")),
			       json_array_size(json_object_get(v, "inputs")),
			       json_array_size(json_object_get(v, "outputs")));
		}
	}
	fflush(stdout);
	json_decref(o);
	return 0;
}
