/*
 * cache_scenario.h: the engine-level scenario of the store-backed cache (cache_limit_bytes,
 * docs/internals/STORAGE.md "Cache"), shared by tests/unit/test_store_cache.c (file:// store)
 * and tests/e2e/test_s3_cache.c (s3rver). Includes harness.h (its assertions and helpers).
 *
 * cache_scenario(url, endpoint, is_s3, a_dir, b_dir):
 *   1. writer (a_dir): one sealed segment of CS_N rows, a DISKANN index, flush + sync, with a
 *      cache limit far below the segment's bytes: after the sync the local .idx is replaced by
 *      a stub (local_evictions > 0) and the index keeps answering; results `ra`;
 *   2. reader (b_dir, fresh, same limit, a quarter of the DISKANN file): opened from the store;
 *      no local .diskann file, its stub instead (the file is never downloaded whole); the index
 *      is loaded (FINISHED, not rebuilt); the same queries give results identical to `ra` (ids
 *      and distances) with recall@10 >= 0.9 against brute force; the block cache missed,
 *      fetched and evicted; every store GET during the search is one of the cache's ranged
 *      fetches (dispatch-layer count), and over S3 the I/O profile's QUERY/OBJSTORE read ops
 *      equal those fetches, each at most one block (the <=4 KiB histogram bucket);
 *   3. reopen b_dir after a sync (its .idx evicted too): the .idx is downloaded again on demand
 *      (local_fetches > 0) and the results are still identical.
 */
#ifndef SX_TEST_CACHE_SCENARIO_H
#define SX_TEST_CACHE_SCENARIO_H
#include <dirent.h>
#include <sextant.h>
#include <sys/stat.h>

#include "harness.h"
#include "storage/objstore.h"

#define CS_DIM   32
#define CS_N     4000
#define CS_NQ    20
#define CS_K     10
#define CS_LIMIT (200u * 1024u)

static void cs_vec(int64_t id, float *v)
{
    uint64_t s = (uint64_t)id * 0x9E3779B97F4A7C15ull + 7;
    for (int d = 0; d < CS_DIM; d++)
        v[d] = test_randf(&s) * 10.0f;
}

static sx_db *cs_open(const char *dir, const char *url, const char *endpoint)
{
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 64u << 20; /* one segment */
    o.build_threads = 2;
    o.search_threads = 2;
    o.storage_url = url;
    o.s3_endpoint = endpoint;
    o.cache_limit_bytes = CS_LIMIT;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

/* Sum of the sizes of files in dir whose name contains `part` (NULL: all); *count of them. */
static uint64_t cs_local_bytes(const char *dir, const char *part, int *count)
{
    DIR *d = opendir(dir);
    uint64_t total = 0;
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (part && !strstr(e->d_name, part)))
            continue;
        char p[1200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            total += (uint64_t)sb.st_size;
            n++;
        }
    }
    if (d)
        closedir(d);
    if (count)
        *count = n;
    return total;
}

static void cs_queries(float *qs)
{
    uint64_t s = 4242;
    for (int i = 0; i < CS_NQ * CS_DIM; i++)
        qs[i] = test_randf(&s) * 10.0f;
}

static void cs_search(sx_collection *c, const float *qs, sx_rowset **rs)
{
    sx_search_req req = { 0 };
    req.queries = qs;
    req.nq = CS_NQ;
    req.k = CS_K;
    req.metric = -1;
    sx_param sp[] = { { "search_list", "100" }, { "beam_width", "4" } };
    req.params = sp;
    req.n_params = 2;
    ASSERT_OK(sx_search(c, &req, rs));
}

static void cs_same(const sx_rowset *a, const sx_rowset *b)
{
    ASSERT_EQ(a->n_rows, b->n_rows);
    for (size_t i = 0; i < a->n_rows; i++) {
        ASSERT_EQ(((int64_t *)a->cols[0].data)[i], ((int64_t *)b->cols[0].data)[i]);
        ASSERT(a->distances[i] == b->distances[i]);
    }
}

static double cs_recall(const sx_rowset *r, const float *qs)
{
    size_t hit = 0, off = 0;
    for (int q = 0; q < CS_NQ; q++) {
        float best[CS_K];
        int64_t ids[CS_K];
        for (int i = 0; i < CS_K; i++) {
            best[i] = 1e30f;
            ids[i] = -1;
        }
        for (int64_t id = 0; id < CS_N; id++) {
            float v[CS_DIM], d = 0;
            cs_vec(id, v);
            for (int k = 0; k < CS_DIM; k++)
                d += (v[k] - qs[q * CS_DIM + k]) * (v[k] - qs[q * CS_DIM + k]);
            if (d >= best[CS_K - 1])
                continue;
            int j = CS_K - 1;
            while (j > 0 && best[j - 1] > d) {
                best[j] = best[j - 1];
                ids[j] = ids[j - 1];
                j--;
            }
            best[j] = d;
            ids[j] = id;
        }
        for (size_t i = 0; i < r->topks[q]; i++)
            for (int j = 0; j < CS_K; j++)
                hit += ((int64_t *)r->cols[0].data)[off + i] == ids[j];
        off += r->topks[q];
    }
    return (double)hit / (double)(CS_NQ * CS_K);
}

static void cs_coll_dir(const char *root, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/collections/cc", root);
}

