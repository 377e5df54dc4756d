/*
 * proxy.c: the cluster's front door, Milvus REST and gRPC (`sextant serve --proxy`;
 * docs/internals/CLUSTER.md, "Proxy"). Milvus REST v2 requests are forwarded, whole, to the node
 * that must answer them:
 *
 *   writes and DDL on a collection      the writer holding it (etcd epoch/<db>/<c> -> node/<id>);
 *                                        a collection nobody holds goes to its last writer (the
 *                                        pointer's "#<id>") while that one is registered, else
 *                                        (a create, a lost writer's) to a writer chosen by a hash
 *                                        of db.collection over the live writers (node/<id> keys
 *                                        with role writer, sorted), which adopts it (fence.c)
 *   reads (search, query, get, describe, stats, ...)
 *                                        consistencyLevel "Eventually": the query nodes in turn
 *                                        (they serve what writers have synced); "Bounded": the
 *                                        same, but an answer whose X-Sextant-Fresh-Ms is absent
 *                                        or more than BOUND_MS old goes to the writer instead;
 *                                        anything else ("Strong", "Session", absent): the
 *                                        holding writer, which has every acknowledged row
 *   collections/list                    the collections etcd has a committed manifest for
 *                                        (the writers are not asked: a restarted writer keeps
 *                                        read-only copies of other writers' collections)
 *   /readyz, /livez                     answered here (ready: at least one writer known)
 *   anything else                       the first writer
 *
 * Shards (shard.h). A create with params.shardsNum S > 1 records {"shards":S,...} in etcd
 * (db/<db>/coll/<c>) and creates S engine collections c__s0..c__s<S-1>; shard k is placed on
 * the writer after the one c's name hashes to, k further on, so the shards spread over the
 * writers. Requests on c then fan out: inserts and upserts split by the key's hash (autoID keys
 * assigned here from blocks reserved in etcd: the shards have autoID off), searches and
 * queries to every shard with limit + offset and the answers merged (global top-k, count(*)
 * summed, rows by key), deletes and DDL to every shard, describe to shard 0 (renamed, shardsNum
 * S). Eventually reads send each shard to a query node in turn, so one search uses
 * several query nodes. The shards of one request are sent in parallel (curl multi). Rename,
 * aliases, import jobs, hybrid search and grouping are refused on a sharded collection. A write
 * whose rows span shards is not atomic: a shard that fails is named in the error, the other
 * shards' rows may be applied (upsert is the retry that converges).
 *
 * A forward that cannot connect, or that a writer answers with "held by writer" / "not hold"
 * (the collection moved), drops the cached route and is tried once more. Answers carry the header
 * X-Sextant-Node: the node that served them (for a fanned-out request, one per shard, in shard
 * order, comma-separated).
 *
 * One port, REST and gRPC, as a node serves them: server/grpc.c owns the listening socket,
 * serves HTTP/2 gRPC calls and hands HTTP/1 connections to this file's MHD daemon (which runs
 * without a listening socket). A gRPC call runs server/grpc_milvus.c on the proxy's service
 * (PROXY_SVC, "gRPC front end" below): each RPC becomes its REST route, run through route().
 *
 * The proxy listens on 127.0.0.1 only and checks no credentials: it forwards the client's
 * Authorization header, and each node checks it.
 *
 * Threads: MHD's thread pool; each request forwards with its own curl handles. The route cache
 * (nodes, holders, sharding records) is guarded by p->mu (leaf: no call inside); nodes are
 * reloaded from etcd at most every 500 ms, a collection's holder and its sharding record are
 * reused for 500 ms, and all after a failed or misrouted forward. Each worker thread keeps its
 * curl handles (and their connections). ida_mu guards the reserved autoID block and is held
 * across the etcd txn that reserves the next one (no other lock under it).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/fence.h"
#include "cluster/shard.h"
#include "server/rbac.h"
#include "server/server.h"
#include "sextant_server.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define MAX_NODES   128
#define MAX_BODY    (64u << 20)
#define MAX_HOLDERS 256
#define HOLDER_NS   500000000LL /* a holder read from etcd is reused this long */

typedef struct pholder {
    char key[300]; /* "db/collection" */
    char id[64];
    int64_t at_ns;
} pholder;

/* A collection's sharding as etcd's db/<db>/coll/<c> record says (cached HOLDER_NS). */
typedef struct pcoll {
    char key[300];   /* "db/collection" */
    unsigned shards; /* 0: no record (one shard under its own name, or no collection) */
    bool ready;      /* false: a create has not finished (pk unknown) */
    bool auto_id;    /* the proxy assigns the keys (the shards have autoID off) */
    bool pk_str;     /* VarChar primary key */
    char pk[256];
    int64_t at_ns;
} pcoll;

#define MAX_METAS 16

typedef struct pmeta {
    char key[600]; /* "db/collection" */
    int64_t at_ns;
    sx__coll_meta m;
} pmeta;

typedef struct pnode {
    char id[64];
    char addr[128]; /* host:port */
    bool query;
} pnode;

struct sx_cluster_proxy {
    struct MHD_Daemon *d; /* REST: takes the HTTP/1 connections the gRPC transport hands it */
    sx__grpc *grpc;       /* the port's owner: accepts, serves gRPC (server/grpc.c) */
    int listen_fd;
    atomic_bool stopping;
    uint16_t port;
    sx__etcd *kv;
    char prefix[96];
    pthread_mutex_t mu;
    pnode nodes[MAX_NODES];
    size_t n_nodes;
    int64_t nodes_at_ns;
    unsigned rr; /* round-robin over query nodes */

    /* replica numbers (replicas/<db>/<c>, set by a load with replicaNumber), read with the
     * nodes; a collection without one is served by every query node */
    struct prep {
        char key[300]; /* "db/collection" */
        unsigned r;
    } * reps; /* under mu; owned */

    size_t n_reps;

    /* query nodes that refused a connection: skipped until down_until (2 s), while another
     * query node is up (a dead node's registration lasts until its lease expires) */
    struct {
        char id[64];
        int64_t until_ns;
    } down[MAX_NODES];

    size_t n_down;
    pholder holders[MAX_HOLDERS];
    size_t n_holders;
    pcoll colls[MAX_HOLDERS];
    size_t n_colls;
    /* collections' metadata for the gRPC front end (svc_coll_get), reused HOLDER_NS and dropped
     * by any write or DDL on the collection through this proxy; guarded by mu */
    pmeta *metas; /* MAX_METAS, allocated at start */
    size_t n_metas;
    /* autoID keys: [ida_next, ida_end) reserved from etcd's idalloc key; ida_mu is held across
     * the etcd txn that reserves the next block (no other lock is taken under it) */
    pthread_mutex_t ida_mu;
    int64_t ida_next, ida_end;
};

/* Each MHD worker thread keeps its curl handles (and their connections to the nodes) for the
 * thread's life: a new connection per forwarded request cost more than the search itself. One
 * easy handle forwards a request to one node; a multi handle with one easy handle per shard
 * fans a request out to the shards in parallel. */
typedef struct tlcurl {
    CURL *one;
    CURLM *multi;
    CURL *each[SX__SHARD_MAX];
} tlcurl;

static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_free_tl(void *v)
{
    tlcurl *t = v;
    for (size_t i = 0; i < SX__SHARD_MAX; i++)
        if (t->each[i])
            curl_easy_cleanup(t->each[i]);
    if (t->multi)
        curl_multi_cleanup(t->multi);
    if (t->one)
        curl_easy_cleanup(t->one);
    sx__free(t);
}

static void curl_key_make(void)
{
    (void)pthread_key_create(&curl_key, curl_free_tl);
}

static tlcurl *thread_handles(void)
{
    (void)pthread_once(&curl_once, curl_key_make);
    tlcurl *t = pthread_getspecific(curl_key);
    if (!t) {
        t = sx__calloc(1, sizeof *t);
        if (t && pthread_setspecific(curl_key, t) != 0) {
            sx__free(t);
            t = NULL;
        }
    }
    return t;
}

static CURL *thread_curl(void)
{
    tlcurl *t = thread_handles();
    if (!t)
        return NULL;
    if (!t->one)
        t->one = curl_easy_init();
    if (t->one)
        curl_easy_reset(t->one);
    return t->one;
}

typedef struct req {
    sx__wbuf w;     /* the request body, NUL-terminated once complete */
    json_t *parsed; /* or the body as JSON, borrowed (a gRPC call's, never encoded unless a
                       node is sent it whole) */
    bool too_big;
} req;

/* The request's body as JSON (new reference; NULL when absent or not JSON). */
static json_t *req_json(const req *r)
{
    if (r->parsed)
        return json_incref(r->parsed);
    return r->w.len ? json_loadb((const char *)r->w.data, r->w.len, 0, NULL) : NULL;
}

/* The request's body as bytes: *owned (free() it) is set when they had to be encoded. */
static const char *req_bytes(const req *r, size_t *len, char **owned)
{
    *owned = NULL;
    if (!r->parsed || r->w.len) {
        *len = r->w.len;
        return (const char *)r->w.data;
    }
    *owned = json_dumps(r->parsed, JSON_COMPACT);
    *len = *owned ? strlen(*owned) : 0;
    return *owned;
}

/* One request as the routing code sees it, whichever front end it came through (REST: an MHD
 * connection, on_request; gRPC: a MilvusService call translated into its REST route, svc_call):
 * the headers the proxy reads or passes on (NULL: absent), and the answer, set once by reply(). */
