/*
 * test_server_sparse.c: SparseFloatVector fields over REST, through an in-process server.
 *
 *   schema     a collection with a FloatVector and a SparseFloatVector field: described (type,
 *              no dim, the sparse index with metric IP), load refused while the sparse field has
 *              no index (65535 naming it), index params checked (metric, drop_ratio_build range,
 *              unknown params, a dense index type on the sparse field).
 *   data       300 rows given as dicts and as {"indices","values"} (unsorted: the server sorts);
 *              every stored vector read back by query equals what was sent (floats exact);
 *              malformed rows (negative, index 2^32 - 1, a repeated index, mismatched arrays, not
 *              an object, over the row limit) are refused (1804) and write nothing.
 *   search     each answer against a brute force computed here (inner product over shared
 *              indexes): growing, after a flush, with a filter, an offset, drop_ratio_search,
 *              nq 3; a hybrid (weighted) search of the dense and the sparse field against the
 *              fusion of the exact rankings; grouped by a field (groupSize 2, offset in
 *              groups) against the exact ranking grouped; no annsField with two vector fields
 * (1100); a filter on the sparse field (1100); dense params and another metric refused on it. index
 * dropping it while loaded is refused; after release, drop and a new index with drop_ratio_build
 * 0.5 the answers follow the build drop (the oracle applies it); the index params survive a
 * restart.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "http.h"

#define N     300
#define TERMS 80
#define MAXE  10

typedef struct srow {
    size_t n;
    uint32_t idx[MAXE];
    float val[MAXE];
} srow;

static const char *g_dir;
static sx_server *g_srv;
static srow g_sp[N];
static float g_dv[N][2];
static int g_tag[N];
static float g_build_drop;

static void start(void)
{
    g_srv = th_server_start(g_dir, NULL);
    ASSERT(g_srv != NULL);
}

static void stop(void)
{
    ASSERT_OK(sx_server_stop(g_srv));
    g_srv = NULL;
}

static void make_data(void)
{
    uint64_t s = 0xabcdef12345ull;
    for (size_t i = 0; i < N; i++) {
        srow *r = &g_sp[i];
        r->n = 0;
        size_t want = 1 + test_rand(&s) % MAXE;
        for (size_t k = 0; k < want; k++) {
            uint32_t t = (uint32_t)(test_rand(&s) % TERMS) * 1000u + 7u;
            bool dup = false;
            for (size_t j = 0; j < r->n; j++)
                dup |= r->idx[j] == t;
            if (dup)
                continue;
            size_t at = r->n++;
            while (at > 0 && r->idx[at - 1] > t) { /* keep ascending */
                r->idx[at] = r->idx[at - 1];
                r->val[at] = r->val[at - 1];
                at--;
            }
            r->idx[at] = t;
            r->val[at] = 0.001f + test_randf(&s) * 4;
        }
        g_dv[i][0] = test_randf(&s);
        g_dv[i][1] = test_randf(&s);
        g_tag[i] = (int)(test_rand(&s) % 4);
    }
}

/* The row as JSON text: a dict, or (odd rows) the indices/values form in descending order. */
static size_t row_text(size_t i, bool csr, char *out, size_t cap)
{
    const srow *r = &g_sp[i];
    size_t n = 0;
    if (!csr) {
        n += (size_t)snprintf(out + n, cap - n, "{");
        for (size_t k = 0; k < r->n; k++)
            n += (size_t)snprintf(out + n, cap - n, "%s`%u`:%.9g", k ? "," : "", r->idx[k],
                                  (double)r->val[k]);
        return n + (size_t)snprintf(out + n, cap - n, "}");
    }
    n += (size_t)snprintf(out + n, cap - n, "{`indices`:[");
    for (size_t k = r->n; k-- > 0;)
        n += (size_t)snprintf(out + n, cap - n, "%u%s", r->idx[k], k ? "," : "");
    n += (size_t)snprintf(out + n, cap - n, "],`values`:[");
    for (size_t k = r->n; k-- > 0;)
        n += (size_t)snprintf(out + n, cap - n, "%.9g%s", (double)r->val[k], k ? "," : "");
    return n + (size_t)snprintf(out + n, cap - n, "]}");
}

