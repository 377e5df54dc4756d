/*
 * bench_remote.c: `sextant bench --target http://HOST:PORT ...`: a concurrent REST load generator
 * for a Milvus-compatible server (Sextant's `serve`, or Milvus itself), in the style of Milvus's
 * Go benchmark (milvus-tools `benchmark/`, docs: benchmarks.md §3) and VectorDBBench's
 * concurrency sweep (benchmarks.md §2).
 *
 * Protocol. For each concurrency level N (--concurrency 1,10,20): N threads, each with its own
 * libcurl easy handle (one keep-alive connection per thread), POST
 * /v2/vectordb/entities/search back to back for --duration seconds (after --warmup seconds whose
 * requests are not recorded). A request carries --nq query vectors taken round-robin from the
 * query file; thread t of N starts at query t * nqueries / N so the threads do not send the same
 * vectors in lockstep. Body:
 *
 *   {"data":[[...],...],"collectionName":C,"dbName":D,"annsField":F,"limit":K,
 *    "outputFields":[],"searchParams":{...}[,"filter":E]}
 *
 * with the headers Accept-Type-Allow-Int64: true (ids as JSON numbers), Expect: (no
 * 100-continue round trip for bodies over 1 KiB) and Authorization: Bearer T with --token.
 * --search-params is a JSON object: with a top-level "params" or "metricType" key it is sent as
 * is, otherwise it is the "params" object ({"ef":64} -> {"params":{"ef":64}}); --metric adds
 * "metricType" (without it the server uses the index's metric, which is what Milvus does).
 *
 * A failure is a transport error, an HTTP status other than 200, or a body whose "code" is not 0
 * (the first failure's message is printed once). Every request's latency (failures included, as
 * Locust and the Go benchmark do) is recorded.
 *
 * Latency log (lock-free). Each worker appends its latencies to its own log: a fixed table of
 * chunk pointers, chunks of LOG_CHUNK floats allocated as needed. The worker writes the value
 * (and, when a chunk is new, the chunk pointer) with plain stores and then publishes the new
 * count with a release store; the reporter thread acquire-loads the count and reads only entries
 * below it, which are never written again. The failure counter is a relaxed atomic read only for
 * display. Chunks are never moved, so no reader sees a reallocation.
 *
 * Reporting. A reporter thread wakes every --interval seconds (a condition variable on
 * CLOCK_MONOTONIC, so the end of a level wakes it at once) and prints, cumulative since the level
 * started (the Go benchmark's layout, columns in ms):
 *
 *   [2024-05-01 12:00:05.001] Name      #   reqs      # fails  |       Avg       Min ...
 *   [2024-05-01 12:00:05.001] search       12345     0(0.00%)  |     4.610     1.020 ...
 *
 * At the end of a level the same two lines are printed from the final numbers, then the level's
 * p95/p99 and, with --gt, recall@limit. QPS = requests / (time the last worker finished - level
 * start). Percentiles are nearest-rank over every recorded latency.
 *
 * Recall. With --gt (.ivecs, one row per query, at least --limit ids), each successful response
 * is split per query with "topks" (a single query takes the whole "data" array) and every hit's
 * primary key is read: the "id" key when it is an integer, else the first integer-valued (or
 * numeric string) key other than "distance" (outputFields is empty, so the hit holds only the PK
 * and the distance whatever the PK field is called). recall = |hits[0:K] ∩ gt[0:K]| / K, averaged
 * over every query answered during the level.
 *
 * Output: the lines above, a table over the levels, and with --json a file
 *   {"target","collection","limit","nq","duration_s","warmup_s","levels":[{"concurrency",
 *    "requests","failures","elapsed_s","qps","latency_ms":{"avg","min","max","p50","p95","p99"},
 *    "recall" (with --gt)}], "conc_num_list","conc_qps_list","conc_latency_p99_list",
 *    "conc_latency_avg_list"}
 * where the conc_* lists use VectorDBBench's names and units (latencies in seconds).
 *
 * Exit status: 0 when every level ran (failures are reported, not fatal); 1 on a setup error
 * (unreadable files, curl, or a probe search before the first level that cannot reach the
 * target or is answered with an error); 2 on a usage error.
 *
 * Threading: the main thread parses, probes, starts the workers and the reporter per level,
 * joins them and reports. Worker-private state (curl handle, buffers, recall sums) is read by the
 * main thread only after pthread_join. The "first failure printed" flag is an atomic exchange.
 *
 * gRPC (--target grpc://HOST:PORT): the same load over Milvus's gRPC API, as the Go benchmark and
 * pymilvus send it: each worker's libcurl handle speaks HTTP/2 with prior knowledge (h2c, one
 * connection per worker) and POSTs /milvus.proto.milvus.MilvusService/Search with content-type
 * application/grpc and te: trailers; the body is one length-prefixed SearchRequest (protobuf-c,
 * our proto/milvus.proto) holding collection_name, db_name, dsl (--filter), nq, a serialized
 * PlaceholderGroup of float32 queries and the search_params anns_field, topk, metric_type and
 * params (the JSON of --search-params' "params"); --token is sent as authorization metadata
 * (base64 of the token, as the SDKs send "user:password"). A failure is a transport error, a
 * grpc-status other than 0 (read from the trailers or a Trailers-Only answer), or a Status inside
 * the SearchResults whose code is not 0. Recall reads results.ids.int_id split by results.topks.
 *
 * Rejected: a shared mutex-protected latency vector (contention at high QPS distorts the very
 * latencies measured); curl multi with one thread (a slow response would delay the others'
 * sends, unlike N independent clients).
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "bench_print.h"
#include "cli.h"
#include "datasets.h"
#include "milvus.pb-c.h"

#define CMD            "bench"
#define ERR_LEN        1024
#define MAX_LEVELS     64
#define MAX_CONC       4096
#define LOG_CHUNK      65536u /* latencies per chunk */
#define LOG_MAX_CHUNKS 4096u  /* chunk table size: 268M requests per worker and level */
#define SEARCH_PATH    "/v2/vectordb/entities/search"
#define GRPC_PATH      "/milvus.proto.milvus.MilvusService/Search"
#define MSG_MAX        512

/* ------------------------------------------------------------------ options and state */

typedef struct rb_opts {
    const char *target, *collection, *query_path, *gt_path, *ann_field, *search_params;
    const char *metric, *filter, *token, *db, *json_path, *consistency;
    const char *conc_text;
    unsigned conc[MAX_LEVELS];
    size_t n_levels;
    uint64_t duration_s, warmup_s, interval_s, limit, nq, timeout_s;
} rb_opts;

/* One worker's append-only latency log (see the design note). */
typedef struct lat_log {
    float **chunks;         /* LOG_MAX_CHUNKS slots; owned */
    _Atomic size_t n;       /* entries published */
    _Atomic uint64_t fails; /* failed requests among them */
} lat_log;

struct rb;

