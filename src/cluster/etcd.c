/*
 * etcd.c: the etcd v3 JSON-gateway client (etcd.h has the contract).
 *
 * Wire format (etcd 3.4's grpc-gateway, checked against Debian's etcd-server 3.4.23): every call
 * is POST /v3/<service>/<method> with a JSON body; bytes fields (key, value, range_end) are
 * base64; int64 fields are decimal strings and are omitted when zero (so a failed txn has no
 * "succeeded" and a key without lease no "lease"). Errors come back as
 * {"error":..,"message":..,"code":N} with gRPC codes: 14 UNAVAILABLE (no leader, the member is
 * cut off), 4 DEADLINE_EXCEEDED, 5 NOT_FOUND (lease), 3 INVALID_ARGUMENT, 9 FAILED_PRECONDITION.
 * Lease keep-alive is a streaming method; one request body gives one {"result":{..}} answer and
 * the stream ends. A range over a prefix sets range_end to the prefix with its last byte + 1.
 *
 * Failover: a request goes to e->cur; on a transport error, HTTP 5xx or codes 14/4 (or 2
 * UNKNOWN with "leader changed") it moves to the next endpoint; at most 2 rounds over the list,
 * with 100, 200, 400 ms pauses between rounds of failures. Other answers are final.
 *
 * Locking: e->mu (SX__RANK_ETCD) is held for the whole request including retries: one curl easy
 * handle per client, reused (keep-alive connection to the current member).
 */
#include "cluster/etcd.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/lock.h"

#define MAX_EP 16

struct sx__etcd {
    sx__mutex mu;
    CURL *curl;
    char *ep[MAX_EP];
    size_t n_ep;
    size_t cur;
    uint32_t timeout_ms;
};

/* curl's write callback: the answer into a growable buffer (util/buf.h) */
static size_t on_data(char *ptr, size_t sz, size_t nm, void *ud)
{
    sx__wbuf *b = ud;
    size_t add = sz * nm;
    if (b->len + add > (64u << 20))
        return 0; /* a gateway answer this large is not one of ours */
    sx__wbuf_put(b, ptr, add);
    return sx__wbuf_ok(b) ? add : 0;
}

sx_status sx__etcd_new(const char *endpoints, uint32_t timeout_ms, sx__etcd **out)
{
    *out = NULL;
    if (!endpoints || !*endpoints)
        return sx__err(SX_EINVAL, "etcd: no endpoint given (--etcd http://HOST:PORT[,...])");
    sx__etcd *e = sx__calloc(1, sizeof *e);
    if (!e)
        return sx__err(SX_ENOMEM, "etcd client");
    e->timeout_ms = timeout_ms ? timeout_ms : 2000;
    const char *p = endpoints;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        while (len && p[len - 1] == '/')
            len--;
        if (len) {
            if (e->n_ep == MAX_EP) {
                sx__etcd_free(e);
                return sx__err(SX_EINVAL, "etcd: more than %d endpoints", MAX_EP);
            }
            if (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0) {
                sx__etcd_free(e);
                return sx__err(SX_EINVAL, "etcd: endpoint '%.*s' is not an http(s):// URL",
                               (int)len, p);
            }
            e->ep[e->n_ep] = sx__strndup(p, len);
            if (!e->ep[e->n_ep]) {
                sx__etcd_free(e);
                return sx__err(SX_ENOMEM, "etcd client");
            }
            e->n_ep++;
        }
        p = c ? c + 1 : p + strlen(p);
    }
    if (!e->n_ep) {
        sx__etcd_free(e);
        return sx__err(SX_EINVAL, "etcd: no endpoint given");
    }
    e->curl = curl_easy_init();
    if (!e->curl || sx__mutex_init(&e->mu, SX__RANK_ETCD, "etcd.mu") != 0) {
        if (e->curl)
            curl_easy_cleanup(e->curl);
        e->curl = NULL;
        sx__etcd_free(e);
        return sx__err(SX_ENOMEM, "etcd client");
    }
    *out = e;
    return SX_OK;
}

void sx__etcd_free(sx__etcd *e)
{
    if (!e)
        return;
    if (e->curl) {
        curl_easy_cleanup(e->curl);
        sx__mutex_destroy(&e->mu);
    }
    for (size_t i = 0; i < e->n_ep; i++)
        sx__free(e->ep[i]);
    sx__free(e);
}

const char *sx__etcd_endpoint(const sx__etcd *e)
{
    return e->ep[e->cur];
}