static void insert_rows(size_t from, size_t to)
{
    static char body[1 << 16];
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`sp`,`data`:[");
    for (size_t i = from; i < to; i++) {
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{`id`:%zu,`d`:[%.9g,%.9g],`tag`:%d,`s`:", i > from ? "," : "", i,
                              (double)g_dv[i][0], (double)g_dv[i][1], g_tag[i]);
        n += row_text(i, i % 2 == 1, body + n, sizeof body - n);
        n += (size_t)snprintf(body + n, sizeof body - n, "}");
    }
    snprintf(body + n, sizeof body - n, "]}");
    (void)th_post_ok("/v2/vectordb/entities/insert", body);
}

/* The oracle: the inner product of query q with row i over shared indexes, after the build drop
 * of the row (the floor(n * ratio) smallest values go); false when nothing is shared. */
static bool score(const srow *q, size_t i, double *out)
{
    const srow *r = &g_sp[i];
    bool gone[MAXE] = { false };
    size_t drop = (size_t)floor((double)r->n * (double)g_build_drop);
    for (size_t d = 0; d < drop; d++) {
        size_t best = SIZE_MAX;
        for (size_t k = 0; k < r->n; k++)
            if (!gone[k] && (best == SIZE_MAX || r->val[k] < r->val[best]))
                best = k;
        gone[best] = true;
    }
    double s = 0;
    bool any = false;
    for (size_t a = 0; a < q->n; a++)
        for (size_t b = 0; b < r->n; b++)
            if (!gone[b] && q->idx[a] == r->idx[b]) {
                s += (double)q->val[a] * (double)r->val[b];
                any = true;
            }
    *out = s;
    return any;
}

typedef struct hit {
    double s;
    size_t id;
} hit;

static int hit_cmp(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static size_t rank(const srow *q, int tag, hit *out)
{
    size_t m = 0;
    for (size_t i = 0; i < N; i++) {
        double s;
        if ((tag < 0 || g_tag[i] == tag) && score(q, i, &s))
            out[m++] = (hit){ s, i };
    }
    qsort(out, m, sizeof *out, hit_cmp);
    return m;
}

static void check_hits(const char *what, const json_t *hits, const hit *want, size_t n)
{
    if (json_array_size(hits) != n)
        FAILF("%s: %zu hits, want %zu: %s", what, json_array_size(hits), n, th_last.text);
    for (size_t h = 0; h < n; h++) {
        const json_t *x = json_array_get(hits, h);
        double d = json_number_value(json_object_get(x, "distance"));
        size_t id = (size_t)json_integer_value(json_object_get(x, "id"));
        if (fabs(d - want[h].s) > 1e-5 * (1 + want[h].s))
            FAILF("%s: hit %zu: score %.9g, want %.9g", what, h, d, want[h].s);
        if (id != want[h].id && fabs(d - want[h].s) > 1e-9) /* ids may swap only on ties */
            FAILF("%s: hit %zu: id %zu, want %zu", what, h, id, want[h].id);
    }
}

/* Searches rows q[0..nq) (stored rows used as queries) and checks each against the oracle. */
static void check_search(
    const char *what, const size_t *qs, size_t nq, int tag, size_t offset, const char *extra)
{
    static char body[1 << 14];
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{`collectionName`:`sp`,`annsField`:`s`,`limit`:7,`offset`:%zu,"
                                "`outputFields`:[`s`],`data`:[",
                                offset);
    for (size_t i = 0; i < nq; i++) {
        n += (size_t)snprintf(body + n, sizeof body - n, "%s", i ? "," : "");
        n += row_text(qs[i], false, body + n, sizeof body - n);
    }
    n += (size_t)snprintf(body + n, sizeof body - n, "]");
    if (tag >= 0)
        n += (size_t)snprintf(body + n, sizeof body - n, ",`filter`:`tag == %d`", tag);
    snprintf(body + n, sizeof body - n, "%s}", extra ? extra : "");
    json_t *ans = th_postf("/v2/vectordb/entities/search", "%s", body);
    if (th_code() != 0)
        FAILF("%s: %s", what, th_last.text);
    const json_t *data = json_object_get(ans, "data"), *topks = json_object_get(ans, "topks");
    size_t at = 0;
    static hit all[N];
    for (size_t i = 0; i < nq; i++) {
        size_t m = rank(&g_sp[qs[i]], tag, all);
        size_t want = m > offset ? m - offset : 0;
        want = want > 7 ? 7 : want;
        ASSERT_EQ(json_integer_value(json_array_get(topks, i)), want);
        json_t *sub = json_array();
        for (size_t h = 0; h < want; h++) {
            json_t *x = json_array_get(data, at + h);
            json_array_append(sub, x);
            /* the stored vector comes back as sent */
            size_t id = (size_t)json_integer_value(json_object_get(x, "id"));
            const json_t *sv = json_object_get(x, "s");
            ASSERT_EQ(json_object_size(sv), g_sp[id].n);
            for (size_t k = 0; k < g_sp[id].n; k++) {
                char key[16];
                snprintf(key, sizeof key, "%u", g_sp[id].idx[k]);
                ASSERT((float)json_number_value(json_object_get(sv, key)) == g_sp[id].val[k]);
            }
        }
        char w[128];
        snprintf(w, sizeof w, "%s, query %zu", what, i);
        check_hits(w, sub, all + offset, want);
        json_decref(sub);
        at += want;
    }
}

static void schema_and_index(void)
{
    make_data();
    start();
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`sp`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`d`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
                     "{`fieldName`:`s`,`dataType`:`SparseFloatVector`},"
                     "{`fieldName`:`tag`,`dataType`:`Int64`}]}}");
    (void)th_post_ok("/v2/vectordb/indexes/create",
                     "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`d`,`metricType`:`L2`,"
                     "`params`:{`index_type`:`FLAT`}}]}");
    th_expect("/v2/vectordb/collections/load", "{`collectionName`:`sp`}", 65535,
              "there is no vector index on field: [s]");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`metricType`:`L2`,"
              "`params`:{`index_type`:`SPARSE_INVERTED_INDEX`}}]}",
              1100, "only IP is the supported metric type for sparse index");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`metricType`:`IP`,"
              "`params`:{`index_type`:`SPARSE_INVERTED_INDEX`,`drop_ratio_build`:1}}]}",
              1100, "drop_ratio_build");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`metricType`:`IP`,"
              "`params`:{`index_type`:`SPARSE_WAND`,`nlist`:4}}]}",
              1100, "nlist is not a parameter of sparse indexes");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`metricType`:`IP`,"
              "`params`:{`index_type`:`HNSW`}}]}",
              1100, "invalid index type: HNSW for the sparse vector field s");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`indexName`:`d`,"
              "`metricType`:`IP`,`params`:{`index_type`:`SPARSE_WAND`}}]}",
              65535, "at most one distinct index");
    (void)th_post_ok("/v2/vectordb/indexes/create",
                     "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`indexName`:`s_ix`,"
                     "`metricType`:`IP`,`params`:{`index_type`:`SPARSE_INVERTED_INDEX`,"
                     "`inverted_index_algo`:`DAAT_MAXSCORE`}}]}");
    json_t *d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`sp`}");
    const json_t *f = json_array_get(json_object_get(d, "fields"), 2);
    ASSERT(strcmp(json_string_value(json_object_get(f, "type")), "SparseFloatVector") == 0);
    ASSERT(!json_object_get(f, "params")); /* no dim */
    ASSERT_EQ(json_array_size(json_object_get(d, "indexes")), 2);
    d = th_post_ok("/v2/vectordb/indexes/describe", "{`collectionName`:`sp`,`indexName`:`s_ix`}");
    const json_t *ix = json_array_get(d, 0);
    ASSERT(strcmp(json_string_value(json_object_get(ix, "metricType")), "IP") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(ix, "indexType")), "SPARSE_INVERTED_INDEX") ==
           0);
    d = th_post_ok("/v2/vectordb/indexes/list", "{`collectionName`:`sp`}");
    ASSERT_EQ(json_array_size(d), 2);
    (void)th_post_ok("/v2/vectordb/collections/load", "{`collectionName`:`sp`}");
}

