/*
 * test_hnsw.c: unit tests of the HNSW index (src/index/hnsw) through its vtable.
 *
 * Recall gates (M=16, efConstruction=200, search ef=RECALL_EF=64, k=10):
 *   - BIGANN-10k ($SX_SHARED_DATA/bigann10k), shipped exact top-100: recall@10 >= 0.95, index
 *     built with 1 and with 2 threads (measured: ~0.999 at ef=64);
 *   - Fashion-MNIST slice: first 10,000 train images as base, first 200 t10k images as queries,
 *     exact ground truth by brute force in double in this file; a returned row counts when its
 *     exact distance is <= the true 10th distance (pixel data has exact ties): recall >= 0.95.
 *     Skipped with a message when /usr/share/datasets/fashion-mnist is absent.
 * Structure: sx__hnsw_check after every build and deserialize; serialize -> deserialize gives
 * identical results; truncations at many lengths and random byte flips (seed printed; with the
 * CRC left stale and with it recomputed, so the structural validation is reached too) never
 * crash and give SX_ECORRUPT or an index that passes sx__hnsw_check and can be searched.
 * Filters: 30% random rows allowed -> every hit allowed, recall vs brute force over the allowed
 * rows >= 0.9 at ef=200; 5 rows allowed -> exactly those 5 are returned (documented behaviour:
 * with fewer than ef allowed rows the filtered search traverses the whole connected graph).
 * Errors: ef < k and bad build params are SX_EINVAL naming the parameter.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "data.h"
#include "harness.h"
#include "index/hnsw/hnsw.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/crc32c.h"
#include "util/err.h"

#define K         10
#define RECALL_EF "64"
#define FM_DIR    "/usr/share/datasets/fashion-mnist"
#define FM_N      10000
#define FM_NQ     200

static const sx__index_ops *ops = &sx__hnsw_index_ops;

/* ---------------------------------------------------------------- data */

typedef struct vecs {
    size_t n, dim;
    float *v;
} vecs;

static vecs random_vecs(size_t n, size_t dim, uint64_t *seed)
{
    vecs v = { n, dim, malloc(n * dim * sizeof(float) + 1) };
    for (size_t i = 0; i < n * dim; i++)
        v.v[i] = test_randf(seed) * 2.0f - 1.0f;
    return v;
}

/* ---------------------------------------------------------------- helpers */

static sx__index *
build(const vecs *v, sx_metric m, const char *M, const char *efc, uint32_t threads)
{
    sx_param p[2] = { { "M", M }, { "efConstruction", efc } };
    sx__build_ctx ctx = { .threads = threads };
    sx__index *idx = NULL;
    ASSERT_OK(ops->build(p, 2, v->v, v->n, v->dim, m, &ctx, &idx));
    ASSERT_OK(sx__hnsw_check(idx));
    return idx;
}

/* Searches; returns the number of hits written to out[] (sorted best first). */
static size_t search(const sx__index *idx,
                     const float *q,
                     size_t k,
                     const char *ef,
                     const uint64_t *allow,
                     sx__hit *out)
{
    sx_param sp = { "ef", ef };
    sx__topk t;
    sx__topk_init(&t, out, k);
    ASSERT_OK(ops->search(idx, q, k, &sp, 1, allow, &t));
    return sx__topk_sort(&t);
}

static sx__wbuf serialize(const sx__index *idx)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(ops->serialize(idx, &w));
    return w;
}

/* Recall@k by distance threshold: a hit counts when its exact distance <= the true k-th. */
static double recall_threshold(const sx__index *idx,
                               const vecs *base,
                               const float *queries,
                               size_t nq,
                               sx_metric m,
                               const char *ef,
                               const uint64_t *allow)
{
    double *scratch = malloc(base->n * sizeof *scratch);
    sx__hit out[K];
    size_t good = 0, total = 0;
    for (size_t q = 0; q < nq; q++) {
        const float *qv = queries + q * base->dim;
        size_t nallowed;
        double kth =
            test_kth_dist(base->v, base->n, base->dim, m, qv, K, allow, scratch, &nallowed);
        size_t got = search(idx, qv, K, ef, allow, out);
        for (size_t i = 0; i < got; i++) {
            if (allow)
                ASSERT(sx__bits_test(allow, out[i].id));
            double d = test_dist_d(qv, base->v + (size_t)out[i].id * base->dim, base->dim, m);
            if (d <= kth + 1e-6 * (1.0 + fabs(kth)))
                good++;
        }
        total += nallowed < K ? nallowed : K;
    }
    free(scratch);
    return (double)good / (double)total;
}

