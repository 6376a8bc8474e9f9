/* Names, ceilings, the lifecycle table, and the --limits/--fees readers (SPEC §3.1, §4.1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "lease/backend/backend.h"

static const char *const dim_names[LEASE_DIM_COUNT] = {
	"fuel", "memory", "storage_read", "storage_write",
	"output_bytes", "output_values", "table_elements", "namespace_bytes",
};

static const uint64_t dim_ceilings[LEASE_DIM_COUNT] = {
	1000000000ull, 1ull << 30, 1ull << 30, 1ull << 30,
	1ull << 30, 65536ull, 1048576ull, 1ull << 30,
};

static const char *const state_names[LEASE_STATE_COUNT] = {
	"Requested", "Funded", "Active", "Settling", "Expired", "Destroyed",
};

static const char *const edge_names[LEASE_EDGE_COUNT] = {
	"request", "fund", "activate", "observe", "snapshot", "restore", "settle",
	"expire", "destroy",
};

#define S(x) (1u << (x))
/* The lifecycle as data: which states an edge leaves from, where it goes. */
static const struct {
	unsigned from; /* bit set of states; 0 for request (from nothing) */
	enum lease_state to;
	const char *needs;
} edges[LEASE_EDGE_COUNT] = {
	[LEASE_EDGE_REQUEST] = { 0, LEASE_REQUESTED, "no lease" },
	[LEASE_EDGE_FUND] = { S(LEASE_REQUESTED), LEASE_FUNDED, "Requested" },
	[LEASE_EDGE_ACTIVATE] = { S(LEASE_FUNDED), LEASE_ACTIVE, "Funded" },
	[LEASE_EDGE_OBSERVE] = { S(LEASE_ACTIVE), LEASE_ACTIVE, "Active" },
	[LEASE_EDGE_SNAPSHOT] = { S(LEASE_ACTIVE), LEASE_ACTIVE, "Active" },
	[LEASE_EDGE_RESTORE] = { S(LEASE_FUNDED), LEASE_ACTIVE, "Funded" },
	[LEASE_EDGE_SETTLE] = { S(LEASE_ACTIVE), LEASE_SETTLING, "Active" },
	[LEASE_EDGE_EXPIRE] = { S(LEASE_REQUESTED) | S(LEASE_FUNDED) | S(LEASE_ACTIVE) |
				S(LEASE_SETTLING), LEASE_EXPIRED,
				"Requested, Funded, Active or Settling" },
	[LEASE_EDGE_DESTROY] = { S(LEASE_EXPIRED), LEASE_DESTROYED, "Expired" },
};

const char *lease_dim_name(enum lease_dim d)
{
	return (unsigned)d < LEASE_DIM_COUNT ? dim_names[d] : "?";
}

uint64_t lease_dim_ceiling(enum lease_dim d)
{
	return (unsigned)d < LEASE_DIM_COUNT ? dim_ceilings[d] : 0;
}

int lease_dim_parse(const char *s, enum lease_dim *out)
{
	for (int i = 0; i < LEASE_DIM_COUNT; i++)
		if (strcmp(s, dim_names[i]) == 0) {
			*out = (enum lease_dim)i;
			return 0;
		}
	return -1;
}

const char *lease_state_name(enum lease_state s)
{
	return (unsigned)s < LEASE_STATE_COUNT ? state_names[s] : "?";
}

int lease_state_parse(const char *s, enum lease_state *out)
{
	for (int i = 0; i < LEASE_STATE_COUNT; i++)
		if (strcasecmp(s, state_names[i]) == 0) {
			*out = (enum lease_state)i;
			return 0;
		}
	return -1;
}

const char *lease_edge_name(enum lease_edge e)
{
	return (unsigned)e < LEASE_EDGE_COUNT ? edge_names[e] : "?";
}