static void data_rules(void)
{
    insert_rows(0, 150);
    static const char *const bad[] = {
        "{`5`:-1}",
        "{`4294967295`:1}",
        "{`indices`:[1,1],`values`:[1,2]}",
        "{`indices`:[1,2],`values`:[1]}",
        "[1,2]",
        "{`x`:1}",
        "{`1`:`a`}",
    };
    char body[512];
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        snprintf(body, sizeof body,
                 "{`collectionName`:`sp`,`data`:[{`id`:9000,`d`:[0,0],`tag`:0,`s`:{`1`:1}},"
                 "{`id`:9001,`d`:[0,0],`tag`:0,`s`:%s}]}",
                 bad[b]);
        json_t *j = th_postf("/v2/vectordb/entities/insert", "%s", body);
        (void)j;
        if (th_code() != 1804)
            FAILF("%s: want 1804, got %s", bad[b], th_last.text);
    }
    /* a row over the text limit: 6,000 entries */
    static char big[1 << 17];
    size_t n = (size_t)snprintf(
        big, sizeof big, "{`collectionName`:`sp`,`data`:[{`id`:9002,`d`:[0,0],`tag`:0,`s`:{");
    for (int k = 0; k < 6000; k++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s`%d`:0.123456789", k ? "," : "", k);
    snprintf(big + n, sizeof big - n, "}}]}");
    th_expect("/v2/vectordb/entities/insert", big, 1804, "over the 65535 Sextant keeps per row");
    json_t *c =
        th_post_ok("/v2/vectordb/entities/query",
                   "{`collectionName`:`sp`,`filter`:`id >= 9000`,`outputFields`:[`count(*)`]}");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(c, 0), "count(*)")), 0);
    insert_rows(150, N);
    /* read back */
    json_t *rows = th_post_ok("/v2/vectordb/entities/query",
                              "{`collectionName`:`sp`,`filter`:`id < 300`,`limit`:300,"
                              "`outputFields`:[`s`]}");
    ASSERT_EQ(json_array_size(rows), N);
    for (size_t i = 0; i < N; i++) {
        const json_t *r = json_array_get(rows, i);
        size_t id = (size_t)json_integer_value(json_object_get(r, "id"));
        const json_t *sv = json_object_get(r, "s");
        ASSERT_EQ(json_object_size(sv), g_sp[id].n);
        for (size_t k = 0; k < g_sp[id].n; k++) {
            char key[16];
            snprintf(key, sizeof key, "%u", g_sp[id].idx[k]);
            ASSERT((float)json_number_value(json_object_get(sv, key)) == g_sp[id].val[k]);
        }
    }
}

