/*
 * test_server_multivec.c: collections with several FloatVector fields (Milvus's data model: up to
 * four, each with its own dim, metric and index) through the REST handlers (collections,
 * indexes, entities), called directly on a catalog in a temporary directory.
 *
 * The collection "mv" has two vector fields of different dims and metrics: a (dim 8, L2, HNSW)
 * and b (dim 16, IP, FLAT). Every search answer is compared with a brute-force oracle computed
 * here in double: while the rows are in the growing segment (searched exactly whatever the
 * index) the top-k of both fields and the hybrid searches (RRF and weighted, the fused scores
 * computed here from the two exact rankings); once flushed, FLAT stays exact and HNSW (ef above
 * the row count) must find each row's own vector first. Vector values are multiples of 2^-16,
 * exact in float and through JSON, so vectors read back are compared byte for byte. Bad inputs
 * (a missing vector column, a wrong dim on the second field, an unknown or missing annsField)
 * must be refused with their Milvus-style messages and write nothing.
 *
 * "mv2" covers the index routes: one create per field with default names (the field's), a name
 * clash, load refused while one field lacks an index, list / describe / drop by name, metrics
 * per field, persistence across a reopen; and a version 1 metadata file (single vector field,
 * state at the top level) still loads.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "server/server.h"

static sx__catalog *g_cat;
static const char *g_dir;
static sx_server_options g_opts;

#define N     300
#define DA    8
#define DB    16
#define K     10
#define PI_D  3.14159265358979323846
#define EPS_D 1e-4 /* float32 engine distances vs the double oracle */
#define N_QRY 6

static float g_a[N][DA], g_b[N][DB];

/* ------------------------------------------------------------------ helpers */

/* Runs the handler of `path` on body (stolen). Returns the answer (caller decrefs). */
static json_t *call_j(const char *path, json_t *body)
{
    sx__handler_fn fn = NULL;
    const sx__route *tables[] = { sx__routes_entities, sx__routes_indexes, sx__routes_collections,
                                  sx__routes_admin };
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const sx__route *r = tables[t]; r->path; r++)
            if (strcmp(r->path, path) == 0)
                fn = r->fn;
    if (!fn || !body) {
        json_decref(body);
        return NULL;
    }
    sx__req rq = { .cat = g_cat,
                   .opts = &g_opts,
                   .body = body,
                   .db_name = "default",
                   .int64_as_string = false,
                   .timeout_s = 30 };
    sx__resp rs = { 200, NULL, NULL, 0 };
    fn(&rq, &rs);
    json_decref(body);
    json_t *out = sx__resp_json(&rs);
    if (!out)
        out = json_pack("{s:i,s:{}}", "code", 0, "data");
    return out;
}

/* The same with a JSON text where ` stands for ". */
static json_t *call(const char *path, const char *text)
{
    char *buf = strdup(text);
    for (char *p = buf; *p; p++)
        if (*p == '`')
            *p = '"';
    json_error_t e;
    json_t *body = json_loads(buf, 0, &e);
    if (!body)
        fprintf(stderr, "bad test body: %s: %s\n", buf, e.text);
    free(buf);
    return call_j(path, body);
}

static int code_of(const json_t *r)
{
    return r ? (int)json_integer_value(json_object_get(r, "code")) : -1;
}

static const char *msg_of(const json_t *r)
{
    const char *m = json_string_value(json_object_get(r, "message"));
    return m ? m : "";
}

/* Asserts the answer's code and that its message holds `part` (NULL: any); frees it. */
#define EXPECT(resp, want, part)                                                 \
 do {                                                                            \
  json_t *r_ = (resp);                                                           \
  const char *p_ = (part);                                                       \
  if (code_of(r_) != (want) || (p_ && !strstr(msg_of(r_), p_))) {                \
   char *d_ = r_ ? json_dumps(r_, JSON_COMPACT) : NULL;                          \
   char m_[1200];                                                                \
   snprintf(m_, sizeof m_, "want code %d with \"%s\": %s", (want), p_ ? p_ : "", \
            d_ ? d_ : "(null)");                                                 \
   free(d_);                                                                     \
   json_decref(r_);                                                              \
   FAILF("%s", m_);                                                              \
  }                                                                              \
  json_decref(r_);                                                               \
 } while (0)

/* Asserts code 0 and returns the answer (caller decrefs), else fails the test. */
#define OK(var, expr)                                                   \
 do {                                                                   \
  var = (expr);                                                         \
  if (code_of(var) != 0) {                                              \
   char *d_ = var ? json_dumps(var, JSON_COMPACT) : NULL;               \
   char m_[1200];                                                       \
   snprintf(m_, sizeof m_, "unexpected failure: %s", d_ ? d_ : "null"); \
   free(d_);                                                            \
   json_decref(var);                                                    \
   FAILF("%s", m_);                                                     \
  }                                                                     \
 } while (0)

static json_t *data_of(json_t *r)
{
    return json_object_get(r, "data");
}

