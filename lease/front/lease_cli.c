/* sbx-lease command line: option parsing and output formats (SPEC §13). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/front/front-internal.h"

#define EVIDENCE_MAX (1u << 20)

static const char usage_head[] =
	"usage: sbx-lease [--store DIR|etcd://HOST:PORT[,HOST:PORT...]/PREFIX]\n"
	"                 [--format json|text] COMMAND ...\n"
	"options may come before or after COMMAND; -- ends them\n";

static int fail(struct lease_cli *c)
{
	common_report(&c->e);
	return SBX_EXIT_FAIL;
}

static int open_store(struct lease_cli *c)
{
	if (lease_store_open(c->store, &c->s, &c->e) < 0)
		return -1;
	lease_store_principal_key(c->s, c->pkey);
	return 0;
}

static void fmt_usage(FILE *f, const json_t *u)
{
	const char *sep = "";

	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		int64_t v = lease_jint(u, lease_dim_name((enum lease_dim)d));
		if (v > 0) {
			fprintf(f, "%s%s=%lld", sep, lease_dim_name((enum lease_dim)d), (long long)v);
			sep = ",";
		}
	}
	if (!*sep)
		fputs("-", f);
}

static void text_record(const json_t *rec, const json_t *head)
{
	json_t *img = json_object_get(rec, "image");

	printf("lease      %s\n", lease_jstr(rec, "id"));
	printf("state      %s%s%s\n", lease_jstr(rec, "state"),
	       lease_jstr(rec, "closed") ? " closed by " : "",
	       lease_jstr(rec, "closed") ? lease_jstr(rec, "closed") : "");
	printf("principal  %s\n", lease_jstr(rec, "principal"));
	printf("host       %s\n", lease_jstr(rec, "host_program"));
	printf("namespace  %s\n", lease_jstr(rec, "namespace"));
	printf("image      %s\n", lease_jstr(img, "path"));
	printf("sha256     %s\n", lease_jstr(img, "sha256"));
	printf("batches    requested %lld, deadline %lld, last %lld\n",
	       (long long)lease_jint(rec, "requested"), (long long)lease_jint(rec, "deadline"),
	       (long long)lease_jint(rec, "batch"));
	printf("escrow     %lld (declared %lld)\n", (long long)lease_jint(rec, "escrow"),
	       (long long)lease_jint(rec, "escrow_required"));
	printf("usage      ");
	fmt_usage(stdout, json_object_get(rec, "usage"));
	printf("\nlimits     ");
	for (int d = 0; d < LEASE_DIM_COUNT; d++)
		printf("%s%s=%lld", d ? "," : "", lease_dim_name((enum lease_dim)d),
		       (long long)lease_jint(json_object_get(rec, "limits"), lease_dim_name((enum lease_dim)d)));
	printf("\nfees       ");
	fmt_usage(stdout, json_object_get(rec, "fees"));
	printf("\ncost       %lld\n", (long long)lease_jint(rec, "cost"));
	if (json_object_get(rec, "charge"))
		printf("settled    charge %lld, refund %lld\n", (long long)lease_jint(rec, "charge"),
		       (long long)lease_jint(rec, "refund"));
	if (json_object_get(rec, "destroyed"))
		printf("destroyed  %s\n", lease_jstr(json_object_get(rec, "destroyed"), "digest"));
	printf("snapshots  %zu\n", json_array_size(json_object_get(rec, "snapshots")));
	printf("head       seq %lld %s\n", (long long)lease_jint(rec, "seq"), lease_jstr(rec, "head"));
	(void)head;
}

static void text_receipt_row(const json_t *r)
{
	const char *from = lease_jstr(r, "from");

	printf("%-4lld %-9s %-9s %-9s %-8lld %.16s\n", (long long)lease_jint(r, "seq"),
	       lease_jstr(r, "edge"), from ? from : "-", lease_jstr(r, "to"),
	       (long long)lease_jint(r, "batch"), lease_jstr(r, "digest"));
}

static int print_pair(struct lease_cli *c, const json_t *pair)
{
	if (c->fmt == COMMON_FMT_JSON)
		return common_json_print(pair, 0);
	text_record(json_object_get(pair, "lease"), json_object_get(pair, "receipt"));
	return 0;
}

static int read_evidence(struct lease_cli *c, const char *path, json_t **r)
{
	char *buf;
	size_t len;
	int rc;

	if (!path)
		return common_errf(&c->e, "--evidence", "required (the lease's head receipt, FILE or -)");
	if (strcmp(path, "-") == 0)
		rc = common_read_fd(0, "stdin", EVIDENCE_MAX, &buf, &len, &c->e);
	else
		rc = common_read_file(path, EVIDENCE_MAX, &buf, &len, &c->e);
	if (rc < 0)
		return -1;
	rc = lease_evidence_parse(buf, len, strcmp(path, "-") ? path : "stdin", r, &c->e);
	free(buf);
	return rc;
}

static int cmd_request(struct lease_cli *c)
{
	json_t *out;

	if (open_store(c) < 0 || lease_request(c->s, &c->req, &out, &c->e) < 0)
		return fail(c);
	print_pair(c, out);
	json_decref(out);
	return SBX_EXIT_OK;
}

static int cmd_edge(struct lease_cli *c, enum lease_edge edge)
{
	json_t *ev = NULL, *args = json_object(), *out = NULL;
	int rc = SBX_EXIT_FAIL;

	if (edge == LEASE_EDGE_FUND)
		json_object_set_new(args, "amount", json_integer((json_int_t)c->amount));
	if (edge == LEASE_EDGE_OBSERVE) {
		json_t *uo = json_object();
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			if (c->usage_given[d])
				json_object_set_new(uo, lease_dim_name((enum lease_dim)d),
						    json_integer((json_int_t)c->usage[d]));
		json_object_set_new(args, "usage", uo);
	}
	if (read_evidence(c, c->evidence, &ev) < 0)
		goto out;
	if (c->npos == 1 && !lease_id_valid(c->pos[0])) {
		common_errf(&c->e, c->pos[0], "not a lease id (expected L followed by 16 hex digits)");
		goto out;
	}
	if (open_store(c) < 0 ||
	    lease_transition(c->s, c->npos ? c->pos[0] : NULL, edge, ev, args, &out, &c->e) < 0)
		goto out;
	if (c->fmt == COMMON_FMT_TEXT) {
		json_t *r = json_object_get(out, "receipt");
		printf("%s: %s -> %s (seq %lld, batch %lld)%s%s\n", lease_jstr(r, "lease"),
		       lease_jstr(r, "from"), lease_jstr(r, "to"), (long long)lease_jint(r, "seq"),
		       (long long)lease_jint(r, "batch"),
		       lease_jstr(r, "reason") && edge == LEASE_EDGE_OBSERVE ? ", closed by " : "",
		       lease_jstr(r, "reason") && edge == LEASE_EDGE_OBSERVE ? lease_jstr(r, "reason") : "");
	} else {
		common_json_print(out, 0);
	}
	rc = SBX_EXIT_OK;
out:
	if (rc != SBX_EXIT_OK)
		common_report(&c->e);
	json_decref(out);
	json_decref(ev);
	json_decref(args);
	return rc;
}

static int cmd_show(struct lease_cli *c)
{
	json_t *out;

	if (open_store(c) < 0 || lease_show(c->s, c->pos[0], &out, &c->e) < 0)
		return fail(c);
	print_pair(c, out);
	json_decref(out);
	return SBX_EXIT_OK;
}

static int cmd_list(struct lease_cli *c)
{
	json_t *out, *rec;
	size_t i;

	if (open_store(c) < 0 || lease_list(c->s, c->req.principal, c->state, &out, &c->e) < 0)
		return fail(c);
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%-17s %-9s %-16s %-12s %-8s %-8s %s\n", "ID", "STATE", "PRINCIPAL", "HOST",
		       "DEADLINE", "COST", "USAGE");
	json_array_foreach(out, i, rec) {
		if (c->fmt == COMMON_FMT_JSON) {
			common_json_print(rec, 0);
			continue;
		}
		printf("%-17s %-9s %-16s %-12s %-8lld %-8lld ", lease_jstr(rec, "id"),
		       lease_jstr(rec, "state"), lease_jstr(rec, "principal"),
		       lease_jstr(rec, "host_program"), (long long)lease_jint(rec, "deadline"),
		       (long long)lease_jint(rec, "cost"));
		fmt_usage(stdout, json_object_get(rec, "usage"));
		putchar('\n');
	}
	json_decref(out);
	return SBX_EXIT_OK;
}

#define CHAIN_LINKS_MAX 65536 /* a walk along prev ends: a damaged store may loop */