typedef struct pconn {
    const char *authz, *ctype, *timeout, *db_name, *allow_i64;
    bool answered;
    unsigned status;
    char out_ctype[128];
    char *node; /* X-Sextant-Node (owned) */
    char *body; /* owned */
    size_t len;
} pconn;

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
    (void)snprintf(pre, sizeof pre, "%sreplicas/", p->prefix);
    kvs = NULL;
    n = 0;
    bool reps_ok = sx__etcd_range(p->kv, pre, &kvs, &n, NULL) == SX_OK;
    sx__err_clear();
    pthread_mutex_lock(&p->mu);
    memcpy(p->nodes, tab, m * sizeof tab[0]);
    p->n_nodes = m;
    p->nodes_at_ns = mono_ns();
    struct prep *reps = reps_ok ? sx__calloc(n + 1, sizeof *reps) : NULL;
    if (reps) {
        for (size_t k = 0; k < n; k++) {
            (void)snprintf(reps[k].key, sizeof reps[k].key, "%s", kvs[k].key + strlen(pre));
            reps[k].r = (unsigned)strtoul(kvs[k].value, NULL, 10);
        }
        sx__free(p->reps);
        p->reps = reps;
        p->n_reps = n;
    }
    pthread_mutex_unlock(&p->mu);
    sx__etcd_kvs_free(kvs, n);
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
        } else {
            /* nobody holds it: the writer that last committed or took it (the pointer's
             * "#<node id>"; fence.c) while it is running (restarted on its directory, its WAL
             * may have rows the store lacks), else the hash's choice, which adopts it */
            (void)snprintf(key, sizeof key, "%smanifest/%s/%s", p->prefix, db, coll);
            if (sx__etcd_get(p->kv, key, &kv, NULL) == SX_OK) {
                const char *h = strchr(kv.value, '#');
                (void)snprintf(id, id_cap, "%.*s", h ? (int)strcspn(h + 1, ".") : 0,
                               h ? h + 1 : "");
                sx__free(kv.key);
                sx__free(kv.value);
                if (id[0] && node_addr(p, id, addr, cap))
                    return true;
            }
        }
    }
    /* shard k of c goes to the writer after the one c's name hashes to, so a collection's
     * shards spread over the writers */
    char name[512], base[256];
    unsigned shard = 0;
    if (coll && sx__shard_parse(coll, base, sizeof base, &shard))
        (void)snprintf(name, sizeof name, "%s.%s", db, base);
    else
        (void)snprintf(name, sizeof name, "%s.%s", db, coll ? coll : "");
    bool ok = false;
    pthread_mutex_lock(&p->mu);
    size_t nw = 0;
    for (size_t i = 0; i < p->n_nodes; i++)
        nw += !p->nodes[i].query;
    if (nw) {
        size_t pick = (sx__shard_str_hash(name) + shard) % nw, k = 0;
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

/* Marks query node id down for 2 s (it refused a connection). */
static void node_down(sx_cluster_proxy *p, const char *id)
{
    int64_t until = mono_ns() + 2000000000LL;
    pthread_mutex_lock(&p->mu);
    size_t slot = p->n_down;
    for (size_t i = 0; i < p->n_down; i++)
        if (strcmp(p->down[i].id, id) == 0 || p->down[i].until_ns < mono_ns())
            slot = i;
    if (slot == p->n_down && p->n_down < MAX_NODES)
        p->n_down++;
    if (slot < MAX_NODES) {
        (void)snprintf(p->down[slot].id, sizeof p->down[slot].id, "%s", id);
        p->down[slot].until_ns = until;
    }
    pthread_mutex_unlock(&p->mu);
}

/* under p->mu */
static bool is_down(const sx_cluster_proxy *p, const char *id, int64_t now)
{
    for (size_t i = 0; i < p->n_down; i++)
        if (strcmp(p->down[i].id, id) == 0 && p->down[i].until_ns > now)
            return true;
    return false;
}

/* under p->mu: the replica number of (db, unit) (a shard counts as its collection), 0 none */
static unsigned replicas_of(const sx_cluster_proxy *p, const char *db, const char *unit)
{
    char base[300], key[600];
    unsigned k;
    if (!sx__shard_parse(unit, base, sizeof base, &k))
        (void)snprintf(base, sizeof base, "%s", unit);
    (void)snprintf(key, sizeof key, "%s/%s", db, base);
    for (size_t i = 0; i < p->n_reps; i++)
        if (strcmp(p->reps[i].key, key) == 0)
            return p->reps[i].r;
    return 0;
}

/* The query node that answers an Eventually read of unit (db, name: a collection or a shard):
 * with a replica number, one of the unit's holders (sx__replica_holders over every registered
 * query node, as the query nodes compute it), in turn, skipping those marked down while another
 * holder is up (a node loss is served by another replica at once); without one, the next query
 * node in turn. */
static bool query_node(sx_cluster_proxy *p,
                       const char *db,
                       const char *unit,
                       char *id,
                       size_t id_cap,
                       char *addr,
                       size_t cap)
{
    load_nodes(p, false);
    bool ok = false;
    int64_t now = mono_ns();
    pthread_mutex_lock(&p->mu);
    unsigned r = db && unit && *unit ? replicas_of(p, db, unit) : 0;
    if (r) {
        const char *ids[MAX_NODES];
        size_t map[MAX_NODES], hold[MAX_NODES], nq = 0;
        for (size_t i = 0; i < p->n_nodes; i++)
            if (p->nodes[i].query) {
                map[nq] = i;
                ids[nq++] = p->nodes[i].id;
            }
        size_t nh = sx__replica_holders(db, unit, ids, nq, r, hold);
        size_t nup = 0;
        for (size_t h = 0; h < nh; h++)
            nup += !is_down(p, ids[hold[h]], now);
        size_t cnt = nup ? nup : nh;
        if (cnt) {
            size_t pick = p->rr++ % cnt, k = 0;
            for (size_t h = 0; h < nh && !ok; h++) {
                if (nup && is_down(p, ids[hold[h]], now))
                    continue;
                if (k++ == pick) {
                    const pnode *pn = &p->nodes[map[hold[h]]];
                    (void)snprintf(id, id_cap, "%s", pn->id);
                    (void)snprintf(addr, cap, "%s", pn->addr);
                    ok = true;
                }
            }
        }
        pthread_mutex_unlock(&p->mu);
        return ok;
    }
    size_t nq = 0, nup = 0;
    for (size_t i = 0; i < p->n_nodes; i++) {
        nq += p->nodes[i].query;
        nup += p->nodes[i].query && !is_down(p, p->nodes[i].id, now);
    }
    bool skip_down = nup > 0;
    if (skip_down)
        nq = nup;
    if (nq) {
        size_t pick = p->rr++ % nq, k = 0;
        for (size_t i = 0; i < p->n_nodes && !ok; i++) {
            if (!p->nodes[i].query || (skip_down && is_down(p, p->nodes[i].id, now)))
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
    int64_t fresh_ms; /* a query node's X-Sextant-Fresh-Ms (0: none) */
    CURLcode cc;      /* the transfer's outcome */
    sx__wbuf w;       /* filled by curl */
    char *body;       /* then the body, NUL-terminated (owned), and its length */
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
    } else if (n > 19 && strncasecmp(ptr, "X-Sextant-Fresh-Ms:", 19) == 0) {
        a->fresh_ms = strtoll(ptr + 19, NULL, 10);
    }
    return n;
}

/* Sets h up to send method url body to addr, the answer into a. Returns the header list, which
 * the caller frees after the transfer. body stays the caller's and must outlive it. */
static struct curl_slist *prep(CURL *h,
                               pconn *c,
                               const char *method,
                               const char *url,
                               const char *body,
                               size_t len,
                               const char *addr,
                               answer *a)
{
    memset(a, 0, sizeof *a);
    sx__wbuf_init(&a->w);
    char full[1024];
    (void)snprintf(full, sizeof full, "http://%s%s", addr, url);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    const char *auth = c->authz;
    const char *ct = c->ctype;
    const char *rt = c->timeout;
    const char *dbn = c->db_name;
    const char *i64 = c->allow_i64;
    char line[4096];
    if (dbn) {
        (void)snprintf(line, sizeof line, "DB-Name: %s", dbn);
        hl = curl_slist_append(hl, line);
    }
    if (i64) {
        (void)snprintf(line, sizeof line, "Accept-Type-Allow-Int64: %s", i64);
        hl = curl_slist_append(hl, line);
    }
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
    if (len || strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, len ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 3600L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    return hl;
}

/* After h's transfer ended with cc: the status and the NUL-terminated body into a. */
static bool finish(CURL *h, CURLcode cc, answer *a)
{
    a->cc = cc;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    sx__wbuf_put(&a->w, "", 1);
    if (sx__wbuf_ok(&a->w)) {
        a->body = (char *)a->w.data; /* ownership moves to the answer */
        a->len = a->w.len - 1;
    } else {
        sx__wbuf_fini(&a->w);
    }
    return cc == CURLE_OK;
}

/* Forwards method url body to addr; false: could not connect (or no answer at all). */
static bool forward_body(pconn *c,
                         const char *method,
                         const char *url,
                         const char *body,
                         size_t len,
                         const char *addr,
                         answer *a)
{
    CURL *h = thread_curl();
    if (!h) {
        memset(a, 0, sizeof *a);
        return false;
    }
    struct curl_slist *hl = prep(h, c, method, url, body, len, addr, a);
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    return finish(h, cc, a);
}

static bool
forward(pconn *c, const char *method, const char *url, const req *r, const char *addr, answer *a)
{
    size_t len = 0;
    char *owned = NULL;
    const char *body = req_bytes(r, &len, &owned);
    bool ok = forward_body(c, method, url, body, len, addr, a);
    free(owned);
    return ok;
}

/* One shard's part of a fanned-out request. */
typedef struct target {
    unsigned shard;
    char id[64], addr[128]; /* the node that answers it */
    char *body;             /* owned (json_dumps) */
    size_t len;
    answer a;  /* its answer (a.body owned) */
    bool ok;   /* the node answered */
    bool q;    /* the node is a query node (an Eventually or Bounded read) */
    json_t *j; /* a.body parsed, once checked */
} target;

/* Sends each target's body to its node, all at once (curl's multi interface), and waits for
 * every answer. */
static void forward_many(pconn *c, const char *method, const char *url, target *t, size_t n)
{
    tlcurl *tl = n > 1 ? thread_handles() : NULL;
    if (tl && !tl->multi)
        tl->multi = curl_multi_init();
    if (!tl || !tl->multi) {
        for (size_t i = 0; i < n; i++)
            t[i].ok = forward_body(c, method, url, t[i].body, t[i].len, t[i].addr, &t[i].a);
        return;
    }
    struct curl_slist *hl[SX__SHARD_MAX] = { NULL };
    CURLcode cc[SX__SHARD_MAX];
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        cc[i] = CURLE_FAILED_INIT;
        if (!tl->each[i])
            tl->each[i] = curl_easy_init();
        else
            curl_easy_reset(tl->each[i]);
        if (!tl->each[i]) {
            memset(&t[i].a, 0, sizeof t[i].a);
            sx__wbuf_init(&t[i].a.w);
            continue;
        }
        hl[i] = prep(tl->each[i], c, method, url, t[i].body, t[i].len, t[i].addr, &t[i].a);
        if (curl_multi_add_handle(tl->multi, tl->each[i]) == CURLM_OK)
            added |= (size_t)1 << i;
    }
    int running = 1;
    while (running) {
        if (curl_multi_perform(tl->multi, &running) != CURLM_OK)
            break;
        if (running)
            (void)curl_multi_poll(tl->multi, NULL, 0, 1000, NULL);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(tl->multi, &left)))
        for (size_t i = 0; msg->msg == CURLMSG_DONE && i < n; i++)
            if (tl->each[i] == msg->easy_handle)
                cc[i] = msg->data.result;
    for (size_t i = 0; i < n; i++) {
        if (added & ((size_t)1 << i))
            (void)curl_multi_remove_handle(tl->multi, tl->each[i]);
        t[i].ok = tl->each[i] ? finish(tl->each[i], cc[i], &t[i].a) : false;
        curl_slist_free_all(hl[i]);
    }
}

static enum MHD_Result
reply(pconn *c, unsigned status, const char *ctype, const char *node, char *body, size_t len)
{
    if (c->answered) { /* a second answer to one request: a bug; the first stands */
        sx__free(body);
        return MHD_YES;
    }
    c->answered = true;
    c->status = status;
    (void)snprintf(c->out_ctype, sizeof c->out_ctype, "%s",
                   ctype && *ctype ? ctype : "application/json");
    c->node = node ? sx__strdup(node) : NULL;
    c->body = body;
    c->len = len;
    return body ? MHD_YES : MHD_NO;
}

static enum MHD_Result reply_text(pconn *c, unsigned status, const char *text)
{
    size_t len = strlen(text);
    char *b = sx__malloc(len + 1);
    if (!b)
        return MHD_NO;
    memcpy(b, text, len + 1);
    return reply(c, status, "application/json", NULL, b, len);
}

/* {"code":65535,"message":"..."} with HTTP 200, as the nodes answer errors */
static enum MHD_Result reply_error(pconn *c, const char *msg)
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

/* collections/list: the collections of the request's database that have a committed manifest
 * in etcd (manifest/<db>/<name>; a drop deletes it), a sharded one once under its own name
 * when its record exists (shards of a half-dropped collection are not listed). etcd, not the
 * writers, is asked: a restarted writer keeps read-only copies of collections other writers
 * hold, including dropped ones. Sorted by name. */
static enum MHD_Result list_all(sx_cluster_proxy *p, pconn *c, const req *r)
{
    json_t *j = req_json(r);
    const char *dbn = json_string_value(json_object_get(j, "dbName"));
    if (!dbn || !*dbn)
        dbn = c->db_name;
    char db[256], pre[400], cpre[400];
    (void)snprintf(db, sizeof db, "%s", dbn && *dbn ? dbn : "default");
    json_decref(j);
    (void)snprintf(pre, sizeof pre, "%smanifest/%s/", p->prefix, db);
    (void)snprintf(cpre, sizeof cpre, "%sdb/%s/coll/", p->prefix, db);
    sx__etcd_kv *kvs = NULL, *recs = NULL;
    size_t n = 0, nr = 0;
    if (sx__etcd_range(p->kv, pre, &kvs, &n, NULL) != SX_OK ||
        sx__etcd_range(p->kv, cpre, &recs, &nr, NULL) != SX_OK) {
        char msg[600];
        (void)snprintf(msg, sizeof msg, "cluster proxy: listing collections in etcd: %s",
                       sx_errmsg());
        sx__etcd_kvs_free(kvs, n);
        return reply_error(c, msg);
    }
    json_t *names = json_array();
    for (size_t i = 0; names && i < n; i++) {
        const char *nm = kvs[i].key + strlen(pre);
        char base[256];
        if (sx__shard_parse(nm, base, sizeof base, NULL)) {
            bool rec = false;
            for (size_t k = 0; k < nr && !rec; k++)
                rec = strcmp(recs[k].key + strlen(cpre), base) == 0;
            if (!rec)
                continue; /* a shard of a collection being dropped */
            nm = base;
        }
        bool dup = false;
        for (size_t m = 0; m < json_array_size(names) && !dup; m++)
            dup = strcmp(json_string_value(json_array_get(names, m)), nm) == 0;
        if (!dup)
            json_array_append_new(names, json_string(nm));
    }
    sx__etcd_kvs_free(kvs, n);
    sx__etcd_kvs_free(recs, nr);
    json_t *out = json_pack("{s:i,s:o}", "code", 0, "data", names ? names : json_array());
    char *t = out ? json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(out);
    enum MHD_Result ret = reply_text(c, 200, t ? t : "{\"code\":65535}");
    free(t);
    return ret;
}

/* ---------------------------------------------------------------- shards */

/* A node's answer saying the collection is held elsewhere (it moved). */
static bool moved_answer(const answer *a)
{
    if (!a->body ||
        !(strstr(a->body, "held by writer") || strstr(a->body, "held by an earlier process") ||
          strstr(a->body, "does not hold")))
        return false;
    /* only a failure's message: a success may carry the words in its data (a key, a field) */
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    const char *m = json_string_value(json_object_get(j, "message"));
    bool moved = json_integer_value(json_object_get(j, "code")) != 0 && m &&
                 (strstr(m, "held by writer") || strstr(m, "held by an earlier process") ||
                  strstr(m, "does not hold"));
    json_decref(j);
    return moved;
}

/* A query node's "collection not found" (code 100) or "database not found" (800): it may lag
 * behind the writers (a collection created or a shard placed since its last refresh), and it
 * opens only the databases its directory had at its start, so an Eventually read it cannot
 * answer is sent to the writer holding the collection, which can (a collection that does not
 * exist gets the writer's own error). */
static bool lagging_answer(const answer *a)
{
    /* most answers are successes, whose numbers often contain "100": parse only a body that
     * can hold one of the two codes */
    if (!a->body || !(strstr(a->body, "\"code\":100") || strstr(a->body, "\"code\":800")))
        return false;
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    json_int_t code = json_integer_value(json_object_get(j, "code"));
    bool lag = code == 100 || code == 800;
    json_decref(j);
    return lag;
}

/* Reads a query node may answer: Eventually (any state), Bounded (a state at most BOUND_MS
 * old: the node's X-Sextant-Fresh-Ms, which it has only when every writer syncs on a timer). */
enum { OFF_WRITER = 0, OFF_EVENTUAL = 1, OFF_BOUNDED = 2 };

#define BOUND_MS 5000 /* Milvus's default graceful time for Bounded */

/* A query node's answer too old for a Bounded read (or of unknown age): the writer answers. */
static bool stale_answer(const answer *a)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return a->fresh_ms <= 0 || now - a->fresh_ms > BOUND_MS;
}