/* A search on the sparse field grouped by tag (groupSize 2; offset 0 and 1 groups) against the
 * exact ranking grouped as Milvus groups: groups in order of their best hit, each its best 2
 * hits, group by group. q: row 33 as text. */
static void grouped(const char *q)
{
    static hit all[N];
    size_t m = rank(&g_sp[33], -1, all);
    for (size_t off = 0; off < 2; off++) {
        hit want[6];
        int order[4];
        size_t ng = 0, nw = 0, cnt[4] = { 0 };
        for (size_t i = 0; i < m; i++) { /* the groups' order: of their best hit */
            int t = g_tag[all[i].id];
            bool seen = false;
            for (size_t k = 0; k < ng; k++)
                seen |= order[k] == t;
            if (!seen)
                order[ng++] = t;
        }
        for (size_t k = off; k < ng && k < off + 2; k++) /* limit 2 groups after off */
            for (size_t i = 0; i < m; i++)
                if (g_tag[all[i].id] == order[k] && cnt[order[k]]++ < 2)
                    want[nw++] = all[i];
        char body[2048];
        snprintf(body, sizeof body,
                 "{`collectionName`:`sp`,`annsField`:`s`,`data`:[%s],`groupingField`:`tag`,"
                 "`groupSize`:2,`limit`:2,`offset`:%zu}",
                 q, off);
        json_t *ans = th_post_ok("/v2/vectordb/entities/search", body);
        ASSERT(ng >= 3 && nw == 4);
        check_hits(off ? "grouped offset 1" : "grouped", ans, want, nw);
        for (size_t h = 0; h < nw; h++) { /* the group's value is answered with each hit */
            const json_t *x = json_array_get(ans, h);
            size_t id = (size_t)json_integer_value(json_object_get(x, "id"));
            ASSERT(id < N && json_integer_value(json_object_get(x, "tag")) == g_tag[id]);
        }
    }
}