typedef struct worker {
    struct rb *rb;
    unsigned id;
    CURL *curl;
    char errbuf[CURL_ERROR_SIZE];
    char *body; /* request body buffer, grown as needed */
    size_t body_cap;
    char *resp; /* response body of the last request */
    size_t resp_len, resp_cap;
    int grpc_status; /* gRPC: grpc-status of the last answer (-1: none seen) */
    bool h2_up;      /* gRPC: the handle holds an HTTP/2 connection (see do_request) */
    char grpc_msg[256];
    lat_log log;
    size_t next_query; /* index of the next query to send */
    double recall_sum; /* over queries answered in the recorded span */
    uint64_t recall_n;
    double t_end; /* monotonic time the worker finished its last request */
} worker;

typedef struct level_result {
    unsigned conc;
    uint64_t requests, failures;
    double elapsed_s, qps;
    double avg_ms, min_ms, max_ms, p50_ms, p95_ms, p99_ms;
    double recall; /* NAN without --gt */
} level_result;

typedef struct rb {
    rb_opts o;
    char url[1024];
    bool grpc;        /* --target grpc://: gRPC over h2c instead of REST */
    uint8_t *gr_tmpl; /* gRPC: the packed SearchRequest without its placeholder group */
    size_t gr_tmpl_len;
    struct curl_slist *headers;
    ds_matrix queries;
    ds_matrix gt;    /* type DS_I32; n == 0 without --gt */
    char *vec_text;  /* every query rendered as "[v0,v1,...]", back to back */
    size_t *vec_off; /* nqueries + 1 offsets into vec_text */
    char *body_tail; /* the request JSON after "data": ",\"collectionName\":...}" */
    size_t body_tail_len;
    worker *w; /* max(conc) workers */
    size_t n_workers;
    /* per level */
    double t_warm_end, t_deadline; /* written before the level's threads start */
    atomic_bool stop;              /* set when a level must end early (thread start failed) */
    atomic_bool first_fail_printed;
    /* reporter */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool level_done; /* under mu */
    size_t level_conc;
    float *scratch; /* reporter's / main's copy of the latencies */
    size_t scratch_cap;
    level_result res[MAX_LEVELS];
} rb;

/* ------------------------------------------------------------------ usage */

static void remote_usage(FILE *out)
{
    fprintf(out,
            "usage: sextant bench --target http://HOST:PORT --collection NAME --query FILE "
            "[options]\n"
            "\n"
            "Concurrent REST search load against a Milvus-compatible server (POST\n" SEARCH_PATH
            "), one line per --interval in the layout of Milvus's Go benchmark.\n"
            "\n"
            "  --target URL           server base URL, e.g. http://127.0.0.1:19530, or\n"
            "                         grpc://127.0.0.1:19530 for Milvus's gRPC Search\n"
            "  --collection NAME      collection to search\n"
            "  --query FILE           query vectors (.fvecs .bvecs .npy IDX .gz), round-robin\n"
            "  --gt FILE              ground-truth ids (.ivecs, >= --limit per query): recall\n"
            "  --concurrency N,N,...  client threads per level (default 1,10,20)\n"
            "  --duration S           seconds per level (default 30)\n"
            "  --warmup S             unrecorded seconds before each level (default 0)\n"
            "  --interval S           seconds between progress lines (default 5)\n"
            "  --limit K              top-k per query (default 10)\n"
            "  --nq N                 query vectors per request (default 1)\n"
            "  --ann-field NAME       vector field (default vector)\n"
            "  --search-params JSON   e.g. '{\"ef\":64}' (sent as searchParams.params)\n"
            "  --metric M             metricType to send (default: none, the index's metric)\n"
            "  --filter EXPR          filter expression\n"
            "  --consistency L        consistencyLevel to send: Strong, Session, Bounded,\n"
            "                         Eventually (default: none, the collection's)\n"
            "  --token T              Authorization: Bearer T\n"
            "  --db NAME              database (default default)\n"
            "  --timeout S            per-request timeout (default 60)\n"
            "  --json FILE            write the results as JSON\n");
}

/* ------------------------------------------------------------------ small helpers */

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = c;
    return 0;
}