/* The links of id's chain, oldest first: id and the leases its requests name as prev. */
static int chain_links(struct lease_store *s, const char *id, json_t **links, struct common_err *e)
{
	json_t *ids = json_array();
	char *at = common_xstrdup(id);

	while (at) {
		json_t *rec = NULL;
		if (json_array_size(ids) >= CHAIN_LINKS_MAX || lease_load(s, at, &rec, e) < 0) {
			if (json_array_size(ids) >= CHAIN_LINKS_MAX)
				common_errf(e, id, "chain longer than %d links", CHAIN_LINKS_MAX);
			free(at);
			json_decref(ids);
			return -1;
		}
		const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
		json_array_insert_new(ids, 0, json_string(at));
		free(at);
		at = common_jstr(l, "prev", NULL) ? common_xstrdup(common_jstr(l, "prev", NULL)) : NULL;
		json_decref(rec);
	}
	*links = ids;
	return 0;
}

static int cmd_log(struct lease_cli *c)
{
	json_t *out, *r, *links, *link;
	size_t i, k;

	if (open_store(c) < 0)
		return fail(c);
	if (c->chain ? chain_links(c->s, c->pos[0], &links, &c->e) < 0 :
	    !(links = json_pack("[s]", c->pos[0])))
		return fail(c);
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%-4s %-9s %-9s %-9s %-8s %s\n", "SEQ", "EDGE", "FROM", "TO", "BATCH", "DIGEST");
	json_array_foreach(links, k, link) {
		if (lease_log(c->s, json_string_value(link), &out, &c->e) < 0) {
			json_decref(links);
			return fail(c);
		}
		json_array_foreach(out, i, r) {
			const char *prev = common_jstr(json_object_get(r, "request"), "prev", NULL);
			if (c->fmt == COMMON_FMT_TEXT && c->chain && i == 0)
				printf("lease %s%s%s\n", json_string_value(link), prev ? " prev " : "",
				       prev ? prev : "");
			if (c->fmt == COMMON_FMT_TEXT)
				text_receipt_row(r);
			else
				common_json_print(r, 0);
		}
		json_decref(out);
	}
	json_decref(links);
	return SBX_EXIT_OK;
}

