/* sbx-lease command line: option parsing and output formats (SPEC §13). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease-internal.h"

#define EVIDENCE_MAX (1u << 20)

static const char usage_head[] =
	"usage: sbx-lease [--store DIR|etcd://HOST:PORT[,HOST:PORT...]/PREFIX]\n"
	"                 [--format json|text] COMMAND ...\n";

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
	uint64_t v;

	if (c->lifetime) {
		if (lease_parse_amount("--lifetime", c->lifetime, &v, &c->e) < 0)
			return fail(c);
		if (v == 0 || v > LEASE_LIFETIME_CEILING) {
			common_errf(&c->e, "--lifetime", "%s is outside 1..%u", c->lifetime,
				    LEASE_LIFETIME_CEILING);
			return fail(c);
		}
		c->req.lifetime = v;
	}
	if (c->escrow && lease_parse_amount("--escrow", c->escrow, &c->req.escrow, &c->e) < 0)
		return fail(c);
	if ((c->limits && lease_parse_limits(c->limits, &c->req, &c->e) < 0) ||
	    (c->fees && lease_parse_fees(c->fees, &c->req, &c->e) < 0))
		return fail(c);
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

	if (edge == LEASE_EDGE_FUND) {
		uint64_t v;
		if (lease_parse_amount("--amount", c->amount, &v, &c->e) < 0)
			goto out;
		json_object_set_new(args, "amount", json_integer((json_int_t)v));
	}
	if (edge == LEASE_EDGE_OBSERVE) {
		uint64_t u[LEASE_DIM_COUNT] = { 0 };
		int given[LEASE_DIM_COUNT] = { 0 };
		json_t *uo = json_object();
		if (lease_parse_usage(c->usage, u, given, &c->e) < 0) {
			json_decref(uo);
			goto out;
		}
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			if (given[d])
				json_object_set_new(uo, lease_dim_name((enum lease_dim)d),
						    json_integer((json_int_t)u[d]));
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
	enum lease_state st = 0;
	json_t *out, *rec;
	size_t i;

	if (c->state && lease_state_parse(c->state, &st) < 0) {
		common_errf(&c->e, "--state", "unknown state \"%s\" (Requested, Funded, Active, Settling, Expired, Destroyed)",
			    c->state);
		return fail(c);
	}
	if (open_store(c) < 0 ||
	    lease_list(c->s, c->req.principal, c->state ? (int)st : -1, &out, &c->e) < 0)
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

static int cmd_log(struct lease_cli *c)
{
	json_t *out, *r;
	size_t i;

	if (open_store(c) < 0 || lease_log(c->s, c->pos[0], &out, &c->e) < 0)
		return fail(c);
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%-4s %-9s %-9s %-9s %-8s %s\n", "SEQ", "EDGE", "FROM", "TO", "BATCH", "DIGEST");
	json_array_foreach(out, i, r) {
		if (c->fmt == COMMON_FMT_TEXT)
			text_receipt_row(r);
		else
			common_json_print(r, 0);
	}
	json_decref(out);
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
	  "          [--fees DIM=PRICE[,...]]", 0, 0 },
	{ "fund", v_fund, "fund [ID] --amount N --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "activate", v_activate, "activate [ID] --evidence FILE|-", 0, 1 },
	{ "observe", v_observe, "observe [ID] --usage DIM=N[,...] --evidence FILE|-", 0, 1 },
	{ "settle", v_settle, "settle [ID] --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "expire", v_expire, "expire [ID] --evidence FILE|-", 0, 1 },
	{ "destroy", v_destroy, "destroy [ID] --evidence FILE|- [--principal-key FILE]", 0, 1 },
	{ "show", v_show, "show ID", 1, 1 },
	{ "list", v_list, "list [--principal P] [--state S]", 0, 0 },
	{ "log", v_log, "log ID", 1, 1 },
	{ "verify", v_verify, "verify [ID]", 0, 1 },
	{ "recover", v_recover, "recover", 0, 0 },
	{ "clock", v_clock, "clock [wall|manual]", 0, 1 },
	{ "tick", v_tick, "tick [N]", 0, 1 },
};
#define NVERBS (sizeof lease_verbs / sizeof lease_verbs[0])

enum { O_STORE = 1000, O_FORMAT, O_IMAGE, O_PRINCIPAL, O_HOST, O_LIMITS, O_LIFETIME,
       O_ESCROW, O_FEES, O_AMOUNT, O_EVIDENCE, O_USAGE, O_STATE, O_PKEY };
#define BIT(o) (1u << ((o) - O_STORE))

/* The options each verb takes besides --store and --format, and must be given;
 * a row per lease_verbs row. */