static void cache_scenario(
    const char *url, const char *endpoint, bool is_s3, const char *a_dir, const char *b_dir)
{
    float *qs = malloc(sizeof(float) * CS_NQ * CS_DIM);
    ASSERT(qs);
    cs_queries(qs);
    char cdir[1100];

    /* 1. the writer */
    sx_db *db = cs_open(a_dir, url, endpoint);
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, CS_DIM, 0 },
    };
    sx_collection_def def = { "cc", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "cc", &c));
    int64_t *ids = malloc(CS_N * 8);
    float *v = malloc(sizeof(float) * CS_N * CS_DIM);
    ASSERT(ids && v);
    for (int64_t i = 0; i < CS_N; i++) {
        ids[i] = i;
        cs_vec(i, v + i * CS_DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { CS_N, cols, 2 };
    ASSERT_OK(sx_insert(c, &b, NULL));
    free(ids);
    free(v);
    sx_param dp[] = { { "max_degree", "16" }, { "search_list_size", "40" } };
    ASSERT_OK(sx_index_create(c, "DISKANN", dp, 2));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 300000));
    ASSERT_OK(sx_db_sync(db));
    cs_coll_dir(a_dir, cdir, sizeof cdir);
    int n_diskann = 0, n_stub = 0;
    uint64_t dbytes = cs_local_bytes(cdir, ".diskann", &n_diskann);
    ASSERT_EQ(n_diskann, 1); /* the writer keeps its local DISKANN file */
    ASSERT(dbytes > 4 * CS_LIMIT);
    (void)cs_local_bytes(cdir, ".idx.remote", &n_stub);
    ASSERT_EQ(n_stub, 1); /* its .idx was evicted: the store holds it */
    sx_cache_stats cst;
    sx_db_cache_stats(db, &cst);
    ASSERT(cst.local_evictions >= 1);
    ASSERT_EQ(cst.limit_bytes, CS_LIMIT);
    sx_rowset *ra, *rb, *rc;
    cs_search(c, qs, &ra);
    double rec = cs_recall(ra, qs);
    fprintf(stderr, "  writer: DISKANN file %llu bytes, recall@10 %.3f\n",
            (unsigned long long)dbytes, rec);
    ASSERT(rec >= 0.9);
    sx_collection_release(c);
    sx_db_close(db);

    /* 2. a fresh directory from the store: DISKANN through the block cache */
    db = cs_open(b_dir, url, endpoint);
    cs_coll_dir(b_dir, cdir, sizeof cdir);
    int n_file = 0;
    (void)cs_local_bytes(cdir, ".diskann.remote", &n_stub);
    ASSERT_EQ(n_stub, 1);
    uint64_t local_dk = cs_local_bytes(cdir, ".diskann", &n_file);
    ASSERT_EQ(n_file, 1);            /* only the stub */
    ASSERT(local_dk < dbytes / 100); /* not downloaded */
    ASSERT_OK(sx_collection_open(db, "cc", &c));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED); /* loaded, not rebuilt */
    sx_cache_stats c0, c1;
    sx_db_cache_stats(db, &c0);
    sx_io_profile p0, p1;
    sx_io_profile_get(&p0);
    long gets0 = sx__objstore_fault_calls(SX__OBJ_FAULT_GET);
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    cs_search(c, qs, &rb);
    sx_io_phase_set(prev);
    long gets = sx__objstore_fault_calls(SX__OBJ_FAULT_GET) - gets0;
    sx_io_profile_get(&p1);
    sx_db_cache_stats(db, &c1);
    cs_same(ra, rb);
    ASSERT(cs_recall(rb, qs) >= 0.9);
    uint64_t fetches = c1.fetches - c0.fetches;
    fprintf(stderr,
            "  reader: %llu block hits, %llu misses, %llu evictions, %llu ranged GETs "
            "(%llu bytes) for %d queries; resident %llu of %u\n",
            (unsigned long long)(c1.hits - c0.hits), (unsigned long long)(c1.misses - c0.misses),
            (unsigned long long)(c1.evictions - c0.evictions), (unsigned long long)fetches,
            (unsigned long long)(c1.bytes_fetched - c0.bytes_fetched), CS_NQ,
            (unsigned long long)c1.resident_bytes, CS_LIMIT);
    ASSERT(c1.misses > c0.misses);
    ASSERT(c1.hits > c0.hits);
    ASSERT(c1.evictions > c0.evictions);
    ASSERT(fetches > 0);
    ASSERT_EQ(c1.fetch_errors, 0);
    ASSERT(c1.resident_bytes <= CS_LIMIT);
    ASSERT_EQ((uint64_t)gets, fetches); /* every GET of the search is a cache fetch */
    if (is_s3) {
        const sx_io_counter *a = &p0.c[SX_IO_PHASE_QUERY][1], *z = &p1.c[SX_IO_PHASE_QUERY][1];
        ASSERT_EQ(z->read_ops - a->read_ops, fetches);
        ASSERT_EQ(z->read_bytes - a->read_bytes, c1.bytes_fetched - c0.bytes_fetched);
        ASSERT_EQ(z->read_hist[0] - a->read_hist[0], fetches); /* all <= 4 KiB */
    }
    /* the sync trims the downloaded .idx too */
    ASSERT_OK(sx_db_sync(db));
    (void)cs_local_bytes(cdir, ".idx.remote", &n_stub);
    ASSERT_EQ(n_stub, 1);
    sx_collection_release(c);
    sx_db_close(db);

    /* 3. reopen: the evicted .idx comes back on demand, DISKANN stays remote */
    db = cs_open(b_dir, url, endpoint);
    ASSERT_OK(sx_collection_open(db, "cc", &c));
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    sx_db_cache_stats(db, &cst);
    ASSERT_EQ(cst.local_fetches, 1);
    (void)cs_local_bytes(cdir, ".diskann.remote", &n_stub);
    ASSERT_EQ(n_stub, 1);
    cs_search(c, qs, &rc);
    cs_same(ra, rc);
    sx_rowset_free(ra);
    sx_rowset_free(rb);
    sx_rowset_free(rc);
    sx_collection_release(c);
    sx_db_close(db);
    free(qs);
}

#endif