size_t sx__etcd_n_endpoints(const sx__etcd *e)
{
    return e->n_ep;
}

/* ------------------------------------------------------------------ encoding */

static char *b64(const char *s, size_t n)
{
    char *o = sx__malloc(((n + 2) / 3) * 4 + 1);
    if (o)
        (void)sx__b64_encode(s, n, o);
    return o;
}

static int set_b64(json_t *obj, const char *name, const char *s, size_t n)
{
    char *v = b64(s, n);
    if (!v)
        return -1;
    int rc = json_object_set_new(obj, name, json_string(v));
    sx__free(v);
    return rc;
}

static int set_i64(json_t *obj, const char *name, int64_t v)
{
    char buf[32];
    (void)snprintf(buf, sizeof buf, "%" PRId64, v);
    return json_object_set_new(obj, name, json_string(buf));
}

static int64_t get_i64(const json_t *obj, const char *name)
{
    const json_t *v = json_object_get(obj, name);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    return 0;
}

static uint64_t get_u64(const json_t *obj, const char *name)
{
    const json_t *v = json_object_get(obj, name);
    if (json_is_string(v))
        return strtoull(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (uint64_t)json_integer_value(v);
    return 0;
}

/* base64 field -> malloc'd bytes + NUL. Absent: "" (etcd omits empty values). */
static char *unb64(const json_t *obj, const char *name, size_t *len)
{
    const char *s = json_string_value(json_object_get(obj, name));
    if (!s)
        s = "";
    size_t cap = strlen(s) / 4 * 3 + 4;
    char *o = sx__malloc(cap);
    if (!o)
        return NULL;
    long n = sx__b64_decode(s, o, cap);
    if (n < 0) {
        sx__free(o);
        return NULL;
    }
    if (len)
        *len = (size_t)n;
    return o;
}

static sx_status kv_from(const json_t *j, sx__etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    kv->key = unb64(j, "key", NULL);
    kv->value = unb64(j, "value", &kv->value_len);
    if (!kv->key || !kv->value) {
        sx__free(kv->key);
        sx__free(kv->value);
        memset(kv, 0, sizeof *kv);
        return sx__err(SX_EREMOTE, "etcd: an answer's key or value is not base64");
    }
    kv->create_revision = get_i64(j, "create_revision");
    kv->mod_revision = get_i64(j, "mod_revision");
    kv->version = get_i64(j, "version");
    kv->lease = get_i64(j, "lease");
    return SX_OK;
}

void sx__etcd_kvs_free(sx__etcd_kv *kvs, size_t n)
{
    if (!kvs)
        return;
    for (size_t i = 0; i < n; i++) {
        sx__free(kvs[i].key);
        sx__free(kvs[i].value);
    }
    sx__free(kvs);
}

/* range_end of a prefix: the prefix with its last byte + 1 (bytes 0xff are dropped first). */
static size_t prefix_end(const char *prefix, char *out, size_t cap)
{
    size_t n = strlen(prefix);
    if (n >= cap)
        return 0;
    memcpy(out, prefix, n);
    while (n && (unsigned char)out[n - 1] == 0xff)
        n--;
    if (!n) {
        out[0] = '\0'; /* "\0": every key */
        return 1;
    }
    out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
    return n;
}

/* ------------------------------------------------------------------ transport */

static bool retryable_code(int64_t code, const char *msg)
{
    if (code == 14 || code == 4)
        return true;
    return msg && (strstr(msg, "leader changed") || strstr(msg, "no leader") ||
                   strstr(msg, "timed out") || strstr(msg, "unhealthy cluster"));
}

/* POST path with req; *ans the parsed answer (an object). only < n_ep: that endpoint alone, no
 * failover. Caller holds e->mu. */
static sx_status call_locked(sx__etcd *e, const char *path, json_t *req, json_t **ans, size_t only)
{
    *ans = NULL;
    char *payload = json_dumps(req, JSON_COMPACT);
    if (!payload)
        return sx__err(SX_ENOMEM, "etcd request");
    char why[512] = "";
    sx_status st = SX_EREMOTE;
    const size_t tries = only < e->n_ep ? 1 : e->n_ep * 2;
    for (size_t t = 0; t < tries; t++) {
        if (t && t % e->n_ep == 0) {
            struct timespec ts = { 0, (long)(100000000L << (t / e->n_ep - 1)) };
            nanosleep(&ts, NULL);
        }
        const char *ep = e->ep[only < e->n_ep ? only : e->cur];
        char url[512];
        (void)snprintf(url, sizeof url, "%s%s", ep, path);
        sx__wbuf b;
        sx__wbuf_init(&b);
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        CURL *c = e->curl;
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)(e->timeout_ms < 1000 ? e->timeout_ms : 1000));
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        CURLcode cc = curl_easy_perform(c);
        long http = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        curl_slist_free_all(hdr);
        sx__wbuf_put(&b, "", 1); /* NUL: the body is printed in messages */
        const char *text = sx__wbuf_ok(&b) ? (const char *)b.data : NULL;
        json_t *j = NULL;
        bool retry = false;
        if (cc != CURLE_OK) {
            (void)snprintf(why, sizeof why, "%s: %s", ep, curl_easy_strerror(cc));
            retry = true;
            st = cc == CURLE_OPERATION_TIMEDOUT ? SX_ETIMEDOUT : SX_EREMOTE;
        } else {
            json_error_t jerr;
            j = text ? json_loadb(text, b.len - 1, 0, &jerr) : NULL;
            if (!json_is_object(j)) {
                (void)snprintf(why, sizeof why, "%s: HTTP %ld, answer is not a JSON object: %.120s",
                               ep, http, text && *text ? text : "(empty)");
                retry = http >= 500;
                st = SX_EREMOTE;
            } else if (json_object_get(j, "error") || json_object_get(j, "code")) {
                int64_t code = get_i64(j, "code");
                const char *msg = json_string_value(json_object_get(j, "message"));
                if (!msg)
                    msg = json_string_value(json_object_get(j, "error"));
                (void)snprintf(why, sizeof why, "%s: %s (code %" PRId64 ")", ep,
                               msg ? msg : "error", code);
                retry = retryable_code(code, msg) || http >= 500;
                st = code == 5 ? SX_ENOTFOUND : retry ? SX_EREMOTE : SX_EINVAL;
            } else {
                sx__wbuf_fini(&b);
                *ans = j;
                sx__free(payload);
                return SX_OK;
            }
        }
        json_decref(j);
        sx__wbuf_fini(&b);
        if (!retry)
            break;
        if (only >= e->n_ep)
            e->cur = (e->cur + 1) % e->n_ep;
    }
    sx__free(payload);
    return sx__err(st, "etcd %s: %s", path, why);
}