static size_t write_cb(char *p, size_t sz, size_t nm, void *ud)
{
    worker *w = ud;
    size_t n = sz * nm;
    if (grow(&w->resp, &w->resp_cap, w->resp_len + n + 1) != 0)
        return 0;
    memcpy(w->resp + w->resp_len, p, n);
    w->resp_len += n;
    w->resp[w->resp_len] = '\0';
    return n;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct_sorted(const float *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    double r = ceil(p * (double)n);
    size_t i = r < 1.0 ? 0 : (size_t)r - 1;
    if (i >= n)
        i = n - 1;
    return (double)v[i];
}

/* k-th smallest (0-based) by Wirth's selection (Hoare partitions); reorders v. n > k. */
static float select_kth(float *v, size_t n, size_t k)
{
    ptrdiff_t l = 0, m = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (l < m) {
        float x = v[kk];
        ptrdiff_t i = l, j = m;
        do {
            while (v[i] < x)
                i++;
            while (x < v[j])
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < kk)
            l = i;
        if (kk < i)
            m = j;
    }
    return v[kk];
}

/* ------------------------------------------------------------------ latency log */

static int log_init(lat_log *l)
{
    l->chunks = calloc(LOG_MAX_CHUNKS, sizeof *l->chunks);
    atomic_init(&l->n, 0);
    atomic_init(&l->fails, 0);
    return l->chunks ? 0 : -1;
}

static void log_free(lat_log *l)
{
    if (l->chunks != NULL) {
        for (size_t c = 0; c < LOG_MAX_CHUNKS && l->chunks[c] != NULL; c++)
            free(l->chunks[c]);
    }
    free(l->chunks);
    l->chunks = NULL;
}

/* Forgets the entries (keeps the chunks). Only while no reader runs. */
static void log_reset(lat_log *l)
{
    atomic_store(&l->n, 0);
    atomic_store(&l->fails, 0);
}

/* Appends one latency (writer: the owning worker only). A full or unallocatable log drops it. */
static void log_push(lat_log *l, float ms, bool failed)
{
    size_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    size_t c = n / LOG_CHUNK;
    if (c >= LOG_MAX_CHUNKS)
        return;
    if (l->chunks[c] == NULL) {
        l->chunks[c] = malloc(LOG_CHUNK * sizeof(float));
        if (l->chunks[c] == NULL)
            return;
    }
    l->chunks[c][n % LOG_CHUNK] = ms;
    if (failed)
        atomic_fetch_add_explicit(&l->fails, 1, memory_order_relaxed);
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
}

typedef struct snap {
    uint64_t reqs, fails;
    double sum, min, max;
    size_t n; /* latencies copied into rb->scratch */
} snap;

/* Copies every published latency of the first `nw` workers into rb->scratch. */
static int collect(rb *b, size_t nw, snap *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    size_t counts[MAX_CONC];
    size_t total = 0;
    for (size_t t = 0; t < nw; t++) {
        counts[t] = atomic_load_explicit(&b->w[t].log.n, memory_order_acquire);
        s->fails += atomic_load_explicit(&b->w[t].log.fails, memory_order_relaxed);
        total += counts[t];
    }
    if (total > b->scratch_cap) {
        size_t cap = b->scratch_cap ? b->scratch_cap : 65536;
        while (cap < total)
            cap *= 2;
        float *p = realloc(b->scratch, cap * sizeof *p);
        if (p == NULL)
            return -1;
        b->scratch = p;
        b->scratch_cap = cap;
    }
    size_t k = 0;
    for (size_t t = 0; t < nw; t++) {
        lat_log *l = &b->w[t].log;
        for (size_t i = 0; i < counts[t]; i += LOG_CHUNK) {
            size_t m = counts[t] - i < LOG_CHUNK ? counts[t] - i : LOG_CHUNK;
            memcpy(b->scratch + k, l->chunks[i / LOG_CHUNK], m * sizeof(float));
            k += m;
        }
    }
    for (size_t i = 0; i < k; i++) {
        double v = (double)b->scratch[i];
        s->sum += v;
        if (v < s->min)
            s->min = v;
        if (v > s->max)
            s->max = v;
    }
    if (k == 0)
        s->min = 0.0;
    s->n = k;
    s->reqs = k;
    return 0;
}

/* ------------------------------------------------------------------ requests */

typedef enum req_outcome { REQ_OK = 0, REQ_TRANSPORT, REQ_HTTP, REQ_CODE } req_outcome;

/* Builds the body for queries [first, first + nq) (mod nqueries) into w->body. */
static int build_body(rb *b, worker *w, size_t first, size_t *len)
{
    size_t nqueries = b->queries.n;
    size_t need = 16 + b->body_tail_len;
    for (size_t j = 0; j < b->o.nq; j++) {
        size_t q = (first + j) % nqueries;
        need += b->vec_off[q + 1] - b->vec_off[q] + 1;
    }
    if (grow(&w->body, &w->body_cap, need) != 0)
        return -1;
    char *p = w->body;
    memcpy(p, "{\"data\":[", 9);
    p += 9;
    for (size_t j = 0; j < b->o.nq; j++) {
        size_t q = (first + j) % nqueries;
        if (j > 0)
            *p++ = ',';
        size_t m = b->vec_off[q + 1] - b->vec_off[q];
        memcpy(p, b->vec_text + b->vec_off[q], m);
        p += m;
    }
    *p++ = ']';
    memcpy(p, b->body_tail, b->body_tail_len);
    p += b->body_tail_len;
    *p = '\0';
    *len = (size_t)(p - w->body);
    return 0;
}

/* The primary key of one hit (see the design note). */
static bool hit_id(json_t *hit, int64_t *out)
{
    json_t *v = json_object_get(hit, "id");
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    const char *key;
    json_object_foreach(hit, key, v) {
        if (strcmp(key, "distance") == 0)
            continue;
        if (json_is_integer(v)) {
            *out = (int64_t)json_integer_value(v);
            return true;
        }
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            char *end = NULL;
            errno = 0;
            long long x = strtoll(s, &end, 10);
            if (errno == 0 && end != s && *end == '\0') {
                *out = (int64_t)x;
                return true;
            }
        }
    }
    return false;
}

/* Adds the recall of the queries [first, first + nq) answered by `data` to the worker's sums. */
static void score(rb *b, worker *w, size_t first, json_t *root)
{
    json_t *data = json_object_get(root, "data");
    json_t *topks = json_object_get(root, "topks");
    size_t k = (size_t)b->o.limit;
    size_t off = 0;
    for (size_t j = 0; j < b->o.nq; j++) {
        size_t q = (first + j) % b->queries.n;
        size_t cnt;
        if (json_is_array(topks) && j < json_array_size(topks))
            cnt = (size_t)json_integer_value(json_array_get(topks, j));
        else if (b->o.nq == 1)
            cnt = json_array_size(data);
        else
            cnt = 0;
        size_t avail = json_array_size(data);
        if (off > avail)
            off = avail;
        if (cnt > avail - off)
            cnt = avail - off;
        const int32_t *g = b->gt.i + q * b->gt.dim;
        size_t found = 0;
        for (size_t h = 0; h < cnt && h < k; h++) {
            int64_t id;
            if (!hit_id(json_array_get(data, off + h), &id))
                continue;
            for (size_t x = 0; x < k; x++) {
                if ((int64_t)g[x] == id) {
                    found++;
                    break;
                }
            }
        }
        off += cnt;
        w->recall_sum += (double)found / (double)k;
        w->recall_n++;
    }
}

/* ------------------------------------------------------------------ gRPC */

static size_t header_cb(char *p, size_t sz, size_t nm, void *ud)
{
    worker *w = ud;
    size_t n = sz * nm;
    if (n > 12 && strncasecmp(p, "grpc-status:", 12) == 0) {
        w->grpc_status = (int)strtol(p + 12, NULL, 10);
    } else if (n > 13 && strncasecmp(p, "grpc-message:", 13) == 0) {
        size_t m = n - 13;
        while (m > 0 && (p[13 + m - 1] == '\r' || p[13 + m - 1] == '\n'))
            m--;
        snprintf(w->grpc_msg, sizeof w->grpc_msg, "%.*s", (int)m, p + 13);
    }
    return n;
}

static SxPb__KeyValuePair *kv(SxPb__KeyValuePair *p, const char *k, char *v)
{
    sx_pb__key_value_pair__init(p);
    p->key = (char *)k;
    p->value = v;
    return p;
}