/* Whether a forward that failed may be sent again: a read always; a write only when it never
 * reached the node (a timeout or a reset after sending may have applied it). */
static bool may_resend(const answer *a, bool read)
{
    return read || a->cc == CURLE_COULDNT_CONNECT || a->cc == CURLE_COULDNT_RESOLVE_HOST;
}

static enum MHD_Result reply_json(pconn *c, json_t *j, const char *node)
{
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!t)
        return reply_error(c, "cluster proxy: out of memory");
    size_t len = strlen(t);
    char *b = sx__malloc(len + 1);
    if (b)
        memcpy(b, t, len + 1);
    free(t);
    if (!b)
        return MHD_NO;
    return reply(c, 200, "application/json", node, b, len);
}

/* The sharding record of db.coll (etcd db/<db>/coll/<coll>), cached HOLDER_NS; force reads
 * etcd. When etcd does not answer, a cached record is used however old. */
static sx_status
coll_info(sx_cluster_proxy *p, const char *db, const char *coll, bool force, pcoll *out)
{
    memset(out, 0, sizeof *out);
    char hk[300];
    (void)snprintf(hk, sizeof hk, "%s/%s", db, coll);
    int64_t now = mono_ns();
    bool have = false, fresh = false;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_colls && !have; i++)
        if (strcmp(p->colls[i].key, hk) == 0) {
            *out = p->colls[i];
            have = true;
            fresh = !force && now - p->colls[i].at_ns < HOLDER_NS;
        }
    pthread_mutex_unlock(&p->mu);
    if (fresh)
        return SX_OK;
    char key[700];
    (void)snprintf(key, sizeof key, "%sdb/%s/coll/%s", p->prefix, db, coll);
    sx__etcd_kv kv;
    sx_status st = sx__etcd_get(p->kv, key, &kv, NULL);
    if (st != SX_OK && st != SX_ENOTFOUND)
        return have ? SX_OK : st;
    pcoll pc;
    memset(&pc, 0, sizeof pc);
    (void)snprintf(pc.key, sizeof pc.key, "%s", hk);
    if (st == SX_OK) {
        json_t *j = json_loads(kv.value, 0, NULL);
        json_int_t n = json_integer_value(json_object_get(j, "shards"));
        pc.shards = n > 1 && n <= SX__SHARD_MAX ? (unsigned)n : 0;
        const char *pk = json_string_value(json_object_get(j, "pk"));
        const char *pt = json_string_value(json_object_get(j, "pkType"));
        pc.ready = pk != NULL;
        (void)snprintf(pc.pk, sizeof pc.pk, "%s", pk ? pk : "");
        pc.pk_str = pt && strcasecmp(pt, "VarChar") == 0;
        pc.auto_id = json_is_true(json_object_get(j, "autoId"));
        json_decref(j);
        sx__free(kv.key);
        sx__free(kv.value);
    }
    pc.at_ns = now;
    pthread_mutex_lock(&p->mu);
    size_t slot = p->n_colls, oldest = 0;
    for (size_t i = 0; i < p->n_colls; i++) {
        if (strcmp(p->colls[i].key, hk) == 0)
            slot = i;
        if (p->colls[i].at_ns < p->colls[oldest].at_ns)
            oldest = i;
    }
    if (slot == p->n_colls && p->n_colls == MAX_HOLDERS)
        slot = oldest;
    else if (slot == p->n_colls)
        p->n_colls++;
    p->colls[slot] = pc;
    pthread_mutex_unlock(&p->mu);
    *out = pc;
    return SX_OK;
}

static void coll_forget(sx_cluster_proxy *p, const char *db, const char *coll)
{
    char hk[300];
    (void)snprintf(hk, sizeof hk, "%s/%s", db, coll);
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_colls; i++)
        if (strcmp(p->colls[i].key, hk) == 0)
            p->colls[i].at_ns = 0;
    pthread_mutex_unlock(&p->mu);
}

/* The cached metadata of db/coll into *m when younger than HOLDER_NS. */
static bool meta_get(sx_cluster_proxy *p, const char *db, const char *coll, sx__coll_meta *m)
{
    char k[600];
    (void)snprintf(k, sizeof k, "%s/%s", db, coll);
    int64_t now = mono_ns();
    bool hit = false;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_metas && !hit; i++)
        if (strcmp(p->metas[i].key, k) == 0 && now - p->metas[i].at_ns < HOLDER_NS) {
            *m = p->metas[i].m;
            hit = true;
        }
    pthread_mutex_unlock(&p->mu);
    return hit;
}

static void meta_put(sx_cluster_proxy *p, const char *db, const char *coll, const sx__coll_meta *m)
{
    char k[600];
    (void)snprintf(k, sizeof k, "%s/%s", db, coll);
    int64_t now = mono_ns();
    pthread_mutex_lock(&p->mu);
    size_t at = p->n_metas, oldest = 0;
    for (size_t i = 0; i < p->n_metas; i++) {
        if (strcmp(p->metas[i].key, k) == 0)
            at = i;
        if (p->metas[i].at_ns < p->metas[oldest].at_ns)
            oldest = i;
    }
    if (at == p->n_metas && p->n_metas == MAX_METAS)
        at = oldest;
    else if (at == p->n_metas)
        p->n_metas++;
    (void)snprintf(p->metas[at].key, sizeof p->metas[at].key, "%s", k);
    p->metas[at].at_ns = now;
    p->metas[at].m = *m;
    pthread_mutex_unlock(&p->mu);
}

/* Forgets db/coll's metadata (a write or DDL on it through this proxy may change it). */
static void meta_forget(sx_cluster_proxy *p, const char *db, const char *coll)
{
    char k[600];
    (void)snprintf(k, sizeof k, "%s/%s", db, coll);
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_metas; i++)
        if (strcmp(p->metas[i].key, k) == 0)
            p->metas[i].at_ns = 0;
    pthread_mutex_unlock(&p->mu);
}