static int cmd_verify(struct lease_cli *c)
{
	json_t *rep, *p;
	size_t i;
	int ok;

	if (open_store(c) < 0 || lease_verify(c->s, c->npos ? c->pos[0] : NULL, &rep, &c->e) < 0)
		return fail(c);
	ok = json_is_true(json_object_get(rep, "ok"));
	json_array_foreach(json_object_get(rep, "problems"), i, p) {
		common_errf(&c->e, "verify", "%s", json_string_value(p));
		common_report(&c->e);
	}
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%s: %lld leases, %lld receipts, %zu problems\n", ok ? "ok" : "FAILED",
		       (long long)lease_jint(rep, "leases"), (long long)lease_jint(rep, "receipts"),
		       json_array_size(json_object_get(rep, "problems")));
	else
		common_json_print(rep, 0);
	json_decref(rep);
	return ok ? SBX_EXIT_OK : SBX_EXIT_FAIL;
}

static int cmd_recover(struct lease_cli *c)
{
	json_t *rep, *r;
	size_t i;

	if (open_store(c) < 0 || lease_repair(c->s, &rep, &c->e) < 0)
		return fail(c);
	if (c->fmt == COMMON_FMT_JSON)
		common_json_print(rep, 0);
	json_array_foreach(json_object_get(rep, "recovered"), i, r)
		if (c->fmt == COMMON_FMT_TEXT)
			printf("%s: %s -> %s\n", lease_jstr(r, "lease"), lease_jstr(r, "from"),
			       lease_jstr(r, "to"));
	json_decref(rep);
	return SBX_EXIT_OK;
}

static int print_clock(struct lease_cli *c, json_t *clk)
{
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%s batch %lld (batch_ms %lld)\n", lease_jstr(clk, "mode"),
		       (long long)lease_jint(clk, "batch"), (long long)lease_jint(clk, "batch_ms"));
	else
		common_json_print(clk, 0);
	json_decref(clk);
	return SBX_EXIT_OK;
}

