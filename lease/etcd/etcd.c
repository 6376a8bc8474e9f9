/* An etcd v3 client over the cluster's documented HTTP/JSON gateway (libcurl,
 * jansson, OpenSSL base64): range, txn, authenticate; endpoint failover within
 * a bounded time (SPEC §14). libcurl is loaded when an etcd store is opened, so
 * tools on the file store do not map it and its thirty dependencies. */
#include <curl/curl.h>
#include <dlfcn.h>
#include <stddef.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lease/etcd/etcd.h"

#define ENDPOINTS_MAX 16
#define REPLY_MAX LEASE_JOURNAL_MAX
#define DEFAULT_TIMEOUT_MS 5000
#define ATTEMPT_MS 1500
/* gRPC codes the gateway passes on that another member (or a later try) may not give */
#define GRPC_DEADLINE 4
#define GRPC_UNAVAILABLE 14
#define GRPC_UNAUTHENTICATED 16

struct lease_etcd {
	CURL *curl;
	char *ep[ENDPOINTS_MAX];
	size_t nep, cur;
	char *prefix; /* "/NAME" */
	char *user, *password, *token;
	uint64_t timeout_ms;
	int down; /* the last request found no member answering in time */
};

/* The libcurl functions this client calls, resolved by curl_load. */
static struct curl_api {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode cc);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
} cu;