/* n new primary keys for an autoID collection, from blocks reserved in etcd (idalloc: the next
 * free key, moved on by a txn that compares its revision, so proxies never hand out a key
 * twice). Keys start at 1 and are unique over the cluster. */
static sx_status alloc_ids(sx_cluster_proxy *p, size_t n, int64_t *first)
{
    pthread_mutex_lock(&p->ida_mu);
    sx_status st = SX_OK;
    if (p->ida_end - p->ida_next < (int64_t)n) {
        char key[200];
        (void)snprintf(key, sizeof key, "%sidalloc", p->prefix);
        int64_t want = n > 65536 ? (int64_t)n : 65536;
        st = SX_EBUSY;
        for (int tries = 0; tries < 20 && st == SX_EBUSY; tries++) {
            sx__etcd_kv kv;
            int64_t cur = 1, rev = 0;
            sx_status g = sx__etcd_get(p->kv, key, &kv, NULL);
            if (g == SX_OK) {
                cur = strtoll(kv.value, NULL, 10);
                rev = kv.mod_revision;
                sx__free(kv.key);
                sx__free(kv.value);
            } else if (g != SX_ENOTFOUND) {
                st = g;
                break;
            }
            char next[32];
            (void)snprintf(next, sizeof next, "%" PRId64, cur + want);
            sx__etcd_cmp cmp = { .key = key,
                                 .target = rev ? SX__ETCD_MOD : SX__ETCD_CREATE,
                                 .rev = rev };
            sx__etcd_op put = { .kind = SX__ETCD_PUT, .key = key, .value = next };
            sx__etcd_txn_result tr;
            st = sx__etcd_txn(p->kv, &cmp, 1, &put, 1, NULL, 0, &tr);
            if (st == SX_OK) {
                if (tr.succeeded) {
                    p->ida_next = cur;
                    p->ida_end = cur + want;
                } else {
                    st = SX_EBUSY; /* another proxy took a block: read again */
                }
                sx__etcd_txn_result_fini(&tr);
            }
        }
        if (st == SX_EBUSY)
            st = sx__err(SX_EBUSY, "cluster proxy: could not reserve primary keys in etcd");
    }
    if (st == SX_OK) {
        *first = p->ida_next;
        p->ida_next += (int64_t)n;
    }
    pthread_mutex_unlock(&p->ida_mu);
    return st;
}

/* Resolves the node that answers shard t->shard of base: a query node for an eventual read,
 * else the writer holding (or placed to hold) the shard. */
static bool
shard_route(sx_cluster_proxy *p, const char *db, const char *base, int eventual, target *t)
{
    char nm[300];
    if (!sx__shard_name(base, t->shard, nm, sizeof nm))
        return false;
    t->q = eventual && query_node(p, db, nm, t->id, sizeof t->id, t->addr, sizeof t->addr);
    if (t->q)
        return true;
    return writer_for(p, db, nm, t->id, sizeof t->id, t->addr, sizeof t->addr);
}

static void targets_free(target *t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        free(t[i].body);
        sx__free(t[i].a.body);
        json_decref(t[i].j);
    }
}

/* Sends every target's body to its shard's node (in parallel); a target whose node did not
 * answer, or said it does not hold the shard, is routed again and sent once more. Then parses
 * each answer into t[i].j. false: some shard has no node to go to. */
static bool fan(sx_cluster_proxy *p,
                pconn *c,
                const char *url,
                const char *db,
                const char *base,
                int eventual,
                target *t,
                unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!shard_route(p, db, base, eventual, &t[i]))
            return false;
    forward_many(c, "POST", url, t, n);
    target again[SX__SHARD_MAX];
    unsigned idx[SX__SHARD_MAX], m = 0;
    bool read = is_read(url), to_writer[SX__SHARD_MAX] = { false };
    for (unsigned i = 0; i < n; i++) {
        bool lag = t[i].q && read && t[i].ok &&
                   (lagging_answer(&t[i].a) || (eventual == OFF_BOUNDED && stale_answer(&t[i].a)));
        if ((!t[i].ok && may_resend(&t[i].a, read)) || moved_answer(&t[i].a) || lag) {
            to_writer[m] = lag;
            idx[m++] = i;
            if (!t[i].ok && eventual)
                node_down(p, t[i].id); /* the retry goes to another query node */
        }
    }
    if (m) {
        load_nodes(p, true);
        holders_clear(p);
        for (unsigned k = 0; k < m; k++) {
            again[k] = t[idx[k]];
            t[idx[k]].a.body = NULL;
            sx__free(again[k].a.body);
            memset(&again[k].a, 0, sizeof again[k].a);
            if (!shard_route(p, db, base, to_writer[k] ? OFF_WRITER : eventual, &again[k]))
                return false;
        }
        forward_many(c, "POST", url, again, m);
        /* a retry that went to another query node and lagged too: the shard's writer */
        for (unsigned k = 0; k < m; k++) {
            if (!(again[k].q && again[k].ok &&
                  (lagging_answer(&again[k].a) ||
                   (eventual == OFF_BOUNDED && stale_answer(&again[k].a)))))
                continue;
            sx__free(again[k].a.body);
            memset(&again[k].a, 0, sizeof again[k].a);
            if (!shard_route(p, db, base, OFF_WRITER, &again[k]))
                return false;
            forward_many(c, "POST", url, &again[k], 1);
        }
        for (unsigned k = 0; k < m; k++)
            t[idx[k]] = again[k];
    }
    for (unsigned i = 0; i < n; i++)
        t[i].j = t[i].ok && t[i].a.body ? json_loadb(t[i].a.body, t[i].a.len, 0, NULL) : NULL;
    return true;
}

/* "id0,id1,...": the nodes that answered, shard by shard (the X-Sextant-Node header). */
static void nodes_of(const target *t, unsigned n, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n && at < cap; i++) {
        int w = snprintf(out + at, cap - at, "%s%s", i ? "," : "", t[i].id);
        at += w > 0 ? (size_t)w : 0;
    }
}

/* The first target whose answer is not a success, else -1. */
static int first_failed(const target *t, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!t[i].ok || !json_is_object(t[i].j) ||
            json_integer_value(json_object_get(t[i].j, "code")) != 0)
            return (int)i;
    return -1;
}

/* The failure of target t (an answer with a non-zero code, or none) as the answer, its message
 * naming the shard; wrote: other shards of the request may have applied their part. */
static enum MHD_Result reply_shard_error(pconn *c, const char *base, const target *t, bool wrote)
{
    char msg[2048];
    json_int_t code = 65535;
    if (!t->ok) {
        (void)snprintf(msg, sizeof msg,
                       "cluster proxy: shard %u of %s: node %s (%s) did not answer (%s)", t->shard,
                       base, t->id, t->addr, curl_easy_strerror(t->a.cc));
    } else if (!json_is_object(t->j)) {
        (void)snprintf(msg, sizeof msg, "shard %u of %s (node %s): HTTP %ld: %.300s", t->shard,
                       base, t->id, t->a.status, t->a.body ? t->a.body : "");
    } else {
        const char *m = json_string_value(json_object_get(t->j, "message"));
        code = json_integer_value(json_object_get(t->j, "code"));
        (void)snprintf(msg, sizeof msg, "shard %u of %s (node %s): %s", t->shard, base, t->id,
                       m ? m : "failed");
    }
    if (wrote) {
        size_t l = strlen(msg);
        (void)snprintf(msg + l, sizeof msg - l,
                       "; the request's rows for other shards may have been applied");
    }
    json_t *j = json_pack("{s:I,s:s}", "code", code, "message", msg);
    enum MHD_Result r = reply_json(c, j, t->id[0] ? t->id : NULL);
    json_decref(j);
    return r;
}

/* Sets target i's body: j with collectionName the shard's name (j is changed). */
static bool shard_body(json_t *j, const char *base, target *t)
{
    char nm[300];
    if (!sx__shard_name(base, t->shard, nm, sizeof nm))
        return false;
    json_object_set_new(j, "collectionName", json_string(nm));
    t->body = json_dumps(j, JSON_COMPACT);
    t->len = t->body ? strlen(t->body) : 0;
    return t->body != NULL;
}

/* Sets the bodies of t[0..n) (shards 0..n-1): j with collectionName each shard's name. j is
 * encoded once, without its collectionName (a search's vectors cost more to encode than the
 * rest of the work here), and each body is that text with the shard's name put in front. */
static bool shard_bodies(json_t *j, const char *base, target *t, unsigned n)
{
    json_object_del(j, "collectionName");
    char *rest = json_dumps(j, JSON_COMPACT);
    if (!rest || rest[0] != '{') {
        free(rest);
        return false;
    }
    size_t rl = strlen(rest);
    bool ok = true;
    for (unsigned k = 0; k < n && ok; k++) {
        char nm[300];
        t[k].shard = k;
        ok = sx__shard_name(base, k, nm, sizeof nm);
        size_t cap = rl + strlen(nm) + 32;
        t[k].body = ok ? malloc(cap) : NULL; /* free()d with json_dumps's texts */
        ok = t[k].body != NULL;
        if (ok) {
            int w = snprintf(t[k].body, cap, "{\"collectionName\":\"%s\"%s%s", nm,
                             rl > 2 ? "," : "", rest + 1);
            t[k].len = w > 0 ? (size_t)w : 0;
        }
    }
    free(rest);
    return ok;
}

/* Whether distances of base's vector field anns (NULL: its only one) are better larger, from
 * shard 0's description (its index's metricType); -1 when it cannot be told. */
static int larger_by_describe(
    sx_cluster_proxy *p, pconn *c, const char *db, const char *base, const char *anns)
{
    target t;
    memset(&t, 0, sizeof t);
    json_t *q = json_pack("{s:s}", "dbName", db);
    int out = -1;
    if (q && shard_body(q, base, &t) &&
        fan(p, c, "/v2/vectordb/collections/describe", db, base, false, &t, 1) &&
        first_failed(&t, 1) < 0) {
        size_t i;
        json_t *ix;
        json_array_foreach(json_object_get(json_object_get(t.j, "data"), "indexes"), i, ix) {
            const char *f = json_string_value(json_object_get(ix, "fieldName"));
            const char *m = json_string_value(json_object_get(ix, "metricType"));
            if (m && (!anns || (f && strcmp(f, anns) == 0))) {
                out = strcasecmp(m, "IP") == 0 || strcasecmp(m, "COSINE") == 0 ||
                      strcasecmp(m, "BM25") == 0;
                break;
            }
        }
    }
    json_decref(q);
    targets_free(&t, 1);
    return out;
}

/* The request sent, as it is, to shard 0 alone, and its answer returned: for a request a node
 * refuses (its own error text: a window out of range, an empty or malformed insert). */
static enum MHD_Result shard0_as_is(sx_cluster_proxy *p,
                                    pconn *c,
                                    const char *url,
                                    json_t *j,
                                    const char *db,
                                    const char *base,
                                    int eventual)
{
    target t;
    memset(&t, 0, sizeof t);
    enum MHD_Result r;
    if (!shard_bodies(j, base, &t, 1) || !fan(p, c, url, db, base, eventual, &t, 1)) {
        r = reply_error(c, "cluster proxy: no node for shard 0 (or out of memory)");
    } else {
        r = reply(c, (unsigned)(t.a.status ? t.a.status : 502), t.a.ctype, t.id,
                  t.a.body ? t.a.body : sx__calloc(1, 1), t.a.len);
        t.a.body = NULL; /* the reply owns it */
    }
    targets_free(&t, 1);
    return r;
}

