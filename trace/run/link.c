/* The leases a run opens and closes: --ephemeral's request and close, the
 * receipts a --lease run added, the result record written, and a chain's next
 * link requested and funded (sbx-run --chain, SPEC §8.4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lease/lease.h"
#include "trace/run/run-internal.h"

static const char *priority_name(enum trace_priority p)
{
	return p == TRACE_PRIO_REALTIME ? "realtime" : p == TRACE_PRIO_INVOKER ? "invoker" : "normal";
}

/* The stops of each call that stopped: its name, [entry stops, exit stops]. */
static json_t *by_call(const struct trace_result *r)
{
	json_t *o = json_object();
	for (long nr = 0; nr < TRACE_STOPS_NR; nr++) {
		const struct trace_sysinfo *s = trace_sys_by_nr(nr);
		const uint32_t *n = r->stops_by_nr[nr];
		if (s && (n[0] || n[1]))
			json_object_set_new(o, s->name, json_pack("[I,I]", (json_int_t)n[0], (json_int_t)n[1]));
	}
	return o;
}

json_t *trace_run_result_json(const char *lease, const char *image, const char *sha,
			      char *const *argv, const struct trace_result *r, int code,
			      const char *closed, json_t *receipts)
{
	json_t *j = json_object(), *av = json_array();
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(av, json_string(argv[i]));
	json_object_set_new(j, "lease", lease ? json_string(lease) : json_null());
	json_object_set_new(j, "image", json_pack("{s:s,s:s}", "path", image, "sha256", sha));
	json_object_set_new(j, "argv", av);
	if (r->exec_failed)
		json_object_set_new(j, "exec_error", json_string(strerror(r->exec_failed)));
	if (r->signal)
		json_object_set_new(j, "signal", json_integer(r->signal));
	else if (r->exited)
		json_object_set_new(j, "status", json_integer(r->status));
	json_object_set_new(j, "exit_code", json_integer(code));
	json_object_set_new(j, "closed", closed ? json_string(closed) : json_null());
	json_object_set_new(j, "stopped", r->stop_reason[0] ? json_string(r->stop_reason) : json_null());
	json_object_set_new(j, "usage", json_pack("{s:I,s:I}", "cpu_us", (json_int_t)r->cpu_us,
						  "maxrss", (json_int_t)r->maxrss));
	json_object_set_new(j, "supervisor", json_pack("{s:I,s:I,s:I,s:o,s:s}", "stops", (json_int_t)r->stops,
						       "exit_stops", (json_int_t)r->exit_stops,
						       "refused", (json_int_t)r->refused, "by_call", by_call(r),
						       "priority", priority_name(r->priority)));
	if (r->notified) /* only where the listener served calls: the ptrace path's result is as it was */
		json_object_set_new(json_object_get(j, "supervisor"), "notified",
				    json_integer((json_int_t)r->notified));
	json_object_set_new(j, "trace", json_null()); /* the trace head digest */
	json_object_set_new(j, "receipts", receipts ? json_incref(receipts) : json_array());
	return j;
}

/* --result goes beneath the directory opened before the guest started */
int trace_run_write_result(const struct trace_run_opts *o, struct common_outfile *out,
			   const json_t *j, struct common_err *e)
{
	char *s = common_json_canonical(j);
	size_t n = strlen(s);
	s = common_xrealloc(s, n + 2);
	s[n++] = '\n';
	int rc = 0;
	if (out->path && common_outfile_write(out, s, n, 0644, e) < 0)
		rc = -1;
	if (o->result_fd >= 0 && common_write_all(o->result_fd, s, n) < 0)
		rc = common_errno(e, errno, "--result-fd %d", o->result_fd);
	free(s);
	return rc;
}