/* The SearchRequest without its placeholder group and nq, packed once (build_tail's twin). */
static int build_grpc_template(rb *b)
{
    SxPb__SearchRequest q = SX_PB__SEARCH_REQUEST__INIT;
    q.collection_name = (char *)b->o.collection;
    q.db_name = (char *)b->o.db;
    q.dsl = (char *)(b->o.filter ? b->o.filter : "");
    q.dsl_type = SX_PB__DSL_TYPE__BoolExprV1;
    if (b->o.consistency != NULL) {
        static const char *const levels[] = { "Strong", "Session", "Bounded", "Eventually" };
        q.use_default_consistency = true;
        for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++)
            if (strcasecmp(b->o.consistency, levels[l]) == 0) {
                q.consistency_level = (SxPb__ConsistencyLevel)l;
                q.use_default_consistency = false;
            }
    }
    char topk[32], *params = NULL, metric[32] = "";
    snprintf(topk, sizeof topk, "%" PRIu64, b->o.limit);
    json_t *inner = NULL;
    if (b->o.search_params != NULL) {
        json_error_t je;
        json_t *user = json_loads(b->o.search_params, 0, &je);
        json_t *pm = json_object_get(user, "params");
        inner = json_incref(json_is_object(pm) ? pm : user);
        const char *mt = json_string_value(json_object_get(user, "metricType"));
        if (mt)
            snprintf(metric, sizeof metric, "%s", mt);
        json_decref(user);
    }
    params = inner ? json_dumps(inner, JSON_COMPACT) : strdup("{}");
    json_decref(inner);
    if (b->o.metric != NULL && !metric[0]) {
        size_t i = 0;
        for (; b->o.metric[i] && i + 1 < sizeof metric; i++)
            metric[i] = (char)toupper((unsigned char)b->o.metric[i]);
        metric[i] = '\0';
    }
    SxPb__KeyValuePair kvs[4], *kp[4];
    size_t n = 0;
    kp[n] = kv(&kvs[n], "anns_field", (char *)b->o.ann_field);
    n++;
    kp[n] = kv(&kvs[n], "topk", topk);
    n++;
    kp[n] = kv(&kvs[n], "params", params ? params : (char *)"{}");
    n++;
    if (metric[0]) {
        kp[n] = kv(&kvs[n], "metric_type", metric);
        n++;
    }
    q.search_params = kp;
    q.n_search_params = n;
    size_t len = sx_pb__search_request__get_packed_size(&q);
    b->gr_tmpl = malloc(len ? len : 1);
    if (b->gr_tmpl == NULL) {
        free(params);
        return cli_fail(CMD, "out of memory building the request");
    }
    b->gr_tmpl_len = sx_pb__search_request__pack(&q, b->gr_tmpl);
    free(params);
    return 0;
}

/* The framed request of queries [first, first + nq): the template + nq + placeholder group
 * (fields of a message may come in any order; appending is a valid encoding). */
static int build_grpc_body(rb *b, worker *w, size_t first, size_t *len)
{
    size_t dim = b->queries.dim, nq = (size_t)b->o.nq;
    SxPb__PlaceholderValue pv = SX_PB__PLACEHOLDER_VALUE__INIT;
    SxPb__PlaceholderValue *pvp = &pv;
    SxPb__PlaceholderGroup pg = SX_PB__PLACEHOLDER_GROUP__INIT;
    ProtobufCBinaryData vals[64];
    ProtobufCBinaryData *vp = nq <= 64 ? vals : malloc(nq * sizeof *vp);
    if (vp == NULL)
        return -1;
    pv.tag = (char *)"$0";
    pv.type = SX_PB__PLACEHOLDER_TYPE__Placeholder_FloatVector;
    for (size_t j = 0; j < nq; j++) {
        size_t q = (first + j) % b->queries.n;
        vp[j].data = (uint8_t *)(b->queries.f + q * dim);
        vp[j].len = dim * sizeof(float);
    }
    pv.values = vp;
    pv.n_values = nq;
    pg.placeholders = &pvp;
    pg.n_placeholders = 1;
    SxPb__SearchRequest tail = SX_PB__SEARCH_REQUEST__INIT;
    tail.nq = (int64_t)nq;
    size_t pgl = sx_pb__placeholder_group__get_packed_size(&pg);
    uint8_t *pgb = malloc(pgl ? pgl : 1);
    int rc = -1;
    if (pgb != NULL) {
        sx_pb__placeholder_group__pack(&pg, pgb);
        tail.search_input_case = SX_PB__SEARCH_REQUEST__SEARCH_INPUT_PLACEHOLDER_GROUP;
        tail.placeholder_group.data = pgb;
        tail.placeholder_group.len = pgl;
        size_t tl = sx_pb__search_request__get_packed_size(&tail);
        size_t total = b->gr_tmpl_len + tl;
        if (grow(&w->body, &w->body_cap, total + 5) == 0) {
            uint8_t *p = (uint8_t *)w->body;
            p[0] = 0;
            p[1] = (uint8_t)(total >> 24);
            p[2] = (uint8_t)(total >> 16);
            p[3] = (uint8_t)(total >> 8);
            p[4] = (uint8_t)total;
            memcpy(p + 5, b->gr_tmpl, b->gr_tmpl_len);
            sx_pb__search_request__pack(&tail, p + 5 + b->gr_tmpl_len);
            *len = total + 5;
            rc = 0;
        }
        free(pgb);
    }
    if (vp != vals)
        free(vp);
    return rc;
}

static req_outcome
grpc_answer(rb *b, worker *w, size_t first, bool scoring, char *msg, size_t msg_len)
{
    if (w->grpc_status != 0) {
        snprintf(msg, msg_len, "grpc-status %d: %s", w->grpc_status, w->grpc_msg);
        return REQ_HTTP;
    }
    const uint8_t *p = (const uint8_t *)w->resp;
    if (w->resp_len < 5 || p[0] != 0) {
        snprintf(msg, msg_len, "answer is not one uncompressed gRPC message (%zu bytes)",
                 w->resp_len);
        return REQ_CODE;
    }
    size_t ml = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
    if (ml != w->resp_len - 5) {
        snprintf(msg, msg_len, "gRPC message of %zu bytes in %zu", ml, w->resp_len - 5);
        return REQ_CODE;
    }
    SxPb__SearchResults *r = sx_pb__search_results__unpack(NULL, ml, p + 5);
    if (r == NULL) {
        snprintf(msg, msg_len, "answer is not a SearchResults message");
        return REQ_CODE;
    }
    req_outcome out = REQ_OK;
    if (r->status && r->status->code != 0) {
        snprintf(msg, msg_len, "code %d: %s", (int)r->status->code,
                 r->status->reason ? r->status->reason : "");
        out = REQ_CODE;
    } else if (scoring && b->gt.n > 0 && r->results) {
        const SxPb__SearchResultData *d = r->results;
        const SxPb__LongArray *ids =
            d->ids && d->ids->id_field_case == SX_PB__IDS__ID_FIELD_INT_ID ? d->ids->int_id : NULL;
        size_t k = (size_t)b->o.limit, off = 0;
        for (size_t j = 0; j < b->o.nq; j++) {
            size_t q = (first + j) % b->queries.n;
            size_t cnt = j < d->n_topks ? (size_t)d->topks[j] : 0;
            size_t avail = ids ? ids->n_data : 0;
            if (off > avail)
                off = avail;
            if (cnt > avail - off)
                cnt = avail - off;
            const int32_t *g = b->gt.i + q * b->gt.dim;
            size_t found = 0;
            for (size_t h = 0; h < cnt && h < k; h++)
                for (size_t x = 0; x < k; x++)
                    if ((int64_t)g[x] == ids->data[off + h]) {
                        found++;
                        break;
                    }
            off += cnt;
            w->recall_sum += (double)found / (double)k;
            w->recall_n++;
        }
    }
    sx_pb__search_results__free_unpacked(r, NULL);
    return out;
}

/* Sends one request for queries [first, first + nq). On failure writes a message into msg.
 * With `scoring` and --gt, a successful answer adds to the worker's recall sums. */
