/*
 * proxy.c: the cluster's REST front door (`sextant serve --proxy`; docs/internals/CLUSTER.md,
 * "Proxy"). Milvus REST v2 requests are forwarded, whole, to the node that must answer them:
 *
 *   writes and DDL on a collection      the writer holding it (etcd epoch/<db>/<c> -> node/<id>);
 *                                        a collection nobody holds yet (a create) goes to a writer
 *                                        chosen by a hash of db.collection over the live writers
 *                                        (node/<id> keys with role writer, sorted), so placement
 *                                        is stable while the writer set is
 *   reads (search, query, get, describe, stats, ...)
 *                                        consistencyLevel "Eventually" or "Bounded": the query
 *                                        nodes in turn (they serve what writers have synced);
 *                                        anything else ("Strong", "Session", absent): the holding
 *                                        writer, which has every acknowledged row
 *   collections/list                    every writer, the names merged (a collection lives on
 *                                        one writer)
 *   /readyz, /livez                     answered here (ready: at least one writer known)
 *   anything else                       the first writer
 *
 * A forward that cannot connect, or that a writer answers with "held by writer" / "not hold"
 * (the collection moved), drops the cached route and is tried once more. Answers carry the header
 * X-Sextant-Node: <node id> that served them. Not yet: gRPC (clients speak REST to the proxy or
 * gRPC to a node), fanning a search over several shards (one collection is one shard today).
 *
 * The proxy listens on 127.0.0.1 only and checks no credentials: it forwards the client's
 * Authorization header, and each node checks it.
 *
 * Threads: MHD's thread pool; each request forwards with its own curl handle. The route cache
 * (nodes, holders) is guarded by p->mu (leaf: no call inside); nodes are reloaded from etcd at
 * most every 500 ms, a collection's holder is reused for 500 ms, and both after a failed or
 * misrouted forward. Each worker thread keeps one curl handle (and its connections).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cluster/etcd.h"
#include "cluster/fence.h"
#include "sextant_server.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define MAX_NODES   64
#define MAX_BODY    (64u << 20)
#define MAX_HOLDERS 256
#define HOLDER_NS   500000000LL /* a holder read from etcd is reused this long */

typedef struct pholder {
    char key[300]; /* "db/collection" */
    char id[64];
    int64_t at_ns;
} pholder;

typedef struct pnode {
    char id[64];
    char addr[128]; /* host:port */
    bool query;
} pnode;

struct sx_cluster_proxy {
    struct MHD_Daemon *d;
    uint16_t port;
    sx__etcd *kv;
    char prefix[96];
    pthread_mutex_t mu;
    pnode nodes[MAX_NODES];
    size_t n_nodes;
    int64_t nodes_at_ns;
    unsigned rr; /* round-robin over query nodes */
    pholder holders[MAX_HOLDERS];
    size_t n_holders;
};

/* One curl handle per MHD worker thread, kept (with its connections to the nodes) for the
 * thread's life: a new connection per forwarded request cost more than the search itself. */
static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_free_tl(void *h)
{
    curl_easy_cleanup(h);
}

static void curl_key_make(void)
{
    (void)pthread_key_create(&curl_key, curl_free_tl);
}

static CURL *thread_curl(void)
{
    (void)pthread_once(&curl_once, curl_key_make);
    CURL *h = pthread_getspecific(curl_key);
    if (!h) {
        h = curl_easy_init();
        if (h && pthread_setspecific(curl_key, h) != 0) {
            curl_easy_cleanup(h);
            h = NULL;
        }
    }
    if (h)
        curl_easy_reset(h);
    return h;
}

typedef struct req {
    sx__wbuf w; /* the request body, NUL-terminated once complete */
    bool too_big;
} req;

static int64_t mono_ns(void)
{
    return sx_clock_ns();
}

/* ---------------------------------------------------------------- routes */

