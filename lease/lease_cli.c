/* sbx-lease command line: option parsing and output formats (SPEC §13). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease/lease-internal.h"

#define EVIDENCE_MAX (1u << 20)

static const char usage_text[] =
	"usage: sbx-lease [--store DIR|etcd://HOST:PORT[,HOST:PORT...]/PREFIX]\n"
	"                 [--format json|text] COMMAND ...\n"
	"  request --image PATH [--principal NAME] [--host-program NAME]\n"
	"          [--limits DIM=N[,DIM=N...]] [--lifetime BATCHES] [--escrow N]\n"
	"          [--fees DIM=PRICE[,...]]\n"
	"  fund [ID] --amount N --evidence FILE|-\n"
	"  activate [ID] --evidence FILE|-\n"
	"  observe [ID] --usage DIM=N[,...] --evidence FILE|-\n"
	"  settle [ID] --evidence FILE|-\n"
	"  expire [ID] --evidence FILE|-\n"
	"  destroy [ID] --evidence FILE|-\n"
	"  show ID\n"
	"  list [--principal P] [--state S]\n"
	"  log ID\n"
	"  verify [ID]\n"
	"  clock [wall|manual]\n"
	"  tick [N]\n";

struct cli {
	const char *store;
	enum common_format fmt;
	struct lease_store *s;
	struct common_err e;
};

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "%s: error: usage: %s\n", common_progname(), why);
	fputs(usage_text, stderr);
	return SBX_EXIT_USAGE;
}

static int fail(struct cli *c)
{
	common_report(&c->e);
	return SBX_EXIT_FAIL;
}

static int open_store(struct cli *c)
{
	return lease_store_open(c->store, &c->s, &c->e);
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

static int print_pair(struct cli *c, const json_t *pair)
{
	if (c->fmt == COMMON_FMT_JSON)
		return common_json_print(pair, 0);
	text_record(json_object_get(pair, "lease"), json_object_get(pair, "receipt"));
	return 0;
}

static int read_evidence(struct cli *c, const char *path, json_t **r)
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

enum { O_STORE = 1000, O_FORMAT, O_IMAGE, O_PRINCIPAL, O_HOST, O_LIMITS, O_LIFETIME,
       O_ESCROW, O_FEES, O_AMOUNT, O_EVIDENCE, O_USAGE, O_STATE };

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
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct args {
	struct lease_request req;
	const char *amount, *evidence, *usage, *state, *lifetime, *escrow;
	const char *pos[2];
	int npos;
	unsigned given; /* bit per option, to refuse options a command does not take */
};

#define BIT(o) (1u << ((o) - O_STORE))

static int parse(struct cli *c, int argc, char **argv, struct args *a, unsigned allowed)
{
	int o;

	memset(a, 0, sizeof *a);
	optind = 0; /* reinitialise GNU getopt: a new argv, options after operands allowed */
	opterr = 0;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (o == '?')
			return usage(optopt ? "unknown or incomplete option" : "unknown option");
		if (o == 'h') {
			fputs(usage_text, stdout);
			return SBX_EXIT_OK;
		}
		if (o != O_STORE && o != O_FORMAT && !(allowed & BIT(o)))
			return usage("option not taken by this command");
		a->given |= BIT(o);
		switch (o) {
		case O_STORE: c->store = optarg; break;
		case O_FORMAT:
			if (common_parse_format(optarg, &c->fmt, &c->e) < 0) {
				common_report(&c->e);
				return SBX_EXIT_USAGE;
			}
			break;
		case O_IMAGE: a->req.image = optarg; break;
		case O_PRINCIPAL: a->req.principal = optarg; break;
		case O_HOST: a->req.host_program = optarg; break;
		case O_LIMITS:
			if (lease_parse_limits(optarg, &a->req, &c->e) < 0)
				return fail(c);
			break;
		case O_FEES:
			if (lease_parse_fees(optarg, &a->req, &c->e) < 0)
				return fail(c);
			break;
		case O_LIFETIME: a->lifetime = optarg; break;
		case O_ESCROW: a->escrow = optarg; break;
		case O_AMOUNT: a->amount = optarg; break;
		case O_EVIDENCE: a->evidence = optarg; break;
		case O_USAGE: a->usage = optarg; break;
		case O_STATE: a->state = optarg; break;
		}
	}
	for (; optind < argc; optind++) {
		if (a->npos == 2)
			return usage("too many operands");
		a->pos[a->npos++] = argv[optind];
	}
	return -1;
}