static void searches(void)
{
    const size_t q1[] = { 4 }, q3[] = { 10, 77, 200 };
    check_search("growing", q1, 1, -1, 0, NULL);
    check_search("growing nq 3", q3, 3, -1, 0, NULL);
    check_search("growing filter", q3, 3, 2, 0, NULL);
    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`sp`}");
    check_search("sealed", q3, 3, -1, 0, NULL);
    check_search("sealed offset 3", q3, 3, -1, 3, NULL);
    check_search("sealed filter", q3, 3, 1, 0, NULL);
    /* drop_ratio_search 0.5 of a two-entry query leaves its larger entry: the same answer as
     * that entry alone */
    char *a1 = json_dumps(th_post_ok("/v2/vectordb/entities/search",
                                     "{`collectionName`:`sp`,`annsField`:`s`,`limit`:50,"
                                     "`data`:[{`7`:1,`1007`:2}],"
                                     "`searchParams`:{`params`:{`drop_ratio_search`:0.5}}}"),
                          JSON_COMPACT);
    char *a2 = json_dumps(th_post_ok("/v2/vectordb/entities/search",
                                     "{`collectionName`:`sp`,`annsField`:`s`,`limit`:50,"
                                     "`data`:[{`1007`:2}]}"),
                          JSON_COMPACT);
    ASSERT(a1 && a2 && strcmp(a1, a2) == 0 && strlen(a1) > 10);
    free(a1);
    free(a2);
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`sp`,`annsField`:`s`,`data`:[{`7`:1}],"
              "`searchParams`:{`params`:{`ef`:10}}}",
              1100, "ef is not a search parameter of sparse vectors");
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`sp`,`annsField`:`s`,`data`:[{`7`:1}],"
              "`searchParams`:{`metricType`:`L2`}}",
              1100, "metric type not match");
    th_expect("/v2/vectordb/entities/search", "{`collectionName`:`sp`,`data`:[[1,2]]}", 1100,
              "multiple anns_fields exist");
    th_expect("/v2/vectordb/entities/query", "{`collectionName`:`sp`,`filter`:`s == \\`x\\``}",
              1100, "the sparse vector field s cannot be used in a filter");
    /* hybrid: weighted, dense (L2) + sparse (IP), against the fusion of the exact rankings */
    char body[2048], sq[512];
    row_text(33, false, sq, sizeof sq);
    snprintf(body, sizeof body,
             "{`collectionName`:`sp`,`search`:[{`annsField`:`d`,`data`:[[%.9g,%.9g]],`limit`:20},"
             "{`annsField`:`s`,`data`:[%s],`limit`:20}],"
             "`rerank`:{`strategy`:`weighted`,`params`:{`weights`:[0.3,0.7]}},`limit`:6}",
             (double)g_dv[33][0], (double)g_dv[33][1], sq);
    json_t *ans = th_post_ok("/v2/vectordb/entities/hybrid_search", body);
    static hit dense[N], sparse[N];
    for (size_t i = 0; i < N; i++) {
        double a = (double)g_dv[i][0] - (double)g_dv[33][0],
               b = (double)g_dv[i][1] - (double)g_dv[33][1];
        dense[i] = (hit){ -(a * a + b * b), i }; /* best first */
    }
    qsort(dense, N, sizeof *dense, hit_cmp);
    size_t ms = rank(&g_sp[33], -1, sparse);
    static double fused[N];
    static bool in[N];
    memset(fused, 0, sizeof fused);
    memset(in, 0, sizeof in);
    for (size_t r = 0; r < 20;
         r++) { /* Milvus's normalisation: L2 1 - 2atan(d)/pi, IP .5 + atan/pi */
        fused[dense[r].id] += 0.3 * (1 - 2 * atan(-dense[r].s) / M_PI);
        in[dense[r].id] = true;
    }
    for (size_t r = 0; r < 20 && r < ms; r++) {
        fused[sparse[r].id] += 0.7 * (0.5 + atan(sparse[r].s) / M_PI);
        in[sparse[r].id] = true;
    }
    static hit f[N];
    size_t nf = 0;
    for (size_t i = 0; i < N; i++)
        if (in[i])
            f[nf++] = (hit){ fused[i], i };
    qsort(f, nf, sizeof *f, hit_cmp);
    check_hits("hybrid weighted", ans, f, 6);
    grouped(sq);
}