int lease_edge_parse(const char *s, enum lease_edge *out)
{
	for (int i = 0; i < LEASE_EDGE_COUNT; i++)
		if (strcmp(s, edge_names[i]) == 0) {
			*out = (enum lease_edge)i;
			return 0;
		}
	return -1;
}

int lease_edge_next(enum lease_edge e, enum lease_state from, enum lease_state *to)
{
	if ((unsigned)e >= LEASE_EDGE_COUNT || (unsigned)from >= LEASE_STATE_COUNT)
		return 0;
	if (!(edges[e].from & S(from)))
		return 0;
	if (to)
		*to = edges[e].to;
	return 1;
}

const char *lease_edge_needs(enum lease_edge e)
{
	return (unsigned)e < LEASE_EDGE_COUNT ? edges[e].needs : "?";
}

int lease_state_live(enum lease_state s)
{
	return s == LEASE_REQUESTED || s == LEASE_FUNDED || s == LEASE_ACTIVE ||
	       s == LEASE_SETTLING;
}

int lease_id_valid(const char *id)
{
	if (!id || strlen(id) != LEASE_ID_LEN || id[0] != 'L')
		return 0;
	for (int i = 1; i < LEASE_ID_LEN; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return 1;
}

/* Principal and host-program names end up in paths and tables: keep them plain. */
int lease_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > LEASE_NAME_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '@'))
			return 0;
	}
	return 1;
}

int lease_hex_valid(const char *s, size_t n)
{
	if (!s || strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int64_t lease_jint(const json_t *o, const char *key)
{
	json_int_t v = common_jint(o, key, -1);

	return v < 0 ? -1 : v;
}

const char *lease_jstr(const json_t *o, const char *key)
{
	return common_jstr(o, key, NULL);
}

/* Strict decimal with an optional binary K/M/G/T suffix; why says what is wrong. */
static int parse_value(const char *s, int suffix, uint64_t max, uint64_t *out, char *why,
		       size_t whylen)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (*p == '-') {
		snprintf(why, whylen, "negative value \"%s\"", s);
		return -1;
	}
	if (*p < '0' || *p > '9') {
		snprintf(why, whylen, "\"%s\" is not a non-negative integer", s);
		return -1;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10) {
			snprintf(why, whylen, "\"%s\" is too large", s);
			return -1;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p && suffix && !p[1]) {
		switch (*p) {
		case 'K': case 'k': mul = 1ull << 10; p++; break;
		case 'M': case 'm': mul = 1ull << 20; p++; break;
		case 'G': case 'g': mul = 1ull << 30; p++; break;
		case 'T': case 't': mul = 1ull << 40; p++; break;
		}
	}
	if (*p) {
		snprintf(why, whylen, "\"%s\" is not a non-negative integer", s);
		return -1;
	}
	if (v > UINT64_MAX / mul || v * mul > max) {
		snprintf(why, whylen, "%s exceeds the ceiling %llu", s, (unsigned long long)max);
		return -1;
	}
	*out = v * mul;
	return 0;
}

/* Walk "k=v,k=v", calling one() per pair. Bounded: at most 64 pairs, 4 KiB. */
static int each_pair(const char *s, const char *what, struct lease_request *req,
		     int (*one)(const char *, const char *, const char *, struct lease_request *,
				int *, struct common_err *), struct common_err *e)
{
	char buf[4096], *save = NULL, *tok;
	int seen[LEASE_DIM_COUNT + 1] = { 0 }, n = 0;

	if (!s || !*s)
		return common_errf(e, what, "empty list (expected DIM=N[,DIM=N...])");
	if (strlen(s) >= sizeof buf)
		return common_errf(e, what, "list too long");
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (++n > 64)
			return common_errf(e, what, "too many entries");
		if (!eq || eq == tok)
			return common_errf(e, what, "\"%s\": expected DIM=N", tok);
		*eq = '\0';
		if (one(what, tok, eq + 1, req, seen, e) < 0)
			return -1;
	}
	if (n == 0)
		return common_errf(e, what, "empty list (expected DIM=N[,DIM=N...])");
	return 0;
}