/* ---------------------------------------------------------------- BIGANN */

static vecs bigann;
static float *bq;
static int32_t *bgt;
static size_t bnq, bgtk;
static sx__index *bidx; /* built with 2 threads, shared by later tests */

static int bigann_state; /* 0: not loaded yet (or absent), 1: loaded, -1: unreadable */

/* Loads BIGANN-10k once; returns 1 when loaded, 0 when a file is absent or unreadable. */
static int load_bigann(void)
{
    if (bigann_state)
        return bigann_state > 0;
    const char *p = test_data("bigann10k/bigann10k_base.bvecs");
    if (!p)
        return 0;
    char base[1024];
    snprintf(base, sizeof base, "%s", p);
    base[strlen(base) - strlen("bigann10k_base.bvecs")] = '\0';
    char path[1100];
    size_t d2;
    snprintf(path, sizeof path, "%sbigann10k_base.bvecs", base);
    bigann.v = test_read_texmex(path, 1, &bigann.n, &bigann.dim);
    snprintf(path, sizeof path, "%sbigann10k_query.bvecs", base);
    bq = test_read_texmex(path, 1, &bnq, &d2);
    snprintf(path, sizeof path, "%sbigann10k_groundtruth_l2_k100.ivecs", base);
    size_t ngt;
    bgt = test_read_texmex(path, 4, &ngt, &bgtk);
    bool ok = bigann.v && bq && bgt && d2 == bigann.dim && ngt == bnq && bgtk >= K;
    bigann_state = ok ? 1 : -1;
    return ok;
}

static void need_bigann(void)
{
    test_need_bigann(load_bigann());
}

static void need_fmnist_files(void)
{
    test_need_fmnist_files(FM_DIR);
}

static double bigann_recall(const sx__index *idx, const char *ef)
{
    sx__hit out[K];
    size_t good = 0;
    for (size_t q = 0; q < bnq; q++) {
        size_t got = search(idx, bq + q * bigann.dim, K, ef, NULL, out);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                if ((int32_t)out[i].id == bgt[q * bgtk + j]) {
                    good++;
                    break;
                }
    }
    return (double)good / (double)(bnq * K);
}

static void test_bigann_recall_1thread(void)
{
    need_bigann();
    sx__index *idx = build(&bigann, SX_METRIC_L2, "16", "200", 1);
    double r = bigann_recall(idx, RECALL_EF);
    fprintf(stderr, "  BIGANN-10k 1 thread: recall@10 = %.4f at ef=%s\n", r, RECALL_EF);
    ops->free(idx);
    ASSERT(r >= 0.95);
}

static void test_bigann_recall_2threads(void)
{
    need_bigann();
    atomic_size_t progress = 0;
    sx_param p[2] = { { "M", "16" }, { "efConstruction", "200" } };
    sx__build_ctx ctx = { .threads = 2, .progress = &progress };
    ASSERT_OK(ops->build(p, 2, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &bidx));
    ASSERT_EQ(atomic_load(&progress), bigann.n);
    ASSERT_OK(sx__hnsw_check(bidx));
    double r = bigann_recall(bidx, RECALL_EF);
    fprintf(stderr, "  BIGANN-10k 2 threads: recall@10 = %.4f at ef=%s, %zu bytes\n", r, RECALL_EF,
            ops->memory_bytes(bidx));
    ASSERT(r >= 0.95);
}