static int cmd_request(struct cli *c, struct args *a)
{
	json_t *out;
	uint64_t v;

	if (a->npos)
		return usage("request takes no operands");
	if (a->lifetime) {
		if (lease_parse_amount("--lifetime", a->lifetime, &v, &c->e) < 0)
			return fail(c);
		if (v == 0 || v > LEASE_LIFETIME_CEILING) {
			common_errf(&c->e, "--lifetime", "%s is outside 1..%u", a->lifetime,
				    LEASE_LIFETIME_CEILING);
			return fail(c);
		}
		a->req.lifetime = v;
	}
	if (a->escrow && lease_parse_amount("--escrow", a->escrow, &a->req.escrow, &c->e) < 0)
		return fail(c);
	if (!a->req.image)
		return usage("request needs --image PATH");
	if (open_store(c) < 0 || lease_request(c->s, &a->req, &out, &c->e) < 0)
		return fail(c);
	print_pair(c, out);
	json_decref(out);
	return SBX_EXIT_OK;
}

static int cmd_edge(struct cli *c, struct args *a, enum lease_edge edge)
{
	json_t *ev = NULL, *args = json_object(), *out = NULL;
	int rc = SBX_EXIT_FAIL;

	if (a->npos > 1) {
		json_decref(args);
		return usage("too many operands");
	}
	if (edge == LEASE_EDGE_FUND) {
		uint64_t v;
		if (!a->amount) {
			json_decref(args);
			return usage("fund needs --amount N");
		}
		if (lease_parse_amount("--amount", a->amount, &v, &c->e) < 0)
			goto out;
		json_object_set_new(args, "amount", json_integer((json_int_t)v));
	}
	if (edge == LEASE_EDGE_OBSERVE) {
		uint64_t u[LEASE_DIM_COUNT] = { 0 };
		int given[LEASE_DIM_COUNT] = { 0 };
		json_t *uo = json_object();
		if (!a->usage) {
			json_decref(args);
			json_decref(uo);
			return usage("observe needs --usage DIM=N[,...]");
		}
		if (lease_parse_usage(a->usage, u, given, &c->e) < 0) {
			json_decref(uo);
			goto out;
		}
		for (int d = 0; d < LEASE_DIM_COUNT; d++)
			if (given[d])
				json_object_set_new(uo, lease_dim_name((enum lease_dim)d),
						    json_integer((json_int_t)u[d]));
		json_object_set_new(args, "usage", uo);
	}
	if (read_evidence(c, a->evidence, &ev) < 0)
		goto out;
	if (a->npos == 1 && !lease_id_valid(a->pos[0])) {
		common_errf(&c->e, a->pos[0], "not a lease id (expected L followed by 16 hex digits)");
		goto out;
	}
	if (open_store(c) < 0 ||
	    lease_transition(c->s, a->npos ? a->pos[0] : NULL, edge, ev, args, &out, &c->e) < 0)
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

static int cmd_show(struct cli *c, struct args *a)
{
	json_t *out;

	if (a->npos != 1)
		return usage("show needs one lease ID");
	if (open_store(c) < 0 || lease_show(c->s, a->pos[0], &out, &c->e) < 0)
		return fail(c);
	print_pair(c, out);
	json_decref(out);
	return SBX_EXIT_OK;
}

static int cmd_list(struct cli *c, struct args *a)
{
	enum lease_state st = 0;
	json_t *out, *rec;
	size_t i;

	if (a->npos)
		return usage("list takes no operands");
	if (a->state && lease_state_parse(a->state, &st) < 0) {
		common_errf(&c->e, "--state", "unknown state \"%s\" (Requested, Funded, Active, Settling, Expired, Destroyed)",
			    a->state);
		return fail(c);
	}
	if (open_store(c) < 0 ||
	    lease_list(c->s, a->req.principal, a->state ? (int)st : -1, &out, &c->e) < 0)
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

static int cmd_log(struct cli *c, struct args *a)
{
	json_t *out, *r;
	size_t i;

	if (a->npos != 1)
		return usage("log needs one lease ID");
	if (open_store(c) < 0 || lease_log(c->s, a->pos[0], &out, &c->e) < 0)
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

static int cmd_verify(struct cli *c, struct args *a)
{
	json_t *rep, *p;
	size_t i;
	int ok;

	if (a->npos > 1)
		return usage("verify takes at most one lease ID");
	if (open_store(c) < 0 || lease_verify(c->s, a->npos ? a->pos[0] : NULL, &rep, &c->e) < 0)
		return fail(c);
	ok = json_is_true(json_object_get(rep, "ok"));
	json_array_foreach(json_object_get(rep, "problems"), i, p)
		fprintf(stderr, "%s: error: verify: %s\n", common_progname(), json_string_value(p));
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%s: %lld leases, %lld receipts, %zu problems\n", ok ? "ok" : "FAILED",
		       (long long)lease_jint(rep, "leases"), (long long)lease_jint(rep, "receipts"),
		       json_array_size(json_object_get(rep, "problems")));
	else
		common_json_print(rep, 0);
	json_decref(rep);
	return ok ? SBX_EXIT_OK : SBX_EXIT_FAIL;
}

static int print_clock(struct cli *c, json_t *clk)
{
	if (c->fmt == COMMON_FMT_TEXT)
		printf("%s batch %lld (batch_ms %lld)\n", lease_jstr(clk, "mode"),
		       (long long)lease_jint(clk, "batch"), (long long)lease_jint(clk, "batch_ms"));
	else
		common_json_print(clk, 0);
	json_decref(clk);
	return SBX_EXIT_OK;
}

static int cmd_clock(struct cli *c, struct args *a)
{
	json_t *clk;

	if (a->npos > 1)
		return usage("clock takes at most one mode (wall or manual)");
	if (open_store(c) < 0)
		return fail(c);
	if (a->npos ? lease_clock_set_mode(c->s, a->pos[0], &clk, &c->e)
		    : lease_clock_get(c->s, &clk, &c->e))
		return fail(c);
	return print_clock(c, clk);
}

static int cmd_tick(struct cli *c, struct args *a)
{
	uint64_t n = 1;
	json_t *clk;

	if (a->npos > 1)
		return usage("tick takes at most one count");
	if (a->npos && lease_parse_amount("tick", a->pos[0], &n, &c->e) < 0)
		return fail(c);
	if (open_store(c) < 0 || lease_clock_tick(c->s, n, &clk, &c->e) < 0)
		return fail(c);
	return print_clock(c, clk);
}

int lease_cli_main(int argc, char **argv)
{
	static const struct {
		const char *name;
		unsigned allowed;
		int edge; /* -1: not a transition */
	} cmds[] = {
		{ "request", BIT(O_IMAGE) | BIT(O_PRINCIPAL) | BIT(O_HOST) | BIT(O_LIMITS) |
			     BIT(O_LIFETIME) | BIT(O_ESCROW) | BIT(O_FEES), -1 },
		{ "fund", BIT(O_AMOUNT) | BIT(O_EVIDENCE), LEASE_EDGE_FUND },
		{ "activate", BIT(O_EVIDENCE), LEASE_EDGE_ACTIVATE },
		{ "observe", BIT(O_USAGE) | BIT(O_EVIDENCE), LEASE_EDGE_OBSERVE },
		{ "settle", BIT(O_EVIDENCE), LEASE_EDGE_SETTLE },
		{ "expire", BIT(O_EVIDENCE), LEASE_EDGE_EXPIRE },
		{ "destroy", BIT(O_EVIDENCE), LEASE_EDGE_DESTROY },
		{ "show", 0, -1 }, { "list", BIT(O_PRINCIPAL) | BIT(O_STATE), -1 },
		{ "log", 0, -1 }, { "verify", 0, -1 }, { "clock", 0, -1 }, { "tick", 0, -1 },
	};
	struct cli c = { .fmt = COMMON_FMT_JSON };
	struct args a;
	const char *cmd;
	int rc = -1, o;

	opterr = 0;
	while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (o == 'h') {
			fputs(usage_text, stdout);
			return SBX_EXIT_OK;
		}
		if (o == O_STORE)
			c.store = optarg;
		else if (o == O_FORMAT) {
			if (common_parse_format(optarg, &c.fmt, &c.e) < 0) {
				common_report(&c.e);
				return SBX_EXIT_USAGE;
			}
		} else
			return usage("unknown option before the command");
	}
	if (optind >= argc)
		return usage("missing command");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		if (strcmp(cmd, cmds[i].name) != 0)
			continue;
		if ((rc = parse(&c, argc, argv, &a, cmds[i].allowed)) >= 0)
			break;
		if (cmds[i].edge >= 0)
			rc = cmd_edge(&c, &a, (enum lease_edge)cmds[i].edge);
		else if (i == 0)
			rc = cmd_request(&c, &a);
		else if (!strcmp(cmd, "show"))
			rc = cmd_show(&c, &a);
		else if (!strcmp(cmd, "list"))
			rc = cmd_list(&c, &a);
		else if (!strcmp(cmd, "log"))
			rc = cmd_log(&c, &a);
		else if (!strcmp(cmd, "verify"))
			rc = cmd_verify(&c, &a);
		else if (!strcmp(cmd, "clock"))
			rc = cmd_clock(&c, &a);
		else
			rc = cmd_tick(&c, &a);
		break;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: error: unknown command \"%s\"\n", common_progname(), cmd);
		rc = usage(NULL);
	}
	lease_store_close(c.s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error: stdout: write failed\n", common_progname());
		return SBX_EXIT_FAIL;
	}
	return rc;
}
