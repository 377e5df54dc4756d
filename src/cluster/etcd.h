/*
 * etcd.h: an etcd v3 client over the JSON gateway (POST /v3/..., keys and values base64, int64
 * fields as decimal strings), on libcurl and jansson. Debian ships etcd-server 3.4 but no C
 * client; the gateway is part of every etcd v3 server. docs/internals/CLUSTER.md says what the
 * cluster keeps in etcd and how it fences writers with revisions.
 *
 * Endpoints. A client holds the cluster's client URLs ("http://127.0.0.1:23791,http://...") and
 * sends each request to its current one; a connection failure, a timeout, an HTTP 5xx or an
 * etcd "unavailable" / "leader changed" / "no leader" answer moves it to the next endpoint and
 * retries (each endpoint twice at most, 100-400 ms apart). A retried request may have been
 * applied by the member that timed out: puts and deletes are idempotent, and callers of txn
 * decide from the answer (a create-if-absent that finds its own lease on the key acquired it).
 *
 * Reads are linearizable (etcd's default; serializable is not used).
 *
 * Errors: SX_EREMOTE (no endpoint answered; message names the last one and why), SX_ENOTFOUND
 * (no such key, a lease that expired or never existed), SX_EINVAL (etcd refused the request),
 * SX_ENOMEM.
 *
 * Thread-safety: one sx__etcd serializes its requests under a mutex (one curl handle, one
 * connection). Code that must not wait behind another thread's request (a lease keep-alive)
 * uses its own client.
 */
#ifndef SX_CLUSTER_ETCD_H
#define SX_CLUSTER_ETCD_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__etcd sx__etcd;

/* endpoints: comma-separated client URLs (at most 16). timeout_ms per attempt (0: 2000).
 * Ownership: free with sx__etcd_free. Errors: SX_EINVAL (no endpoint), SX_ENOMEM. */
SX_NODISCARD sx_status sx__etcd_new(const char *endpoints, uint32_t timeout_ms, sx__etcd **out);
void sx__etcd_free(sx__etcd *e);
/* The endpoint the next request goes to (borrowed, valid until the next call). */
const char *sx__etcd_endpoint(const sx__etcd *e);

typedef struct sx__etcd_kv {
    char *key;   /* NUL-terminated (keys here are text) */
    char *value; /* the value's bytes plus a NUL (values here are text or JSON) */
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} sx__etcd_kv;

void sx__etcd_kvs_free(sx__etcd_kv *kvs, size_t n);

/* One key. SX_ENOTFOUND when absent. *rev (optional): the store's revision of the answer. */
SX_NODISCARD sx_status sx__etcd_get(sx__etcd *e, const char *key, sx__etcd_kv *out, int64_t *rev);
/* Every key starting with prefix, in key order. kvs owned (sx__etcd_kvs_free). */
SX_NODISCARD sx_status
sx__etcd_range(sx__etcd *e, const char *prefix, sx__etcd_kv **kvs, size_t *n, int64_t *rev);
/* lease 0: none. *rev (optional): the revision of the put. */
SX_NODISCARD sx_status
sx__etcd_put(sx__etcd *e, const char *key, const char *value, int64_t lease, int64_t *rev);
/* Deletes key, or every key under it when prefix. *deleted (optional): how many. */
SX_NODISCARD sx_status sx__etcd_del(sx__etcd *e, const char *key, bool prefix, int64_t *deleted);

SX_NODISCARD sx_status sx__etcd_lease_grant(sx__etcd *e, uint32_t ttl_s, int64_t *id);
/* One keep-alive. *ttl_left: seconds the lease now has. SX_ENOTFOUND: it expired (or was
 * revoked): whatever was attached to it is gone. */
SX_NODISCARD sx_status sx__etcd_lease_keepalive(sx__etcd *e, int64_t id, int64_t *ttl_left);
SX_NODISCARD sx_status sx__etcd_lease_revoke(sx__etcd *e, int64_t id);

/* Transactions: if every compare holds, the success ops run, else the failure ops; atomically. */
typedef enum sx__etcd_target {
    SX__ETCD_CREATE = 0, /* create_revision == rev (0: the key does not exist) */
    SX__ETCD_MOD,        /* mod_revision == rev: nobody wrote the key since */
    SX__ETCD_VERSION,    /* version == rev */
    SX__ETCD_VALUE,      /* value == value */
} sx__etcd_target;

typedef struct sx__etcd_cmp {
    const char *key;
    sx__etcd_target target;
    int64_t rev;
    const char *value;
} sx__etcd_cmp;

typedef enum sx__etcd_opkind { SX__ETCD_PUT = 0, SX__ETCD_DEL, SX__ETCD_GET } sx__etcd_opkind;

typedef struct sx__etcd_op {
    sx__etcd_opkind kind;
    const char *key;
    const char *value; /* PUT */
    int64_t lease;     /* PUT; 0 none */
} sx__etcd_op;

typedef struct sx__etcd_txn_result {
    bool succeeded;
    int64_t revision; /* the store's revision after the txn (a put's mod_revision when it wrote) */
    sx__etcd_kv *kvs; /* what the GET ops of the branch taken read, in order; owned */
    size_t n_kvs;
} sx__etcd_txn_result;

SX_NODISCARD sx_status sx__etcd_txn(sx__etcd *e,
                                    const sx__etcd_cmp *cmp,
                                    size_t n_cmp,
                                    const sx__etcd_op *on_success,
                                    size_t n_success,
                                    const sx__etcd_op *on_failure,
                                    size_t n_failure,
                                    sx__etcd_txn_result *out);
void sx__etcd_txn_result_fini(sx__etcd_txn_result *r);

/* The member answering at endpoint index i (0-based) and the leader it knows (maintenance
 * status): ids as etcd prints them. SX_EREMOTE when that member does not answer. */
SX_NODISCARD sx_status sx__etcd_member_status(sx__etcd *e,
                                              size_t i,
                                              uint64_t *member_id,
                                              uint64_t *leader_id);
size_t sx__etcd_n_endpoints(const sx__etcd *e);

#endif