/* request, fund, activate: one locked commit, one receipt each */
int trace_run_ephemeral_open(struct lease_store *s, const struct trace_run_opts *o,
			     const char *image, const char *sha, const struct trace_script *sc,
			     char **id, json_t **head, json_t *receipts, struct common_err *e)
{
	struct lease_request req;
	memset(&req, 0, sizeof req);
	req.principal = o->principal;
	req.host_program = o->host_program;
	req.image = image;
	req.image_sha256 = sha;
	req.script = sc->path;
	req.script_sha256 = sc->path ? sc->sha : NULL;
	req.lifetime = o->lifetime;
	req.escrow = o->escrow;
	req.ephemeral = 1;
	if (o->limits && lease_parse_limits(o->limits, &req, e) < 0)
		return -1;
	if (o->fees && lease_parse_fees(o->fees, &req, e) < 0)
		return -1;
	json_t *amount = json_pack("{s:I}", "amount", (json_int_t)o->escrow), *made = NULL;
	struct lease_step steps[] = { { LEASE_EDGE_FUND, amount, 0 }, { LEASE_EDGE_ACTIVATE, NULL, 0 } };
	int rc = lease_steps(s, &req, NULL, NULL, steps, 2, &made, e);
	json_decref(amount);
	if (rc < 0)
		return -1;
	json_t *r = json_array_get(made, 0);
	*id = common_xstrdup(common_jstr(r, "lease", NULL) ? common_jstr(r, "lease", NULL) : "");
	json_array_extend(receipts, made);
	*head = json_incref(json_array_get(made, json_array_size(made) - 1));
	json_decref(made);
	return 0;
}

/* The bound the close's observation closed the lease by: its settle's reason. */
static void closed_by(const json_t *made, char closed[32])
{
	const json_t *r;
	size_t i;

	closed[0] = '\0';
	json_array_foreach(made, i, r) {
		const char *why = common_jstr(r, "reason", NULL);
		if (strcmp(common_jstr(r, "edge", ""), "settle") == 0 && why &&
		    strcmp(why, "caller") != 0 && strcmp(why, "run-died") != 0)
			snprintf(closed, 32, "%s", why);
	}
}

int trace_run_ephemeral_close(struct lease_store *s, const char *id, const uint64_t *final,
			      json_t *receipts, char closed[32], struct common_err *e)
{
	json_t *obs = final ? json_pack("{s:{}, s:b}", "usage", "changed_only", 1) : NULL;
	struct lease_step steps[] = { { LEASE_EDGE_OBSERVE, obs, 1 }, { LEASE_EDGE_SETTLE, NULL, 1 },
				      { LEASE_EDGE_EXPIRE, NULL, 0 }, { LEASE_EDGE_DESTROY, NULL, 0 } };
	json_t *made = NULL, *all = NULL;
	int rc;

	for (int d = 0; final && d < LEASE_DIM_COUNT; d++)
		json_object_set_new(json_object_get(obs, "usage"), lease_dim_name((enum lease_dim)d),
				    json_integer((json_int_t)final[d]));
	rc = lease_steps(s, NULL, id, NULL, steps + !final, 4 - !final, &made, e);

	json_decref(obs);
	closed[0] = '\0';
	if (rc < 0)
		return -1;
	closed_by(made, closed);
	/* the journal also holds the observations metering made during the run */
	if (lease_log_since(s, id, -1, &all, e) == 0) {
		json_array_clear(receipts);
		json_array_extend(receipts, all);
	} else {
		json_array_extend(receipts, made);
	}
	json_decref(all);
	json_decref(made);
	return 0;
}

/* --lease: the receipts this run added (observations, a closure), else the head */
void trace_run_lease_receipts(struct lease_store *s, const char *id, json_int_t start_seq,
			      json_t *receipts)
{
	struct common_err e;
	json_t *all = NULL;
	/* from the head the run started with, which stands alone when nothing followed */
	if (lease_log_since(s, id, start_seq - 1, &all, &e) == 0) {
		if (json_array_size(all) > 1)
			json_array_remove(all, 0);
		json_array_extend(receipts, all);
	}
	json_decref(all);
}


/* A request for the lease after prev, from prev's record: the same principal, host
 * program, image (and script), limits, fees, lifetime and escrow. */