static void rebuild_and_restart(void)
{
    th_expect("/v2/vectordb/indexes/drop", "{`collectionName`:`sp`,`indexName`:`s_ix`}", 65535,
              "please release it first");
    (void)th_post_ok("/v2/vectordb/collections/release", "{`collectionName`:`sp`}");
    (void)th_post_ok("/v2/vectordb/indexes/drop", "{`collectionName`:`sp`,`indexName`:`s_ix`}");
    ASSERT_EQ(json_array_size(th_post_ok("/v2/vectordb/indexes/list", "{`collectionName`:`sp`}")),
              1);
    (void)th_post_ok("/v2/vectordb/indexes/create",
                     "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`s`,`indexName`:`s_ix2`,"
                     "`metricType`:`IP`,`params`:{`index_type`:`SPARSE_WAND`,"
                     "`drop_ratio_build`:0.5}}]}");
    (void)th_post_ok("/v2/vectordb/collections/load", "{`collectionName`:`sp`}");
    g_build_drop = 0.5f;
    const size_t q3[] = { 10, 77, 200 };
    check_search("drop_ratio_build 0.5 (sealed)", q3, 3, -1, 0, NULL);
    stop();
    start();
    json_t *d =
        th_post_ok("/v2/vectordb/indexes/describe", "{`collectionName`:`sp`,`indexName`:`s_ix2`}");
    const json_t *p = json_object_get(json_array_get(d, 0), "params");
    ASSERT(json_real_value(json_object_get(p, "drop_ratio_build")) == 0.5); /* a number */
    check_search("drop_ratio_build 0.5 after a restart", q3, 3, -1, 0, NULL);
}

/* ---------------------------------------------------------------- full-text search (BM25) */

#define ND   240
#define VOC  30
#define MAXW 20

static const char *const g_voc[VOC] = { "alpha",   "bravo",  "charlie", "delta",    "echo",
                                        "foxtrot", "golf",   "hotel",   "india",    "juliet",
                                        "kilo",    "lima",   "mike",    "november", "oscar",
                                        "papa",    "quebec", "romeo",   "sierra",   "tango",
                                        "uniform", "victor", "whiskey", "xray",     "yankee",
                                        "zulu",    "one",    "two",     "three",    "four" };
static int g_doc[ND][MAXW];
static int g_doc_n[ND];
static bool g_doc_live[ND];

/* BM25 (k1 1.2, b 0.75) of document d for the query words q (with repeats), over the live
 * documents: tokens are the words as written (the standard analyzer lowercases; they are). */
static double bm25(size_t d, const int *q, size_t nq)
{
    double n = 0, sum = 0;
    for (size_t i = 0; i < ND; i++)
        if (g_doc_live[i]) {
            n += 1;
            sum += g_doc_n[i];
        }
    double avgdl = sum / n, s = 0;
    for (size_t a = 0; a < nq; a++) {
        double df = 0, tf = 0;
        for (size_t i = 0; i < ND; i++) {
            bool has = false;
            for (int w = 0; w < g_doc_n[i]; w++)
                has |= g_doc[i][w] == q[a];
            df += g_doc_live[i] && has;
        }
        for (int w = 0; w < g_doc_n[d]; w++)
            tf += g_doc[d][w] == q[a];
        if (tf == 0)
            continue;
        double idf = log(1 + (n - df + 0.5) / (df + 0.5));
        s += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * g_doc_n[d] / avgdl));
    }
    return s;
}