#define CURL_FN(field) { "curl_" #field, offsetof(struct curl_api, field) }
static const struct {
	const char *name;
	size_t off;
} curl_fns[] = {
	CURL_FN(global_init), CURL_FN(easy_init), CURL_FN(easy_setopt),
	CURL_FN(easy_perform), CURL_FN(easy_getinfo), CURL_FN(easy_cleanup),
	CURL_FN(easy_strerror), CURL_FN(slist_append), CURL_FN(slist_free_all),
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static char curl_why[256]; /* empty once libcurl is loaded and initialised */

static void curl_load(void)
{
	void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	void *fn;

	if (!lib) {
		snprintf(curl_why, sizeof curl_why, "%s", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof curl_fns / sizeof *curl_fns; i++) {
		if (!(fn = dlsym(lib, curl_fns[i].name))) {
			snprintf(curl_why, sizeof curl_why, "%s: no symbol", curl_fns[i].name);
			return;
		}
		memcpy((char *)&cu + curl_fns[i].off, &fn, sizeof fn);
	}
	if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		snprintf(curl_why, sizeof curl_why, "curl_global_init failed");
}

int lease_etcd_url(const char *url)
{
	return url && (strncmp(url, "etcd://", 7) == 0 || strncmp(url, "etcds://", 8) == 0);
}

static char *b64(const char *s, size_t n)
{
	char *out = common_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

/* Decoded bytes (NUL-terminated) of base64 text, NULL when it is not base64. */
static char *unb64(const char *s, size_t *len)
{
	size_t n = strlen(s), pad = 0;
	char *out;
	int r;

	if (n % 4)
		return NULL;
	out = common_xmalloc(n / 4 * 3 + 1);
	r = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	if (r < 0) {
		free(out);
		return NULL;
	}
	while (pad < 2 && n > pad && s[n - 1 - pad] == '=')
		pad++;
	*len = (size_t)r - pad;
	out[*len] = '\0';
	return out;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static int read_password(struct lease_etcd *c, struct common_err *e)
{
	const char *file = env("SBX_ETCD_PASSWORD_FILE");
	char *buf;
	size_t len;

	if (!c->user)
		return 0;
	if (env("SBX_ETCD_PASSWORD")) {
		c->password = common_xstrdup(env("SBX_ETCD_PASSWORD"));
		return 0;
	}
	if (!file)
		return common_errf(e, "SBX_ETCD_USER", "needs SBX_ETCD_PASSWORD or SBX_ETCD_PASSWORD_FILE");
	if (common_read_file(file, 4096, &buf, &len, e) < 0)
		return -1;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	c->password = buf;
	return 0;
}

/* "etcd[s]://H:P[,H:P...]/PREFIX": endpoints and the key prefix. */
static int parse_url(struct lease_etcd *c, const char *url, struct common_err *e)
{
	int tls = strncmp(url, "etcds://", 8) == 0 || env("SBX_ETCD_CACERT") || env("SBX_ETCD_CERT");
	const char *p = strchr(url, ':') + 3, *slash = strchr(p, '/');
	char *hosts, *tok, *save;

	if (!slash || !slash[1] || slash == p)
		return common_errf(e, url, "expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX");
	for (const char *q = slash + 1; *q; q++)
		if (!(('a' <= *q && *q <= 'z') || ('A' <= *q && *q <= 'Z') || ('0' <= *q && *q <= '9') ||
		      strchr("._-/", *q)))
			return common_errf(e, url, "prefix may hold only A-Z a-z 0-9 . _ - /");
	c->prefix = common_xasprintf("%s", slash);
	while (strlen(c->prefix) > 1 && c->prefix[strlen(c->prefix) - 1] == '/')
		c->prefix[strlen(c->prefix) - 1] = '\0';
	hosts = strndup(p, (size_t)(slash - p));
	for (tok = strtok_r(hosts, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (c->nep == ENDPOINTS_MAX || !strchr(tok, ':') || strpbrk(tok, "/@?#")) {
			if (c->nep == ENDPOINTS_MAX)
				common_errf(e, url, "more than %d endpoints", ENDPOINTS_MAX);
			else
				common_errf(e, url, "endpoint \"%s\" is not HOST:PORT", tok);
			free(hosts);
			return -1;
		}
		c->ep[c->nep++] = common_xasprintf("%s://%s", tls ? "https" : "http", tok);
	}
	free(hosts);
	if (c->nep == 0)
		return common_errf(e, url, "no endpoint (expected HOST:PORT)");
	return 0;
}

int lease_etcd_open(const char *url, struct lease_etcd **out, struct common_err *e)
{
	struct lease_etcd *c = common_xcalloc(1, sizeof *c);
	uint64_t ms;

	pthread_once(&curl_once, curl_load);
	if (*curl_why) {
		free(c);
		return common_errf(e, "store", "etcd: cannot load libcurl: %s", curl_why);
	}
	if (!(c->curl = cu.easy_init())) {
		free(c);
		return common_errf(e, "store", "etcd: cannot initialise libcurl");
	}
	c->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (env("SBX_ETCD_TIMEOUT_MS") &&
	    common_parse_u64(env("SBX_ETCD_TIMEOUT_MS"), 3600000, &ms, e) == 0)
		c->timeout_ms = ms ? ms : 1;
	else if (env("SBX_ETCD_TIMEOUT_MS"))
		goto fail;
	if (env("SBX_ETCD_USER"))
		c->user = common_xstrdup(env("SBX_ETCD_USER"));
	if (parse_url(c, url, e) < 0 || read_password(c, e) < 0)
		goto fail;
	cu.easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(c->curl, CURLOPT_NOPROXY, "*");
	cu.easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
	if (env("SBX_ETCD_CACERT"))
		cu.easy_setopt(c->curl, CURLOPT_CAINFO, env("SBX_ETCD_CACERT"));
	if (env("SBX_ETCD_CERT"))
		cu.easy_setopt(c->curl, CURLOPT_SSLCERT, env("SBX_ETCD_CERT"));
	if (env("SBX_ETCD_KEY"))
		cu.easy_setopt(c->curl, CURLOPT_SSLKEY, env("SBX_ETCD_KEY"));
	*out = c;
	return 0;
fail:
	lease_etcd_close(c);
	return -1;
}

void lease_etcd_close(struct lease_etcd *c)
{
	if (!c)
		return;
	if (c->curl)
		cu.easy_cleanup(c->curl);
	for (size_t i = 0; i < c->nep; i++)
		free(c->ep[i]);
	free(c->prefix);
	free(c->user);
	if (c->password)
		memset(c->password, 0, strlen(c->password));
	free(c->password);
	free(c->token);
	free(c);
}

int lease_etcd_unreachable(const struct lease_etcd *c)
{
	return c->down;
}

struct reply {
	char *buf;
	size_t len;
	int over;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;

	n *= size;
	if (r->len + n > REPLY_MAX) {
		r->over = 1;
		return 0;
	}
	r->buf = common_xrealloc(r->buf, r->len + n + 1);
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	r->buf[r->len] = '\0';
	return n;
}

static void nap_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

enum outcome { OK, RETRY, FATAL };

/* The gateway's reply r (freed here) with HTTP status: OK with *out, RETRY
 * (another member or a later try may answer), or FATAL with e filled. */
static enum outcome decode(struct lease_etcd *c, long status, struct reply *r, json_t **out,
			   char *why, size_t whylen, struct common_err *e)
{
	json_t *j = r->over ? NULL : common_json_load(r->buf ? r->buf : "", r->len, "etcd reply", NULL);
	int64_t code;

	if (!json_is_object(j)) {
		char *text = r->buf ? common_escape(r->buf, r->len < 200 ? r->len : 200, 0) : NULL;
		json_decref(j);
		common_errf(e, "store", "etcd %s: HTTP %ld: %s", c->ep[c->cur], status,
			    r->over ? "reply too large" : text ? text : "empty reply");
		free(text);
		free(r->buf);
		return FATAL;
	}
	free(r->buf);
	code = lease_jint(j, "code");
	if (status == 200 && !json_object_get(j, "error")) {
		*out = j;
		return OK;
	}
	snprintf(why, whylen, "%s: %s", c->ep[c->cur],
		 lease_jstr(j, "error") ? lease_jstr(j, "error") : "HTTP error");
	if (status >= 500 && code != GRPC_UNAUTHENTICATED && (code == GRPC_UNAVAILABLE ||
							      code == GRPC_DEADLINE || code < 0)) {
		json_decref(j);
		return RETRY;
	}
	if (code == GRPC_UNAUTHENTICATED && c->token) {
		free(c->token);
		c->token = NULL;
		json_decref(j);
		return RETRY;
	}
	common_errf(e, "store", "etcd: %s", why);
	json_decref(j);
	return FATAL;
}

/* One POST to the current endpoint: OK with *out, RETRY (this member is down,
 * has no leader or timed out: another may answer), or FATAL with e filled. */
static enum outcome post_once(struct lease_etcd *c, const char *path, const char *body,
			      uint64_t budget_ms, json_t **out, char *why, size_t whylen,
			      struct common_err *e)
{
	struct reply r = { NULL, 0, 0 };
	char *url = common_xasprintf("%s%s", c->ep[c->cur], path), *auth = NULL;
	char detail[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode cc;

	h = cu.slist_append(h, "Content-Type: application/json");
	if (c->token) {
		auth = common_xasprintf("Authorization: %s", c->token);
		h = cu.slist_append(h, auth);
	}
	cu.easy_setopt(c->curl, CURLOPT_URL, url);
	cu.easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	cu.easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	cu.easy_setopt(c->curl, CURLOPT_WRITEDATA, &r);
	cu.easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)(budget_ms < ATTEMPT_MS ? budget_ms : ATTEMPT_MS));
	cu.easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	cu.easy_setopt(c->curl, CURLOPT_ERRORBUFFER, detail);
	cc = cu.easy_perform(c->curl);
	cu.easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	cu.easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	cu.slist_free_all(h);
	free(auth);
	if (cc != CURLE_OK && !r.over) {
		snprintf(why, whylen, "%s: %s", c->ep[c->cur], *detail ? detail : cu.easy_strerror(cc));
		free(url);
		free(r.buf);
		/* a certificate nobody accepts stays so: no other try can succeed */
		if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CERTPROBLEM ||
		    cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_SSL_CONNECT_ERROR) {
			common_errf(e, "store", "etcd TLS: %s", why);
			return FATAL;
		}
		return RETRY;
	}
	free(url);
	return decode(c, status, &r, out, why, whylen, e);
}

static int post(struct lease_etcd *c, const char *path, const json_t *req, json_t **out,
		struct common_err *e);

static int authenticate(struct lease_etcd *c, struct common_err *e)
{
	json_t *req = json_pack("{s:s, s:s}", "name", c->user, "password", c->password), *rep;
	int rc;

	rc = post(c, "/v3/auth/authenticate", req, &rep, e);
	json_decref(req);
	if (rc < 0)
		return -1;
	if (!lease_jstr(rep, "token")) {
		json_decref(rep);
		return common_errf(e, "store", "etcd: authentication gave no token");
	}
	c->token = common_xstrdup(lease_jstr(rep, "token"));
	json_decref(rep);
	return 0;
}

/* POST req to path on some member within the time bound, failing over in turn. */
static int post(struct lease_etcd *c, const char *path, const json_t *req, json_t **out,
		struct common_err *e)
{
	uint64_t start = common_mono_us() / 1000, now, left, pause = 20;
	char *body = json_dumps(req, JSON_COMPACT), why[512] = "no attempt";
	int auth_call = strcmp(path, "/v3/auth/authenticate") == 0;
	size_t tries = 0;

	c->down = 0;
	for (;;) {
		now = common_mono_us() / 1000;
		if (now - start >= c->timeout_ms && tries > 0)
			break;
		if (c->user && !c->token && !auth_call && authenticate(c, e) < 0) {
			free(body);
			return -1;
		}
		tries++;
		left = now - start >= c->timeout_ms ? 1 : c->timeout_ms - (now - start);
		switch (post_once(c, path, body, left, out, why, sizeof why, e)) {
		case OK:
			free(body);
			return 0;
		case FATAL:
			free(body);
			return -1;
		case RETRY:
			break;
		}
		c->cur = (c->cur + 1) % c->nep;
		if (c->cur == 0 || c->nep == 1) {
			nap_ms(pause);
			pause = pause < 200 ? pause * 2 : pause;
		}
	}
	free(body);
	c->down = 1;
	return common_errf(e, "store", "etcd unreachable: %s (%zu attempts in %llu ms)", why, tries,
			   (unsigned long long)c->timeout_ms);
}

static char *full_key(const struct lease_etcd *c, const char *key)
{
	return common_xasprintf("%s/%s", c->prefix, key);
}

/* The first key after every key that starts with k: etcd's range end of a prefix. */
static char *prefix_end(const char *k)
{
	char *end = common_xstrdup(k);

	end[strlen(end) - 1]++;
	return end;
}

static json_t *b64_str(const char *s)
{
	char *v = b64(s, strlen(s));
	json_t *j = json_string(v);

	free(v);
	return j;
}

static int64_t rev_of(const json_t *kv, const char *field)
{
	const char *s = lease_jstr(kv, field);

	return s ? strtoll(s, NULL, 10) : 0;
}

/* [[key relative to the prefix, value, mod_revision], ...] of a range reply. */
static int kvs_of(const struct lease_etcd *c, const json_t *rep, json_t **kvs, struct common_err *e)
{
	json_t *arr = json_array(), *kv;
	size_t i, plen = strlen(c->prefix) + 1, klen, vlen;

	json_array_foreach(json_object_get(rep, "kvs"), i, kv) {
		char *k = lease_jstr(kv, "key") ? unb64(lease_jstr(kv, "key"), &klen) : NULL;
		char *v = unb64(lease_jstr(kv, "value") ? lease_jstr(kv, "value") : "", &vlen);
		if (!k || !v || klen < plen || strlen(k) != klen || strlen(v) != vlen) {
			free(k);
			free(v);
			json_decref(arr);
			return common_errf(e, "store", "etcd: a key or value is not text");
		}
		if (strncmp(k, c->prefix, plen - 1) != 0 || k[plen - 1] != '/') {
			free(k);
			free(v);
			json_decref(arr);
			return common_errf(e, "store", "etcd: a reply names a key outside the prefix");
		}
		json_array_append_new(arr, json_pack("[s, s, I]", k + plen, v,
						     (json_int_t)rev_of(kv, "mod_revision")));
		free(k);
		free(v);
	}
	*kvs = arr;
	return 0;
}

int lease_etcd_decode(struct lease_etcd *c, long status, const char *body, size_t len,
		      json_t **kvs, struct common_err *e)
{
	struct reply r = { common_xmalloc(len + 1), len, len > REPLY_MAX };
	json_t *rep = NULL;
	char why[512];
	int rc;

	memcpy(r.buf, body, len);
	r.buf[len] = '\0';
	switch (decode(c, status, &r, &rep, why, sizeof why, e)) {
	case OK:
		rc = kvs_of(c, rep, kvs, e);
		json_decref(rep);
		return rc;
	case RETRY:
		return 1;
	default:
		return -1;
	}
}

int lease_etcd_range(struct lease_etcd *c, const char *prefix, const char *from, json_t **kvs,
		     struct common_err *e)
{
	char *k = full_key(c, prefix), *f = from ? full_key(c, from) : NULL, *end = prefix_end(k);
	json_t *req = json_object(), *rep = NULL;
	int rc;

	json_object_set_new(req, "key", b64_str(f ? f : k));
	if (prefix[strlen(prefix) - 1] == '/' || from)
		json_object_set_new(req, "range_end", b64_str(end));
	rc = post(c, "/v3/kv/range", req, &rep, e);
	if (rc == 0)
		rc = kvs_of(c, rep, kvs, e);
	json_decref(req);
	json_decref(rep);
	free(k);
	free(f);
	free(end);
	return rc;
}

int lease_etcd_get(struct lease_etcd *c, const char *key, char **val, int64_t *rev,
		   struct common_err *e)
{
	json_t *kvs;

	*val = NULL;
	*rev = 0;
	if (lease_etcd_range(c, key, NULL, &kvs, e) < 0)
		return -1;
	if (json_array_size(kvs) == 1) {
		*val = common_xstrdup(json_string_value(json_array_get(json_array_get(kvs, 0), 1)));
		*rev = json_integer_value(json_array_get(json_array_get(kvs, 0), 2));
	}
	json_decref(kvs);
	return 0;
}

/* The kvs of every range among a txn reply's responses, one array. */
static int responses_kvs(const struct lease_etcd *c, const json_t *rep, json_t **kvs,
			 struct common_err *e)
{
	json_t *one, *r;
	size_t i;

	*kvs = json_array();
	json_array_foreach(json_object_get(rep, "responses"), i, r) {
		if (!json_object_get(r, "response_range"))
			continue;
		if (kvs_of(c, json_object_get(r, "response_range"), &one, e) < 0) {
			json_decref(*kvs);
			*kvs = NULL;
			return -1;
		}
		json_array_extend(*kvs, one);
		json_decref(one);
	}
	return 0;
}

static json_t *range_op(const struct lease_etcd *c, const char *key)
{
	char *k = full_key(c, key);
	json_t *op = json_pack("{s:{s:o}}", "request_range", "key", b64_str(k));

	free(k);
	return op;
}

int lease_etcd_get_many(struct lease_etcd *c, const json_t *keys, json_t **kvs,
			struct common_err *e)
{
	json_t *req = json_pack("{s:[], s:[]}", "compare", "success"), *rep = NULL, *k;
	size_t i;
	int rc;

	*kvs = NULL;
	/* a transaction of reads only is one linearizable read, not a proposal */
	json_array_foreach(keys, i, k)
		json_array_append_new(json_object_get(req, "success"),
				      range_op(c, json_string_value(k)));
	rc = post(c, "/v3/kv/txn", req, &rep, e);
	if (rc == 0)
		rc = responses_kvs(c, rep, kvs, e);
	json_decref(req);
	json_decref(rep);
	return rc;
}

int lease_etcd_txn(struct lease_etcd *c, const json_t *cmp, const json_t *puts, int64_t *rev,
		   json_t **now, struct common_err *e)
{
	json_t *req = json_pack("{s:[], s:[], s:[]}", "compare", "success", "failure"), *rep = NULL;
	json_t *it;
	size_t i;
	int rc;

	if (now)
		*now = NULL;
	json_array_foreach(cmp, i, it) {
		char *k = full_key(c, json_string_value(json_array_get(it, 0))), rev[24];
		snprintf(rev, sizeof rev, "%lld", (long long)json_integer_value(json_array_get(it, 1)));
		json_array_append_new(json_object_get(req, "compare"),
				      json_pack("{s:o, s:s, s:s, s:s}", "key", b64_str(k), "target", "MOD",
						"result", "EQUAL", "mod_revision", rev));
		/* a lost comparison answers with what holds now: the retry needs no read */
		if (now)
			json_array_append_new(json_object_get(req, "failure"),
					      range_op(c, json_string_value(json_array_get(it, 0))));
		free(k);
	}
	json_array_foreach(puts, i, it) {
		char *k = full_key(c, json_string_value(json_array_get(it, 0)));
		const char *v = json_string_value(json_array_get(it, 1));
		char *bv = v ? b64(v, strlen(v)) : NULL;
		if (v)
			json_array_append_new(json_object_get(req, "success"),
					      json_pack("{s:{s:o, s:s}}", "request_put", "key",
							b64_str(k), "value", bv));
		else
			json_array_append_new(json_object_get(req, "success"),
					      json_pack("{s:{s:o}}", "request_delete_range", "key",
							b64_str(k)));
		free(bv);
		free(k);
	}
	rc = post(c, "/v3/kv/txn", req, &rep, e);
	if (rc == 0) {
		rc = json_is_true(json_object_get(rep, "succeeded")) ? 1 : 0;
		*rev = rev_of(json_object_get(rep, "header"), "revision");
	}
	if (rc == 0 && now && responses_kvs(c, rep, now, e) < 0)
		rc = -1;
	json_decref(req);
	json_decref(rep);
	return rc;
}
