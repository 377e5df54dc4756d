/*
 * test_store_cache.c: the cache of store-backed files (cache_limit_bytes) over a file:// store:
 * a DISKANN collection opened from the store in a fresh directory reads its sectors through the
 * block cache (never downloading the file), with results identical to the writer's local file,
 * evictions under the limit, recall kept; local .idx copies are evicted after a sync and
 * downloaded again on demand. The scenario is tests/harness/cache_scenario.h (also run over
 * s3rver by tests/e2e/test_s3_cache.c).
 */
#include <sextant.h>

#include "cache_scenario.h"
#include "harness.h"

static void test_diskann_from_store(void)
{
    char root[600], url[700], a[600], b[600];
    snprintf(root, sizeof root, "%s", test_tmpdir("storecache_root"));
    snprintf(url, sizeof url, "file://%s", root);
    snprintf(a, sizeof a, "%s", test_tmpdir("storecache_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("storecache_b"));
    cache_scenario(url, NULL, false, a, b);
}

/* Without a limit nothing changes: the reader downloads the DISKANN file whole. */
static void test_no_limit_downloads(void)
{
    char root[600], url[700], a[600], b[600], cdir[700];
    snprintf(root, sizeof root, "%s", test_tmpdir("storecache_nl_root"));
    snprintf(url, sizeof url, "file://%s", root);
    snprintf(a, sizeof a, "%s", test_tmpdir("storecache_nl_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("storecache_nl_b"));
    sx_db_options o = { 0 };
    o.storage_url = url;
    o.build_threads = 2;
    sx_db *db;
    ASSERT_OK(sx_db_open(a, &o, &db));
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, CS_DIM, 0 },
    };
    sx_collection_def def = { "cc", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "cc", &c));
    int64_t ids[500];
    float v[500 * CS_DIM];
    for (int i = 0; i < 500; i++) {
        ids[i] = i;
        cs_vec(i, v + i * CS_DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { 500, cols, 2 };
    ASSERT_OK(sx_insert(c, &bt, NULL));
    sx_param dp[] = { { "max_degree", "16" }, { "search_list_size", "40" } };
    ASSERT_OK(sx_index_create(c, "DISKANN", dp, 2));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 300000));
    ASSERT_OK(sx_db_sync(db));
    sx_cache_stats cst;
    sx_db_cache_stats(db, &cst);
    ASSERT_EQ(cst.local_evictions, 0);
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(b, &o, &db));
    snprintf(cdir, sizeof cdir, "%s/collections/cc", b);
    int nd = 0, ns = 0;
    (void)cs_local_bytes(cdir, ".diskann", &nd);
    (void)cs_local_bytes(cdir, ".remote", &ns);
    ASSERT_EQ(nd, 1);
    ASSERT_EQ(ns, 0);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_diskann_from_store);
    RUN(test_no_limit_downloads);
    return TEST_DONE();
}