static req_outcome
do_request(rb *b, worker *w, size_t first, bool scoring, char *msg, size_t msg_len)
{
    size_t len;
    w->grpc_status = -1;
    w->grpc_msg[0] = '\0';
    if ((b->grpc ? build_grpc_body(b, w, first, &len) : build_body(b, w, first, &len)) != 0) {
        snprintf(msg, msg_len, "out of memory building the request");
        return REQ_TRANSPORT;
    }
    w->resp_len = 0;
    if (w->resp != NULL)
        w->resp[0] = '\0';
    /* libcurl 7.88.1 (Debian 12) fails every reuse of a prior-knowledge HTTP/2 connection with
     * "Error in the HTTP2 framing layer" (curl issue 10634, fixed in 7.89): the first request
     * of a connection asks for prior knowledge, the next ones for plain HTTP/2, which reuses the
     * connection as it is. After a failure the next request starts over with prior knowledge. */
    if (b->grpc)
        curl_easy_setopt(
            w->curl, CURLOPT_HTTP_VERSION,
            (long)(w->h2_up ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    w->h2_up = false;
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    w->errbuf[0] = '\0';
    CURLcode cc = curl_easy_perform(w->curl);
    if (cc != CURLE_OK) {
        snprintf(msg, msg_len, "%s: %s", curl_easy_strerror(cc),
                 w->errbuf[0] ? w->errbuf : "(no detail)");
        return REQ_TRANSPORT;
    }
    long status = 0;
    curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        snprintf(msg, msg_len, "HTTP %ld: %.200s", status, w->resp ? w->resp : "");
        return REQ_HTTP;
    }
    if (b->grpc) {
        w->h2_up = true;
        return grpc_answer(b, w, first, scoring, msg, msg_len);
    }
    json_error_t je;
    json_t *root = json_loadb(w->resp ? w->resp : "", w->resp_len, 0, &je);
    if (root == NULL) {
        snprintf(msg, msg_len, "response is not JSON (%s): %.200s", je.text,
                 w->resp ? w->resp : "");
        return REQ_CODE;
    }
    json_t *code = json_object_get(root, "code");
    if (!json_is_integer(code) || json_integer_value(code) != 0) {
        const char *m = json_string_value(json_object_get(root, "message"));
        if (json_is_integer(code))
            snprintf(msg, msg_len, "code %" JSON_INTEGER_FORMAT ": %s", json_integer_value(code),
                     m ? m : "");
        else
            snprintf(msg, msg_len, "response without a code: %.200s", w->resp);
        json_decref(root);
        return REQ_CODE;
    }
    if (scoring && b->gt.n > 0)
        score(b, w, first, root);
    json_decref(root);
    return REQ_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rb *b = w->rb;
    char msg[MSG_MAX];
    for (;;) {
        double t0 = cli_now();
        if (t0 >= b->t_deadline || atomic_load_explicit(&b->stop, memory_order_relaxed))
            break;
        bool record = t0 >= b->t_warm_end;
        size_t first = w->next_query;
        w->next_query = (first + b->o.nq) % b->queries.n;
        req_outcome r = do_request(b, w, first, record, msg, sizeof msg);
        double t1 = cli_now();
        if (r != REQ_OK && !atomic_exchange(&b->first_fail_printed, true)) {
            fprintf(stderr, "sextant %s: first failed request (concurrency %zu): %s\n", CMD,
                    b->level_conc, msg);
        }
        if (record)
            log_push(&w->log, (float)((t1 - t0) * 1000.0), r != REQ_OK);
        w->t_end = t1;
    }
    return NULL;
}

/* ------------------------------------------------------------------ reporter */

static void abs_deadline(double mono_t, struct timespec *ts)
{
    double s = floor(mono_t);
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)((mono_t - s) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *reporter_main(void *arg)
{
    rb *b = arg;
    double tick = b->t_warm_end + (double)b->o.interval_s;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        struct timespec ts;
        abs_deadline(tick, &ts);
        while (!b->level_done) {
            int e = pthread_cond_timedwait(&b->cv, &b->mu, &ts);
            if (e == ETIMEDOUT)
                break;
        }
        if (b->level_done)
            break;
        if (cli_now() < tick)
            continue;
        pthread_mutex_unlock(&b->mu);
        if (tick < b->t_deadline) {
            snap s;
            if (collect(b, b->level_conc, &s) == 0) {
                double med = s.n ? (double)select_kth(b->scratch, s.n, (s.n - 1) / 2) : 0.0;
                bp_block(s.reqs, s.fails, s.n ? s.sum / (double)s.n : 0.0, s.min, s.max, med,
                         cli_now() - b->t_warm_end);
            }
        }
        double now = cli_now();
        while (tick <= now) /* a slow print skips ticks rather than printing back to back */
            tick += (double)b->o.interval_s;
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ------------------------------------------------------------------ setup */

static int parse_args(rb_opts *o, int argc, char **argv)
{
    const char *v = NULL;
    o->conc_text = "1,10,20";
    o->duration_s = 30;
    o->interval_s = 5;
    o->limit = 10;
    o->nq = 1;
    o->timeout_s = 60;
    o->ann_field = "vector";
    o->db = "default";
    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            remote_usage(stdout);
            return -1;
        }
        if ((r = cli_take(argc, argv, &i, CMD, "--target", &o->target)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--collection", &o->collection)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--query", &o->query_path)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--gt", &o->gt_path)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--ann-field", &o->ann_field)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--search-params", &o->search_params)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--metric", &o->metric)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--filter", &o->filter)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--consistency", &o->consistency)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--token", &o->token)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--db", &o->db)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--json", &o->json_path)) != 0 ||
            (r = cli_take(argc, argv, &i, CMD, "--concurrency", &o->conc_text)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }

        struct {
            const char *name;
            uint64_t lo, hi;
            uint64_t *dst;
        } nums[] = { { "--duration", 1, 86400, &o->duration_s },
                     { "--warmup", 0, 86400, &o->warmup_s },
                     { "--interval", 1, 86400, &o->interval_s },
                     { "--limit", 1, 16384, &o->limit },
                     { "--nq", 1, 16384, &o->nq },
                     { "--timeout", 1, 86400, &o->timeout_s } };

        bool matched = false;
        for (size_t j = 0; j < sizeof nums / sizeof nums[0] && !matched; j++) {
            r = cli_take(argc, argv, &i, CMD, nums[j].name, &v);
            if (r == 0)
                continue;
            if (r < 0 ||
                cli_parse_u64(CMD, nums[j].name, v, nums[j].lo, nums[j].hi, nums[j].dst) != 0)
                return CLI_EXIT_USAGE;
            matched = true;
        }
        if (matched)
            continue;
        fprintf(stderr, "sextant %s: unknown option '%s' (with --target)\n", CMD, argv[i]);
        return CLI_EXIT_USAGE;
    }
    if (o->target == NULL || o->collection == NULL || o->query_path == NULL) {
        fprintf(stderr, "sextant %s: --target needs --collection and --query\n", CMD);
        return CLI_EXIT_USAGE;
    }
    if (strncmp(o->target, "http://", 7) != 0 && strncmp(o->target, "https://", 8) != 0 &&
        strncmp(o->target, "grpc://", 7) != 0) {
        fprintf(stderr, "sextant %s: --target '%s' is not an http://, https:// or grpc:// URL\n",
                CMD, o->target);
        return CLI_EXIT_USAGE;
    }
    if (o->consistency != NULL && strcasecmp(o->consistency, "Strong") != 0 &&
        strcasecmp(o->consistency, "Session") != 0 && strcasecmp(o->consistency, "Bounded") != 0 &&
        strcasecmp(o->consistency, "Eventually") != 0) {
        fprintf(stderr,
                "sextant %s: --consistency '%s' is not Strong, Session, Bounded or Eventually\n",
                CMD, o->consistency);
        return CLI_EXIT_USAGE;
    }
    char store[1024];
    const char *items[MAX_LEVELS];
    int n =
        cli_split_list(CMD, "--concurrency", o->conc_text, store, sizeof store, items, MAX_LEVELS);
    if (n < 0)
        return CLI_EXIT_USAGE;
    for (int j = 0; j < n; j++) {
        uint64_t c;
        if (cli_parse_u64(CMD, "--concurrency", items[j], 1, MAX_CONC, &c) != 0)
            return CLI_EXIT_USAGE;
        o->conc[j] = (unsigned)c;
    }
    o->n_levels = (size_t)n;
    return 0;
}