static int64_t jint(const json_t *row, const char *k)
{
    return json_integer_value(json_object_get(row, k));
}

static json_t *vec_json(const float *v, size_t dim)
{
    json_t *a = json_array();
    for (size_t i = 0; i < dim; i++)
        json_array_append_new(a, json_real((double)v[i]));
    return a;
}

/* Whether JSON array j holds exactly the floats of v (bytes compared). */
static bool vec_same(const json_t *j, const float *v, size_t dim)
{
    if (!json_is_array(j) || json_array_size(j) != dim)
        return false;
    for (size_t i = 0; i < dim; i++) {
        float x = (float)json_number_value(json_array_get(j, i));
        if (memcmp(&x, &v[i], sizeof x) != 0)
            return false;
    }
    return true;
}

/* A multiple of 2^-16 in (-1, 1): exact in float and in the JSON round trip. */
static float rand_val(uint64_t *s)
{
    int64_t k = (int64_t)(test_rand(s) % 131071u) - 65535;
    return (float)((double)k / 65536.0);
}

static uint64_t live_rows(const char *coll)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = malloc(sizeof *m);
    uint64_t n = UINT64_MAX;
    if (m && sx__cat_coll_get(g_cat, "default", coll, &h, m) == SX_OK) {
        if (sx_count(h, NULL, &n) != SX_OK)
            n = UINT64_MAX;
        sx_collection_release(h);
    }
    free(m);
    return n;
}

/* ------------------------------------------------------------------ the oracle */

typedef struct hit {
    int64_t id;
    double d;
} hit;

static double dist_a(const float *q, size_t i) /* squared L2 */
{
    double s = 0;
    for (size_t k = 0; k < DA; k++) {
        double t = (double)q[k] - (double)g_a[i][k];
        s += t * t;
    }
    return s;
}

static double dist_b(const float *q, size_t i) /* inner product */
{
    double s = 0;
    for (size_t k = 0; k < DB; k++)
        s += (double)q[k] * (double)g_b[i][k];
    return s;
}

static bool g_ip_sort; /* qsort context: larger first (IP) or smaller first (L2) */