static int cmd_clock(struct lease_cli *c)
{
	json_t *clk;

	if (open_store(c) < 0)
		return fail(c);
	if (c->npos ? lease_clock_set_mode(c->s, c->pos[0], &clk, &c->e)
		    : lease_clock_get(c->s, &clk, &c->e))
		return fail(c);
	return print_clock(c, clk);
}

static int cmd_tick(struct lease_cli *c)
{
	uint64_t n = 1;
	json_t *clk;

	if (c->npos && lease_parse_amount("tick", c->pos[0], &n, &c->e) < 0)
		return fail(c);
	if (open_store(c) < 0 || lease_clock_tick(c->s, n, &clk, &c->e) < 0)
		return fail(c);
	return print_clock(c, clk);
}

static int v_request(void *c) { return cmd_request(c); }
static int v_fund(void *c) { return cmd_edge(c, LEASE_EDGE_FUND); }
static int v_activate(void *c) { return cmd_edge(c, LEASE_EDGE_ACTIVATE); }
static int v_observe(void *c) { return cmd_edge(c, LEASE_EDGE_OBSERVE); }
static int v_settle(void *c) { return cmd_edge(c, LEASE_EDGE_SETTLE); }
static int v_expire(void *c) { return cmd_edge(c, LEASE_EDGE_EXPIRE); }
static int v_destroy(void *c) { return cmd_edge(c, LEASE_EDGE_DESTROY); }
static int v_show(void *c) { return cmd_show(c); }
static int v_list(void *c) { return cmd_list(c); }
static int v_log(void *c) { return cmd_log(c); }
static int v_verify(void *c) { return cmd_verify(c); }
static int v_recover(void *c) { return cmd_recover(c); }
static int v_clock(void *c) { return cmd_clock(c); }
static int v_tick(void *c) { return cmd_tick(c); }