/* insert / upsert on a sharded collection: rows split by the hash of their key (autoID keys
 * assigned here first), each shard's rows sent to its writer, the counts and keys answered in
 * the request's order. */
static enum MHD_Result shard_write(sx_cluster_proxy *p,
                                   pconn *c,
                                   const char *url,
                                   json_t *j,
                                   const char *db,
                                   const char *base,
                                   const pcoll *pc,
                                   bool upsert)
{
    json_t *rows = json_object_get(j, "data");
    if (json_is_object(rows)) {
        json_t *arr = json_array();
        json_array_append(arr, rows);
        json_object_set_new(j, "data", arr);
        rows = arr;
    }
    if (!json_is_array(rows) || json_array_size(rows) == 0) /* the node's own answer */
        return shard0_as_is(p, c, url, j, db, base, false);
    size_t nrows = json_array_size(rows), missing = 0, i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        bool has = json_object_get(row, pc->pk) != NULL;
        if (pc->auto_id && has && !upsert) {
            char msg[512];
            (void)snprintf(msg, sizeof msg,
                           "fail to deal the insert data, error: row %zu: the primary key %s is "
                           "auto-generated (autoID): do not give it",
                           i, pc->pk);
            json_t *e = json_pack("{s:i,s:s}", "code", 1804, "message", msg);
            enum MHD_Result r = reply_json(c, e, NULL);
            json_decref(e);
            return r;
        }
        missing += !has;
    }
    if (pc->auto_id && missing) {
        int64_t id;
        if (alloc_ids(p, missing, &id) != SX_OK)
            return reply_error(c, sx_errmsg());
        json_array_foreach(rows, i, row) {
            if (!json_object_get(row, pc->pk))
                json_object_set_new(row, pc->pk, json_integer(id++));
        }
    }
    json_t *ids = json_array();
    json_array_foreach(rows, i, row) {
        json_array_append(ids, json_object_get(row, pc->pk));
    }
    json_t *part[SX__SHARD_MAX] = { NULL };
    size_t bad = 0;
    if (sx__shard_split_rows(rows, pc->pk, pc->shards, part, &bad) != SX_OK) {
        json_decref(ids);
        char msg[512];
        (void)snprintf(msg, sizeof msg,
                       "fail to deal the insert data, error: row %zu: the primary key %s is "
                       "missing or not an %s",
                       bad, pc->pk, pc->pk_str ? "string" : "integer");
        json_t *e = json_pack("{s:i,s:s}", "code", 1804, "message", msg);
        enum MHD_Result r = reply_json(c, e, NULL);
        json_decref(e);
        return r;
    }
    target t[SX__SHARD_MAX];
    memset(t, 0, sizeof t);
    unsigned n = 0;
    bool ok = true;
    for (unsigned k = 0; k < pc->shards; k++) {
        if (json_array_size(part[k]) && ok) {
            t[n].shard = k;
            json_object_set(j, "data", part[k]);
            ok = shard_body(j, base, &t[n]);
            n++;
        }
        json_decref(part[k]);
    }
    enum MHD_Result r;
    if (!ok || !fan(p, c, url, db, base, false, t, n)) {
        r = reply_error(c, "cluster proxy: no writer for a shard (or out of memory)");
    } else {
        int f = first_failed(t, n);
        if (f >= 0) {
            r = reply_shard_error(c, base, &t[f], n > 1);
        } else {
            json_t *out = json_pack("{s:i,s:{s:I,s:O},s:i}", "code", 0, "data",
                                    upsert ? "upsertCount" : "insertCount", (json_int_t)nrows,
                                    upsert ? "upsertIds" : "insertIds", ids, "cost", 0);
            char nodes[SX__SHARD_MAX * 65] = "";
            nodes_of(t, n, nodes, sizeof nodes);
            r = reply_json(c, out, nodes);
            json_decref(out);
        }
    }
    json_decref(ids);
    targets_free(t, n);
    return r;
}

/* Deletes every key of j equal to key in any case (the nodes look keys up that way). */
static void strip_keys(json_t *j, const char *key)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(j, tmp, k, v)
    {
        if (strcasecmp(k, key) == 0)
            json_object_del(j, k);
    }
}

/* A request on a collection with shards (pc): fanned out to every shard (search, query, get,
 * delete, statistics, DDL) or answered by shard 0 (describe and the other reads of metadata
 * every shard shares), the answers merged (shard.h). */
static enum MHD_Result sharded(sx_cluster_proxy *p,
                               pconn *c,
                               const char *url,
                               json_t *j,
                               const char *db,
                               const char *base,
                               const pcoll *pc,
                               int eventual)
{
    const char *ep = strncmp(url, "/v2/vectordb/", 13) == 0 ? url + 13 : url;
    char msg[600];
    if (!pc->ready && strcmp(ep, "collections/drop") != 0) {
        (void)snprintf(msg, sizeof msg,
                       "collection %s is being created (a create did not finish: run it again, "
                       "or drop the collection)",
                       base);
        return reply_error(c, msg);
    }
    if (strcmp(ep, "collections/rename") == 0 || strncmp(ep, "aliases/", 8) == 0 ||
        strncmp(ep, "jobs/", 5) == 0 || strcmp(ep, "entities/hybrid_search") == 0 ||
        strcmp(ep, "entities/advanced_search") == 0 ||
        (strcmp(ep, "entities/search") == 0 && json_object_get(j, "groupingField"))) {
        (void)snprintf(msg, sizeof msg,
                       "%s is not supported on a collection with shards (%s has %u) by the "
                       "cluster proxy yet",
                       ep, base, pc->shards);
        return reply_error(c, msg);
    }
    if (strcmp(ep, "entities/insert") == 0 || strcmp(ep, "entities/upsert") == 0)
        return shard_write(p, c, url, j, db, base, pc, strcmp(ep, "entities/upsert") == 0);
    bool search = strcmp(ep, "entities/search") == 0;
    bool query = strcmp(ep, "entities/query") == 0 || strcmp(ep, "entities/get") == 0;
    bool drop = strcmp(ep, "collections/drop") == 0;
    bool sum_rows =
        strcmp(ep, "collections/get_stats") == 0 || strcmp(ep, "partitions/get_stats") == 0;
    bool first_only = strcmp(ep, "collections/describe") == 0 ||
                      strcmp(ep, "collections/has") == 0 || strcmp(ep, "indexes/list") == 0 ||
                      strcmp(ep, "partitions/list") == 0 || strcmp(ep, "partitions/has") == 0;
    /* limit and offset read as the nodes read them (server/json.c: any case of the key, numbers
     * as strings; absent or a query's 0: 100); each shard is asked for the whole window and the
     * merge cuts it. Values a node would refuse go to shard 0 alone for its own error. */
    size_t limit = 100, offset = 0;
    bool has_limit = false;
    bool windowed = (search || strcmp(ep, "entities/query") == 0);
    if (windowed) {
        int64_t l = 0, o = 0;
        bool bad = sx__jint(j, "limit", &l) != 0 || sx__jint(j, "offset", &o) != 0 || l < 0 ||
                   o < 0 || l > 16384 || o > 16384 || l + o > 16384 ||
                   (search && l == 0 && sx__jget(j, "limit"));
        if (bad)
            return shard0_as_is(p, c, url, j, db, base, eventual);
        limit = l > 0 ? (size_t)l : 100;
        offset = (size_t)o;
        strip_keys(j, "limit");
        strip_keys(j, "offset");
        json_object_set_new(j, "limit", json_integer((json_int_t)limit + (json_int_t)offset));
        has_limit = true; /* the shards were asked for a window: the merge cuts it */
    }
    unsigned n = first_only ? 1 : pc->shards;
    target t[SX__SHARD_MAX];
    memset(t, 0, sizeof t);
    bool ok = shard_bodies(j, base, t, n);
    enum MHD_Result r;
    if (!ok || !fan(p, c, url, db, base, is_read(url) ? eventual : OFF_WRITER, t, n)) {
        targets_free(t, n);
        return reply_error(c, "cluster proxy: no node for a shard (or out of memory)");
    }
    int f = first_failed(t, n);
    if (drop) { /* a shard already gone (an earlier drop stopped half-way) is dropped */
        for (unsigned k = 0; k < n && f >= 0; k++)
            if (t[k].ok && json_integer_value(json_object_get(t[k].j, "code")) == 100)
                json_object_set_new(t[k].j, "code", json_integer(0));
        f = first_failed(t, n);
    }
    if (f >= 0) {
        r = reply_shard_error(c, base, &t[f], n > 1 && !search && !query && !sum_rows);
        targets_free(t, n);
        return r;
    }
    json_t *js[SX__SHARD_MAX] = { NULL }, *out = NULL;
    for (unsigned k = 0; k < n; k++)
        js[k] = t[k].j;
    if (search) {
        const json_t *tk = json_object_get(js[0], "topks");
        size_t nq = tk ? json_array_size(tk) : 1;
        int larger = sx__shard_search_order(js, n);
        if (larger < 0)
            larger = larger_by_describe(p, c, db, base,
                                        json_string_value(json_object_get(j, "annsField")));
        out = sx__shard_merge_search(js, n, nq, limit, offset, larger == 1);
    } else if (query) {
        out = sx__shard_merge_query(js, n, pc->pk, has_limit, limit, offset);
    } else if (sum_rows) {
        out = sx__shard_sum(js, n, "rowCount");
    } else if (strcmp(ep, "entities/delete") == 0) {
        out = sx__shard_sum(js, n, "deleteCount");
    } else if (strcmp(ep, "indexes/describe") == 0) {
        out = sx__shard_merge_index(js, n);
    } else if (strcmp(ep, "collections/get_load_state") == 0) {
        out = sx__shard_merge_load(js, n);
    } else if (drop) {
        char key[700];
        (void)snprintf(key, sizeof key, "%sdb/%s/coll/%s", p->prefix, db, base);
        sx_status st = sx__etcd_del(p->kv, key, false, NULL);
        coll_forget(p, db, base);
        out = st == SX_OK ? json_pack("{s:i,s:{}}", "code", 0, "data")
                          : json_pack("{s:i,s:s}", "code", 65535, "message", sx_errmsg());
    } else {
        out = json_deep_copy(js[0]);
        json_t *d = json_object_get(out, "data");
        if (strcmp(ep, "collections/describe") == 0 && json_is_object(d)) {
            json_object_set_new(d, "collectionName", json_string(base));
            json_object_set_new(d, "shardsNum", json_integer(pc->shards));
            json_object_set_new(d, "autoId", json_boolean(pc->auto_id));
            size_t i;
            json_t *fld;
            json_array_foreach(json_object_get(d, "fields"), i, fld) {
                if (json_is_true(json_object_get(fld, "primaryKey")))
                    json_object_set_new(fld, "autoId", json_boolean(pc->auto_id));
            }
        }
    }
    char nodes[SX__SHARD_MAX * 65] = "";
    nodes_of(t, n, nodes, sizeof nodes);
    r = out ? reply_json(c, out, nodes)
            : reply_error(c, "cluster proxy: the shards' answers could not be merged");
    json_decref(out);
    targets_free(t, n);
    return r;
}