static int hit_cmp(const void *x, const void *y)
{
    const hit *a = x, *b = y;
    if (a->d != b->d)
        return (g_ip_sort ? a->d > b->d : a->d < b->d) ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

/* The exact ranking of every row (n_live rows: ids [0, n_live)) for query q on field a or b. */
static void rank_all(bool on_b, const float *q, size_t n_live, hit *out)
{
    for (size_t i = 0; i < n_live; i++)
        out[i] = (hit){ (int64_t)i, on_b ? dist_b(q, i) : dist_a(q, i) };
    g_ip_sort = on_b;
    qsort(out, n_live, sizeof *out, hit_cmp);
}

/* Checks a search answer (rows with id and distance) against the exact ranking: the same
 * distances rank by rank, the same ids but where two exact distances are within EPS_D (a
 * float32 tie), and each returned id's exact distance equal to the one answered. */
static bool check_topk(
    const json_t *rows, const hit *want, size_t k, bool on_b, const float *q, char *why, size_t cap)
{
    if (json_array_size(rows) != k) {
        snprintf(why, cap, "%zu hits, want %zu", json_array_size(rows), k);
        return false;
    }
    for (size_t i = 0; i < k; i++) {
        const json_t *row = json_array_get(rows, i);
        int64_t id = jint(row, "id");
        double d = json_number_value(json_object_get(row, "distance"));
        if (id < 0 || id >= N) {
            snprintf(why, cap, "hit %zu: id %lld", i, (long long)id);
            return false;
        }
        double exact = on_b ? dist_b(q, (size_t)id) : dist_a(q, (size_t)id);
        double tol = EPS_D * (1.0 + fabs(want[i].d));
        if (fabs(d - want[i].d) > tol || fabs(exact - d) > tol ||
            (id != want[i].id && fabs(exact - want[i].d) > tol)) {
            snprintf(why, cap, "hit %zu: id %lld distance %.9g, want id %lld distance %.9g", i,
                     (long long)id, d, (long long)want[i].id, want[i].d);
            return false;
        }
    }
    return true;
}

typedef struct fused {
    int64_t id;
    double score;
} fused;

static int fused_cmp(const void *x, const void *y)
{
    const fused *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

/* The fused ranking of two sub-searches (a: L2 top sub_k, b: IP top sub_k) as Milvus fuses:
 * RRF(60) or weighted (L2 1 - 2 atan(d)/pi, IP 0.5 + atan(d)/pi). Returns the candidates. */
static size_t fuse(const float *qa,
                   const float *qb,
                   size_t n_live,
                   size_t sub_k,
                   bool weighted,
                   const double *w,
                   fused *out)
{
    static hit ra[N], rb[N];
    rank_all(false, qa, n_live, ra);
    rank_all(true, qb, n_live, rb);
    double score[N] = { 0 };
    bool seen[N] = { false };
    for (size_t h = 0; h < sub_k; h++) {
        score[ra[h].id] +=
            weighted ? w[0] * (1.0 - 2.0 * atan(ra[h].d) / PI_D) : 1.0 / (60.0 + (double)(h + 1));
        seen[ra[h].id] = true;
        score[rb[h].id] +=
            weighted ? w[1] * (0.5 + atan(rb[h].d) / PI_D) : 1.0 / (60.0 + (double)(h + 1));
        seen[rb[h].id] = true;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_live; i++)
        if (seen[i])
            out[n++] = (fused){ (int64_t)i, score[i] };
    qsort(out, n, sizeof *out, fused_cmp);
    return n;
}

/* ------------------------------------------------------------------ requests */

/* A search of field `anns` (NULL: none named) with one query. */
static json_t *
search_body(const char *anns, const float *q, size_t dim, size_t limit, const char *params_json)
{
    json_t *b = json_pack("{s:s,s:[o],s:I}", "collectionName", "mv", "data", vec_json(q, dim),
                          "limit", (json_int_t)limit);
    if (anns)
        json_object_set_new(b, "annsField", json_string(anns));
    if (params_json) {
        json_error_t e;
        json_object_set_new(b, "searchParams", json_loads(params_json, 0, &e));
    }
    return b;
}

/* A hybrid search: sub-request 0 on a (with params_a, NULL: none), 1 on b. */
static json_t *hybrid_body(const float *qa,
                           const float *qb,
                           size_t sub_k,
                           size_t limit,
                           const char *rerank,
                           const char *params_a)
{
    json_error_t e;
    json_t *subs = json_pack("[{s:s,s:[o],s:I},{s:s,s:[o],s:I}]", "annsField", "a", "data",
                             vec_json(qa, DA), "limit", (json_int_t)sub_k, "annsField", "b", "data",
                             vec_json(qb, DB), "limit", (json_int_t)sub_k);
    if (params_a)
        json_object_set_new(json_array_get(subs, 0), "params", json_loads(params_a, 0, &e));
    return json_pack("{s:s,s:o,s:o,s:I}", "collectionName", "mv", "search", subs, "rerank",
                     json_loads(rerank, 0, &e), "limit", (json_int_t)limit);
}

/* A row of mv as JSON: id, a, b, tag (skip: a field left out, "" none). */
static json_t *row_json(size_t i, const char *skip)
{
    json_t *r = json_pack("{s:I,s:I}", "id", (json_int_t)i, "tag", (json_int_t)(i % 7));
    if (strcmp(skip, "a") != 0)
        json_object_set_new(r, "a", vec_json(g_a[i], DA));
    if (strcmp(skip, "b") != 0)
        json_object_set_new(r, "b", vec_json(g_b[i], DB));
    return r;
}

/* ------------------------------------------------------------------ tests */

static void test_setup(void)
{
    g_dir = test_tmpdir("srv_multivec");
    sx_db_options o = { .sync_mode = SX_SYNC_NONE };
    ASSERT_OK(sx__cat_open(g_dir, &o, &g_cat));
    uint64_t s = 0x5eed5eedULL;
    for (size_t i = 0; i < N; i++) {
        for (size_t k = 0; k < DA; k++)
            g_a[i][k] = rand_val(&s);
        for (size_t k = 0; k < DB; k++)
            g_b[i][k] = rand_val(&s);
    }
}

/* create, insert (and the refused inserts), indexes, describe, load */
static void test_create_insert(void)
{
    json_t *r;
    OK(r, call("/v2/vectordb/collections/create",
               "{`collectionName`:`mv`,`schema`:{`fields`:["
               "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
               "{`fieldName`:`a`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:8}},"
               "{`fieldName`:`tag`,`dataType`:`Int64`},"
               "{`fieldName`:`b`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:16}}]}}"));
    json_decref(r);
    /* no index yet: load is refused, as Milvus */
    EXPECT(call("/v2/vectordb/collections/load", "{`collectionName`:`mv`}"), SX__MC_INDEX_NOT_FOUND,
           "index not found[collection=mv]");
    json_t *rows = json_array();
    for (size_t i = 0; i < N; i++)
        json_array_append_new(rows, row_json(i, ""));
    OK(r, call_j("/v2/vectordb/entities/insert",
                 json_pack("{s:s,s:o}", "collectionName", "mv", "data", rows)));
    ASSERT_EQ(jint(data_of(r), "insertCount"), N);
    json_decref(r);
    ASSERT_EQ(live_rows("mv"), N);

    /* refused, nothing written: a missing vector column, a wrong dim on the second field (also on
     * the first), the first row fine */
    const char *skip[] = { "b", "a" };
    for (size_t t = 0; t < 2; t++) {
        json_t *bad = json_pack("[o,o]", row_json(0, ""), row_json(1, skip[t]));
        json_object_set_new(json_array_get(bad, 0), "id", json_integer(N + 1));
        json_object_set_new(json_array_get(bad, 1), "id", json_integer(N + 2));
        char want[64];
        snprintf(want, sizeof want, "row 1: the field %s is missing", skip[t]);
        EXPECT(call_j("/v2/vectordb/entities/insert",
                      json_pack("{s:s,s:o}", "collectionName", "mv", "data", bad)),
               SX__MC_BAD_INSERT, want);
    }
    json_t *bad = json_pack("[o]", row_json(3, ""));
    json_object_set_new(json_array_get(bad, 0), "id", json_integer(N + 3));
    json_object_set_new(json_array_get(bad, 0), "b", vec_json(g_b[3], DA)); /* 8 floats, not 16 */
    EXPECT(call_j("/v2/vectordb/entities/insert",
                  json_pack("{s:s,s:o}", "collectionName", "mv", "data", bad)),
           SX__MC_BAD_INSERT, "field b: the dimension (8) does not match the schema (16)");
    bad = json_pack("[o]", row_json(3, ""));
    json_object_set_new(json_array_get(bad, 0), "id", json_integer(N + 3));
    json_object_set_new(json_array_get(bad, 0), "a", vec_json(g_b[3], DB));
    EXPECT(call_j("/v2/vectordb/entities/upsert",
                  json_pack("{s:s,s:o}", "collectionName", "mv", "data", bad)),
           SX__MC_BAD_INSERT, "field a: the dimension (16) does not match the schema (8)");
    ASSERT_EQ(live_rows("mv"), N);

    /* both indexes in one call: HNSW L2 on a (named), FLAT IP on b (default name: b) */
    OK(r, call("/v2/vectordb/indexes/create",
               "{`collectionName`:`mv`,`indexParams`:["
               "{`fieldName`:`a`,`indexName`:`a_idx`,`metricType`:`L2`,`indexType`:`HNSW`,"
               "`params`:{`M`:16,`efConstruction`:200}},"
               "{`fieldName`:`b`,`metricType`:`IP`,`indexType`:`FLAT`}]}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/indexes/list", "{`collectionName`:`mv`}"));
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    ASSERT(strcmp(json_string_value(json_array_get(data_of(r), 0)), "a_idx") == 0);
    ASSERT(strcmp(json_string_value(json_array_get(data_of(r), 1)), "b") == 0);
    json_decref(r);
    const char *iname[] = { "a_idx", "b" }, *fname[] = { "a", "b" }, *mt[] = { "L2", "IP" },
               *it[] = { "HNSW", "FLAT" };
    for (size_t i = 0; i < 2; i++) {
        json_t *b = json_pack("{s:s,s:s}", "collectionName", "mv", "indexName", iname[i]);
        OK(r, call_j("/v2/vectordb/indexes/describe", b));
        json_t *d = json_array_get(data_of(r), 0);
        ASSERT(strcmp(json_string_value(json_object_get(d, "fieldName")), fname[i]) == 0);
        ASSERT(strcmp(json_string_value(json_object_get(d, "metricType")), mt[i]) == 0);
        ASSERT(strcmp(json_string_value(json_object_get(d, "indexType")), it[i]) == 0);
        json_decref(r);
    }
    /* describe: both vector fields with their dims, both indexes */
    OK(r, call("/v2/vectordb/collections/describe", "{`collectionName`:`mv`}"));
    json_t *fields = json_object_get(data_of(r), "fields");
    ASSERT_EQ(json_array_size(fields), 4);
    const char *dims[] = { NULL, "8", NULL, "16" };
    for (size_t i = 0; i < 4; i++) {
        json_t *p = json_object_get(json_array_get(fields, i), "params");
        if (dims[i])
            ASSERT(strcmp(json_string_value(json_object_get(json_array_get(p, 0), "value")),
                          dims[i]) == 0);
    }
    json_t *idx = json_object_get(data_of(r), "indexes");
    ASSERT_EQ(json_array_size(idx), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(idx, i);
        ASSERT(strcmp(json_string_value(json_object_get(e, "fieldName")), fname[i]) == 0);
        ASSERT(strcmp(json_string_value(json_object_get(e, "indexName")), iname[i]) == 0);
        ASSERT(strcmp(json_string_value(json_object_get(e, "metricType")), mt[i]) == 0);
    }
    json_decref(r);
    OK(r, call("/v2/vectordb/collections/load", "{`collectionName`:`mv`}"));
    json_decref(r);
}

/* Queries: stored rows' vectors perturbed, fixed seed. */
static void make_query(size_t t, float *qa, float *qb)
{
    uint64_t s = 1000 + t;
    for (size_t k = 0; k < DA; k++)
        qa[k] = g_a[(t * 37) % N][k] + rand_val(&s) / 4;
    for (size_t k = 0; k < DB; k++)
        qb[k] = g_b[(t * 53) % N][k] + rand_val(&s) / 4;
}

/* Exact top-k of each field (the rows are growing, or b's FLAT index). */
static void check_exact(bool only_b)
{
    static hit want[N];
    char why[256];
    for (size_t t = 0; t < N_QRY; t++) {
        float qa[DA], qb[DB];
        make_query(t, qa, qb);
        json_t *r;
        if (!only_b) {
            OK(r, call_j("/v2/vectordb/entities/search", search_body("a", qa, DA, K, NULL)));
            rank_all(false, qa, N, want);
            if (!check_topk(data_of(r), want, K, false, qa, why, sizeof why)) {
                json_decref(r);
                FAILF("query %zu on a: %s", t, why);
            }
            json_decref(r);
        }
        OK(r, call_j("/v2/vectordb/entities/search", search_body("b", qb, DB, K, NULL)));
        rank_all(true, qb, N, want);
        if (!check_topk(data_of(r), want, K, true, qb, why, sizeof why)) {
            json_decref(r);
            FAILF("query %zu on b: %s", t, why);
        }
        json_decref(r);
    }
}

/* Hybrid searches (RRF and weighted) against the fusion of the exact rankings. params_a: the
 * sub-request on a's search params (NULL: none). */
static void check_hybrid(const char *params_a)
{
    static fused want[2 * N];
    const char *rerank[] = { "{\"strategy\":\"rrf\",\"params\":{\"k\":60}}",
                             "{\"strategy\":\"weighted\",\"params\":{\"weights\":[0.6,0.4]}}" };
    const double w[2] = { 0.6, 0.4 };
    for (size_t t = 0; t < N_QRY; t++) {
        float qa[DA], qb[DB];
        make_query(t, qa, qb);
        for (size_t v = 0; v < 2; v++) {
            size_t n = fuse(qa, qb, N, 20, v == 1, w, want);
            ASSERT(n >= K);
            json_t *r;
            OK(r, call_j("/v2/vectordb/entities/hybrid_search",
                         hybrid_body(qa, qb, 20, K, rerank[v], params_a)));
            json_t *d = data_of(r);
            ASSERT_EQ(json_array_size(d), K);
            for (size_t i = 0; i < K; i++) {
                json_t *row = json_array_get(d, i);
                double score = json_number_value(json_object_get(row, "distance"));
                if (jint(row, "id") != want[i].id || fabs(score - want[i].score) > 1e-5) {
                    int64_t got = jint(row, "id");
                    json_decref(r);
                    FAILF("query %zu rerank %zu hit %zu: id %lld score %.9g, want id %lld score "
                          "%.9g",
                          t, v, i, (long long)got, score, (long long)want[i].id, want[i].score);
                }
            }
            json_decref(r);
        }
    }
}

static void test_search_growing(void)
{
    check_exact(false);
    check_hybrid(NULL);
}

/* Refused searches: no annsField with two vector fields, unknown and scalar fields, a query of
 * the other field's dim, the other field's metric. */
static void test_search_errors(void)
{
    float qa[DA], qb[DB];
    make_query(0, qa, qb);
    EXPECT(call_j("/v2/vectordb/entities/search", search_body(NULL, qa, DA, K, NULL)),
           SX__MC_INVALID_PARAM,
           "multiple anns_fields exist, please specify a anns_field in search_params");
    EXPECT(call_j("/v2/vectordb/entities/search", search_body("zz", qa, DA, K, NULL)),
           SX__MC_INVALID_PARAM,
           "failed to create query plan: failed to get field schema by name: fieldName(zz) not "
           "found");
    EXPECT(call_j("/v2/vectordb/entities/search", search_body("tag", qa, DA, K, NULL)),
           SX__MC_INVALID_PARAM, "field (tag) to search is not of vector data type");
    EXPECT(call_j("/v2/vectordb/entities/search", search_body("b", qa, DA, K, NULL)),
           SX__MC_BAD_JSON, "does not match the field dimension (16)");
    EXPECT(call_j("/v2/vectordb/entities/search",
                  search_body("b", qb, DB, K, "{\"metricType\":\"L2\"}")),
           SX__MC_INVALID_PARAM, "[expected=IP][actual=L2]");
    EXPECT(call_j("/v2/vectordb/entities/search",
                  search_body("a", qa, DA, K, "{\"metricType\":\"L2\"}")),
           0, NULL);
    /* hybrid: each sub-request names its field */
    json_t *b = hybrid_body(qa, qb, 20, K, "{\"strategy\":\"rrf\"}", NULL);
    json_object_del(json_array_get(json_object_get(b, "search"), 1), "annsField");
    EXPECT(call_j("/v2/vectordb/entities/hybrid_search", b), SX__MC_INVALID_PARAM,
           "multiple anns_fields exist");
    b = hybrid_body(qa, qb, 20, K, "{\"strategy\":\"rrf\"}", NULL);
    json_object_set_new(json_array_get(json_object_get(b, "search"), 1), "annsField",
                        json_string("a")); /* b's 16-dim query on a */
    EXPECT(call_j("/v2/vectordb/entities/hybrid_search", b), SX__MC_BAD_JSON,
           "does not match the field dimension (8)");
}

/* Both vectors read back byte for byte: search, get ("*"), query. */
static void test_outputs(void)
{
    float qa[DA], qb[DB];
    make_query(1, qa, qb);
    json_t *b = search_body("b", qb, DB, 5, NULL), *r;
    json_object_set_new(b, "outputFields", json_pack("[s,s]", "a", "b"));
    OK(r, call_j("/v2/vectordb/entities/search", b));
    ASSERT_EQ(json_array_size(data_of(r)), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *row = json_array_get(data_of(r), i);
        size_t id = (size_t)jint(row, "id");
        ASSERT(id < N);
        ASSERT(vec_same(json_object_get(row, "a"), g_a[id], DA));
        ASSERT(vec_same(json_object_get(row, "b"), g_b[id], DB));
    }
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/get",
               "{`collectionName`:`mv`,`id`:[7,250,3],`outputFields`:[`*`]}"));
    const size_t ids[] = { 7, 250, 3 };
    ASSERT_EQ(json_array_size(data_of(r)), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(data_of(r), i);
        ASSERT_EQ(jint(row, "id"), (int64_t)ids[i]);
        ASSERT_EQ(jint(row, "tag"), (int64_t)(ids[i] % 7));
        ASSERT(vec_same(json_object_get(row, "a"), g_a[ids[i]], DA));
        ASSERT(vec_same(json_object_get(row, "b"), g_b[ids[i]], DB));
    }
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/query",
               "{`collectionName`:`mv`,`filter`:`id < 4`,`outputFields`:[`b`]}"));
    ASSERT_EQ(json_array_size(data_of(r)), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *row = json_array_get(data_of(r), i);
        size_t id = (size_t)jint(row, "id");
        ASSERT(id < 4);
        ASSERT(vec_same(json_object_get(row, "b"), g_b[id], DB));
        ASSERT(!json_object_get(row, "a"));
    }
    json_decref(r);
}