static sx_status call(sx__etcd *e, const char *path, json_t *req, json_t **ans)
{
    if (!req)
        return sx__err(SX_ENOMEM, "etcd request");
    sx__mutex_lock(&e->mu);
    sx_status st = call_locked(e, path, req, ans, SIZE_MAX);
    sx__mutex_unlock(&e->mu);
    json_decref(req);
    return st;
}

static int64_t header_rev(const json_t *ans)
{
    return get_i64(json_object_get(ans, "header"), "revision");
}

/* ------------------------------------------------------------------ kv */

static sx_status kvs_from(const json_t *arr, sx__etcd_kv **kvs, size_t *n)
{
    *kvs = NULL;
    *n = 0;
    size_t m = json_array_size(arr);
    if (!m)
        return SX_OK;
    sx__etcd_kv *v = sx__calloc(m, sizeof *v);
    if (!v)
        return sx__err(SX_ENOMEM, "etcd range");
    for (size_t i = 0; i < m; i++) {
        sx_status st = kv_from(json_array_get(arr, i), &v[i]);
        if (st != SX_OK) {
            sx__etcd_kvs_free(v, i);
            return st;
        }
    }
    *kvs = v;
    *n = m;
    return SX_OK;
}

static json_t *range_req(const char *key, bool prefix)
{
    json_t *r = json_object();
    if (!r || set_b64(r, "key", key, strlen(key)) != 0) {
        json_decref(r);
        return NULL;
    }
    if (prefix) {
        char end[1024];
        size_t n = prefix_end(key, end, sizeof end);
        if (!n || set_b64(r, "range_end", end, n) != 0) {
            json_decref(r);
            return NULL;
        }
    }
    return r;
}

sx_status sx__etcd_get(sx__etcd *e, const char *key, sx__etcd_kv *out, int64_t *rev)
{
    memset(out, 0, sizeof *out);
    json_t *ans;
    sx_status st = call(e, "/v3/kv/range", range_req(key, false), &ans);
    if (st != SX_OK)
        return st;
    if (rev)
        *rev = header_rev(ans);
    const json_t *kvs = json_object_get(ans, "kvs");
    if (json_array_size(kvs) == 0)
        st = sx__err(SX_ENOTFOUND, "etcd: no key %s", key);
    else
        st = kv_from(json_array_get(kvs, 0), out);
    json_decref(ans);
    return st;
}

