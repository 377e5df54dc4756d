/*
 * test_s3_store.c: the engine with `storage_url = s3://...` against s3rver (tests/harness/
 * s3rver.h), directly and through the fault-injecting proxy (tests/harness/faultproxy.h).
 * Skipped (77) without node or without tests/e2e/node/node_modules.
 *
 *   open-from-bucket: ingest, index, deletes, flush, sync; the bucket's MANIFEST names only
 *     objects that are present (with the recorded size) and nothing else is left; a fresh data
 *     directory opened from the bucket alone has the same count, rows and search results.
 *   faults: rounds of insert + delete + flush with random 500 / 503 / SlowDown / reset / lost
 *     response / reset mid-body / truncated body on every request (and one round with a
 *     persistent 503): each flush succeeds or fails with SX_EREMOTE and a message naming the
 *     object store; after every round the bucket's MANIFEST names only present objects; once the
 *     faults stop a final flush succeeds and a fresh open from the bucket has every
 *     acknowledged row.
 * The bucket is inspected with a direct S3 client, the store manifest decoded here
 * independently of the engine (docs/internals/FORMAT-SEGMENT.md).
 */
#include <sextant.h>
#include <stdlib.h>

#include "faultproxy.h"
#include "harness.h"
#include "s3rver.h"
#include "storage/s3.h"
#include "util/alloc.h"

#define BUCKET "sxstore"
#define DIM    8

static th_s3rver srv;
static faultproxy fp;
static char proxy_ep[64];
static sx__s3 *S; /* direct, for inspection */
static const char *tmp;

/* ---------------------------------------------------------------- bucket inspection */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

typedef struct ment {
    char key[256];
    uint64_t size;
} ment;

/* Reads PREFIX/COLL/MANIFEST; returns the entry count, -1 when absent. */
static int bucket_manifest(const char *prefix, const char *coll, ment *out, int max)
{
    char key[512];
    snprintf(key, sizeof key, "%s/%s/MANIFEST", prefix, coll);
    void *data = NULL;
    size_t len = 0;
    sx_status st = sx__s3_get(S, key, 0, 0, &data, &len);
    if (st == SX_ENOTFOUND)
        return -1;
    ASSERT_OK(st);
    const uint8_t *b = data;
    ASSERT(len > 32 && memcmp(b, "SXSTM001", 8) == 0);
    size_t off = 20;
    uint32_t mlen = rd32(b + off);
    off += 4 + mlen;
    uint32_t n = rd32(b + off);
    off += 4;
    ASSERT((int)n <= max);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = rd32(b + off);
        off += 4 + l; /* local name */
        l = rd32(b + off);
        off += 4;
        snprintf(out[i].key, sizeof out[i].key, "%.*s", (int)l, (const char *)b + off);
        off += l;
        out[i].size = rd64(b + off);
        off += 8 + 4 + 1;
    }
    ASSERT_EQ(off + 4, len);
    sx__free(data);
    return (int)n;
}

/* Every object the bucket's manifest names is there with its size; returns the count. With
 * exact, nothing else of the collection is in the bucket either. */
static int check_bucket(const char *prefix, const char *coll, bool exact)
{
    static ment e[2048];
    int n = bucket_manifest(prefix, coll, e, 2048);
    for (int i = 0; i < n; i++) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s/%s", prefix, coll, e[i].key);
        uint64_t sz = 0;
        sx_status st = sx__s3_head(S, key, &sz);
        if (st != SX_OK || sz != e[i].size)
            FAILF("bucket manifest names %s (%" PRIu64 " bytes): %s", key, e[i].size,
                  st == SX_OK ? "size differs" : sx_status_str(st));
    }
    if (exact) {
        char pre[512];
        snprintf(pre, sizeof pre, "%s/%s/", prefix, coll);
        char **keys = NULL;
        uint64_t *sizes = NULL;
        size_t nk = 0;
        ASSERT_OK(sx__s3_list(S, pre, &keys, &sizes, &nk));
        ASSERT_EQ(nk, (size_t)n + 1); /* the named objects and MANIFEST */
        sx_strings_free(keys, nk);
        sx__free(sizes);
    }
    return n;
}