/* Sealed: b's FLAT stays exact, a's HNSW finds each row's own vector first. */
static void test_search_sealed(void)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = malloc(sizeof *m);
    ASSERT(m);
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "mv", &h, m));
    free(m);
    ASSERT_OK(sx_flush(h));
    sx_status st = sx_index_wait(h, 120000); /* every indexed vector field */
    sx_index_info ia, ib;
    ASSERT_OK(sx_index_describe_on(h, "a", &ia));
    ASSERT_OK(sx_index_describe_on(h, "b", &ib));
    sx_collection_release(h);
    ASSERT_OK(st);
    ASSERT_EQ(ia.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ib.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ia.indexed_rows, N);
    ASSERT_EQ(ib.indexed_rows, N);
    ASSERT(strcmp(ia.type, "HNSW") == 0 && ia.metric == SX_METRIC_L2);
    ASSERT(strcmp(ib.type, "FLAT") == 0 && ib.metric == SX_METRIC_IP);
    check_exact(true);
    for (size_t i = 0; i < N; i += 7) {
        json_t *r;
        OK(r, call_j("/v2/vectordb/entities/search",
                     search_body("a", g_a[i], DA, 3, "{\"params\":{\"ef\":400}}")));
        json_t *top = json_array_get(data_of(r), 0);
        int64_t id = jint(top, "id");
        double d = json_number_value(json_object_get(top, "distance"));
        json_decref(r);
        if (id != (int64_t)i || d != 0.0)
            FAILF("row %zu: top-1 on a is %lld at %g", i, (long long)id, d);
    }
    /* hybrid on the sealed rows: b's FLAT is exact, a's HNSW with ef above the row count too */
    check_hybrid("{\"ef\":400}");
}

