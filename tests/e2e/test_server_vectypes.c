/*
 * test_server_vectypes.c: Float16Vector, BFloat16Vector and BinaryVector fields over REST, through
 * an in-process server.
 *
 *   schema    a collection with the three (dims 8, 4 and 32 bits) and their indexes (HNSW L2,
 *             FLAT IP, BIN_IVF_FLAT HAMMING) created in one call: described with their types,
 *             dims and metrics; a binary dim that is not a multiple of 8, an index type or metric
 *             that does not fit a field's type, refused with Milvus's codes.
 *   data      200 rows, the 16-bit vectors as float lists (values exact in their type) and as
 *             base64 of their little-endian bytes, the binary ones as byte lists and as base64;
 *             every stored vector read back by query is the base64 of exactly the bytes sent
 *             (what Milvus answers); malformed values (out of float16 range, NaN-like strings,
 *             wrong lengths, bad base64, bytes over 255) refused with 1804 and nothing written.
 *   search    each field against a brute force computed here, growing and after a flush, with
 *             float lists and base64 queries, by primary keys, nq 2 and a filter; a hybrid RRF
 *             search over the Float16 and BFloat16 fields; queries of the wrong kind refused.
 *   restart   after a server restart the same answers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "http.h"
#include "util/half.h"

#define N  200
#define DH 8
#define DB 4
#define DX 32
#define XB (DX / 8)

static const char *g_dir;
static sx_server *g_srv;
static float g_h[N][DH], g_b[N][DB];
static uint8_t g_x[N][XB];
static int g_tag[N];

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

static const char b64c[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64(const uint8_t *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = b64c[v >> 18 & 63];
        out[o++] = b64c[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64c[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64c[v & 63] : '=';
    }
    out[o] = 0;
}

/* The little-endian bytes of the 16-bit values of v (n floats, exact in the type). */
static void half_bytes(const float *v, size_t n, bool bf, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = bf ? sx__f32_to_bf16(v[i]) : sx__f32_to_f16(v[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

static void make_data(void)
{
    uint64_t s = 0x5eed1234ull;
    for (size_t i = 0; i < N; i++) {
        for (size_t d = 0; d < DH; d++) /* eighths in [-4, 4): exact in float16 */
            g_h[i][d] = (float)((int)(test_rand(&s) % 64) - 32) / 8.0f;
        for (size_t d = 0; d < DB; d++) /* quarters: exact in bfloat16 */
            g_b[i][d] = (float)((int)(test_rand(&s) % 16) - 8) / 4.0f;
        for (size_t d = 0; d < XB; d++)
            g_x[i][d] = (uint8_t)test_rand(&s);
        g_tag[i] = (int)(i % 3);
    }
}

static size_t vec_text(size_t i, char f, bool alt, char *out, size_t cap)
{
    uint8_t bytes[64];
    char enc[128];
    size_t n = 0;
    if (f == 'x') {
        if (alt) {
            b64(g_x[i], XB, enc);
            return (size_t)snprintf(out, cap, "`%s`", enc);
        }
        n += (size_t)snprintf(out + n, cap - n, "[");
        for (size_t d = 0; d < XB; d++)
            n += (size_t)snprintf(out + n, cap - n, "%s%u", d ? "," : "", g_x[i][d]);
        return n + (size_t)snprintf(out + n, cap - n, "]");
    }
    const float *v = f == 'h' ? g_h[i] : g_b[i];
    size_t dim = f == 'h' ? DH : DB;
    if (alt) {
        half_bytes(v, dim, f == 'b', bytes);
        b64(bytes, dim * 2, enc);
        return (size_t)snprintf(out, cap, "`%s`", enc);
    }
    n += (size_t)snprintf(out + n, cap - n, "[");
    for (size_t d = 0; d < dim; d++)
        n += (size_t)snprintf(out + n, cap - n, "%s%g", d ? "," : "", (double)v[d]);
    return n + (size_t)snprintf(out + n, cap - n, "]");
}

static void insert_rows(size_t from, size_t to)
{
    static char body[1 << 16];
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`vt`,`data`:[");
    for (size_t i = from; i < to; i++) {
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{`id`:%zu,`tag`:%d,`h`:", i > from ? "," : "", i, g_tag[i]);
        n += vec_text(i, 'h', i % 2 == 1, body + n, sizeof body - n);
        n += (size_t)snprintf(body + n, sizeof body - n, ",`b`:");
        n += vec_text(i, 'b', i % 2 == 0, body + n, sizeof body - n);
        n += (size_t)snprintf(body + n, sizeof body - n, ",`x`:");
        n += vec_text(i, 'x', i % 3 == 0, body + n, sizeof body - n);
        n += (size_t)snprintf(body + n, sizeof body - n, "}");
    }
    snprintf(body + n, sizeof body - n, "]}");
    json_t *d = th_post_ok("/v2/vectordb/entities/insert", body);
    ASSERT_EQ(json_integer_value(json_object_get(d, "insertCount")), (long long)(to - from));
}

static void schema(void)
{
    make_data();
    start();
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`bad`,`schema`:{`fields`:["
              "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
              "{`fieldName`:`x`,`dataType`:`BinaryVector`,`elementTypeParams`:{`dim`:12}}]}}",
              1100, "has to be multiple of 8");
    (void)th_post_ok(
        "/v2/vectordb/collections/create",
        "{`collectionName`:`vt`,`schema`:{`fields`:["
        "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
        "{`fieldName`:`tag`,`dataType`:`Int64`},"
        "{`fieldName`:`h`,`dataType`:`Float16Vector`,`elementTypeParams`:{`dim`:8}},"
        "{`fieldName`:`b`,`dataType`:`BFloat16Vector`,`elementTypeParams`:{`dim`:4}},"
        "{`fieldName`:`x`,`dataType`:`BinaryVector`,`elementTypeParams`:{`dim`:32}}]},"
        "`indexParams`:[{`fieldName`:`h`,`metricType`:`L2`,`params`:{`index_type`:`HNSW`,`M`:8,"
        "`efConstruction`:64}},{`fieldName`:`b`,`metricType`:`IP`,`params`:{`index_type`:"
        "`FLAT`}},{`fieldName`:`x`,`metricType`:`HAMMING`,`params`:{`index_type`:`BIN_IVF_FLAT`,"
        "`nlist`:4}}]}");
    json_t *d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`vt`}");
    const char *types[5] = { "Int64", "Int64", "Float16Vector", "BFloat16Vector", "BinaryVector" };
    for (size_t i = 0; i < 5; i++) {
        const json_t *f = json_array_get(json_object_get(d, "fields"), i);
        ASSERT(strcmp(json_string_value(json_object_get(f, "type")), types[i]) == 0);
    }
    const json_t *xf = json_array_get(json_object_get(d, "fields"), 4);
    const json_t *p0 = json_array_get(json_object_get(xf, "params"), 0);
    ASSERT(strcmp(json_string_value(json_object_get(p0, "value")), "32") == 0);
    json_t *ix =
        th_post_ok("/v2/vectordb/indexes/describe", "{`collectionName`:`vt`,`indexName`:`x`}");
    const json_t *i0 = json_array_get(ix, 0);
    ASSERT(strcmp(json_string_value(json_object_get(i0, "metricType")), "HAMMING") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(i0, "indexType")), "BIN_IVF_FLAT") == 0);

    /* index types and metrics that do not fit */
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`vt2`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`x`,`dataType`:`BinaryVector`,`elementTypeParams`:{`dim`:16}},"
                     "{`fieldName`:`h`,`dataType`:`Float16Vector`,`elementTypeParams`:{`dim`:4}}"
                     "]}}");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`vt2`,`indexParams`:[{`fieldName`:`x`,`metricType`:`HAMMING`,"
              "`params`:{`index_type`:`HNSW`}}]}",
              1100, "does not support BINARY_VECTOR");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`vt2`,`indexParams`:[{`fieldName`:`x`,`metricType`:`L2`,"
              "`params`:{`index_type`:`BIN_FLAT`}}]}",
              1100, "metric type L2 is not supported");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`vt2`,`indexParams`:[{`fieldName`:`h`,`metricType`:`L2`,"
              "`params`:{`index_type`:`IVF_PQ`}}]}",
              1100, "does not support FLOAT16_VECTOR");
    th_expect("/v2/vectordb/indexes/create",
              "{`collectionName`:`vt2`,`indexParams`:[{`fieldName`:`h`,`metricType`:`JACCARD`,"
              "`params`:{`index_type`:`FLAT`}}]}",
              1100, "metric type JACCARD is not supported");
    /* AUTOINDEX without a metric: HAMMING on the binary field, as Milvus */
    (void)th_post_ok("/v2/vectordb/indexes/create",
                     "{`collectionName`:`vt2`,`indexParams`:[{`fieldName`:`x`,`params`:{"
                     "`index_type`:`AUTOINDEX`}}]}");
    ix = th_post_ok("/v2/vectordb/indexes/describe", "{`collectionName`:`vt2`,`indexName`:`x`}");
    i0 = json_array_get(ix, 0);
    ASSERT(strcmp(json_string_value(json_object_get(i0, "metricType")), "HAMMING") == 0);
}

static void data_rules(void)
{
    insert_rows(0, N / 2);
    /* malformed values: 1804, nothing written */
    const char *bad[] = {
        "`h`:[70000,0,0,0,0,0,0,0],`b`:[0,0,0,0],`x`:[1,2,3,4]",      /* beyond float16 */
        "`h`:[0,0,0,0,0,0,0],`b`:[0,0,0,0],`x`:[1,2,3,4]",            /* 7 values */
        "`h`:`AAAA`,`b`:[0,0,0,0],`x`:[1,2,3,4]",                     /* 3 bytes of base64 */
        "`h`:`!!!!`,`b`:[0,0,0,0],`x`:[1,2,3,4]",                     /* not base64 */
        "`h`:`AAAAAAAAAAAAAAAAAAAAfA==`,`b`:[0,0,0,0],`x`:[1,2,3,4]", /* +inf float16 (0x7C00) */
        "`h`:[0,0,0,0,0,0,0,0],`b`:[0,0,0,0],`x`:[1,2,3,256]",        /* a byte over 255 */
        "`h`:[0,0,0,0,0,0,0,0],`b`:[0,0,0,0],`x`:[1,2,3]",            /* 3 bytes for dim 32 */
        "`h`:[0,0,0,0,0,0,0,0],`b`:[0,0,0,0],`x`:`AQID`",             /* base64 of 3 bytes */
        "`h`:[0,0,0,0,0,0,0,0],`b`:[1e39,0,0,0],`x`:[1,2,3,4]",       /* beyond bfloat16 */
        "`h`:[0,0,0,0,0,0,0,0],`b`:{},`x`:[1,2,3,4]",                 /* an object */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = th_postf("/v2/vectordb/entities/insert",
                             "{`collectionName`:`vt`,`data`:[{`id`:%d,`tag`:0,%s}]}", 5000 + (int)i,
                             bad[i]);
        (void)j;
        if (th_code() != 1804)
            FAILF("bad row %zu: %s", i, th_last.text);
    }
    json_t *cnt = th_post_ok("/v2/vectordb/entities/query",
                             "{`collectionName`:`vt`,`filter`:`id >= 5000`,`outputFields`:["
                             "`count(*)`]}");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(cnt, 0), "count(*)")), 0);
    /* read back: base64 of the bytes sent */
    json_t *rows = th_post_ok("/v2/vectordb/entities/query",
                              "{`collectionName`:`vt`,`filter`:`id < 100`,`limit`:100,"
                              "`outputFields`:[`h`,`b`,`x`]}");
    ASSERT_EQ(json_array_size(rows), N / 2);
    for (size_t r = 0; r < json_array_size(rows); r++) {
        const json_t *o = json_array_get(rows, r);
        size_t id = (size_t)json_integer_value(json_object_get(o, "id"));
        uint8_t bytes[64];
        char want[128];
        half_bytes(g_h[id], DH, false, bytes);
        b64(bytes, DH * 2, want);
        ASSERT(strcmp(json_string_value(json_object_get(o, "h")), want) == 0);
        half_bytes(g_b[id], DB, true, bytes);
        b64(bytes, DB * 2, want);
        ASSERT(strcmp(json_string_value(json_object_get(o, "b")), want) == 0);
        b64(g_x[id], XB, want);
        ASSERT(strcmp(json_string_value(json_object_get(o, "x")), want) == 0);
    }
}

/* The oracle's ranking of field f for query row qi (stored rows as queries): internal distances,
 * smaller better, ties by id. */
typedef struct hit {
    double d;
    size_t id;
} hit;

static int hit_cmp(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static size_t rank(char f, size_t qi, size_t n_rows, int tag, hit *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n_rows; i++) {
        if (tag >= 0 && g_tag[i] != tag)
            continue;
        double d = 0;
        if (f == 'h')
            for (size_t k = 0; k < DH; k++)
                d += ((double)g_h[qi][k] - (double)g_h[i][k]) *
                     ((double)g_h[qi][k] - (double)g_h[i][k]);
        else if (f == 'b')
            for (size_t k = 0; k < DB; k++)
                d -= (double)g_b[qi][k] * (double)g_b[i][k];
        else
            for (size_t k = 0; k < XB; k++)
                d += __builtin_popcount((unsigned)(g_x[qi][k] ^ g_x[i][k]));
        out[m++] = (hit){ d, i };
    }
    qsort(out, m, sizeof *out, hit_cmp);
    return m;
}

/* Searches field f with the stored rows qs[] as queries (alt: the other encoding) and checks
 * each answer's distances against the oracle's (ids may differ only on ties). */
static void
check_search(char f, const size_t *qs, size_t nq, bool alt, size_t n_rows, int tag, bool by_ids)
{
    static char body[1 << 14];
    const char *name = f == 'h' ? "h" : f == 'b' ? "b" : "x";
    const char *sp = f == 'h'   ? ",`searchParams`:{`params`:{`ef`:200}}"
                     : f == 'x' ? ",`searchParams`:{`params`:{`nprobe`:4}}"
                                : "";
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{`collectionName`:`vt`,`annsField`:`%s`,`limit`:5%s", name, sp);
    if (tag >= 0)
        n += (size_t)snprintf(body + n, sizeof body - n, ",`filter`:`tag == %d`", tag);
    n += (size_t)snprintf(body + n, sizeof body - n, by_ids ? ",`ids`:[" : ",`data`:[");
    for (size_t i = 0; i < nq; i++) {
        n += (size_t)snprintf(body + n, sizeof body - n, "%s", i ? "," : "");
        if (by_ids)
            n += (size_t)snprintf(body + n, sizeof body - n, "%zu", qs[i]);
        else
            n += vec_text(qs[i], f, alt, body + n, sizeof body - n);
    }
    snprintf(body + n, sizeof body - n, "]}");
    json_t *ans = th_postf("/v2/vectordb/entities/search", "%s", body);
    if (th_code() != 0)
        FAILF("search %c: %s", f, th_last.text);
    const json_t *data = json_object_get(ans, "data");
    static hit all[N];
    size_t at = 0;
    for (size_t i = 0; i < nq; i++) {
        size_t m = rank(f, qs[i], n_rows, tag, all);
        size_t want = m < 5 ? m : 5;
        for (size_t h = 0; h < want; h++) {
            const json_t *x = json_array_get(data, at + h);
            double d = json_number_value(json_object_get(x, "distance"));
            double wd = f == 'b' ? -all[h].d : all[h].d;
            if (fabs(d - wd) > 1e-4 * (1 + fabs(wd)))
                FAILF("search %c query %zu hit %zu: distance %.9g, want %.9g: %s", f, i, h, d, wd,
                      th_last.text);
        }
        at += want;
    }
    ASSERT_EQ(json_array_size(data), at);
}

static void searches(void)
{
    (void)th_post_ok("/v2/vectordb/collections/load", "{`collectionName`:`vt`}");
    size_t qs[3] = { 3, 42, 77 };
    for (int alt = 0; alt < 2; alt++) {
        check_search('h', qs, 2, alt, N / 2, -1, false);
        check_search('b', qs, 2, alt, N / 2, -1, false);
        check_search('x', qs, 2, alt, N / 2, -1, false);
    }
    insert_rows(N / 2, N);
    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`vt`}");
    size_t q2[3] = { 150, 7, 199 };
    check_search('h', q2, 3, false, N, -1, false);
    check_search('b', q2, 3, true, N, 1, false);
    check_search('x', q2, 3, true, N, 2, false);
    check_search('x', q2, 3, false, N, -1, true); /* by primary keys */
    check_search('h', q2, 1, false, N, -1, true);
    /* the wrong kind of query */
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`vt`,`annsField`:`x`,`data`:[[0.5,1,2,3]],`limit`:3}", 1801,
              "byte 0 is not an integer");
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`vt`,`annsField`:`x`,`data`:[[1,2,3]],`limit`:3}", 1801,
              "the field needs 4");
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`vt`,`annsField`:`h`,`data`:[`AAAA`],`limit`:3}", 1801,
              "the field needs 16");
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`vt`,`annsField`:`x`,`data`:[[1,2,3,4]],`limit`:3,"
              "`searchParams`:{`metricType`:`JACCARD`}}",
              1100, "metric type not match");
    /* a hybrid search over the two 16-bit fields */
    json_t *hy = th_post_ok(
        "/v2/vectordb/entities/hybrid_search",
        "{`collectionName`:`vt`,`search`:[{`annsField`:`h`,`data`:[[0,0,0,0,0,0,0,0]],`limit`:5},"
        "{`annsField`:`b`,`data`:[`AAAAAAAAAAA=`],`limit`:5}],`rerank`:{`strategy`:`rrf`,"
        "`params`:{`k`:60}},`limit`:5}");
    ASSERT_EQ(json_array_size(hy), 5);
}

static void restart(void)
{
    stop();
    start();
    (void)th_post_ok("/v2/vectordb/collections/load", "{`collectionName`:`vt`}");
    size_t q2[3] = { 11, 120, 188 };
    check_search('h', q2, 3, true, N, -1, false);
    check_search('b', q2, 3, false, N, -1, false);
    check_search('x', q2, 3, false, N, 0, false);
}

int main(void)
{
    g_dir = test_tmpdir("srv_vectypes");
    RUN(schema);
    RUN(data_rules);
    RUN(searches);
    RUN(restart);
    if (g_srv)
        stop();
    return TEST_DONE();
}