/* collections/create. Returns 1 when the request is an ordinary one-shard create for route's
 * path; else answers it: shardsNum > 1 makes the etcd record (create-if-absent), the shard
 * collections on their writers (autoID off: the proxy assigns keys), then completes the record
 * with the primary key read back from shard 0. Running the same create again finishes one that
 * stopped half-way (each shard's create is idempotent for the same schema). */
static int create(sx_cluster_proxy *p,
                  pconn *c,
                  json_t *j,
                  const char *db,
                  const char *coll,
                  enum MHD_Result *ret)
{
    char msg[600];
    if (sx__shard_parse(coll, NULL, 0, NULL)) {
        (void)snprintf(msg, sizeof msg,
                       "collection name %s is reserved: names ending in __s<number> are the "
                       "cluster's shards",
                       coll);
        json_t *e = json_pack("{s:i,s:s}", "code", 1100, "message", msg);
        *ret = reply_json(c, e, NULL);
        json_decref(e);
        return 0;
    }
    json_int_t want =
        json_integer_value(json_object_get(json_object_get(j, "params"), "shardsNum"));
    pcoll pc;
    if (coll_info(p, db, coll, true, &pc) != SX_OK) {
        *ret = reply_error(c, sx_errmsg());
        return 0;
    }
    if (want <= 1 || want > SX__SHARD_MAX) {
        if (!pc.shards)
            return 1;
        (void)snprintf(msg, sizeof msg, "collection %s already exists with shardsNum %u", coll,
                       pc.shards);
        *ret = reply_error(c, msg);
        return 0;
    }
    unsigned n = (unsigned)want;
    load_nodes(p, true); /* place the shards over every writer registered now, not the
                            500 ms-old list (a writer that just started would be left out) */
    if (pc.shards && pc.shards != n) {
        (void)snprintf(msg, sizeof msg, "collection %s already exists with shardsNum %u", coll,
                       pc.shards);
        *ret = reply_error(c, msg);
        return 0;
    }
    char key[700];
    if (!pc.shards) {
        /* an unsharded collection of that name: held (epoch), committed (manifest) */
        bool exists = false;
        const char *kinds[] = { "epoch", "manifest" };
        for (size_t i = 0; i < 2 && !exists; i++) {
            (void)snprintf(key, sizeof key, "%s%s/%s/%s", p->prefix, kinds[i], db, coll);
            sx__etcd_kv kv;
            if (sx__etcd_get(p->kv, key, &kv, NULL) == SX_OK) {
                exists = true;
                sx__free(kv.key);
                sx__free(kv.value);
            }
        }
        if (exists) {
            (void)snprintf(msg, sizeof msg, "collection %s already exists with shardsNum 1", coll);
            *ret = reply_error(c, msg);
            return 0;
        }
        (void)snprintf(key, sizeof key, "%sdb/%s/coll/%s", p->prefix, db, coll);
        char val[64];
        (void)snprintf(val, sizeof val, "{\"shards\":%u}", n);
        sx__etcd_cmp cmp = { .key = key, .target = SX__ETCD_CREATE, .rev = 0 };
        sx__etcd_op put = { .kind = SX__ETCD_PUT, .key = key, .value = val };
        sx__etcd_txn_result tr;
        sx_status st = sx__etcd_txn(p->kv, &cmp, 1, &put, 1, NULL, 0, &tr);
        if (st != SX_OK) {
            *ret = reply_error(c, sx_errmsg());
            return 0;
        }
        bool won = tr.succeeded;
        sx__etcd_txn_result_fini(&tr);
        coll_forget(p, db, coll);
        if (!won) { /* another create of the name got there first: the same shards, or refused */
            if (coll_info(p, db, coll, true, &pc) != SX_OK) {
                *ret = reply_error(c, sx_errmsg());
                return 0;
            }
            if (pc.shards != n) {
                (void)snprintf(msg, sizeof msg,
                               "collection %s was created at the same time with shardsNum %u", coll,
                               pc.shards);
                *ret = reply_error(c, msg);
                return 0;
            }
        }
    }
    /* the shards have autoID off: the proxy gives the keys (unique over the shards) */
    bool auto_id = json_is_true(json_object_get(j, "autoID"));
    if (json_object_get(j, "autoID"))
        json_object_set_new(j, "autoID", json_false());
    json_t *schema = json_object_get(j, "schema");
    if (json_is_true(json_object_get(schema, "autoID"))) {
        auto_id = true;
        json_object_set_new(schema, "autoID", json_false());
    }
    size_t i;
    json_t *fld;
    json_array_foreach(json_object_get(schema, "fields"), i, fld) {
        if (json_is_true(json_object_get(fld, "autoID"))) {
            auto_id = true;
            json_object_set_new(fld, "autoID", json_false());
        }
    }
    if (pc.ready && pc.auto_id != auto_id) { /* the shards' schemas cannot tell (autoID off) */
        (void)snprintf(msg, sizeof msg, "collection %s already exists with autoID %s", coll,
                       pc.auto_id ? "true" : "false");
        *ret = reply_error(c, msg);
        return 0;
    }
    json_object_del(json_object_get(j, "params"), "shardsNum");
    target t[SX__SHARD_MAX];
    memset(t, 0, sizeof t);
    bool ok = shard_bodies(j, coll, t, n);
    if (!ok || !fan(p, c, "/v2/vectordb/collections/create", db, coll, false, t, n)) {
        targets_free(t, n);
        *ret = reply_error(c, "cluster proxy: no writer for a shard (or out of memory)");
        return 0;
    }
    int f = first_failed(t, n);
    if (f >= 0) {
        *ret = reply_shard_error(c, coll, &t[f], false);
        targets_free(t, n);
        return 0;
    }
    targets_free(t, n);
    /* the primary key, as shard 0 describes it */
    memset(t, 0, sizeof t);
    json_t *q = json_pack("{s:s}", "dbName", db);
    const char *pk = NULL, *pt = NULL;
    if (q && shard_body(q, coll, &t[0]) &&
        fan(p, c, "/v2/vectordb/collections/describe", db, coll, false, t, 1) &&
        first_failed(t, 1) < 0) {
        json_array_foreach(json_object_get(json_object_get(t[0].j, "data"), "fields"), i, fld) {
            if (json_is_true(json_object_get(fld, "primaryKey"))) {
                pk = json_string_value(json_object_get(fld, "name"));
                pt = json_string_value(json_object_get(fld, "type"));
            }
        }
    }
    json_decref(q);
    sx_status st = SX_EIO;
    if (pk) {
        json_t *rec = json_pack("{s:i,s:b,s:s,s:s}", "shards", (int)n, "autoId", auto_id, "pk", pk,
                                "pkType", pt ? pt : "Int64");
        char *val = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(rec);
        (void)snprintf(key, sizeof key, "%sdb/%s/coll/%s", p->prefix, db, coll);
        /* complete the record only if it is still there (a drop meanwhile deleted it) */
        sx__etcd_cmp cmp = { .key = key, .target = SX__ETCD_VERSION, .rev = 0 };
        sx__etcd_op put = { .kind = SX__ETCD_PUT, .key = key, .value = val };
        sx__etcd_txn_result tr;
        st = SX_ENOMEM;
        if (val) {
            /* version != 0 is not a compare etcd has: read the version, compare it equal */
            sx__etcd_kv cur;
            st = sx__etcd_get(p->kv, key, &cur, NULL);
            if (st == SX_OK) {
                cmp.rev = cur.version;
                sx__free(cur.key);
                sx__free(cur.value);
                st = sx__etcd_txn(p->kv, &cmp, 1, &put, 1, NULL, 0, &tr);
                if (st == SX_OK) {
                    if (!tr.succeeded)
                        st = sx__err(SX_EBUSY, "the record changed while the shards were created");
                    sx__etcd_txn_result_fini(&tr);
                }
            } else if (st == SX_ENOTFOUND) {
                st = sx__err(SX_ENOTFOUND, "the collection was dropped while it was created");
            }
        }
        free(val);
    }
    targets_free(t, 1);
    coll_forget(p, db, coll);
    if (st != SX_OK) {
        (void)snprintf(msg, sizeof msg,
                       "cluster proxy: the shards of %s were created but its record was not "
                       "completed (%s): run the create again",
                       coll, pk ? sx_errmsg() : "shard 0 did not describe its primary key");
        *ret = reply_error(c, msg);
        return 0;
    }
    json_t *okj = json_pack("{s:i,s:{}}", "code", 0, "data");
    *ret = reply_json(c, okj, NULL);
    json_decref(okj);
    return 0;
}

/* Database DDL (databases/create, drop, alter, drop_properties): every live writer, so a
 * collection of the database can be placed on any of them. create succeeds when each writer
 * created the database or had it (at least one created it); drop is refused while etcd names a
 * collection of the database (as a node refuses), then succeeds when each writer dropped it or
 * did not have it; alter and drop_properties need every writer. A writer that does not answer
 * fails the request, naming it (retrying converges). Reads (list, describe) go to one writer. */