static void test_bigann_roundtrip(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall_2threads did not build it");
    }
    sx__wbuf w = serialize(bidx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &idx2));
    ASSERT_OK(sx__hnsw_check(idx2));
    ASSERT_EQ(ops->memory_bytes(idx2), ops->memory_bytes(bidx));
    sx__hit a[K], b[K];
    for (size_t q = 0; q < bnq; q++) {
        size_t na = search(bidx, bq + q * bigann.dim, K, "40", NULL, a);
        size_t nb = search(idx2, bq + q * bigann.dim, K, "40", NULL, b);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++) {
            ASSERT_EQ(a[i].id, b[i].id);
            ASSERT(a[i].dist == b[i].dist);
        }
    }
    /* serialize(deserialize(x)) == x */
    sx__wbuf w2 = serialize(idx2);
    ASSERT_EQ(w2.len, w.len);
    ASSERT(memcmp(w.data, w2.data, w.len) == 0);
    sx__wbuf_fini(&w2);
    sx__wbuf_fini(&w);
    ops->free(idx2);
}

static void test_bigann_filter_30pct(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall_2threads did not build it");
    }
    uint64_t seed = test_seed();
    uint64_t *allow = calloc(sx__bits_words(bigann.n), sizeof *allow);
    for (size_t i = 0; i < bigann.n; i++)
        if (test_rand(&seed) % 100 < 30)
            sx__bits_set(allow, i);
    double r = recall_threshold(bidx, &bigann, bq, bnq, SX_METRIC_L2, "200", allow);
    fprintf(stderr, "  30%% allowed: recall@10 = %.4f at ef=200\n", r);
    free(allow);
    ASSERT(r >= 0.9);
}

static void test_bigann_filter_5rows(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall_2threads did not build it");
    }
    uint64_t *allow = calloc(sx__bits_words(bigann.n), sizeof *allow);
    const uint32_t rows[5] = { 3, 777, 4242, 8001, 9999 };
    for (int i = 0; i < 5; i++)
        sx__bits_set(allow, rows[i]);
    sx__hit out[K];
    for (size_t q = 0; q < 10; q++) {
        /* fewer allowed rows than ef: the search visits the whole (connected) graph and returns
         * every allowed row */
        size_t got = search(bidx, bq + q * bigann.dim, K, "64", allow, out);
        ASSERT_EQ(got, 5);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
        got = search(bidx, bq + q * bigann.dim, 3, "10", allow, out);
        ASSERT_EQ(got, 3);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
    }
    /* nothing allowed: nothing returned */
    memset(allow, 0, sx__bits_words(bigann.n) * sizeof *allow);
    ASSERT_EQ(search(bidx, bq, K, "64", allow, out), 0);
    free(allow);
}

/* ---------------------------------------------------------------- Fashion-MNIST */

static void test_fmnist_recall(void)
{
    size_t dim, dq;
    float *base = test_read_idx(FM_DIR "/train-images-idx3-ubyte.gz", FM_N, &dim);
    float *queries = test_read_idx(FM_DIR "/t10k-images-idx3-ubyte.gz", FM_NQ, &dq);
    if (!base || !queries || dq != dim) {
        free(base);
        free(queries);
        need_fmnist_files();
        FAILF("Fashion-MNIST in " FM_DIR " is present but unreadable");
    }
    vecs v = { FM_N, dim, base };
    sx__index *idx = build(&v, SX_METRIC_L2, "16", "200", 2);
    double r = recall_threshold(idx, &v, queries, FM_NQ, SX_METRIC_L2, RECALL_EF, NULL);
    fprintf(stderr, "  Fashion-MNIST 10k/200: recall@10 = %.4f at ef=%s\n", r, RECALL_EF);
    ops->free(idx);
    free(base);
    free(queries);
    ASSERT(r >= 0.95);
}

/* ---------------------------------------------------------------- small, synthetic */