sx_status
sx__etcd_range(sx__etcd *e, const char *prefix, sx__etcd_kv **kvs, size_t *n, int64_t *rev)
{
    *kvs = NULL;
    *n = 0;
    json_t *ans;
    sx_status st = call(e, "/v3/kv/range", range_req(prefix, true), &ans);
    if (st != SX_OK)
        return st;
    if (rev)
        *rev = header_rev(ans);
    st = kvs_from(json_object_get(ans, "kvs"), kvs, n);
    json_decref(ans);
    return st;
}

static json_t *put_req(const char *key, const char *value, int64_t lease)
{
    json_t *r = json_object();
    if (!r || set_b64(r, "key", key, strlen(key)) != 0 ||
        set_b64(r, "value", value, strlen(value)) != 0 || (lease && set_i64(r, "lease", lease))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

sx_status sx__etcd_put(sx__etcd *e, const char *key, const char *value, int64_t lease, int64_t *rev)
{
    json_t *ans;
    sx_status st = call(e, "/v3/kv/put", put_req(key, value, lease), &ans);
    if (st != SX_OK)
        return st;
    if (rev)
        *rev = header_rev(ans);
    json_decref(ans);
    return SX_OK;
}

sx_status sx__etcd_del(sx__etcd *e, const char *key, bool prefix, int64_t *deleted)
{
    json_t *ans;
    sx_status st = call(e, "/v3/kv/deleterange", range_req(key, prefix), &ans);
    if (st != SX_OK)
        return st;
    if (deleted)
        *deleted = get_i64(ans, "deleted");
    json_decref(ans);
    return SX_OK;
}

/* ------------------------------------------------------------------ leases */

/* {"<name>": "<v>"} (NULL on OOM: call() answers SX_ENOMEM) */
static json_t *i64_req(const char *name, int64_t v)
{
    json_t *r = json_object();
    if (r && set_i64(r, name, v) != 0) {
        json_decref(r);
        r = NULL;
    }
    return r;
}

sx_status sx__etcd_lease_grant(sx__etcd *e, uint32_t ttl_s, int64_t *id)
{
    *id = 0;
    json_t *ans;
    sx_status st = call(e, "/v3/lease/grant", i64_req("TTL", ttl_s), &ans);
    if (st != SX_OK)
        return st;
    *id = get_i64(ans, "ID");
    const char *err = json_string_value(json_object_get(ans, "error"));
    json_decref(ans);
    if (!*id)
        return sx__err(SX_EREMOTE, "etcd lease grant: no lease id in the answer%s%s",
                       err ? ": " : "", err ? err : "");
    return SX_OK;
}

sx_status sx__etcd_lease_keepalive(sx__etcd *e, int64_t id, int64_t *ttl_left)
{
    *ttl_left = 0;
    json_t *ans;
    sx_status st = call(e, "/v3/lease/keepalive", i64_req("ID", id), &ans);
    if (st != SX_OK)
        return st;
    const json_t *res = json_object_get(ans, "result");
    *ttl_left = get_i64(res ? res : ans, "TTL");
    json_decref(ans);
    if (*ttl_left <= 0)
        return sx__err(SX_ENOTFOUND, "etcd: lease %" PRId64 " has expired", id);
    return SX_OK;
}

sx_status sx__etcd_lease_revoke(sx__etcd *e, int64_t id)
{
    json_t *ans;
    sx_status st = call(e, "/v3/lease/revoke", i64_req("ID", id), &ans);
    if (st != SX_OK)
        return st;
    json_decref(ans);
    return SX_OK;
}

/* ------------------------------------------------------------------ txn */

static json_t *ops_json(const sx__etcd_op *ops, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_object(), *inner = NULL;
        const char *name = "request_range";
        switch (ops[i].kind) {
        case SX__ETCD_PUT:
            inner = put_req(ops[i].key, ops[i].value ? ops[i].value : "", ops[i].lease);
            name = "request_put";
            break;
        case SX__ETCD_DEL:
            inner = range_req(ops[i].key, false);
            name = "request_delete_range";
            break;
        case SX__ETCD_GET:
            inner = range_req(ops[i].key, false);
            break;
        }
        if (!o || !inner || json_object_set_new(o, name, inner) != 0 ||
            json_array_append_new(a, o) != 0) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

sx_status sx__etcd_txn(sx__etcd *e,
                       const sx__etcd_cmp *cmp,
                       size_t n_cmp,
                       const sx__etcd_op *on_success,
                       size_t n_success,
                       const sx__etcd_op *on_failure,
                       size_t n_failure,
                       sx__etcd_txn_result *out)
{
    memset(out, 0, sizeof *out);
    static const char *const targets[] = { "CREATE", "MOD", "VERSION", "VALUE" };
    static const char *const fields[] = { "create_revision", "mod_revision", "version", "value" };
    json_t *req = json_object(), *cmps = json_array();
    bool ok = req && cmps && json_object_set_new(req, "compare", cmps) == 0;
    if (!ok)
        json_decref(cmps);
    for (size_t i = 0; ok && i < n_cmp; i++) {
        json_t *c = json_object();
        unsigned t = (unsigned)cmp[i].target;
        ok =
            c && t < 4 && json_array_append_new(cmps, c) == 0 &&
            set_b64(c, "key", cmp[i].key, strlen(cmp[i].key)) == 0 &&
            json_object_set_new(c, "target", json_string(targets[t])) == 0 &&
            (cmp[i].target == SX__ETCD_VALUE ? set_b64(c, "value", cmp[i].value ? cmp[i].value : "",
                                                       cmp[i].value ? strlen(cmp[i].value) : 0) == 0
                                             : set_i64(c, fields[t], cmp[i].rev) == 0);
    }
    json_t *s = ok ? ops_json(on_success, n_success) : NULL;
    ok = ok && s && json_object_set_new(req, "success", s) == 0;
    json_t *f = ok ? ops_json(on_failure, n_failure) : NULL;
    ok = ok && f && json_object_set_new(req, "failure", f) == 0;
    if (!ok) {
        json_decref(req);
        return sx__err(SX_ENOMEM, "etcd txn");
    }
    json_t *ans;
    sx_status st = call(e, "/v3/kv/txn", req, &ans);
    if (st != SX_OK)
        return st;
    out->succeeded = json_is_true(json_object_get(ans, "succeeded"));
    out->revision = header_rev(ans);
    /* the kvs of every range response, in order */
    const json_t *resp = json_object_get(ans, "responses");
    size_t total = 0;
    for (size_t i = 0; i < json_array_size(resp); i++)
        total += json_array_size(
            json_object_get(json_object_get(json_array_get(resp, i), "response_range"), "kvs"));
    if (total) {
        out->kvs = sx__calloc(total, sizeof *out->kvs);
        if (!out->kvs)
            st = sx__err(SX_ENOMEM, "etcd txn answer");
        for (size_t i = 0; st == SX_OK && i < json_array_size(resp); i++) {
            const json_t *kvs =
                json_object_get(json_object_get(json_array_get(resp, i), "response_range"), "kvs");
            for (size_t k = 0; st == SX_OK && k < json_array_size(kvs); k++) {
                st = kv_from(json_array_get(kvs, k), &out->kvs[out->n_kvs]);
                if (st == SX_OK)
                    out->n_kvs++;
            }
        }
    }
    json_decref(ans);
    if (st != SX_OK)
        sx__etcd_txn_result_fini(out);
    return st;
}

void sx__etcd_txn_result_fini(sx__etcd_txn_result *r)
{
    sx__etcd_kvs_free(r->kvs, r->n_kvs);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ maintenance */

sx_status sx__etcd_member_status(sx__etcd *e, size_t i, uint64_t *member_id, uint64_t *leader_id)
{
    *member_id = *leader_id = 0;
    if (i >= e->n_ep)
        return sx__err(SX_EINVAL, "etcd: no endpoint %zu", i);
    json_t *req = json_object();
    if (!req)
        return sx__err(SX_ENOMEM, "etcd request");
    json_t *ans;
    sx__mutex_lock(&e->mu);
    sx_status st = call_locked(e, "/v3/maintenance/status", req, &ans, i);
    sx__mutex_unlock(&e->mu);
    json_decref(req);
    if (st != SX_OK)
        return st;
    *member_id = get_u64(json_object_get(ans, "header"), "member_id");
    *leader_id = get_u64(ans, "leader");
    json_decref(ans);
    return SX_OK;
}