/* Upsert replaces both vectors; one lacking b changes nothing. */
static void test_upsert(void)
{
    json_t *row = row_json(10, ""), *r;
    json_object_set_new(row, "a", vec_json(g_a[11], DA));
    json_object_set_new(row, "b", vec_json(g_b[12], DB));
    OK(r, call_j("/v2/vectordb/entities/upsert",
                 json_pack("{s:s,s:[o]}", "collectionName", "mv", "data", row)));
    json_decref(r);
    row = row_json(10, "b");
    json_object_set_new(row, "a", vec_json(g_a[13], DA));
    EXPECT(call_j("/v2/vectordb/entities/upsert",
                  json_pack("{s:s,s:[o]}", "collectionName", "mv", "data", row)),
           SX__MC_BAD_INSERT, "the field b is missing");
    OK(r, call("/v2/vectordb/entities/get",
               "{`collectionName`:`mv`,`id`:[10],`outputFields`:[`a`,`b`]}"));
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT(vec_same(json_object_get(json_array_get(data_of(r), 0), "a"), g_a[11], DA));
    ASSERT(vec_same(json_object_get(json_array_get(data_of(r), 0), "b"), g_b[12], DB));
    json_decref(r);
    ASSERT_EQ(live_rows("mv"), N);
}

/* mv2: the index routes one field at a time. */
static void test_index_routes(void)
{
    json_t *r;
    OK(r, call("/v2/vectordb/collections/create",
               "{`collectionName`:`mv2`,`schema`:{`fields`:["
               "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
               "{`fieldName`:`x`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:4}},"
               "{`fieldName`:`y`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:4}}]}}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/indexes/create",
               "{`collectionName`:`mv2`,`indexParams`:[{`fieldName`:`x`,`metricType`:`L2`,"
               "`indexType`:`HNSW`,`params`:{`M`:8,`efConstruction`:64}}]}"));
    json_decref(r);
    EXPECT(call("/v2/vectordb/collections/load", "{`collectionName`:`mv2`}"), SX__MC_UNEXPECTED,
           "there is no vector index on field: [y], please create index firstly");
    /* index names are unique in the collection */
    EXPECT(call("/v2/vectordb/indexes/create",
                "{`collectionName`:`mv2`,`indexParams`:[{`fieldName`:`y`,`indexName`:`x`,"
                "`metricType`:`IP`,`indexType`:`FLAT`}]}"),
           SX__MC_UNEXPECTED, "at most one distinct index is allowed per field");
    OK(r, call("/v2/vectordb/indexes/create",
               "{`collectionName`:`mv2`,`indexParams`:[{`fieldName`:`y`,`metricType`:`IP`,"
               "`indexType`:`IVF_FLAT`,`params`:{`nlist`:4}}]}"));
    json_decref(r);
    /* another index on y is refused; the same one again is fine */
    EXPECT(call("/v2/vectordb/indexes/create",
                "{`collectionName`:`mv2`,`indexParams`:[{`fieldName`:`y`,`indexName`:`y2`,"
                "`metricType`:`IP`,`indexType`:`FLAT`}]}"),
           SX__MC_UNEXPECTED,
           "at most one distinct index is allowed per field (field y has "
           "index y)");
    OK(r, call("/v2/vectordb/indexes/list", "{`collectionName`:`mv2`}"));
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    ASSERT(strcmp(json_string_value(json_array_get(data_of(r), 0)), "x") == 0);
    ASSERT(strcmp(json_string_value(json_array_get(data_of(r), 1)), "y") == 0);
    json_decref(r);
    OK(r, call("/v2/vectordb/indexes/describe", "{`collectionName`:`mv2`,`indexName`:`y`}"));
    json_t *d = json_array_get(data_of(r), 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "fieldName")), "y") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "metricType")), "IP") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "indexType")), "IVF_FLAT") == 0);
    json_decref(r);
    OK(r, call("/v2/vectordb/collections/load", "{`collectionName`:`mv2`}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/insert",
               "{`collectionName`:`mv2`,`data`:[{`id`:1,`x`:[1,0,0,0],`y`:[0,1,0,0]},"
               "{`id`:2,`x`:[0,1,0,0],`y`:[1,0,0,0]}]}"));
    json_decref(r);
    /* each field with its own metric: L2 on x, IP on y */
    OK(r, call("/v2/vectordb/entities/search",
               "{`collectionName`:`mv2`,`annsField`:`x`,`data`:[[1,0,0,0]],`limit`:2}"));
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 1);
    ASSERT_NEAR(json_number_value(json_object_get(json_array_get(data_of(r), 1), "distance")), 2.0,
                1e-6);
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/search",
               "{`collectionName`:`mv2`,`annsField`:`y`,`data`:[[3,0,0,0]],`limit`:2}"));
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 2);
    ASSERT_NEAR(json_number_value(json_object_get(json_array_get(data_of(r), 0), "distance")), 3.0,
                1e-6);
    json_decref(r);
    /* drop y's index: refused while loaded; then describe / load answer 700 */
    EXPECT(call("/v2/vectordb/indexes/drop", "{`collectionName`:`mv2`,`indexName`:`y`}"),
           SX__MC_UNEXPECTED, "release it first");
    OK(r, call("/v2/vectordb/collections/release", "{`collectionName`:`mv2`}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/indexes/drop", "{`collectionName`:`mv2`,`indexName`:`y`}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/indexes/list", "{`collectionName`:`mv2`}"));
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT(strcmp(json_string_value(json_array_get(data_of(r), 0)), "x") == 0);
    json_decref(r);
    EXPECT(call("/v2/vectordb/indexes/describe", "{`collectionName`:`mv2`,`indexName`:`y`}"),
           SX__MC_INDEX_NOT_FOUND, "index not found[indexName=y]");
    EXPECT(call("/v2/vectordb/collections/load", "{`collectionName`:`mv2`}"), SX__MC_UNEXPECTED,
           "no vector index on field: [y]");
    /* y again, as COSINE under another name: x keeps L2 */
    OK(r, call("/v2/vectordb/indexes/create",
               "{`collectionName`:`mv2`,`indexParams`:[{`fieldName`:`y`,`indexName`:`y_cos`,"
               "`metricType`:`COSINE`,`indexType`:`FLAT`}]}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/collections/load", "{`collectionName`:`mv2`}"));
    json_decref(r);

    /* reopen: the per-field state was persisted */
    ASSERT_OK(sx__cat_close(g_cat));
    g_cat = NULL;
    sx_db_options o = { .sync_mode = SX_SYNC_NONE };
    ASSERT_OK(sx__cat_open(g_dir, &o, &g_cat));
    static sx__coll_meta m;
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "mv2", NULL, &m));
    ASSERT_EQ(m.n_vecs, 2);
    ASSERT(strcmp(m.vecs[0].field, "x") == 0 && strcmp(m.vecs[1].field, "y") == 0);
    ASSERT(strcmp(m.vecs[0].index_name, "x") == 0 && strcmp(m.vecs[0].index_type, "HNSW") == 0);
    ASSERT(strcmp(m.vecs[1].index_name, "y_cos") == 0);
    ASSERT(strcmp(m.vecs[1].index_type, "FLAT") == 0);
    ASSERT_EQ(m.vecs[0].metric, SX_METRIC_L2);
    ASSERT_EQ(m.vecs[1].metric, SX_METRIC_COSINE);
    ASSERT(!m.vecs[0].metric_pending && !m.vecs[1].metric_pending);
    ASSERT(m.loaded);
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "mv", NULL, &m));
    ASSERT_EQ(m.n_vecs, 2);
    ASSERT(strcmp(m.vecs[0].index_name, "a_idx") == 0 && strcmp(m.vecs[1].index_name, "b") == 0);
    ASSERT_EQ(m.vecs[0].metric, SX_METRIC_L2);
    ASSERT_EQ(m.vecs[1].metric, SX_METRIC_IP);
    OK(r, call("/v2/vectordb/entities/search",
               "{`collectionName`:`mv2`,`annsField`:`y`,`data`:[[3,0,0,0]],`limit`:1}"));
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 2);
    ASSERT_NEAR(json_number_value(json_object_get(json_array_get(data_of(r), 0), "distance")), 1.0,
                1e-6); /* cosine */
    json_decref(r);
}