static void test_ip_cosine(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(2000, 24, &seed);
    for (size_t i = 0; i < v.n; i++)
        sx__normalize(v.v + i * v.dim, v.dim);
    vecs q = random_vecs(50, 24, &seed);
    sx_metric ms[2] = { SX_METRIC_IP, SX_METRIC_COSINE };
    for (int m = 0; m < 2; m++) {
        sx__index *idx = build(&v, ms[m], "12", "100", 2);
        double r = recall_threshold(idx, &v, q.v, q.n, ms[m], "100", NULL);
        fprintf(stderr, "  metric %d: recall@10 = %.4f at ef=100\n", (int)ms[m], r);
        ASSERT(r >= 0.95);
        ops->free(idx);
    }
    free(v.v);
    free(q.v);
}

static void test_edge_cases(void)
{
    uint64_t seed = 42;
    sx__hit out[K];
    /* empty index */
    vecs e = { 0, 4, NULL };
    sx__index *idx = build(&e, SX_METRIC_L2, "16", "200", 2);
    float q[4] = { 0, 0, 0, 0 };
    ASSERT_EQ(search(idx, q, K, "64", NULL, out), 0);
    sx__wbuf w = serialize(idx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, NULL, 0, 4, SX_METRIC_L2, &idx2));
    ASSERT_OK(sx__hnsw_check(idx2));
    ops->free(idx2);
    sx__wbuf_fini(&w);
    ops->free(idx);
    /* one row */
    vecs one = random_vecs(1, 4, &seed);
    idx = build(&one, SX_METRIC_L2, "16", "200", 2);
    ASSERT_EQ(search(idx, q, K, "64", NULL, out), 1);
    ASSERT_EQ(out[0].id, 0);
    ops->free(idx);
    free(one.v);
    /* all rows identical: pruning keeps one neighbour each; the repair keeps them reachable */
    vecs same = { 500, 4, malloc(500 * 4 * sizeof(float)) };
    for (size_t i = 0; i < 500 * 4; i++)
        same.v[i] = 1.0f;
    for (uint32_t t = 1; t <= 2; t++) {
        idx = build(&same, SX_METRIC_L2, "4", "20", t);
        ASSERT_EQ(search(idx, same.v, K, "10", NULL, out), K);
        ops->free(idx);
    }
    free(same.v);
    /* more threads than rows, k > n, minimum M and efConstruction */
    vecs few = random_vecs(20, 3, &seed);
    sx__hit big[50];
    /* every row reachable from the entry point, which level-0 search starts from (graph.h
     * invariant R): all 20 rows, whatever the interleaving of the parallel build */
    idx = build(&few, SX_METRIC_L2, "2", "1", 8);
    ASSERT_EQ(search(idx, few.v, 50, "50", NULL, big), 20);
    ASSERT_EQ(big[0].id, 0);
    ops->free(idx);
    /* extreme parameters: the largest efConstruction (4096) is capped at n internally, M = 2048 */
    idx = build(&few, SX_METRIC_L2, "2048", "4096", 2);
    ASSERT_EQ(search(idx, few.v, 50, "50", NULL, big), 20);
    ASSERT_EQ(big[0].id, 0);
    ops->free(idx);
    free(few.v);
}

static void test_cancel_and_progress(void)
{
    uint64_t seed = 7;
    vecs v = random_vecs(3000, 8, &seed);
    atomic_bool cancel = true;
    atomic_size_t progress = 0;
    sx__build_ctx ctx = { .threads = 2, .progress = &progress, .cancel = &cancel };
    sx__index *idx = NULL;
    ASSERT_STATUS(ops->build(NULL, 0, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx), SX_ECANCELED);
    ASSERT(idx == NULL);
    atomic_store(&cancel, false);
    atomic_store(&progress, 0);
    ASSERT_OK(ops->build(NULL, 0, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx));
    ASSERT_EQ(atomic_load(&progress), v.n);
    ASSERT_OK(sx__hnsw_check(idx));
    ops->free(idx);
    free(v.v);
}

/* ---------------------------------------------------------------- params */