/* ---------------------------------------------------------------- data */

static sx_db *open_db(const char *dir, const char *url, const char *endpoint)
{
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 1000 * DIM * 4;
    o.build_threads = 2;
    o.search_threads = 2;
    o.storage_url = url;
    o.s3_endpoint = endpoint;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

static void create_coll(sx_db *db, const char *name)
{
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def d = { name, f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static void row_vec(int64_t id, float *v)
{
    uint64_t s = (uint64_t)id * 0x9E3779B97F4A7C15ull + 1;
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(&s) * 10.0f;
}

static sx_status insert_rows(sx_collection *c, int64_t start, size_t n)
{
    int64_t *ids = malloc(n * 8);
    float *v = malloc(n * DIM * 4);
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        row_vec(ids[i], v + i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { n, cols, 2 };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids), free(v);
    return st;
}

static void search(sx_collection *c, const float *qs, size_t nq, sx_rowset **rs)
{
    sx_search_req req = { 0 };
    req.queries = qs;
    req.nq = nq;
    req.k = 10;
    req.metric = -1;
    sx_param ef = { "ef", "300" };
    req.params = &ef;
    req.n_params = 1;
    ASSERT_OK(sx_search(c, &req, rs));
}

/* ---------------------------------------------------------------- tests */

static void test_open_from_bucket(void)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/rt_a", tmp);
    snprintf(b, sizeof b, "%s/rt_b", tmp);
    const char *url = "s3://" BUCKET "/rt";
    sx_db *db = open_db(a, url, srv.endpoint);
    create_coll(db, "docs");
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "docs", &c));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    for (int i = 0; i < 5; i++)
        ASSERT_OK(insert_rows(c, i * 700, 700));
    int64_t dk[] = { 1, 700, 2800 };
    sx_keys keys = { 3, dk, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_db_sync(db));
    int n = check_bucket("rt", "docs", true);
    ASSERT(n >= 5 + 1 + 5); /* segments, a delete file, index files */
    float qs[8 * DIM];
    uint64_t s = 5;
    for (int i = 0; i < 8 * DIM; i++)
        qs[i] = test_randf(&s) * 10.0f;
    sx_rowset *ra, *rb;
    search(c, qs, 8, &ra);
    sx_collection_release(c);
    sx_db_close(db);

    db = open_db(b, url, srv.endpoint);
    ASSERT_OK(sx_db_check(db));
    ASSERT_OK(sx_collection_open(db, "docs", &c));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, 3500 - 3);
    ASSERT_OK(sx_index_wait(c, 120000));
    search(c, qs, 8, &rb);
    ASSERT_EQ(ra->n_rows, rb->n_rows);
    for (size_t i = 0; i < ra->n_rows; i++) {
        ASSERT_EQ(((int64_t *)ra->cols[0].data)[i], ((int64_t *)rb->cols[0].data)[i]);
        ASSERT_NEAR(ra->distances[i], rb->distances[i], 1e-5);
    }
    sx_rowset_free(ra);
    sx_rowset_free(rb);
    int64_t gk[] = { 3499 };
    sx_keys g = { 1, gk, NULL };
    const char *outs[] = { "vec" };
    sx_rowset *rs;
    ASSERT_OK(sx_get(c, &g, outs, 1, &rs));
    ASSERT_EQ(rs->n_rows, 1);
    float v[DIM];
    row_vec(3499, v);
    ASSERT(memcmp(rs->cols[1].data, v, sizeof v) == 0);
    sx_rowset_free(rs);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_drop(db, "docs"));
    ASSERT_EQ(bucket_manifest("rt", "docs", NULL, 0), -1);
    sx_db_close(db);
}