static enum MHD_Result
db_ddl(sx_cluster_proxy *p, pconn *c, const char *url, const req *r, const char *db)
{
    bool create = strcmp(url, "/v2/vectordb/databases/create") == 0;
    bool drop = strcmp(url, "/v2/vectordb/databases/drop") == 0;
    if (drop && strcmp(db, "default") != 0) {
        char pre[600];
        sx__etcd_kv *kvs = NULL;
        size_t n = 0, nr = 0;
        (void)snprintf(pre, sizeof pre, "%smanifest/%s/", p->prefix, db);
        sx_status st = sx__etcd_range(p->kv, pre, &kvs, &n, NULL);
        sx__etcd_kvs_free(kvs, n);
        kvs = NULL;
        (void)snprintf(pre, sizeof pre, "%sdb/%s/coll/", p->prefix, db);
        if (st == SX_OK)
            st = sx__etcd_range(p->kv, pre, &kvs, &nr, NULL);
        sx__etcd_kvs_free(kvs, nr);
        if (st != SX_OK)
            return reply_error(c, sx_errmsg());
        if (n + nr > 0) {
            char msg[600];
            (void)snprintf(msg, sizeof msg,
                           "can not drop database %s: it still has collections (drop them first)",
                           db);
            return reply_error(c, msg);
        }
    }
    load_nodes(p, true);
    pnode ws[MAX_NODES];
    size_t nw = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_nodes; i++)
        if (!p->nodes[i].query)
            ws[nw++] = p->nodes[i];
    pthread_mutex_unlock(&p->mu);
    if (!nw)
        return reply_error(c, "cluster proxy: no writer is registered in etcd");
    target t[SX__SHARD_MAX];
    int made = 0;
    bool failed = false;
    char msg[512] = "";
    for (size_t b = 0; b < nw; b += SX__SHARD_MAX) {
        unsigned k = (unsigned)(nw - b < SX__SHARD_MAX ? nw - b : SX__SHARD_MAX);
        memset(t, 0, sizeof t);
        for (unsigned i = 0; i < k; i++) {
            (void)snprintf(t[i].id, sizeof t[i].id, "%s", ws[b + i].id);
            (void)snprintf(t[i].addr, sizeof t[i].addr, "%s", ws[b + i].addr);
            size_t len = 0;
            char *owned = NULL;
            const char *bytes = req_bytes(r, &len, &owned);
            t[i].body = owned ? owned : len ? strndup(bytes, len) : strdup("{}");
            t[i].len = t[i].body ? strlen(t[i].body) : 0;
        }
        forward_many(c, "POST", url, t, k);
        for (unsigned i = 0; i < k; i++) {
            json_t *j =
                t[i].ok && t[i].a.body ? json_loadb(t[i].a.body, t[i].a.len, 0, NULL) : NULL;
            json_t *cv = json_object_get(j, "code");
            const char *m = json_string_value(json_object_get(j, "message"));
            int code = json_is_integer(cv) ? (int)json_integer_value(cv) : -1;
            bool had =
                (create && code != 0 && m && strstr(m, "already exist")) || (drop && code == 800);
            if (code == 0) {
                made++;
            } else if (!had && !failed) {
                failed = true;
                (void)snprintf(msg, sizeof msg, "database %s on writer %s: %s", db, t[i].id,
                               m         ? m
                               : t[i].ok ? "unreadable answer"
                                         : curl_easy_strerror(t[i].a.cc));
            } else if (had && !failed && !msg[0] && m) {
                (void)snprintf(msg, sizeof msg, "%s", m); /* the answer if none made it */
            }
            json_decref(j);
        }
        targets_free(t, k);
    }
    if (failed)
        return reply_error(c, msg);
    if (made == 0) { /* every writer had it (create) or lacked it (drop) */
        json_t *e = json_pack("{s:i,s:s}", "code", create ? 65535 : 800, "message", msg);
        enum MHD_Result ret = reply_json(c, e, NULL);
        json_decref(e);
        return ret;
    }
    return reply_text(c, 200, "{\"code\":0,\"data\":{}}");
}

/* collections/load with "replicaNumber" R >= 1 records replicas/<db>/<c> = R (query nodes then
 * hold the collection, or each of its shards, on R of them); release and drop remove it (every
 * query node holds it again, as without a replica number). Best effort: an etcd error leaves the
 * placement as it was. */
static void
replicas_note(sx_cluster_proxy *p, const char *url, const json_t *j, const char *db, const char *c)
{
    bool load = strcmp(url, "/v2/vectordb/collections/load") == 0;
    bool unload = strcmp(url, "/v2/vectordb/collections/release") == 0 ||
                  strcmp(url, "/v2/vectordb/collections/drop") == 0;
    json_t *rn = json_object_get(j, "replicaNumber");
    if (!(load && json_is_integer(rn) && json_integer_value(rn) >= 1) && !unload)
        return;
    char key[700], val[32];
    (void)snprintf(key, sizeof key, "%sreplicas/%s/%s", p->prefix, db, c);
    if (load) {
        json_int_t r = json_integer_value(rn);
        (void)snprintf(val, sizeof val, "%lld", (long long)(r > MAX_NODES ? MAX_NODES : r));
        sx__ignore(sx__etcd_put(p->kv, key, val, 0, NULL));
    } else {
        sx__ignore(sx__etcd_del(p->kv, key, false, NULL));
    }
    sx__err_clear();
    load_nodes(p, true); /* route with it from now on */
}

static enum MHD_Result
route(sx_cluster_proxy *p, pconn *c, const char *url, const char *method, const req *r)
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
    if (strcmp(url, "/v2/vectordb/databases/create") == 0 ||
        strcmp(url, "/v2/vectordb/databases/drop") == 0 ||
        strcmp(url, "/v2/vectordb/databases/alter") == 0 ||
        strcmp(url, "/v2/vectordb/databases/drop_properties") == 0) {
        json_t *jb = req_json(r);
        const char *dn = json_string_value(json_object_get(jb, "dbName"));
        char dbn[256];
        (void)snprintf(dbn, sizeof dbn, "%s", dn && *dn ? dn : "default");
        json_decref(jb);
        return db_ddl(p, c, url, r, dbn);
    }
    json_t *j = req_json(r);
    const char *coll = json_string_value(json_object_get(j, "collectionName"));
    const char *db = json_string_value(json_object_get(j, "dbName"));
    const char *level = json_string_value(json_object_get(j, "consistencyLevel"));
    char collc[256], dbc[256];
    if (!db || !*db) /* the nodes take the DB-Name header when the body names none */
        db = c->db_name;
    (void)snprintf(collc, sizeof collc, "%s", coll ? coll : "");
    (void)snprintf(dbc, sizeof dbc, "%s", db && *db ? db : "default");
    int eventual = !level                                 ? OFF_WRITER
                   : strcasecmp(level, "Eventually") == 0 ? OFF_EVENTUAL
                   : strcasecmp(level, "Bounded") == 0    ? OFF_BOUNDED
                                                          : OFF_WRITER;
    enum MHD_Result ret = MHD_NO;
    if (*collc && !is_read(url))
        meta_forget(p, dbc, collc);
    if (*collc && json_is_object(j))
        replicas_note(p, url, j, dbc, collc);
    if (json_is_object(j) && *collc) {
        if (strcmp(url, "/v2/vectordb/collections/create") == 0) {
            if (create(p, c, j, dbc, collc, &ret) == 0) {
                json_decref(j);
                return ret;
            }
        } else {
            pcoll pc;
            if (coll_info(p, dbc, collc, false, &pc) != SX_OK) {
                json_decref(j);
                return reply_error(c, sx_errmsg());
            }
            if (pc.shards) {
                ret = sharded(p, c, url, j, dbc, collc, &pc, eventual);
                json_decref(j);
                return ret;
            }
        }
    }
    json_decref(j);
    bool to_writer = false; /* a query node lagged: the retry goes to the writer */
    int last = 1;           /* one retry; one more when a query node's retry lagged */
    for (int attempt = 0; attempt <= last; attempt++) {
        char id[64] = "", addr[128] = "";
        bool from_query = eventual && is_read(url) && !to_writer &&
                          query_node(p, dbc, collc, id, sizeof id, addr, sizeof addr);
        bool have = from_query;
        if (!have)
            have = writer_for(p, dbc, collc, id, sizeof id, addr, sizeof addr);
        if (!have)
            return reply_error(c, "cluster proxy: no writer is registered in etcd");
        answer a;
        bool ok = forward(c, method, url, r, addr, &a);
        bool moved = ok && moved_answer(&a);
        if (ok && from_query &&
            (lagging_answer(&a) || (eventual == OFF_BOUNDED && stale_answer(&a)))) {
            sx__free(a.body);
            to_writer = true;
            if (attempt == last)
                last++; /* the writer answers */
            continue;
        }
        if (ok && (!moved || attempt == last)) {
            return reply(c, (unsigned)(a.status ? a.status : 502), a.ctype, id,
                         a.body ? a.body : sx__calloc(1, 1), a.len);
        }
        sx__free(a.body);
        if (!ok && !may_resend(&a, is_read(url))) {
            char msg[512];
            (void)snprintf(msg, sizeof msg,
                           "cluster proxy: node %s (%s) did not answer (%s): the request may or "
                           "may not have been applied",
                           id, addr, curl_easy_strerror(a.cc));
            return reply_error(c, msg);
        }
        if (!ok && eventual && is_read(url))
            node_down(p, id); /* the retry goes to another query node */
        load_nodes(p, true);  /* dead or moved: look again */
        holders_clear(p);
        if (attempt == last) {
            char msg[512];
            (void)snprintf(msg, sizeof msg, "cluster proxy: node %s (%s) did not answer", id, addr);
            ret = reply_error(c, msg);
        }
    }
    return ret;
}

/* ---------------------------------------------------------------- REST front end */

static void free_body(void *b)
{
    sx__free(b);
}

static const char *mhd_hdr(struct MHD_Connection *mc, const char *name)
{
    return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *mc,
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
    pconn c;
    memset(&c, 0, sizeof c);
    c.authz = mhd_hdr(mc, "Authorization");
    c.ctype = mhd_hdr(mc, "Content-Type");
    c.timeout = mhd_hdr(mc, "Request-Timeout");
    c.db_name = mhd_hdr(mc, "DB-Name");
    c.allow_i64 = mhd_hdr(mc, "Accept-Type-Allow-Int64");
    if (r->too_big)
        (void)reply_text(&c, 413, "{\"code\":1100,\"message\":\"request body too large\"}");
    else
        (void)route(p, &c, url, method, r);
    if (!c.answered || !c.body) {
        sx__free(c.node);
        return MHD_NO;
    }
    struct MHD_Response *rs =
        MHD_create_response_from_buffer_with_free_callback(c.len, c.body, free_body);
    if (!rs) {
        sx__free(c.body);
        sx__free(c.node);
        return MHD_NO;
    }
    (void)MHD_add_response_header(rs, "Content-Type", c.out_ctype);
    if (c.node)
        (void)MHD_add_response_header(rs, "X-Sextant-Node", c.node);
    sx__free(c.node);
    enum MHD_Result ret = MHD_queue_response(mc, c.status, rs);
    MHD_destroy_response(rs);
    return ret;
}

static void
on_done(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)mc;
    (void)toe;
    req *r = *con_cls;
    if (r) {
        sx__wbuf_fini(&r->w);
        sx__free(r);
        *con_cls = NULL;
    }
}

/* ---------------------------------------------------------------- gRPC front end
 *
 * The single-node server's gRPC front end (server/grpc.c, server/grpc_milvus.c) on this proxy's
 * service (sx__svc): each MilvusService RPC becomes the REST route that does the same thing,
 * which route() forwards or fans out exactly as a REST client's request (sharding, consistency
 * levels, retries). The metadata the RPCs read (a collection's schema for columns <-> rows,
 * DescribeCollection, ShowCollections, the databases) comes from the nodes: the schema from the
 * writer holding the collection (/v2/sextant/collections/meta; shard 0's for a sharded one,
 * renamed, with its shardsNum and autoID), the lists from the REST routes. The proxy checks no
 * credentials: the call's authorization metadata goes on to the nodes as a Basic (or the
 * client's Bearer) Authorization header, and each node checks it. */