int trace_lease_request_of(const json_t *l, struct lease_request *req, struct common_err *e)
{
	const json_t *img = json_object_get(l, "image"), *sc = json_object_get(img, "script");
	const json_t *lim = json_object_get(l, "limits"), *fees = json_object_get(l, "fees");

	req->principal = common_jstr(l, "principal", NULL);
	req->host_program = common_jstr(l, "host_program", NULL);
	req->image = common_jstr(img, "path", NULL);
	req->image_sha256 = common_jstr(img, "sha256", NULL);
	req->script = common_jstr(sc, "path", NULL);
	req->script_sha256 = common_jstr(sc, "sha256", NULL);
	req->lifetime = (uint64_t)common_jint(l, "lifetime", 0);
	req->escrow = (uint64_t)common_jint(l, "escrow_required", 0);
	req->ephemeral = json_object_get(l, "ephemeral") != NULL;
	for (int d = 0; d < LEASE_DIM_COUNT; d++) {
		const json_t *v = json_object_get(lim, lease_dim_name((enum lease_dim)d));
		const json_t *f = json_object_get(fees, lease_dim_name((enum lease_dim)d));
		if (json_is_integer(v)) {
			req->limits[d] = (uint64_t)json_integer_value(v);
			req->has_limit[d] = 1;
		}
		if (json_is_integer(f))
			req->fees[d] = (uint64_t)json_integer_value(f);
	}
	if (!req->principal || !req->image || !req->image_sha256)
		return common_errf(e, "chain", "lease %s: no principal or image in its record",
				   common_jstr(l, "id", "?"));
	return 0;
}

int trace_lease_fund_like(struct lease_store *s, const char *lease, const char *prev,
			  char **id, struct common_err *e)
{
	struct lease_request req;
	json_t *rec = NULL, *made = NULL, *amount = NULL;
	int rc = -1;

	memset(&req, 0, sizeof req);
	if (lease_load(s, lease, &rec, e) < 0)
		goto out;
	const json_t *l = json_object_get(rec, "lease") ? json_object_get(rec, "lease") : rec;
	if (trace_lease_request_of(l, &req, e) < 0)
		goto out;
	if (!prev)
		req.ephemeral = 0; /* a lease of its own, not the chain's next link */
	req.prev = prev;
	amount = json_pack("{s:I}", "amount", (json_int_t)req.escrow);
	/* Funded: the restore of the snapshot makes it Active (SPEC §8.4) */
	struct lease_step fund[] = { { LEASE_EDGE_FUND, amount, 0 } };
	if (lease_steps(s, &req, NULL, NULL, fund, 1, &made, e) < 0)
		goto out;
	*id = common_xstrdup(common_jstr(json_array_get(made, 0), "lease", ""));
	rc = 0;
out:
	json_decref(amount);
	json_decref(made);
	json_decref(rec);
	return rc;
}

int trace_chain_next(const struct trace_run_opts *o, const struct trace_chain_link *ln,
		     char **next, struct common_err *e)
{
	struct lease_store *s;
	if (lease_store_open(o->store, &s, e) < 0)
		return -1;
	lease_store_principal_key(s, o->principal_key);
	int rc = trace_lease_fund_like(s, ln->lease, ln->lease, next, e);
	lease_store_close(s);
	return rc;
}

void trace_chain_fail(const struct trace_run_opts *o, json_t *links, const struct common_err *err)
{
	struct common_outfile out = { .dirfd = -1 };
	struct common_err e;

	if (!o->result_path && o->result_fd < 0)
		return;
	json_t *j = json_pack("{s:O,s:i,s:s++}", "links", links, "exit_code", SBX_EXIT_SBX, "error",
			      err->what, ": ", err->why);
	if ((o->result_path && common_outfile_open(&out, o->result_path, &e) < 0) ||
	    trace_run_write_result(o, &out, j, &e) < 0)
		common_report(&e);
	if (out.path)
		common_outfile_close(&out);
	json_decref(j);
}