static void expect_build_einval(const char *key, const char *value, const char *needle)
{
    sx_param p = { key, value };
    ASSERT_STATUS(ops->check_build_params(&p, 1), SX_EINVAL);
    if (!strstr(sx_errmsg(), needle))
        FAILF("message \"%s\" does not name \"%s\"", sx_errmsg(), needle);
    float v[4] = { 0 };
    sx__index *idx = NULL;
    sx__build_ctx ctx = { .threads = 1 };
    ASSERT_STATUS(ops->build(&p, 1, v, 1, 4, SX_METRIC_L2, &ctx, &idx), SX_EINVAL);
    if (!strstr(sx_errmsg(), needle))
        FAILF("message \"%s\" does not name \"%s\"", sx_errmsg(), needle);
}

static void test_params(void)
{
    ASSERT_OK(ops->check_build_params(NULL, 0));
    sx_param ok[5] = { { "M", "2048" },
                       { "efConstruction", "1" },
                       { "index_type", "HNSW" },
                       { "metric_type", "L2" },
                       { "metricType", "IP" } };
    ASSERT_OK(ops->check_build_params(ok, 5));
    expect_build_einval("M", "1", "M");
    expect_build_einval("M", "2049", "M");
    expect_build_einval("M", "16x", "M");
    expect_build_einval("M", "", "M");
    expect_build_einval("efConstruction", "0", "efConstruction");
    expect_build_einval("efConstruction", "2147483648", "efConstruction");
    expect_build_einval("efConstruction", "-5", "efConstruction");
    expect_build_einval("nlist", "128", "nlist");
    expect_build_einval("m", "16", "\"m\"");

    sx_param ef = { "ef", "5" };
    ASSERT_STATUS(ops->check_search_params(&ef, 1, 10), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "ef") != NULL);
    ASSERT_OK(ops->check_search_params(&ef, 1, 5));
    ASSERT_OK(ops->check_search_params(NULL, 0, 100));
    ef.value = "abc";
    ASSERT_STATUS(ops->check_search_params(&ef, 1, 1), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "ef") != NULL);
    ef.value = "2147483648";
    ASSERT_STATUS(ops->check_search_params(&ef, 1, 1), SX_EINVAL);

    /* search itself rejects ef < k */
    uint64_t seed = 3;
    vecs v = random_vecs(100, 4, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "8", "50", 1);
    sx__hit out[K];
    sx__topk t;
    sx__topk_init(&t, out, K);
    ef.value = "9";
    ASSERT_STATUS(ops->search(idx, v.v, K, &ef, 1, NULL, &t), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "ef") != NULL);
    ASSERT_EQ(t.n, 0);
    /* default ef = max(k, 64), the largest ef (65536) is capped at n */
    ASSERT_OK(ops->search(idx, v.v, K, NULL, 0, NULL, &t));
    ASSERT_EQ(t.n, K);
    ASSERT_EQ(search(idx, v.v, K, "65536", NULL, out), K);
    ASSERT_EQ(out[0].id, 0);
    ops->free(idx);
    free(v.v);
}

/* ---------------------------------------------------------------- corruption */

/* Deserialize must not crash; a success must be a valid, searchable index. */
static int try_load(const uint8_t *d, size_t len, const vecs *v)
{
    sx__index *idx = NULL;
    sx_status st = ops->deserialize(d, len, v->v, v->n, v->dim, SX_METRIC_L2, &idx);
    if (st != SX_OK) {
        if (st != SX_ECORRUPT)
            FAILF("deserialize of %zu bytes returned %s (%s)", len, sx_status_str(st), sx_errmsg());
        return 0;
    }
    ASSERT_OK(sx__hnsw_check(idx));
    sx__hit out[K];
    for (size_t q = 0; q < 5; q++)
        (void)search(idx, v->v + q * 7 * v->dim, K, "20", NULL, out);
    ops->free(idx);
    return 1;
}

static void fix_crc(uint8_t *d, size_t len)
{
    sx__put_le32(d + len - 4, sx__crc32c(0, d, len - 4));
}