/* The answer of one REST route run through route() as JSON ({"code":...}); NULL: no memory. */
static json_t *call_json(sx_cluster_proxy *p,
                         const char *url,
                         const json_t *body,
                         const char *db,
                         const char *authz,
                         double timeout_s)
{
    char auth[CRED_B64_MAX + 16], tmo[32];
    pconn c;
    memset(&c, 0, sizeof c);
    if (authz && *authz) {
        bool scheme = strncasecmp(authz, "Bearer ", 7) == 0 || strncasecmp(authz, "Basic ", 6) == 0;
        (void)snprintf(auth, sizeof auth, "%s%s", scheme ? "" : "Basic ", authz);
        c.authz = auth;
    }
    if (timeout_s > 0) {
        (void)snprintf(tmo, sizeof tmo, "%.3f", timeout_s);
        c.timeout = tmo;
    }
    c.db_name = db && *db ? db : "default";
    c.ctype = "application/json";
    req r;
    memset(&r, 0, sizeof r);
    sx__wbuf_init(&r.w);
    r.parsed = (json_t *)body; /* read only: route() parses nothing again */
    (void)route(p, &c, url, "POST", &r);
    sx__wbuf_fini(&r.w);
    json_t *ans = c.body ? json_loadb(c.body, c.len, 0, NULL) : NULL;
    if (!json_is_object(ans)) {
        json_decref(ans);
        ans = json_pack("{s:i,s:s#}", "code", 65535, "message", c.body ? c.body : "no answer",
                        (int)(c.len < 400 ? c.len : 400));
    }
    sx__free(c.body);
    sx__free(c.node);
    return ans;
}

/* The route's data when its code is 0 (borrowed from *ans, which the caller frees); else
 * NULL, with the error set from the answer's message (SX_ENOTFOUND for codes 100 and 800). */
static json_t *ans_data(json_t *ans, sx_status *st)
{
    json_t *cv = json_object_get(ans, "code");
    if (json_is_integer(cv) && json_integer_value(cv) == 0) {
        *st = SX_OK;
        return json_object_get(ans, "data");
    }
    const char *m = json_string_value(json_object_get(ans, "message"));
    json_int_t code = json_is_integer(cv) ? json_integer_value(cv) : 65535;
    *st = sx__err(code == 100 || code == 800 ? SX_ENOTFOUND : SX_EIO, "%s",
                  m ? m : "cluster proxy: no answer");
    return NULL;
}

static json_t *svc_call(void *ctx,
                        const char *route_path,
                        const json_t *body,
                        const char *db,
                        const sx__principal *who,
                        const char *authz,
                        double timeout_s,
                        const char *log_name)
{
    (void)who; /* the nodes check the credentials */
    (void)log_name;
    return call_json(ctx, route_path, body, db, authz, timeout_s);
}

static sx_status
svc_coll_get(void *ctx, const char *authz, const char *db, const char *name, sx__coll_meta *meta)
{
    sx_cluster_proxy *p = ctx;
    db = db && *db ? db : "default";
    if (meta_get(p, db, name, meta))
        return SX_OK;
    pcoll pc;
    sx_status st = coll_info(p, db, name, false, &pc);
    if (st != SX_OK)
        return st;
    char sh[SX_MAX_NAME + 1];
    const char *tgt = name;
    if (pc.shards) {
        if (!pc.ready)
            return sx__err(SX_ENOTFOUND, "collection %s is being created", name);
        if (!sx__shard_name(name, 0, sh, sizeof sh))
            return sx__err(SX_EINVAL, "collection name too long");
        tgt = sh;
    }
    json_t *body = json_pack("{s:s}", "collectionName", tgt);
    json_t *ans = body ? call_json(p, "/v2/sextant/collections/meta", body, db, authz, 0) : NULL;
    json_decref(body);
    if (!ans)
        return sx__err(SX_ENOMEM, "cluster proxy: out of memory");
    json_t *d = ans_data(ans, &st);
    if (st == SX_OK && !sx__cat_meta_parse(d, meta))
        st = sx__err(SX_EIO, "cluster proxy: the node's metadata of %s is not readable", name);
    json_decref(ans);
    if (st == SX_OK && pc.shards) { /* the collection, not its shard 0 */
        (void)snprintf(meta->name, sizeof meta->name, "%s", name);
        (void)snprintf(meta->engine_name, sizeof meta->engine_name, "%s", name);
        meta->shards = pc.shards;
        for (size_t i = 0; i < meta->n_fields; i++)
            if (meta->fields[i].is_primary)
                meta->fields[i].auto_id = pc.auto_id;
    }
    if (st == SX_OK)
        meta_put(p, db, name, meta);
    return st;
}

/* The strings of a route's data array (or of data[key] when key is set). */
static sx_status svc_strings(sx_cluster_proxy *p,
                             const char *url,
                             const char *db,
                             const char *authz,
                             char ***names,
                             size_t *n)
{
    *names = NULL;
    *n = 0;
    json_t *body = json_pack("{s:s}", "dbName", db && *db ? db : "default");
    json_t *ans = body ? call_json(p, url, body, db, authz, 0) : NULL;
    json_decref(body);
    if (!ans)
        return sx__err(SX_ENOMEM, "cluster proxy: out of memory");
    sx_status st;
    json_t *d = ans_data(ans, &st);
    size_t k = json_array_size(d);
    char **out = st == SX_OK ? sx__calloc(k ? k : 1, sizeof *out) : NULL;
    if (st == SX_OK && !out)
        st = sx__err(SX_ENOMEM, "cluster proxy: out of memory");
    for (size_t i = 0; out && i < k; i++) {
        const char *v = json_string_value(json_array_get(d, i));
        out[*n] = sx__strdup(v ? v : "");
        if (!out[*n]) {
            sx_strings_free(out, *n);
            out = NULL;
            *n = 0;
            st = sx__err(SX_ENOMEM, "cluster proxy: out of memory");
            break;
        }
        (*n)++;
    }
    json_decref(ans);
    *names = out;
    return st;
}

static sx_status
svc_coll_list(void *ctx, const char *authz, const char *db, char ***names, size_t *n)
{
    return svc_strings(ctx, "/v2/vectordb/collections/list", db, authz, names, n);
}

static sx_status svc_db_list(void *ctx, const char *authz, char ***names, size_t *n)
{
    return svc_strings(ctx, "/v2/vectordb/databases/list", "default", authz, names, n);
}

static sx_status
svc_db_describe(void *ctx, const char *authz, const char *db, json_t **props, int64_t *db_id)
{
    *props = NULL;
    *db_id = 0;
    json_t *body = json_pack("{s:s}", "dbName", db && *db ? db : "default");
    json_t *ans =
        body ? call_json(ctx, "/v2/vectordb/databases/describe", body, db, authz, 0) : NULL;
    json_decref(body);
    if (!ans)
        return sx__err(SX_ENOMEM, "cluster proxy: out of memory");
    sx_status st;
    json_t *d = ans_data(ans, &st);
    if (st == SX_OK) {
        json_t *o = json_object();
        json_t *kv = json_object_get(d, "properties"); /* [{"key","value"}] */
        for (size_t i = 0; o && i < json_array_size(kv); i++) {
            json_t *e = json_array_get(kv, i);
            const char *k = json_string_value(json_object_get(e, "key"));
            json_t *v = json_object_get(e, "value");
            if (k && v)
                json_object_set(o, k, v);
        }
        json_t *id = json_object_get(d, "dbID");
        *db_id = json_is_integer(id) ? (int64_t)json_integer_value(id) : 0;
        *props = o;
        if (!o)
            st = sx__err(SX_ENOMEM, "cluster proxy: out of memory");
    }
    json_decref(ans);
    return st;
}

static bool svc_db_exists(void *ctx, const char *authz, const char *db)
{
    json_t *props = NULL;
    int64_t id = 0;
    sx_status st = svc_db_describe(ctx, authz, db, &props, &id);
    json_decref(props);
    return st == SX_OK;
}

static bool svc_stopping(void *ctx)
{
    sx_cluster_proxy *p = ctx;
    return atomic_load(&p->stopping);
}

static int svc_auth(void *ctx, const char *authz, sx__principal *who)
{
    (void)ctx;
    (void)authz; /* passed on with each forwarded request: the nodes check it */
    memset(who, 0, sizeof *who);
    who->kind = SX__WHO_SUPER;
    return 0;
}

static void svc_add_http(void *ctx, int fd, const struct sockaddr *addr, socklen_t len)
{
    sx_cluster_proxy *p = ctx;
    if (MHD_add_connection(p->d, fd, addr, len) != MHD_YES)
        fprintf(stderr, "sextant proxy: HTTP connection refused (connection limit or memory)\n");
}

static const sx__svc_ops PROXY_SVC = {
    svc_call,      svc_coll_get, svc_coll_list, svc_db_list,  svc_db_describe,
    svc_db_exists, svc_stopping, svc_auth,      svc_add_http,
};

sx_status sx_cluster_proxy_start(const sx_cluster_proxy_options *opts, sx_cluster_proxy **out)
{
    sx__err_clear();
    if (!opts || !out || !opts->etcd || !*opts->etcd)
        return sx__err(SX_EINVAL, "a cluster proxy needs --etcd");
    *out = NULL;
    sx_cluster_proxy *p = sx__calloc(1, sizeof *p);
    pmeta *metas = sx__calloc(MAX_METAS, sizeof *metas);
    if (!p || !metas) {
        sx__free(p);
        sx__free(metas);
        return sx__err(SX_ENOMEM, "proxy");
    }
    p->metas = metas;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->ida_mu, NULL);
    p->listen_fd = -1;
    atomic_init(&p->stopping, false);
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
    unsigned threads = opts->threads ? opts->threads : 16;
    if (st == SX_OK) {
        /* one port, REST and gRPC (as a node serves them): the gRPC transport accepts and hands
         * HTTP/1 connections to MHD, which runs without a listening socket */
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(opts->port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only: no credentials here */
        int one = 1;
        p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->listen_fd < 0 ||
            setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
            listen(p->listen_fd, 1024) != 0)
            st = sx__err(SX_EIO, "cluster proxy: cannot listen on port %u: %s",
                         (unsigned)opts->port, strerror(errno));
    }
    if (st == SX_OK) {
        p->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                                    MHD_USE_NO_LISTEN_SOCKET,
                                0, NULL, NULL, on_request, p, MHD_OPTION_NOTIFY_COMPLETED, on_done,
                                p, MHD_OPTION_THREAD_POOL_SIZE, threads,
                                MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
        if (!p->d)
            st = sx__err(SX_EIO, "cluster proxy: cannot start the HTTP server");
    }
    if (st == SX_OK) {
        struct sockaddr_in bound;
        memset(&bound, 0, sizeof bound);
        socklen_t bl = sizeof bound;
        p->port = getsockname(p->listen_fd, (struct sockaddr *)&bound, &bl) == 0
                      ? ntohs(bound.sin_port)
                      : opts->port;
        sx__svc svc = { &PROXY_SVC, p, 10u, 60u, 1024u, 1024u, threads, MAX_BODY };
        st = sx__grpc_start(&svc, p->listen_fd, &p->grpc);
    }
    if (st == SX_OK) {
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
    atomic_store(&p->stopping, true);
    if (p->grpc) {
        sx__grpc_quiesce(p->grpc);
        sx__grpc_stop(p->grpc); /* the port closes once the calls out have finished */
    }
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    if (p->d)
        MHD_stop_daemon(p->d);
    sx__etcd_free(p->kv);
    sx__free(p->reps);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->ida_mu);
    sx__free(p->metas);
    sx__free(p);
}