static int cmp_node(const void *a, const void *b)
{
    return strcmp(((const pnode *)a)->id, ((const pnode *)b)->id);
}

/* Reloads the node table from etcd (node/<id> keys) when older than 500 ms or forced. */
static void load_nodes(sx_cluster_proxy *p, bool force)
{
    pthread_mutex_lock(&p->mu);
    bool fresh = !force && mono_ns() - p->nodes_at_ns < 500000000LL && p->n_nodes;
    pthread_mutex_unlock(&p->mu);
    if (fresh)
        return;
    char pre[160];
    (void)snprintf(pre, sizeof pre, "%snode/", p->prefix);
    sx__etcd_kv *kvs = NULL;
    size_t n = 0;
    if (sx__etcd_range(p->kv, pre, &kvs, &n, NULL) != SX_OK)
        return; /* keep what we had */
    pnode tab[MAX_NODES];
    size_t m = 0;
    for (size_t i = 0; i < n && m < MAX_NODES; i++) {
        json_t *j = json_loads(kvs[i].value, 0, NULL);
        const char *role = json_string_value(json_object_get(j, "role"));
        const char *addr = json_string_value(json_object_get(j, "addr"));
        if (role && addr && (strcmp(role, "writer") == 0 || strcmp(role, "query") == 0)) {
            (void)snprintf(tab[m].id, sizeof tab[m].id, "%s", kvs[i].key + strlen(pre));
            (void)snprintf(tab[m].addr, sizeof tab[m].addr, "%s", addr);
            tab[m].query = strcmp(role, "query") == 0;
            m++;
        }
        json_decref(j);
    }
    sx__etcd_kvs_free(kvs, n);
    qsort(tab, m, sizeof tab[0], cmp_node);
    pthread_mutex_lock(&p->mu);
    memcpy(p->nodes, tab, m * sizeof tab[0]);
    p->n_nodes = m;
    p->nodes_at_ns = mono_ns();
    pthread_mutex_unlock(&p->mu);
}

static bool node_addr(sx_cluster_proxy *p, const char *id, char *addr, size_t cap)
{
    bool found = false;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_nodes && !found; i++)
        if (strcmp(p->nodes[i].id, id) == 0) {
            (void)snprintf(addr, cap, "%s", p->nodes[i].addr);
            found = true;
        }
    pthread_mutex_unlock(&p->mu);
    return found;
}

/* FNV-1a, then murmur3's finalizer: FNV's low bits alone follow the last characters' parity
 * (six names ending in a digit of alternating parity all landed on one writer of two) */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static bool holder_get(sx_cluster_proxy *p, const char *hk, char *id, size_t cap)
{
    bool hit = false;
    int64_t now = mono_ns();
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_holders && !hit; i++)
        if (strcmp(p->holders[i].key, hk) == 0 && now - p->holders[i].at_ns < HOLDER_NS) {
            (void)snprintf(id, cap, "%s", p->holders[i].id);
            hit = true;
        }
    pthread_mutex_unlock(&p->mu);
    return hit;
}

static void holder_put(sx_cluster_proxy *p, const char *hk, const char *id)
{
    pthread_mutex_lock(&p->mu);
    size_t slot = p->n_holders, oldest = 0;
    for (size_t i = 0; i < p->n_holders; i++) {
        if (strcmp(p->holders[i].key, hk) == 0)
            slot = i;
        if (p->holders[i].at_ns < p->holders[oldest].at_ns)
            oldest = i;
    }
    if (slot == p->n_holders && p->n_holders == MAX_HOLDERS)
        slot = oldest;
    else if (slot == p->n_holders)
        p->n_holders++;
    (void)snprintf(p->holders[slot].key, sizeof p->holders[slot].key, "%s", hk);
    (void)snprintf(p->holders[slot].id, sizeof p->holders[slot].id, "%s", id);
    p->holders[slot].at_ns = mono_ns();
    pthread_mutex_unlock(&p->mu);
}

