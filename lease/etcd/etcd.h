/* The etcd back end (SPEC §14): the shared part of a store in an etcd cluster
 * (shared.c), through a v3 client (etcd.c). */
#ifndef SBX_LEASE_ETCD_H
#define SBX_LEASE_ETCD_H

#include "lease/backend/backend.h"

extern const struct lease_backend lease_etcd_backend;

/* etcd.c: a v3 client through the HTTP/JSON gateway; keys below the URL's prefix. */
int lease_etcd_url(const char *url); /* 1 for etcd://… and etcds://… */
int lease_etcd_open(const char *url, struct lease_etcd **out, struct common_err *e);
void lease_etcd_close(struct lease_etcd *c);
int lease_etcd_unreachable(const struct lease_etcd *c); /* the last request timed out */
/* [[key, value, mod_revision], …] of the keys under prefix (from `from` when given) */
int lease_etcd_range(struct lease_etcd *c, const char *prefix, const char *from, json_t **kvs,
		     struct common_err *e);
/* One gateway reply as a range answer: 0 with *kvs, 1 when another member or try
 * may answer, -1 refused with e (what range decodes; for the fuzz target) */
int lease_etcd_decode(struct lease_etcd *c, long status, const char *body, size_t len,
		      json_t **kvs, struct common_err *e);
/* *val NULL and *rev 0 when key is absent */
int lease_etcd_get(struct lease_etcd *c, const char *key, char **val, int64_t *rev,
		   struct common_err *e);
/* [[key, value, mod_revision], …] of the keys named (absent ones left out), read at
 * one revision in one round trip */
int lease_etcd_get_many(struct lease_etcd *c, const json_t *keys, json_t **kvs,
			struct common_err *e);
/* Puts [[key, value], …] (a null value deletes key) when every [[key, mod_revision], …]
 * of cmp still holds (mod_revision 0: key absent):
 * 1 applied (at *rev), 0 not (nothing written; *now, when now is given, holds
 * [[key, value, mod_revision], …] of cmp's keys present now), -1 error */
int lease_etcd_txn(struct lease_etcd *c, const json_t *cmp, const json_t *puts, int64_t *rev,
		   json_t **now, struct common_err *e);

#endif