/* A version 1 metadata file (one vector field; its state in the top-level keys, no "vectors")
 * loads unchanged. */
static void test_legacy_v1(void)
{
    json_t *r;
    OK(r, call("/v2/vectordb/collections/create",
               "{`collectionName`:`old`,`dimension`:4,`metricType`:`IP`}"));
    json_decref(r);
    ASSERT_OK(sx__cat_close(g_cat));
    g_cat = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/rest/old.json", g_dir);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ASSERT(j);
    ASSERT(json_object_get(j, "vectors"));
    json_object_del(j, "vectors");
    json_object_set_new(j, "version", json_integer(1));
    json_object_set_new(j, "index_name", json_string("vidx")); /* read from here */
    ASSERT(strcmp(json_string_value(json_object_get(j, "index_field")), "vector") == 0);
    ASSERT_EQ(json_dump_file(j, path, JSON_COMPACT), 0);
    json_decref(j);
    sx_db_options o = { .sync_mode = SX_SYNC_NONE };
    ASSERT_OK(sx__cat_open(g_dir, &o, &g_cat));
    static sx__coll_meta m;
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "old", NULL, &m));
    ASSERT_EQ(m.n_vecs, 1);
    ASSERT(strcmp(m.vecs[0].field, "vector") == 0);
    ASSERT(strcmp(m.vecs[0].index_name, "vidx") == 0);
    ASSERT(strcmp(m.vecs[0].index_type, "AUTOINDEX") == 0);
    ASSERT_EQ(m.vecs[0].metric, SX_METRIC_IP);
    ASSERT(!m.vecs[0].metric_pending && m.loaded);
    OK(r, call("/v2/vectordb/indexes/describe", "{`collectionName`:`old`,`indexName`:`vidx`}"));
    json_t *d = json_array_get(data_of(r), 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "fieldName")), "vector") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "metricType")), "IP") == 0);
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/insert",
               "{`collectionName`:`old`,`data`:[{`id`:1,`vector`:[1,2,0,0]}]}"));
    json_decref(r);
    OK(r, call("/v2/vectordb/entities/search", "{`collectionName`:`old`,`data`:[[1,1,0,0]]}"));
    ASSERT_NEAR(json_number_value(json_object_get(json_array_get(data_of(r), 0), "distance")), 3.0,
                1e-6);
    json_decref(r);
}

static void test_teardown(void)
{
    ASSERT_OK(sx__cat_close(g_cat));
    g_cat = NULL;
}

int main(void)
{
    RUN(test_setup);
    if (h_fail)
        return TEST_DONE();
    RUN(test_legacy_v1); /* single vector field: also before the engine serves several */
    RUN(test_create_insert);
    RUN(test_search_growing);
    RUN(test_search_errors);
    RUN(test_outputs);
    RUN(test_search_sealed);
    RUN(test_upsert);
    RUN(test_index_routes);
    RUN(test_teardown);
    return TEST_DONE();
}