static void check_bm25(const char *what, const int *q, size_t nq)
{
    char text[256] = "";
    size_t n = 0;
    for (size_t a = 0; a < nq; a++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", a ? " " : "", g_voc[q[a]]);
    json_t *ans = th_postf("/v2/vectordb/entities/search",
                           "{`collectionName`:`ft`,`annsField`:`sparse`,`limit`:8,"
                           "`data`:[`%s`],`searchParams`:{`metricType`:`BM25`}}",
                           text);
    if (th_code() != 0)
        FAILF("%s: %s", what, th_last.text);
    static hit want[ND];
    size_t m = 0;
    for (size_t d = 0; d < ND; d++) {
        if (!g_doc_live[d])
            continue;
        double s = bm25(d, q, nq);
        if (s > 0)
            want[m++] = (hit){ s, d };
    }
    qsort(want, m, sizeof *want, hit_cmp);
    check_hits(what, json_object_get(ans, "data"), want, m < 8 ? m : 8);
}

static void full_text(void)
{
    (void)th_post_ok(
        "/v2/vectordb/collections/create",
        "{`collectionName`:`ft`,`schema`:{`fields`:["
        "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
        "{`fieldName`:`d`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
        "{`fieldName`:`text`,`dataType`:`VarChar`,`elementTypeParams`:{`max_length`:1000,"
        "`enable_analyzer`:true,`analyzer_params`:{`type`:`standard`}}},"
        "{`fieldName`:`sparse`,`dataType`:`SparseFloatVector`}],"
        "`functions`:[{`name`:`bm25`,`type`:`BM25`,`inputFieldNames`:[`text`],"
        "`outputFieldNames`:[`sparse`],`params`:{}}]},"
        "`indexParams`:[{`fieldName`:`d`,`metricType`:`L2`,`params`:{`index_type`:`FLAT`}},"
        "{`fieldName`:`sparse`,`metricType`:`BM25`,`params`:{`index_type`:"
        "`SPARSE_INVERTED_INDEX`,`bm25_k1`:1.2,`bm25_b`:0.75}}]}");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`ft2`,`schema`:{`fields`:["
              "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
              "{`fieldName`:`d`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
              "{`fieldName`:`text`,`dataType`:`VarChar`,`elementTypeParams`:{`max_length`:9,"
              "`enable_analyzer`:true,`analyzer_params`:{`type`:`chinese`}}}]}}",
              1100, "analyzer type chinese is not supported by Sextant");
    uint64_t s = 99;
    static char body[1 << 16];
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`ft`,`data`:[");
    for (size_t d = 0; d < ND; d++) {
        g_doc_n[d] = 3 + (int)(test_rand(&s) % (MAXW - 3));
        g_doc_live[d] = true;
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{`id`:%zu,`d`:[0,0],`text`:`",
                              d ? "," : "", d);
        for (int w = 0; w < g_doc_n[d]; w++) {
            /* skewed: low words often */
            int x = (int)(test_rand(&s) % VOC);
            g_doc[d][w] = x % 3 == 0 ? x / 3 : x;
            n += (size_t)snprintf(body + n, sizeof body - n, "%s%s", w ? " " : "",
                                  g_voc[g_doc[d][w]]);
        }
        n += (size_t)snprintf(body + n, sizeof body - n, "`}");
    }
    snprintf(body + n, sizeof body - n, "]}");
    (void)th_post_ok("/v2/vectordb/entities/insert", body);
    th_expect("/v2/vectordb/entities/insert",
              "{`collectionName`:`ft`,`data`:[{`id`:999,`d`:[0,0],`text`:`a`,`sparse`:{`1`:1}}]}",
              1804, "is the output of BM25 function bm25");
    const int q1[] = { 1, 7 }, q2[] = { 5, 5, 22, 9 }, q3[] = { 29 };
    check_bm25("BM25 growing", q1, 2);
    check_bm25("BM25 growing, repeated word", q2, 4);
    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`ft`}");
    check_bm25("BM25 sealed", q1, 2);
    check_bm25("BM25 sealed, rare word", q3, 1);
    (void)th_post_ok("/v2/vectordb/entities/delete", "{`collectionName`:`ft`,`filter`:`id < 60`}");
    for (size_t d = 0; d < 60; d++)
        g_doc_live[d] = false;
    check_bm25("BM25 after deletes (statistics of the live rows)", q2, 4);
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`ft`,`annsField`:`sparse`,`data`:[`alpha`],"
              "`searchParams`:{`metricType`:`IP`}}",
              1100, "metric type not match");
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`ft`,`annsField`:`sparse`,`data`:[{`1`:1}]}", 1100,
              "a full-text (BM25) search takes texts");
    json_t *d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`ft`}");
    const json_t *fn = json_array_get(json_object_get(d, "functions"), 0);
    ASSERT(strcmp(json_string_value(json_object_get(fn, "type")), "BM25") == 0);
    ASSERT(json_is_true(
        json_object_get(json_array_get(json_object_get(d, "fields"), 3), "isFunctionOutput")));
    /* the Milvus full-text quickstart's shape: no dense vector, auto ids, the english analyzer;
     * searched without annsField (the only vector field) */
    (void)th_post_ok(
        "/v2/vectordb/collections/create",
        "{`collectionName`:`fq`,`schema`:{`autoID`:true,`fields`:["
        "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
        "{`fieldName`:`text`,`dataType`:`VarChar`,`elementTypeParams`:{`max_length`:200,"
        "`enable_analyzer`:true,`analyzer_params`:{`type`:`english`}}},"
        "{`fieldName`:`sparse`,`dataType`:`SparseFloatVector`}],"
        "`functions`:[{`name`:`bm25`,`type`:`BM25`,`inputFieldNames`:[`text`],"
        "`outputFieldNames`:[`sparse`],`params`:{}}]},"
        "`indexParams`:[{`fieldName`:`sparse`,`metricType`:`BM25`,`params`:{`index_type`:"
        "`AUTOINDEX`}}]}");
    (void)th_post_ok("/v2/vectordb/entities/insert",
                     "{`collectionName`:`fq`,`data`:[{`text`:`The runners were running`},"
                     "{`text`:`Vectors and embeddings`},{`text`:`A run of the mill day`}]}");
    for (int round = 0; round < 2; round++) {
        json_t *h = th_post_ok("/v2/vectordb/entities/search",
                               "{`collectionName`:`fq`,`data`:[`RUNS`],`limit`:5,"
                               "`outputFields`:[`text`]}");
        /* runs / running / run stem to run; runners to runner: rows 1 and 3, the shorter
         * text first (BM25's length normalisation) */
        ASSERT_EQ(json_array_size(h), 2);
        ASSERT(strcmp(json_string_value(json_object_get(json_array_get(h, 0), "text")),
                      "A run of the mill day") == 0 ||
               strcmp(json_string_value(json_object_get(json_array_get(h, 0), "text")),
                      "The runners were running") == 0);
        (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`fq`}");
    }
    stop();
    start();
    check_bm25("BM25 after a restart", q1, 2);
    json_t *h = th_post_ok("/v2/vectordb/entities/search",
                           "{`collectionName`:`fq`,`data`:[`embedding`],`limit`:5}");
    ASSERT_EQ(json_array_size(h), 1);
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(h, 0), "id")), 2);
}

int main(void)
{
    g_dir = test_tmpdir("srv_sparse");
    RUN(schema_and_index);
    RUN(data_rules);
    RUN(searches);
    RUN(rebuild_and_restart);
    RUN(full_text);
    if (g_srv)
        stop();
    return TEST_DONE();
}