static int one_limit(const char *what, const char *k, const char *v, struct lease_request *req,
		     int *seen, struct common_err *e)
{
	enum lease_dim d;
	uint64_t n;
	char why[256];

	if (strcmp(k, "lifetime") == 0) {
		if (seen[LEASE_DIM_COUNT]++)
			return common_errf(e, what, "lifetime given twice");
		if (parse_value(v, 0, LEASE_LIFETIME_CEILING, &n, why, sizeof why) < 0)
			return common_errf(e, what, "lifetime: %s", why);
		req->lifetime = n;
		return 0;
	}
	if (lease_dim_parse(k, &d) < 0)
		return common_errf(e, what, "unknown dimension \"%s\"", k);
	if (seen[d]++)
		return common_errf(e, what, "%s given twice", k);
	if (parse_value(v, 1, dim_ceilings[d], &n, why, sizeof why) < 0)
		return common_errf(e, what, "%s: %s", k, why);
	req->limits[d] = n;
	req->has_limit[d] = 1;
	return 0;
}

static int one_fee(const char *what, const char *k, const char *v, struct lease_request *req,
		   int *seen, struct common_err *e)
{
	enum lease_dim d;
	uint64_t n;
	char why[256];

	if (lease_dim_parse(k, &d) < 0)
		return common_errf(e, what, "unknown dimension \"%s\"", k);
	if (seen[d]++)
		return common_errf(e, what, "%s given twice", k);
	if (parse_value(v, 0, LEASE_FEE_MAX, &n, why, sizeof why) < 0)
		return common_errf(e, what, "%s: %s", k, why);
	req->fees[d] = n;
	return 0;
}

int lease_parse_limits(const char *s, struct lease_request *req, struct common_err *e)
{
	return each_pair(s, "--limits", req, one_limit, e);
}

int lease_parse_fees(const char *s, struct lease_request *req, struct common_err *e)
{
	return each_pair(s, "--fees", req, one_fee, e);
}

/* Usage observations: "dim=N" totals, bounded by LEASE_USAGE_MAX (may exceed limits). */
int lease_parse_usage(const char *s, uint64_t usage[LEASE_DIM_COUNT], int given[LEASE_DIM_COUNT],
		      struct common_err *e)
{
	char buf[4096], *save = NULL, *tok, why[256];
	int n = 0;

	if (!s || !*s || strlen(s) >= sizeof buf)
		return common_errf(e, "--usage", "expected DIM=N[,DIM=N...]");
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		enum lease_dim d;
		if (++n > 64)
			return common_errf(e, "--usage", "too many entries");
		if (!eq)
			return common_errf(e, "--usage", "\"%s\": expected DIM=N", tok);
		*eq = '\0';
		if (lease_dim_parse(tok, &d) < 0)
			return common_errf(e, "--usage", "unknown dimension \"%s\"", tok);
		if (given[d]++)
			return common_errf(e, "--usage", "%s given twice", tok);
		if (parse_value(eq + 1, 1, LEASE_USAGE_MAX, &usage[d], why, sizeof why) < 0)
			return common_errf(e, "--usage", "%s: %s", tok, why);
	}
	return n ? 0 : common_errf(e, "--usage", "expected DIM=N[,DIM=N...]");
}

/* Amounts (--escrow, --amount): plain integers. */
int lease_parse_amount(const char *what, const char *s, uint64_t *out, struct common_err *e)
{
	char why[256];

	if (!s || parse_value(s, 0, LEASE_AMOUNT_MAX, out, why, sizeof why) < 0)
		return common_errf(e, what, "%s", s ? why : "missing value");
	return 0;
}

/* Equal in canonical form (what a record or receipt is compared by). */
int lease_json_same(const json_t *a, const json_t *b)
{
	char *x = common_json_canonical(a), *y = common_json_canonical(b);
	int r = strcmp(x, y) == 0;

	free(x);
	free(y);
	return r;
}
