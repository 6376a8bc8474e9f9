/* The guest's environment as sbx-run and adjudication build it. */
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"
#include "trace/box/box.h"

extern char **environ;

/* What a guest gets by default: nothing the invoker keeps secret in its
 * environment (tokens, agent sockets, the store) crosses unless named. */
static const char *const env_default[] = { "PATH", "HOME", "TERM", "LANG", "TZ" };
#define ENV_DEFAULT_PATH "PATH=/usr/local/bin:/usr/bin:/bin"

/* Set NAME=VALUE in env (n entries), replacing NAME's entry. */
static char **env_put(char **env, size_t *n, const char *kv)
{
	size_t klen = strcspn(kv, "=") + 1, j;
	for (j = 0; j < *n; j++)
		if (strncmp(env[j], kv, klen) == 0)
			break;
	if (j == *n) {
		env = common_xrealloc(env, (*n + 2) * sizeof *env);
		env[++*n] = NULL;
	} else {
		free(env[j]);
	}
	env[j] = common_xstrdup(kv);
	return env;
}

/* The invoker's NAME=VALUE entry, or NULL. */
static const char *env_find(const char *name)
{
	size_t k = strlen(name);
	for (size_t i = 0; environ[i]; i++)
		if (strncmp(environ[i], name, k) == 0 && environ[i][k] == '=')
			return environ[i];
	return NULL;
}

char **trace_env_build(int env_clear, const char *const *env_set, size_t nenv_set)
{
	size_t n = 0;
	char **env = common_xcalloc(1, sizeof *env);
	const char *kv;
	if (env_clear == -1) {
		for (size_t i = 0; environ[i]; i++)
			env = env_put(env, &n, environ[i]);
	} else if (env_clear == 0) {
		env = env_put(env, &n, env_find("PATH") ? env_find("PATH") : ENV_DEFAULT_PATH);
		for (size_t i = 1; i < sizeof env_default / sizeof env_default[0]; i++)
			if ((kv = env_find(env_default[i])))
				env = env_put(env, &n, kv);
	}
	/* NAME=VALUE sets; a bare NAME passes the invoker's value, if it has one */
	for (size_t i = 0; i < nenv_set; i++) {
		kv = strchr(env_set[i], '=') ? env_set[i] : env_find(env_set[i]);
		if (kv)
			env = env_put(env, &n, kv);
	}
	return env;
}

void trace_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}