static void test_faults_through_proxy(void)
{
    char a[600], f[600];
    snprintf(a, sizeof a, "%s/flt_a", tmp);
    snprintf(f, sizeof f, "%s/flt_fresh", tmp);
    const char *url = "s3://" BUCKET "/flt";
    setenv("SEXTANT_S3_TIMEOUT_MS", "2000", 1);
    setenv("SEXTANT_S3_RETRIES", "2", 1); /* few retries: some flushes must fail */
    sx_db *db = open_db(a, url, proxy_ep);
    create_coll(db, "t");
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "t", &c));
    unsigned mask = 1u << FP_500 | 1u << FP_503 | 1u << FP_SLOWDOWN | 1u << FP_RESET |
                    1u << FP_LOST | 1u << FP_RESET_MIDBODY | 1u << FP_TRUNCATE;
    int64_t next = 0;
    int ok = 0, failed = 0;
    for (int round = 0; round < 12; round++) {
        ASSERT_OK(insert_rows(c, next, 400)); /* acknowledged (local WAL) */
        next += 400;
        int64_t dk = next - 7;
        sx_keys keys = { 1, &dk, NULL };
        ASSERT_OK(sx_delete(c, &keys, NULL));
        fp_clear(&fp);
        if (round == 5)
            fp_set_persistent(&fp, FP_503);
        else
            fp_set_random(&fp, 0.35, mask, 1000u + (unsigned)round);
        sx_status st = sx_flush(c);
        fp_clear(&fp);
        if (st == SX_OK) {
            ok++;
        } else {
            ASSERT_EQ(st, SX_EREMOTE);
            ASSERT(strstr(sx_errmsg(), "object store") != NULL);
            failed++;
        }
        check_bucket("flt", "t", false);
    }
    fprintf(stderr, "faulty flushes: %d ok, %d failed, %ld faults injected\n", ok, failed,
            fp_faults_total(&fp));
    ASSERT(fp_faults_total(&fp) >= 12); /* the faults did happen, on uploads too */
    ASSERT(fp_count(&fp, "PUT", "/flt/t/seg-") > 0);
    ASSERT(failed >= 1); /* the persistent 503 round at least */
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_db_sync(db));
    check_bucket("flt", "t", true);
    uint64_t want = 0;
    ASSERT_OK(sx_count(c, NULL, &want));
    ASSERT_EQ(want, (uint64_t)next - 12);
    sx_collection_release(c);
    sx_db_close(db);
    unsetenv("SEXTANT_S3_TIMEOUT_MS");
    unsetenv("SEXTANT_S3_RETRIES");

    db = open_db(f, url, srv.endpoint);
    ASSERT_OK(sx_collection_open(db, "t", &c));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, want);
    for (int64_t id = 0; id < next; id += 41) {
        sx_keys g = { 1, &id, NULL };
        sx_rowset *rs;
        ASSERT_OK(sx_get(c, &g, NULL, 0, &rs));
        ASSERT_EQ(rs->n_rows, id % 400 == 393 ? 0 : 1);
        sx_rowset_free(rs);
    }
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    tmp = test_tmpdir("s3store");
    int rc = th_s3rver_start(tmp, &srv);
    if (rc)
        return rc;
    if (fp_start(&fp, srv.port) != 0) {
        fprintf(stderr, "cannot start the fault proxy\n");
        th_s3rver_stop(&srv);
        return 1;
    }
    snprintf(proxy_ep, sizeof proxy_ep, "http://127.0.0.1:%d", fp.port);
    setenv("AWS_ACCESS_KEY_ID", TH_S3RVER_ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", TH_S3RVER_SECRET, 1);
    sx__s3_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.endpoint = srv.endpoint;
    cfg.bucket = BUCKET;
    if (sx__s3_new(&cfg, &S) != SX_OK || sx__s3_create_bucket(S) != SX_OK) {
        fprintf(stderr, "S3 client / bucket: %s\n", sx_errmsg());
        fp_stop(&fp);
        th_s3rver_stop(&srv);
        return 1;
    }
    RUN(test_open_from_bucket);
    RUN(test_faults_through_proxy);
    sx__s3_free(S);
    fp_stop(&fp);
    th_s3rver_stop(&srv);
    return TEST_DONE();
}