/* Renders every query as JSON text once; floats with %.9g round-trip exactly. */
static int render_queries(rb *b)
{
    size_t nq = b->queries.n, dim = b->queries.dim;
    size_t cap = nq * (dim * 17 + 2) + 1;
    b->vec_text = malloc(cap);
    b->vec_off = malloc((nq + 1) * sizeof *b->vec_off);
    if (b->vec_text == NULL || b->vec_off == NULL)
        return cli_fail(CMD, "out of memory rendering %zu queries", nq);
    size_t pos = 0;
    for (size_t q = 0; q < nq; q++) {
        b->vec_off[q] = pos;
        b->vec_text[pos++] = '[';
        for (size_t d = 0; d < dim; d++) {
            float f = b->queries.f[q * dim + d];
            if (!isfinite(f))
                return cli_fail(CMD, "%s: query %zu has a non-finite value", b->o.query_path, q);
            int m = snprintf(b->vec_text + pos, cap - pos, d ? ",%.9g" : "%.9g", (double)f);
            if (m < 0 || (size_t)m >= cap - pos)
                return cli_fail(CMD, "internal error rendering queries");
            pos += (size_t)m;
        }
        b->vec_text[pos++] = ']';
    }
    b->vec_off[nq] = pos;
    b->vec_text[pos] = '\0';
    return 0;
}

/* The JSON after the "data" member: ",\"collectionName\":...}". */
static int build_tail(rb *b)
{
    json_t *sp = NULL;
    if (b->o.search_params != NULL) {
        json_error_t je;
        json_t *user = json_loads(b->o.search_params, 0, &je);
        if (!json_is_object(user)) {
            json_decref(user);
            fprintf(stderr, "sextant %s: --search-params is not a JSON object: %s\n", CMD,
                    user == NULL ? je.text : "not an object");
            return CLI_EXIT_USAGE;
        }
        if (json_object_get(user, "params") != NULL ||
            json_object_get(user, "metricType") != NULL) {
            sp = user;
        } else {
            sp = json_object();
            json_object_set_new(sp, "params", user);
        }
    } else {
        sp = json_object();
    }
    if (b->o.metric != NULL && json_object_get(sp, "metricType") == NULL) {
        char m[32];
        size_t i = 0;
        for (; b->o.metric[i] && i + 1 < sizeof m; i++)
            m[i] = (char)toupper((unsigned char)b->o.metric[i]);
        m[i] = '\0';
        json_object_set_new(sp, "metricType", json_string(m));
    }
    json_t *o = json_object();
    json_object_set_new(o, "collectionName", json_string(b->o.collection));
    json_object_set_new(o, "dbName", json_string(b->o.db));
    json_object_set_new(o, "annsField", json_string(b->o.ann_field));
    json_object_set_new(o, "limit", json_integer((json_int_t)b->o.limit));
    json_object_set_new(o, "outputFields", json_array());
    json_object_set_new(o, "searchParams", sp);
    if (b->o.filter != NULL)
        json_object_set_new(o, "filter", json_string(b->o.filter));
    if (b->o.consistency != NULL)
        json_object_set_new(o, "consistencyLevel", json_string(b->o.consistency));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s == NULL || s[0] != '{')
        return cli_fail(CMD, "out of memory building the request");
    size_t n = strlen(s);
    b->body_tail = malloc(n + 2);
    if (b->body_tail == NULL) {
        free(s);
        return cli_fail(CMD, "out of memory building the request");
    }
    b->body_tail[0] = ',';
    memcpy(b->body_tail + 1, s + 1, n); /* "..." + "}" + NUL */
    b->body_tail_len = n;               /* ',' + n - 1 chars */
    /* "{}" would leave ",}": impossible, the object always has members. */
    free(s);
    return 0;
}

static int load_files(rb *b)
{
    char err[ERR_LEN];
    size_t qlimit = 0;
    if (b->o.gt_path != NULL) {
        if (ds_load(b->o.gt_path, 0, &b->gt, err, sizeof err) != 0)
            return cli_fail(CMD, "%s", err);
        if (b->gt.type != DS_I32)
            return cli_fail(CMD, "%s: ground truth must hold int32 ids (.ivecs or <i4 .npy)",
                            b->o.gt_path);
        if (b->gt.dim < b->o.limit)
            return cli_fail(CMD, "%s: %zu ids per query, fewer than --limit %" PRIu64, b->o.gt_path,
                            b->gt.dim, b->o.limit);
        qlimit = b->gt.n;
    }
    if (ds_load_float(b->o.query_path, qlimit, &b->queries, err, sizeof err) != 0)
        return cli_fail(CMD, "%s", err);
    if (b->queries.n == 0)
        return cli_fail(CMD, "%s: no query vectors", b->o.query_path);
    if (b->gt.n > 0 && b->gt.n < b->queries.n)
        return cli_fail(CMD, "internal error: more queries than ground-truth rows");
    if (b->gt.n > b->queries.n)
        return cli_fail(CMD, "%s: %zu ground-truth rows but only %zu queries in %s", b->o.gt_path,
                        b->gt.n, b->queries.n, b->o.query_path);
    return 0;
}