static void test_corrupt(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(400, 6, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "4", "40", 2);
    sx__wbuf w = serialize(idx);
    uint8_t *d = malloc(w.len);

    /* truncation at every length (no valid prefix exists: the CRC trails the record) */
    for (size_t len = 0; len < w.len; len++) {
        memcpy(d, w.data, len);
        ASSERT_EQ(try_load(d, len, &v), 0);
    }
    /* truncation with a recomputed CRC reaches the structural checks */
    for (size_t len = 4; len < w.len; len += 3) {
        memcpy(d, w.data, len);
        fix_crc(d, len);
        ASSERT_EQ(try_load(d, len, &v), 0);
    }
    /* random flips of 1..4 bytes, CRC stale (must be caught) and recomputed (validated) */
    size_t valid = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(d, w.data, w.len);
        int nflip = 1 + (int)(test_rand(&seed) % 4);
        for (int f = 0; f < nflip; f++) {
            size_t pos = test_rand(&seed) % w.len;
            uint8_t x = (uint8_t)(test_rand(&seed) | 1);
            if (it % 3 == 0)
                x = (uint8_t)(1u << (test_rand(&seed) % 8));
            d[pos] ^= x;
        }
        if (memcmp(d, w.data, w.len) == 0)
            continue;
        if (it % 2 == 0) {
            ASSERT_EQ(try_load(d, w.len, &v), 0);
        } else {
            fix_crc(d, w.len);
            valid += (size_t)try_load(d, w.len, &v);
        }
    }
    fprintf(stderr, "  %zu of 1500 CRC-fixed corruptions still formed a valid graph\n", valid);
    /* wrong segment shape */
    sx__index *x = NULL;
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n - 1, v.dim, SX_METRIC_L2, &x),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim + 1, SX_METRIC_L2, &x),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_IP, &x), SX_ECORRUPT);
    ASSERT(x == NULL);
    free(d);
    sx__wbuf_fini(&w);
    ops->free(idx);
    free(v.v);
}

/* allocation failure at every step of build, serialize and deserialize: no crash, no leak */
static void test_oom(void)
{
    uint64_t seed = 11;
    vecs v = random_vecs(300, 5, &seed);
    sx__index *ok = build(&v, SX_METRIC_L2, "6", "30", 1);
    sx__wbuf good = serialize(ok);
    for (long nth = 1; nth < 200; nth++) {
        sx__index *idx = NULL;
        sx_param p = { "M", "6" };
        sx__build_ctx ctx = { .threads = 2 };
        sx__alloc_fail_after(nth);
        sx_status st = ops->build(&p, 1, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx);
        sx__alloc_fail_after(0);
        ASSERT(st == SX_OK || st == SX_ENOMEM);
        if (st == SX_OK) {
            ASSERT_OK(sx__hnsw_check(idx));
            ops->free(idx);
        }
        sx__alloc_fail_after(nth);
        st = ops->deserialize(good.data, good.len, v.v, v.n, v.dim, SX_METRIC_L2, &idx);
        sx__alloc_fail_after(0);
        ASSERT(st == SX_OK || st == SX_ENOMEM);
        if (st == SX_OK)
            ops->free(idx);
        sx__wbuf w;
        sx__wbuf_init(&w);
        sx__alloc_fail_after(nth);
        st = ops->serialize(ok, &w);
        sx__alloc_fail_after(0);
        ASSERT(st == SX_OK || st == SX_ENOMEM);
        sx__wbuf_fini(&w);
    }
    sx__wbuf_fini(&good);
    ops->free(ok);
    free(v.v);
}

int main(void)
{
    RUN(test_params);
    RUN(test_edge_cases);
    RUN(test_cancel_and_progress);
    RUN(test_ip_cosine);
    RUN(test_corrupt);
    RUN(test_oom);
    RUN(test_bigann_recall_1thread);
    RUN(test_bigann_recall_2threads);
    RUN(test_bigann_roundtrip);
    RUN(test_bigann_filter_30pct);
    RUN(test_bigann_filter_5rows);
    RUN(test_fmnist_recall);
    if (bidx)
        ops->free(bidx);
    free(bigann.v);
    free(bq);
    free(bgt);
    return TEST_DONE();
}