static const struct common_verb lease_verbs[] = {
	{ "request", v_request, "request --image PATH [--principal NAME] [--principal-key FILE]\n"
	  "          [--host-program NAME]\n"
	  "          [--limits DIM=N[,DIM=N...]] [--lifetime BATCHES] [--escrow N]\n"
	  "          [--fees DIM=PRICE[,...]] [--prev ID]", 0, 0 },
	{ "fund", v_fund, "fund [ID] --amount N --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "activate", v_activate, "activate [ID] --evidence FILE|-", 0, 1 },
	{ "observe", v_observe, "observe [ID] --usage DIM=N[,...] --evidence FILE|-", 0, 1 },
	{ "settle", v_settle, "settle [ID] --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "expire", v_expire, "expire [ID] --evidence FILE|-", 0, 1 },
	{ "destroy", v_destroy, "destroy [ID] --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "show", v_show, "show ID", 1, 1 },
	{ "list", v_list, "list [--principal P] [--state S]", 0, 0 },
	{ "log", v_log, "log [--chain] ID", 1, 1 },
	{ "verify", v_verify, "verify [ID]", 0, 1 },
	{ "recover", v_recover, "recover", 0, 0 },
	{ "clock", v_clock, "clock [wall|manual]", 0, 1 },
	{ "tick", v_tick, "tick [N]", 0, 1 },
};
#define NVERBS (sizeof lease_verbs / sizeof lease_verbs[0])

/* A bit per lease_verbs row. */
enum { REQUEST = 1u << 0, FUND = 1u << 1, ACTIVATE = 1u << 2, OBSERVE = 1u << 3,
       SETTLE = 1u << 4, EXPIRE = 1u << 5, DESTROY = 1u << 6, SHOW = 1u << 7, LIST = 1u << 8,
       LOG = 1u << 9, VERIFY = 1u << 10, RECOVER = 1u << 11, CLOCK = 1u << 12, TICK = 1u << 13 };
#define EDGES (FUND | ACTIVATE | OBSERVE | SETTLE | EXPIRE | DESTROY)
static int parse_amount(const struct common_opt *o, void *cli, const char *v,
			struct common_err *e)
{
	char what[64];

	snprintf(what, sizeof what, "--%s", o->name);
	return lease_parse_amount(what, v, COMMON_OPT_FIELD(o, cli, uint64_t), e);
}

static int parse_lifetime(const struct common_opt *o, void *cli, const char *v,
			  struct common_err *e)
{
	uint64_t *n = COMMON_OPT_FIELD(o, cli, uint64_t);

	if (lease_parse_amount("--lifetime", v, n, e) < 0)
		return -1;
	if (*n == 0 || *n > LEASE_LIFETIME_CEILING)
		return common_errf(e, "--lifetime", "%s is outside 1..%u", v, LEASE_LIFETIME_CEILING);
	return 0;
}

static int parse_limits(const struct common_opt *o, void *cli, const char *v,
			struct common_err *e)
{
	return lease_parse_limits(v, COMMON_OPT_FIELD(o, cli, struct lease_request), e);
}

static int parse_fees(const struct common_opt *o, void *cli, const char *v,
		      struct common_err *e)
{
	return lease_parse_fees(v, COMMON_OPT_FIELD(o, cli, struct lease_request), e);
}

static int parse_usage(const struct common_opt *o, void *cli, const char *v,
		       struct common_err *e)
{
	struct lease_cli *c = cli;

	(void)o;
	return lease_parse_usage(v, c->usage, c->usage_given, e);
}

static int parse_state(const struct common_opt *o, void *cli, const char *v,
		       struct common_err *e)
{
	enum lease_state st;

	if (lease_state_parse(v, &st) < 0)
		return common_errf(e, "--state", "unknown state \"%s\" (Requested, Funded, Active, "
				   "Settling, Expired, Destroyed)", v);
	*COMMON_OPT_FIELD(o, cli, int) = (int)st;
	return 0;
}

static const struct common_opt_type amount_type = { 1, parse_amount },
	lifetime_type = { 1, parse_lifetime }, limits_type = { 1, parse_limits },
	fees_type = { 1, parse_fees }, usage_type = { 1, parse_usage },
	state_type = { 1, parse_state };

#define OPT(...) COMMON_OPT(struct lease_cli, __VA_ARGS__)

static const struct common_opt lease_opts[] = {
	OPT("store", &common_opt_str, store, 0),
	OPT("format", &common_opt_format, fmt, 0),
	OPT("image", &common_opt_str, req.image, REQUEST, .need = REQUEST),
	OPT("principal", &common_opt_str, req.principal, REQUEST | LIST),
	OPT("host-program", &common_opt_str, req.host_program, REQUEST),
	OPT("limits", &limits_type, req, REQUEST),
	OPT("lifetime", &lifetime_type, req.lifetime, REQUEST),
	OPT("escrow", &amount_type, req.escrow, REQUEST),
	OPT("fees", &fees_type, req, REQUEST),
	OPT("prev", &common_opt_str, req.prev, REQUEST),
	OPT("chain", &common_opt_flag, chain, LOG),
	OPT("amount", &amount_type, amount, FUND, .need = FUND),
	OPT("evidence", &common_opt_str, evidence, EDGES),
	OPT("usage", &usage_type, usage, OBSERVE, .need = OBSERVE),
	OPT("state", &state_type, state, LIST),
	OPT("principal-key", &common_opt_str, pkey, REQUEST | FUND | SETTLE | DESTROY),
};

static const struct common_cli lease_cli = {
	.opts = lease_opts, .nopts = sizeof lease_opts / sizeof lease_opts[0],
	.verbs = lease_verbs, .nverbs = NVERBS,
};

int lease_cli_parse(int argc, char **argv, struct lease_cli *c, struct common_err *e)
{
	struct common_words w;
	int rc;

	memset(c, 0, sizeof *c);
	c->state = -1;
	if ((rc = common_cli_parse(&lease_cli, argc, argv, c, &w, e)) != 0)
		return rc;
	c->verb = w.verb;
	for (int i = 0; i < w.noperands; i++)
		c->pos[c->npos++] = w.operands[i];
	return 0;
}

static void usage(FILE *f)
{
	fputs(usage_head, f);
	for (size_t i = 0; i < NVERBS; i++)
		fprintf(f, "  %s\n", lease_verbs[i].usage);
}

int lease_cli_main(int argc, char **argv)
{
	struct lease_cli c;
	int rc = common_cli_parsed(lease_cli_parse(argc, argv, &c, &c.e), &c.e, usage, SBX_EXIT_USAGE);

	if (rc >= 0)
		return rc;
	rc = c.verb->run(&c);
	lease_store_close(c.s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		common_errf(&c.e, "stdout", "write failed");
		common_report(&c.e);
		return SBX_EXIT_FAIL;
	}
	return rc;
}