static void holders_clear(sx_cluster_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->n_holders = 0;
    pthread_mutex_unlock(&p->mu);
}

/* The writer for db.coll: its holder (cached HOLDER_NS), else the hash's choice. false: no
 * writer known. */
static bool writer_for(sx_cluster_proxy *p,
                       const char *db,
                       const char *coll,
                       char *id,
                       size_t id_cap,
                       char *addr,
                       size_t cap)
{
    load_nodes(p, false);
    if (coll && *coll) {
        char hk[300];
        (void)snprintf(hk, sizeof hk, "%s/%s", db, coll);
        if (holder_get(p, hk, id, id_cap) && node_addr(p, id, addr, cap))
            return true;
        char key[512];
        (void)snprintf(key, sizeof key, "%sepoch/%s/%s", p->prefix, db, coll);
        sx__etcd_kv kv;
        if (sx__etcd_get(p->kv, key, &kv, NULL) == SX_OK) {
            (void)snprintf(id, id_cap, "%s", kv.value);
            sx__free(kv.key);
            sx__free(kv.value);
            holder_put(p, hk, id);
            if (node_addr(p, id, addr, cap))
                return true;
            load_nodes(p, true);
            if (node_addr(p, id, addr, cap))
                return true;
        }
    }
    char name[512];
    (void)snprintf(name, sizeof name, "%s.%s", db, coll ? coll : "");
    bool ok = false;
    pthread_mutex_lock(&p->mu);
    size_t nw = 0;
    for (size_t i = 0; i < p->n_nodes; i++)
        nw += !p->nodes[i].query;
    if (nw) {
        size_t pick = name_hash(name) % nw, k = 0;
        for (size_t i = 0; i < p->n_nodes && !ok; i++) {
            if (p->nodes[i].query)
                continue;
            if (k++ == pick) {
                (void)snprintf(id, id_cap, "%s", p->nodes[i].id);
                (void)snprintf(addr, cap, "%s", p->nodes[i].addr);
                ok = true;
            }
        }
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static bool query_node(sx_cluster_proxy *p, char *id, size_t id_cap, char *addr, size_t cap)
{
    load_nodes(p, false);
    bool ok = false;
    pthread_mutex_lock(&p->mu);
    size_t nq = 0;
    for (size_t i = 0; i < p->n_nodes; i++)
        nq += p->nodes[i].query;
    if (nq) {
        size_t pick = p->rr++ % nq, k = 0;
        for (size_t i = 0; i < p->n_nodes && !ok; i++) {
            if (!p->nodes[i].query)
                continue;
            if (k++ == pick) {
                (void)snprintf(id, id_cap, "%s", p->nodes[i].id);
                (void)snprintf(addr, cap, "%s", p->nodes[i].addr);
                ok = true;
            }
        }
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

/* ---------------------------------------------------------------- forwarding */

typedef struct answer {
    long status;
    sx__wbuf w; /* filled by curl */
    char *body; /* then the body, NUL-terminated (owned), and its length */
    size_t len;
    char ctype[128];
} answer;

static size_t on_body(char *ptr, size_t sz, size_t nm, void *ud)
{
    answer *a = ud;
    size_t add = sz * nm;
    sx__wbuf_put(&a->w, ptr, add);
    return sx__wbuf_ok(&a->w) ? add : 0;
}

static size_t on_header(char *ptr, size_t sz, size_t nm, void *ud)
{
    answer *a = ud;
    size_t n = sz * nm;
    if (n > 13 && strncasecmp(ptr, "Content-Type:", 13) == 0) {
        const char *v = ptr + 13;
        while (*v == ' ')
            v++;
        size_t l = strcspn(v, "\r\n");
        (void)snprintf(a->ctype, sizeof a->ctype, "%.*s", (int)l, v);
    }
    return n;
}

/* Forwards method url body to addr; false: could not connect (or no answer at all). */
static bool forward(struct MHD_Connection *c,
                    const char *method,
                    const char *url,
                    const req *r,
                    const char *addr,
                    answer *a)
{
    memset(a, 0, sizeof *a);
    sx__wbuf_init(&a->w);
    CURL *h = thread_curl();
    if (!h)
        return false;
    char full[1024];
    (void)snprintf(full, sizeof full, "http://%s%s", addr, url);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *rt = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Request-Timeout");
    char line[4096];
    if (auth) {
        (void)snprintf(line, sizeof line, "Authorization: %s", auth);
        hl = curl_slist_append(hl, line);
    }
    (void)snprintf(line, sizeof line, "Content-Type: %s", ct ? ct : "application/json");
    hl = curl_slist_append(hl, line);
    if (rt) {
        (void)snprintf(line, sizeof line, "Request-Timeout: %s", rt);
        hl = curl_slist_append(hl, line);
    }
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (r->w.len || strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->w.len ? (const char *)r->w.data : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->w.len);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 3600L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(hl);
    sx__wbuf_put(&a->w, "", 1);
    if (sx__wbuf_ok(&a->w)) {
        a->body = (char *)a->w.data; /* ownership moves to the answer */
        a->len = a->w.len - 1;
    } else {
        sx__wbuf_fini(&a->w);
    }
    return cc == CURLE_OK;
}

static void free_body(void *b)
{
    sx__free(b);
}

static enum MHD_Result reply(struct MHD_Connection *c,
                             unsigned status,
                             const char *ctype,
                             const char *node,
                             char *body,
                             size_t len)
{
    struct MHD_Response *rs =
        MHD_create_response_from_buffer_with_free_callback(len, body, free_body);
    if (!rs) {
        sx__free(body);
        return MHD_NO;
    }
    (void)MHD_add_response_header(rs, "Content-Type", ctype && *ctype ? ctype : "application/json");
    if (node)
        (void)MHD_add_response_header(rs, "X-Sextant-Node", node);
    enum MHD_Result ret = MHD_queue_response(c, status, rs);
    MHD_destroy_response(rs);
    return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    size_t len = strlen(text);
    char *b = sx__malloc(len + 1);
    if (!b)
        return MHD_NO;
    memcpy(b, text, len + 1);
    return reply(c, status, "application/json", NULL, b, len);
}

/* {"code":65535,"message":"..."} with HTTP 200, as the nodes answer errors */
static enum MHD_Result reply_error(struct MHD_Connection *c, const char *msg)
{
    json_t *j = json_pack("{s:i,s:s}", "code", 65535, "message", msg);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    enum MHD_Result r = reply_text(c, 200, t ? t : "{\"code\":65535}");
    free(t);
    return r;
}

static bool is_read(const char *url)
{
    static const char *const reads[] = {
        "/v2/vectordb/entities/search",
        "/v2/vectordb/entities/query",
        "/v2/vectordb/entities/get",
        "/v2/vectordb/entities/hybrid_search",
        "/v2/vectordb/entities/advanced_search",
        "/v2/vectordb/collections/describe",
        "/v2/vectordb/collections/has",
        "/v2/vectordb/collections/get_stats",
        "/v2/vectordb/collections/get_load_state",
        "/v2/vectordb/indexes/list",
        "/v2/vectordb/indexes/describe",
        "/v2/vectordb/partitions/list",
        "/v2/vectordb/partitions/has",
        "/v2/vectordb/partitions/get_stats",
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if (strcmp(url, reads[i]) == 0)
            return true;
    return false;
}

/* collections/list: every writer's names, merged (unique; writer by writer, in node id order) */
static enum MHD_Result list_all(sx_cluster_proxy *p, struct MHD_Connection *c, const req *r)
{
    load_nodes(p, false);
    pnode tab[MAX_NODES];
    pthread_mutex_lock(&p->mu);
    size_t n = p->n_nodes;
    memcpy(tab, p->nodes, n * sizeof tab[0]);
    pthread_mutex_unlock(&p->mu);
    json_t *names = json_array();
    for (size_t i = 0; names && i < n; i++) {
        if (tab[i].query)
            continue;
        answer a;
        if (!forward(c, "POST", "/v2/vectordb/collections/list", r, tab[i].addr, &a)) {
            sx__free(a.body);
            continue; /* a dead writer: its collections are not listed */
        }
        json_t *j = a.body ? json_loads(a.body, 0, NULL) : NULL;
        sx__free(a.body);
        if (json_integer_value(json_object_get(j, "code")) != 0) {
            json_decref(j);
            continue;
        }
        json_t *d = json_object_get(j, "data");
        for (size_t k = 0; k < json_array_size(d); k++) {
            const char *nm = json_string_value(json_array_get(d, k));
            bool dup = false;
            for (size_t m = 0; nm && m < json_array_size(names) && !dup; m++)
                dup = strcmp(json_string_value(json_array_get(names, m)), nm) == 0;
            if (nm && !dup)
                json_array_append_new(names, json_string(nm));
        }
        json_decref(j);
    }
    json_t *out = json_pack("{s:i,s:o}", "code", 0, "data", names ? names : json_array());
    char *t = out ? json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(out);
    enum MHD_Result ret = reply_text(c, 200, t ? t : "{\"code\":65535}");
    free(t);
    return ret;
}

static enum MHD_Result route(sx_cluster_proxy *p,
                             struct MHD_Connection *c,
                             const char *url,
                             const char *method,
                             const req *r)
{
    if (strcmp(url, "/readyz") == 0 || strcmp(url, "/livez") == 0) {
        char id[64], addr[128];
        bool any = writer_for(p, "default", "", id, sizeof id, addr, sizeof addr);
        return reply_text(c, any || strcmp(url, "/livez") == 0 ? 200 : 503,
                          any || strcmp(url, "/livez") == 0 ? "{\"status\":\"ok\"}"
                                                            : "{\"status\":\"no writer\"}");
    }
    if (strcmp(url, "/v2/vectordb/collections/list") == 0)
        return list_all(p, c, r);
    json_t *j = r->w.len ? json_loadb((const char *)r->w.data, r->w.len, 0, NULL) : NULL;
    const char *coll = json_string_value(json_object_get(j, "collectionName"));
    const char *db = json_string_value(json_object_get(j, "dbName"));
    const char *level = json_string_value(json_object_get(j, "consistencyLevel"));
    char collc[256], dbc[256];
    (void)snprintf(collc, sizeof collc, "%s", coll ? coll : "");
    (void)snprintf(dbc, sizeof dbc, "%s", db && *db ? db : "default");
    bool eventual =
        level && (strcasecmp(level, "Eventually") == 0 || strcasecmp(level, "Bounded") == 0);
    json_decref(j);
    enum MHD_Result ret = MHD_NO;
    for (int attempt = 0; attempt < 2; attempt++) {
        char id[64] = "", addr[128] = "";
        bool have = eventual && is_read(url) && query_node(p, id, sizeof id, addr, sizeof addr);
        if (!have)
            have = writer_for(p, dbc, collc, id, sizeof id, addr, sizeof addr);
        if (!have)
            return reply_error(c, "cluster proxy: no writer is registered in etcd");
        answer a;
        bool ok = forward(c, method, url, r, addr, &a);
        bool moved =
            ok && a.body &&
            (strstr(a.body, "held by writer") || strstr(a.body, "held by an earlier process") ||
             strstr(a.body, "does not hold"));
        if (ok && (!moved || attempt == 1)) {
            return reply(c, (unsigned)(a.status ? a.status : 502), a.ctype, id,
                         a.body ? a.body : sx__calloc(1, 1), a.len);
        }
        sx__free(a.body);
        load_nodes(p, true); /* dead or moved: look again */
        holders_clear(p);
        if (attempt == 1) {
            char msg[512];
            (void)snprintf(msg, sizeof msg, "cluster proxy: node %s (%s) did not answer", id, addr);
            ret = reply_error(c, msg);
        }
    }
    return ret;
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload,
                                  size_t *upload_size,
                                  void **con_cls)
{
    (void)version;
    sx_cluster_proxy *p = cls;
    req *r = *con_cls;
    if (!r) {
        r = sx__calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        sx__wbuf_init(&r->w);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_big && r->w.len + *upload_size <= MAX_BODY) {
            sx__wbuf_put(&r->w, upload, *upload_size);
            r->too_big = !sx__wbuf_ok(&r->w);
        } else {
            r->too_big = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big)
        return reply_text(c, 413, "{\"code\":1100,\"message\":\"request body too large\"}");
    return route(p, c, url, method, r);
}

static void
on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    req *r = *con_cls;
    if (r) {
        sx__wbuf_fini(&r->w);
        sx__free(r);
        *con_cls = NULL;
    }
}

sx_status sx_cluster_proxy_start(const sx_cluster_proxy_options *opts, sx_cluster_proxy **out)
{
    sx__err_clear();
    if (!opts || !out || !opts->etcd || !*opts->etcd)
        return sx__err(SX_EINVAL, "a cluster proxy needs --etcd");
    *out = NULL;
    sx_cluster_proxy *p = sx__calloc(1, sizeof *p);
    if (!p)
        return sx__err(SX_ENOMEM, "proxy");
    pthread_mutex_init(&p->mu, NULL);
    sx_status st = sx__etcd_new(opts->etcd, 0, &p->kv);
    sx__etcd_kv kv;
    if (st == SX_OK) {
        /* the proxy only reads the cluster: its UUID must exist (a writer makes it; one
         * starting beside the proxy gets 10 s) */
        st = sx__etcd_get(p->kv, "/sextant/uuid", &kv, NULL);
        for (int i = 0; i < 100 && st == SX_ENOTFOUND; i++) {
            struct timespec ts = { 0, 100000000L };
            nanosleep(&ts, NULL);
            st = sx__etcd_get(p->kv, "/sextant/uuid", &kv, NULL);
        }
        if (st == SX_ENOTFOUND)
            st = sx__err(SX_EINVAL, "etcd (%s) has no Sextant cluster yet: start a writer first",
                         opts->etcd);
        if (st == SX_OK) {
            (void)snprintf(p->prefix, sizeof p->prefix, "/sextant/%s/", kv.value);
            sx__free(kv.key);
            sx__free(kv.value);
        }
    }
    if (st == SX_OK) {
        unsigned threads = opts->threads ? opts->threads : 16;
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(opts->port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only: no credentials here */
        p->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, opts->port, NULL,
                                NULL, on_request, p, MHD_OPTION_NOTIFY_COMPLETED, on_done, p,
                                MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT,
                                60u, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
        if (!p->d)
            st = sx__err(SX_EIO, "cluster proxy: cannot listen on port %u", (unsigned)opts->port);
    }
    if (st == SX_OK) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->d, MHD_DAEMON_INFO_BIND_PORT);
        p->port = di ? di->port : opts->port;
        *out = p;
        return SX_OK;
    }
    char msg[512];
    (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
    sx_cluster_proxy_stop(p);
    return sx__err(st, "%s", msg);
}

uint16_t sx_cluster_proxy_port(const sx_cluster_proxy *p)
{
    return p->port;
}

void sx_cluster_proxy_stop(sx_cluster_proxy *p)
{
    if (!p)
        return;
    if (p->d)
        MHD_stop_daemon(p->d);
    sx__etcd_free(p->kv);
    pthread_mutex_destroy(&p->mu);
    sx__free(p);
}