static int init_workers(rb *b)
{
    unsigned maxc = 0;
    for (size_t j = 0; j < b->o.n_levels; j++)
        maxc = b->o.conc[j] > maxc ? b->o.conc[j] : maxc;
    b->w = calloc(maxc, sizeof *b->w);
    if (b->w == NULL)
        return cli_fail(CMD, "out of memory");
    b->n_workers = maxc;
    for (unsigned t = 0; t < maxc; t++) {
        worker *w = &b->w[t];
        w->rb = b;
        w->id = t;
        if (log_init(&w->log) != 0)
            return cli_fail(CMD, "out of memory");
        w->curl = curl_easy_init();
        if (w->curl == NULL)
            return cli_fail(CMD, "curl_easy_init failed");
        curl_easy_setopt(w->curl, CURLOPT_URL, b->url);
        curl_easy_setopt(w->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, b->headers);
        curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(w->curl, CURLOPT_ERRORBUFFER, w->errbuf);
        curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->curl, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(w->curl, CURLOPT_TIMEOUT_MS, (long)(b->o.timeout_s * 1000));
        curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        if (b->grpc) {
            curl_easy_setopt(w->curl, CURLOPT_HTTP_VERSION,
                             (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
            curl_easy_setopt(w->curl, CURLOPT_HEADERFUNCTION, header_cb);
            curl_easy_setopt(w->curl, CURLOPT_HEADERDATA, w);
        }
    }
    return 0;
}

/* One search before the first level: the target must answer it with code 0. */
static int probe(rb *b)
{
    char msg[MSG_MAX];
    req_outcome r = do_request(b, &b->w[0], 0, false, msg, sizeof msg);
    if (r == REQ_TRANSPORT)
        return cli_fail(CMD, "cannot reach %s: %s", b->o.target, msg);
    if (r != REQ_OK)
        return cli_fail(CMD, "probe search on collection '%s' at %s failed: %s", b->o.collection,
                        b->url, msg);
    return 0;
}

/* ------------------------------------------------------------------ levels */

static int run_level(rb *b, size_t li)
{
    unsigned conc = b->o.conc[li];
    level_result *res = &b->res[li];
    memset(res, 0, sizeof *res);
    res->conc = conc;
    b->level_conc = conc;
    atomic_store(&b->first_fail_printed, false);
    for (unsigned t = 0; t < conc; t++) {
        worker *w = &b->w[t];
        log_reset(&w->log);
        w->next_query = (size_t)((uint64_t)t * b->queries.n / conc);
        w->recall_sum = 0;
        w->recall_n = 0;
    }
    char ts[48];
    bp_stamp(ts, sizeof ts);
    printf("[%s] concurrency %u: %" PRIu64 " s%s, limit %" PRIu64 ", nq %" PRIu64 "\n", ts, conc,
           b->o.duration_s, b->o.warmup_s ? " after warmup" : "", b->o.limit, b->o.nq);
    (void)fflush(stdout);

    double start = cli_now();
    b->t_warm_end = start + (double)b->o.warmup_s;
    b->t_deadline = b->t_warm_end + (double)b->o.duration_s;
    b->level_done = false;
    atomic_store(&b->stop, false);

    pthread_t *th = calloc(conc, sizeof *th);
    if (th == NULL)
        return cli_fail(CMD, "out of memory");
    unsigned started = 0;
    int rc = 0;
    for (; started < conc; started++) {
        if (pthread_create(&th[started], NULL, worker_main, &b->w[started]) != 0) {
            rc = cli_fail(CMD, "cannot start worker thread %u", started);
            atomic_store(&b->stop, true); /* the started ones stop after their request */
            break;
        }
    }
    pthread_t rep;
    bool rep_ok = rc == 0 && pthread_create(&rep, NULL, reporter_main, b) == 0;
    for (unsigned t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    free(th);
    pthread_mutex_lock(&b->mu);
    b->level_done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (rep_ok)
        pthread_join(rep, NULL);
    if (rc != 0)
        return rc;

    double end = b->t_warm_end;
    double rsum = 0;
    uint64_t rn = 0;
    for (unsigned t = 0; t < conc; t++) {
        end = b->w[t].t_end > end ? b->w[t].t_end : end;
        rsum += b->w[t].recall_sum;
        rn += b->w[t].recall_n;
    }
    snap s;
    if (collect(b, conc, &s) != 0)
        return cli_fail(CMD, "out of memory collecting latencies");
    qsort(b->scratch, s.n, sizeof *b->scratch, cmp_float);
    res->requests = s.reqs;
    res->failures = s.fails;
    res->elapsed_s = end - b->t_warm_end;
    res->qps = res->elapsed_s > 0 ? (double)s.reqs / res->elapsed_s : 0.0;
    res->avg_ms = s.n ? s.sum / (double)s.n : 0.0;
    res->min_ms = s.min;
    res->max_ms = s.max;
    res->p50_ms = pct_sorted(b->scratch, s.n, 0.50);
    res->p95_ms = pct_sorted(b->scratch, s.n, 0.95);
    res->p99_ms = pct_sorted(b->scratch, s.n, 0.99);
    res->recall = b->gt.n > 0 ? (rn ? rsum / (double)rn : 0.0) : (double)NAN;

    bp_block(res->requests, res->failures, res->avg_ms, res->min_ms, res->max_ms, res->p50_ms,
             res->elapsed_s);
    bp_stamp(ts, sizeof ts);
    printf("[%s] search run finished, concurrency: %u, qps %.2f, p95 %.3f ms, p99 %.3f ms", ts,
           conc, res->qps, res->p95_ms, res->p99_ms);
    if (b->gt.n > 0)
        printf(", recall@%" PRIu64 " %.4f (%" PRIu64 " queries)", b->o.limit, res->recall, rn);
    printf("\n");
    (void)fflush(stdout);
    return 0;
}

static void print_table(const rb *b)
{
    printf("\n%11s %10s %9s %10s %9s %9s %9s %9s", "concurrency", "requests", "failures", "qps",
           "avg_ms", "p50_ms", "p95_ms", "p99_ms");
    if (b->gt.n > 0)
        printf(" %9s", "recall");
    printf("\n");
    for (size_t j = 0; j < b->o.n_levels; j++) {
        const level_result *r = &b->res[j];
        printf("%11u %10" PRIu64 " %9" PRIu64 " %10.2f %9.3f %9.3f %9.3f %9.3f", r->conc,
               r->requests, r->failures, r->qps, r->avg_ms, r->p50_ms, r->p95_ms, r->p99_ms);
        if (b->gt.n > 0)
            printf(" %9.4f", r->recall);
        printf("\n");
    }
    (void)fflush(stdout);
}

static int write_json(const rb *b)
{
    json_t *root = json_object();
    json_t *levels = json_array();
    json_t *cn = json_array(), *cq = json_array(), *c99 = json_array(), *cavg = json_array();
    json_object_set_new(root, "target", json_string(b->o.target));
    json_object_set_new(root, "collection", json_string(b->o.collection));
    json_object_set_new(root, "limit", json_integer((json_int_t)b->o.limit));
    json_object_set_new(root, "nq", json_integer((json_int_t)b->o.nq));
    json_object_set_new(root, "duration_s", json_integer((json_int_t)b->o.duration_s));
    json_object_set_new(root, "warmup_s", json_integer((json_int_t)b->o.warmup_s));
    json_object_set_new(root, "queries", json_integer((json_int_t)b->queries.n));
    for (size_t j = 0; j < b->o.n_levels; j++) {
        const level_result *r = &b->res[j];
        json_t *l = json_object();
        json_t *lat = json_object();
        json_object_set_new(l, "concurrency", json_integer(r->conc));
        json_object_set_new(l, "requests", json_integer((json_int_t)r->requests));
        json_object_set_new(l, "failures", json_integer((json_int_t)r->failures));
        json_object_set_new(l, "elapsed_s", json_real(r->elapsed_s));
        json_object_set_new(l, "qps", json_real(r->qps));
        json_object_set_new(lat, "avg", json_real(r->avg_ms));
        json_object_set_new(lat, "min", json_real(r->min_ms));
        json_object_set_new(lat, "max", json_real(r->max_ms));
        json_object_set_new(lat, "p50", json_real(r->p50_ms));
        json_object_set_new(lat, "p95", json_real(r->p95_ms));
        json_object_set_new(lat, "p99", json_real(r->p99_ms));
        json_object_set_new(l, "latency_ms", lat);
        if (b->gt.n > 0)
            json_object_set_new(l, "recall", json_real(r->recall));
        json_array_append_new(levels, l);
        json_array_append_new(cn, json_integer(r->conc));
        json_array_append_new(cq, json_real(r->qps));
        json_array_append_new(c99, json_real(r->p99_ms / 1000.0));
        json_array_append_new(cavg, json_real(r->avg_ms / 1000.0));
    }
    json_object_set_new(root, "levels", levels);
    json_object_set_new(root, "conc_num_list", cn);
    json_object_set_new(root, "conc_qps_list", cq);
    json_object_set_new(root, "conc_latency_p99_list", c99);
    json_object_set_new(root, "conc_latency_avg_list", cavg);
    int rc = json_dump_file(root, b->o.json_path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc != 0)
        return cli_fail(CMD, "cannot write %s", b->o.json_path);
    printf("results written to %s\n", b->o.json_path);
    return 0;
}

static void rb_fini(rb *b)
{
    for (size_t t = 0; t < b->n_workers; t++) {
        worker *w = &b->w[t];
        if (w->curl != NULL)
            curl_easy_cleanup(w->curl);
        log_free(&w->log);
        free(w->body);
        free(w->resp);
    }
    free(b->w);
    curl_slist_free_all(b->headers);
    ds_free(&b->queries);
    ds_free(&b->gt);
    free(b->vec_text);
    free(b->vec_off);
    free(b->body_tail);
    free(b->gr_tmpl);
    free(b->scratch);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

int cli_bench_remote(int argc, char **argv)
{
    rb *b = calloc(1, sizeof *b);
    if (b == NULL)
        return cli_fail(CMD, "out of memory");
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&b->first_fail_printed, false);
    atomic_init(&b->stop, false);
    bool curl_up = false;

    int rc = parse_args(&b->o, argc, argv);
    if (rc != 0) {
        if (rc == CLI_EXIT_USAGE)
            fprintf(stderr, "Run 'sextant bench --help' for usage.\n");
        else
            rc = CLI_EXIT_OK;
        goto out;
    }
    rc = build_tail(b);
    if (rc != 0) {
        if (rc == CLI_EXIT_USAGE)
            fprintf(stderr, "Run 'sextant bench --help' for usage.\n");
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    size_t tl = strlen(b->o.target);
    while (tl > 0 && b->o.target[tl - 1] == '/')
        tl--;
    if (tl + sizeof SEARCH_PATH > sizeof b->url) {
        cli_fail(CMD, "--target is too long");
        goto out;
    }
    b->grpc = strncmp(b->o.target, "grpc://", 7) == 0;
    if (b->grpc)
        snprintf(b->url, sizeof b->url, "http://%.*s%s", (int)tl - 7, b->o.target + 7, GRPC_PATH);
    else
        snprintf(b->url, sizeof b->url, "%.*s%s", (int)tl, b->o.target, SEARCH_PATH);
    if (load_files(b) != 0 || render_queries(b) != 0 || (b->grpc && build_grpc_template(b) != 0))
        goto out;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        cli_fail(CMD, "curl_global_init failed");
        goto out;
    }
    curl_up = true;
    if (b->grpc) {
        b->headers = curl_slist_append(NULL, "Content-Type: application/grpc");
        b->headers = curl_slist_append(b->headers, "TE: trailers");
        b->headers = curl_slist_append(b->headers, "Expect:");
        if (b->o.token != NULL) {
            static const char b64[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            size_t n = strlen(b->o.token), o = 0;
            char *h = malloc(n * 2 + 32);
            if (h == NULL) {
                cli_fail(CMD, "out of memory");
                goto out;
            }
            o = (size_t)sprintf(h, "authorization: ");
            const unsigned char *t = (const unsigned char *)b->o.token;
            for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t)t[i] << 16 | (i + 1 < n ? (uint32_t)t[i + 1] << 8 : 0) |
                             (i + 2 < n ? t[i + 2] : 0);
                h[o++] = b64[v >> 18 & 63];
                h[o++] = b64[v >> 12 & 63];
                h[o++] = (char)(i + 1 < n ? b64[v >> 6 & 63] : '=');
                h[o++] = (char)(i + 2 < n ? b64[v & 63] : '=');
            }
            h[o] = '\0';
            b->headers = curl_slist_append(b->headers, h);
            free(h);
        }
    } else {
        b->headers = curl_slist_append(NULL, "Content-Type: application/json");
        b->headers = curl_slist_append(b->headers, "Accept-Type-Allow-Int64: true");
        b->headers = curl_slist_append(b->headers, "Expect:");
    }
    if (b->o.token != NULL && !b->grpc) {
        size_t hl = strlen(b->o.token) + 32;
        char *h = malloc(hl);
        if (h == NULL) {
            cli_fail(CMD, "out of memory");
            goto out;
        }
        snprintf(h, hl, "Authorization: Bearer %s", b->o.token);
        b->headers = curl_slist_append(b->headers, h);
        free(h);
    }
    if (b->headers == NULL) {
        cli_fail(CMD, "out of memory");
        goto out;
    }
    if (init_workers(b) != 0 || probe(b) != 0)
        goto out;
    printf("target %s, collection %s, %zu queries of dim %zu%s, levels %s\n", b->url,
           b->o.collection, b->queries.n, b->queries.dim, b->gt.n ? ", ground truth" : "",
           b->o.conc_text);
    for (size_t j = 0; j < b->o.n_levels; j++) {
        if (run_level(b, j) != 0)
            goto out;
    }
    print_table(b);
    if (b->o.json_path != NULL && write_json(b) != 0)
        goto out;
    rc = CLI_EXIT_OK;
out:
    rb_fini(b);
    free(b);
    if (curl_up)
        curl_global_cleanup();
    return rc;
}