static const struct {
	unsigned allowed, required;
} verb_opts[NVERBS] = {
	{ BIT(O_IMAGE) | BIT(O_PRINCIPAL) | BIT(O_HOST) | BIT(O_LIMITS) | BIT(O_LIFETIME) |
	  BIT(O_ESCROW) | BIT(O_FEES) | BIT(O_PKEY), BIT(O_IMAGE) },
	{ BIT(O_AMOUNT) | BIT(O_EVIDENCE) | BIT(O_PKEY), BIT(O_AMOUNT) },
	{ BIT(O_EVIDENCE), 0 },
	{ BIT(O_USAGE) | BIT(O_EVIDENCE), BIT(O_USAGE) },
	{ BIT(O_EVIDENCE) | BIT(O_PKEY), 0 }, { BIT(O_EVIDENCE), 0 },
	{ BIT(O_EVIDENCE) | BIT(O_PKEY), 0 },
	{ 0, 0 }, { BIT(O_PRINCIPAL) | BIT(O_STATE), 0 }, { 0, 0 }, { 0, 0 }, { 0, 0 }, { 0, 0 },
	{ 0, 0 },
};

static const struct option opts[] = {
	{ "store", required_argument, NULL, O_STORE },
	{ "format", required_argument, NULL, O_FORMAT },
	{ "image", required_argument, NULL, O_IMAGE },
	{ "principal", required_argument, NULL, O_PRINCIPAL },
	{ "host-program", required_argument, NULL, O_HOST },
	{ "limits", required_argument, NULL, O_LIMITS },
	{ "lifetime", required_argument, NULL, O_LIFETIME },
	{ "escrow", required_argument, NULL, O_ESCROW },
	{ "fees", required_argument, NULL, O_FEES },
	{ "amount", required_argument, NULL, O_AMOUNT },
	{ "evidence", required_argument, NULL, O_EVIDENCE },
	{ "usage", required_argument, NULL, O_USAGE },
	{ "state", required_argument, NULL, O_STATE },
	{ "principal-key", required_argument, NULL, O_PKEY },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int set_opt(struct lease_cli *c, int o, const char *v, struct common_err *e)
{
	switch (o) {
	case O_STORE: c->store = v; break;
	case O_FORMAT: return common_parse_format(v, &c->fmt, e);
	case O_IMAGE: c->req.image = v; break;
	case O_PRINCIPAL: c->req.principal = v; break;
	case O_HOST: c->req.host_program = v; break;
	case O_LIMITS: c->limits = v; break;
	case O_FEES: c->fees = v; break;
	case O_LIFETIME: c->lifetime = v; break;
	case O_ESCROW: c->escrow = v; break;
	case O_AMOUNT: c->amount = v; break;
	case O_EVIDENCE: c->evidence = v; break;
	case O_USAGE: c->usage = v; break;
	case O_STATE: c->state = v; break;
	case O_PKEY: c->pkey = v; break;
	}
	return 0;
}

/* getopt_long over argv from optind; global: only --store and --format (before the verb). */
static int scan(struct lease_cli *c, int argc, char **argv, const char *optstring,
		unsigned allowed, struct common_err *e)
{
	int o, li;

	while ((o = getopt_long(argc, argv, optstring, opts, &li)) != -1) {
		if (o == 'h')
			return 1;
		if (o == '?' || o == ':')
			return common_getopt_err(o, argv, e);
		if (o != O_STORE && o != O_FORMAT && !(allowed & BIT(o))) {
			char name[32];
			snprintf(name, sizeof name, "--%s", opts[li].name);
			return common_errf(e, name, "%s", c->verb ? "not an option of this command"
							       : "comes after the command");
		}
		c->given |= BIT(o);
		if (set_opt(c, o, optarg, e) < 0)
			return -1;
	}
	return 0;
}

int lease_cli_parse(int argc, char **argv, struct lease_cli *c, struct common_err *e)
{
	size_t k;
	int rc;

	memset(c, 0, sizeof *c);
	optind = 0; /* reinitialise GNU getopt: a new argv */
	opterr = 0;
	if ((rc = scan(c, argc, argv, "+:h", 0, e)) != 0)
		return rc;
	if (!(c->verb = common_verb_find(lease_verbs, NVERBS, optind < argc ? argv[optind] : NULL, e)))
		return -1;
	k = (size_t)(c->verb - lease_verbs);
	argc -= optind;
	argv += optind;
	optind = 0; /* the verb's words, options after operands allowed */
	if ((rc = scan(c, argc, argv, ":h", verb_opts[k].allowed, e)) != 0)
		return rc;
	for (int o = O_IMAGE; o <= O_PKEY; o++)
		if ((verb_opts[k].required & BIT(o)) && !(c->given & BIT(o)))
			return common_errf(e, c->verb->name, "needs --%s", opts[o - O_STORE].name);
	if (common_verb_args(c->verb, argc - optind, e) < 0)
		return -1;
	for (; optind < argc; optind++)
		c->pos[c->npos++] = argv[optind];
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
