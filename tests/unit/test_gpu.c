/*
 * test_gpu.c: the GPU layer (src/gpu). Runs in every build; the parts that need a GPU skip with
 * a printed reason when sx__gpu_available() is false (always in CI), and run on a machine with
 * an NVIDIA GPU through scripts/gpu-check.sh.
 *
 * Plain C, always:
 *   - kNN plans (gpu_plan.c) over a grid of shapes (n, nq, dim, k, on-device output) and budgets
 *     from 1 KiB to 64 GiB: batches cover [0,nq) and tiles cover [0,n), each row exactly once
 *     and in order; device_bytes equals the layout formula and is <= the budget; the tile fits
 *     SX__GPU_TILE_MAX and int; resident only when the base takes <= half the budget; streamed
 *     chunks <= SX__GPU_CHUNK_BYTES; SX_ENOMEM only when even a 1 x 1 layout does not fit;
 *     argument errors are SX_EINVAL.
 *   - k-means plans: the same coverage and budget properties.
 *   - sx__gpu_budget: margin and limit arithmetic.
 *   - sx__gpu_pick_farthest vs a full sort (ties to the lower row, NaN last), random inputs.
 *   - sx__cagra_merge_row (cagra_rows.h, the code the GPU merge kernel runs): protected prefix,
 *     reverse edges, duplicates, empty slots.
 *   - without a GPU: every entry point returns SX_EINVAL and sx__gpu_describe() says why.
 * With a GPU:
 *   - sx__gpu_knn equals the exact kNN (double-precision oracle): every returned id is within
 *     the true k-th distance (float tolerance), ids distinct, distances ascending and equal to
 *     the exact ones, self excluded, padding (UINT32_MAX, +inf) beyond n, recall >= 0.99; L2 and
 *     IP, k = 1, 10, 100, 1024, odd dimensions; again with SX_GPU_MEM_LIMIT forcing the streamed
 *     layout with many tiles and batches (the on-device top-k merge across tiles must equal the
 *     full sort). BIGANN-10k self-kNN graph (k = 32) vs sx__flat_scan: recall >= 0.999.
 *   - sx__gpu_kmeans: inertia within 1% of a CPU Lloyd run from the same initial centroids
 *     (src/vector sx__kmeans_assign for the assignment), and <= 1.03 x the inertia of the CPU
 *     k-means (sx__kmeans_train, all rows, 20 iterations, its own random initial centroids);
 *     streamed (small budget) within 1% of resident.
 *   - CAGRA: sx__gpu_cagra_prune_merge on the CPU twin's exact kNN graph equals the twin's
 *     sx__cagra_prune + sx__cagra_merge bit for bit; the full GPU build (FP32 and TF32 kNN) vs the
 *     CPU twin (sx__cagra_build_graph): mean neighbour overlap >= 0.95 (FP32) / 0.85 (TF32) and
 *     recall@10 of a best-first search (ef 64) within 0.02 of the twin's and >= 0.9; once more
 *     with a small budget (streamed kNN writing into the device graph).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "gpu/cagra_rows.h"
#include "gpu/gpu.h"
#include "gpu/gpu_plan.h"
#include "harness.h"
#include "index/cagra/cagra.h"
#include "index/flat/flat.h"
#include "util/alloc.h"
#include "util/heap.h"
#include "vector/kmeans.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t seed;

/* Returns 1 when a GPU is usable; otherwise ends the test as skipped, saying why (a test that
 * did not run must not count as passed). */
static int gpu_or_skip(const char *what)
{
    if (sx__gpu_available())
        return 1;
    SKIPF("%s needs a usable GPU: %s", what, sx__gpu_describe());
}

static float *rand_vecs(size_t n, size_t dim, uint64_t *s)
{
    float *v = malloc(n * dim * sizeof *v);
    /* 16 clusters of anisotropic noise, so neighbours are structured and ties are rare */
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)(test_rand(s) % 16);
        for (size_t d = 0; d < dim; d++)
            v[i * dim + d] =
                (float)((c * 7 + d) % 11) + (test_randf(s) - 0.5f) * (float)(1 + d % 3);
    }
    return v;
}

static int
load_bigann(float **base, size_t *n, size_t *dim, float **q, size_t *nq, int32_t **gt, size_t *gtk)
{
    const char *p = test_data("bigann10k/bigann10k_base.bvecs");
    if (!p)
        return 0;
    char dir[1024], path[1100];
    size_t d2, ngt;
    snprintf(dir, sizeof dir, "%s", p);
    dir[strlen(dir) - strlen("bigann10k_base.bvecs")] = '\0';
    snprintf(path, sizeof path, "%sbigann10k_base.bvecs", dir);
    *base = test_read_texmex(path, 1, n, dim);
    snprintf(path, sizeof path, "%sbigann10k_query.bvecs", dir);
    *q = test_read_texmex(path, 1, nq, &d2);
    snprintf(path, sizeof path, "%sbigann10k_groundtruth_l2_k100.ivecs", dir);
    *gt = test_read_texmex(path, 4, &ngt, gtk);
    return *base && *q && *gt && d2 == *dim && ngt == *nq && *gtk >= 10;
}

static void need_bigann(void)
{
    test_need_bigann(false);
}

/* ---------------------------------------------------------------- plans */

static void check_knn_plan(size_t n, size_t nq, size_t dim, uint32_t k, bool dev, size_t budget)
{
    sx__gpu_knn_plan p;
    sx_status st = sx__gpu_knn_plan_make(n, nq, dim, k, dev, budget, &p);
    size_t row = (dim + 1) * 4, out = dev ? nq * (size_t)k * 4 : 0;
    /* the smallest streamed layout: 1 query row, 1 column */
    size_t min_bytes = 2 * row + row + 4 + 2 * (size_t)k * 8 + out;
    if (st == SX_ENOMEM) {
        if (n > 0 && nq > 0 && min_bytes <= budget)
            FAILF("ENOMEM for n %zu nq %zu dim %zu k %u dev %d budget %zu (min %zu)", n, nq, dim, k,
                  dev, budget, min_bytes);
        return;
    }
    ASSERT_OK(st);
    if (n == 0 || nq == 0) {
        ASSERT_EQ(p.n_tiles, 0);
        ASSERT_EQ(p.device_bytes, 0);
        return;
    }
    ASSERT(p.query_rows >= 1 && p.tile_cols >= 1);
    ASSERT(p.query_rows <= SX__GPU_QUERY_ROWS && p.query_rows <= nq);
    ASSERT(p.tile_cols <= n);
    ASSERT(p.query_rows * p.tile_cols <= SX__GPU_TILE_MAX);
    ASSERT(p.tile_cols <= (size_t)INT32_MAX);
    ASSERT_EQ(p.device_bytes, sx__gpu_knn_plan_device_bytes(&p));
    ASSERT_EQ(p.pinned_bytes, sx__gpu_knn_plan_pinned_bytes(&p));
    if (p.device_bytes > budget)
        FAILF("device bytes %zu > budget %zu (n %zu nq %zu dim %zu k %u)", p.device_bytes, budget,
              n, nq, dim, k);
    size_t expect = (p.resident ? n * row : 2 * p.tile_cols * row) + p.query_rows * row +
                    p.query_rows * p.tile_cols * 4 + 2 * p.query_rows * (size_t)k * 8 + out;
    ASSERT_EQ(p.device_bytes, expect);
    if (p.resident)
        ASSERT(n * row + out <= budget / 2 + 1);
    else
        ASSERT(p.tile_cols == 1 || p.tile_cols * dim * 4 <= SX__GPU_CHUNK_BYTES);
    /* coverage: every query row and every base row exactly once, in order */
    size_t next = 0;
    for (size_t b = 0; b < p.n_batches; b++) {
        size_t r0, rows;
        sx__gpu_knn_plan_batch(&p, b, &r0, &rows);
        ASSERT_EQ(r0, next);
        ASSERT(rows >= 1 && rows <= p.query_rows);
        next = r0 + rows;
    }
    ASSERT_EQ(next, nq);
    next = 0;
    for (size_t t = 0; t < p.n_tiles; t++) {
        size_t c0, cols;
        sx__gpu_knn_plan_tile(&p, t, &c0, &cols);
        ASSERT_EQ(c0, next);
        ASSERT(cols >= 1 && cols <= p.tile_cols);
        next = c0 + cols;
    }
    ASSERT_EQ(next, n);
}

static void test_knn_plan(void)
{
    static const size_t ns[] = { 0, 1, 2, 7, 1000, 4097, 100000, 1000000, 100000000 };
    static const size_t nqs[] = { 0, 1, 3, 4096, 4097, 10000, 1000000 };
    static const size_t dims[] = { 1, 3, 128, 768, 4096 };
    static const uint32_t ks[] = { 1, 10, 128, 1024 };
    static const size_t budgets[] = { 1024,       65536,           1u << 20,        16u << 20,
                                      300u << 20, (size_t)4 << 30, (size_t)64 << 30 };
    size_t plans = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
            for (size_t c = 0; c < sizeof dims / sizeof *dims; c++)
                for (size_t d = 0; d < sizeof ks / sizeof *ks; d++)
                    for (size_t e = 0; e < sizeof budgets / sizeof *budgets; e++)
                        for (int dev = 0; dev < 2; dev++) {
                            /* coverage loops over up to ~1e8 / 1 tiles would be slow: skip
                             * shapes whose plan would have > 1e6 steps */
                            if (ns[a] >= 100000000 && budgets[e] < (16u << 20))
                                continue;
                            check_knn_plan(ns[a], nqs[b], dims[c], ks[d], dev, budgets[e]);
                            plans++;
                        }
    /* random shapes */
    uint64_t s = seed;
    for (int i = 0; i < 3000; i++) {
        size_t n = (size_t)(test_rand(&s) % 200000), nq = (size_t)(test_rand(&s) % 20000);
        size_t dim = 1 + (size_t)(test_rand(&s) % 1000);
        uint32_t k = 1 + (uint32_t)(test_rand(&s) % SX__GPU_TOPK_MAX);
        size_t budget = (size_t)1 << (14 + test_rand(&s) % 24);
        budget += (size_t)(test_rand(&s) % budget);
        check_knn_plan(n, nq, dim, k, test_rand(&s) & 1, budget);
        plans++;
    }
    fprintf(stderr, "  %zu kNN plans checked\n", plans);
    /* a big budget keeps the base resident with full query batches */
    sx__gpu_knn_plan p;
    ASSERT_OK(sx__gpu_knn_plan_make(1000000, 1000000, 128, 128, true, (size_t)100 << 30, &p));
    ASSERT(p.resident);
    ASSERT_EQ(p.query_rows, SX__GPU_QUERY_ROWS);
    ASSERT_EQ(p.tile_cols, SX__GPU_TILE_MAX / SX__GPU_QUERY_ROWS);
    /* a base larger than the budget streams */
    ASSERT_OK(sx__gpu_knn_plan_make(10000000, 1000, 768, 10, false, (size_t)8 << 30, &p));
    ASSERT(!p.resident);
    ASSERT(p.n_tiles > 1);
    /* argument errors */
    ASSERT_STATUS(sx__gpu_knn_plan_make(10, 10, 0, 10, false, 1 << 20, &p), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_knn_plan_make(10, 10, 8, 0, false, 1 << 20, &p), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_knn_plan_make(10, 10, 8, SX__GPU_TOPK_MAX + 1, false, 1 << 20, &p),
                  SX_EINVAL);
    ASSERT_STATUS(sx__gpu_knn_plan_make(10, 10, 8, 4, false, 16, &p), SX_ENOMEM);
}

static void check_kmeans_plan(size_t n, size_t dim, size_t k, size_t budget)
{
    sx__gpu_kmeans_plan p;
    sx_status st = sx__gpu_kmeans_plan_make(n, dim, k, budget, &p);
    size_t min_bytes = 2 * dim * 4 + k * 4 + n * 8 + k * (2 * dim + 2) * 4;
    if (st == SX_ENOMEM) {
        if (min_bytes <= budget)
            FAILF("ENOMEM for n %zu dim %zu k %zu budget %zu (min %zu)", n, dim, k, budget,
                  min_bytes);
        return;
    }
    ASSERT_OK(st);
    ASSERT(p.batch_rows >= 1 && p.batch_rows <= n);
    ASSERT(p.batch_rows * k <= SX__GPU_TILE_MAX);
    ASSERT_EQ(p.device_bytes, sx__gpu_kmeans_plan_device_bytes(&p));
    if (p.device_bytes > budget)
        FAILF("kmeans device bytes %zu > budget %zu", p.device_bytes, budget);
    if (!p.resident)
        ASSERT(p.batch_rows == 1 || p.batch_rows * dim * 4 <= SX__GPU_CHUNK_BYTES);
    size_t next = 0;
    for (size_t b = 0; b < p.n_batches; b++) {
        size_t r0, rows;
        sx__gpu_kmeans_plan_batch(&p, b, &r0, &rows);
        ASSERT_EQ(r0, next);
        ASSERT(rows >= 1 && rows <= p.batch_rows);
        next = r0 + rows;
    }
    ASSERT_EQ(next, n);
}

static void test_kmeans_plan(void)
{
    static const size_t ns[] = { 1, 2, 100, 65536, 1000000, 30000000 };
    static const size_t dims[] = { 1, 8, 128, 960 };
    static const size_t ks[] = { 1, 2, 64, 1024, 65536 };
    static const size_t budgets[] = { 4096, 1u << 20, 64u << 20, (size_t)2 << 30,
                                      (size_t)80 << 30 };
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof dims / sizeof *dims; b++)
            for (size_t c = 0; c < sizeof ks / sizeof *ks; c++)
                for (size_t e = 0; e < sizeof budgets / sizeof *budgets; e++)
                    if (ks[c] <= ns[a])
                        check_kmeans_plan(ns[a], dims[b], ks[c], budgets[e]);
    uint64_t s = seed ^ 0x55;
    for (int i = 0; i < 2000; i++) {
        size_t n = 1 + (size_t)(test_rand(&s) % 300000);
        size_t k = 1 + (size_t)(test_rand(&s) % (n < 5000 ? n : 5000));
        size_t dim = 1 + (size_t)(test_rand(&s) % 1000);
        size_t budget = (size_t)1 << (12 + test_rand(&s) % 26);
        check_kmeans_plan(n, dim, k, budget + (size_t)(test_rand(&s) % budget));
    }
    sx__gpu_kmeans_plan p;
    ASSERT_STATUS(sx__gpu_kmeans_plan_make(10, 8, 11, 1 << 20, &p), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_kmeans_plan_make(10, 8, 0, 1 << 20, &p), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_kmeans_plan_make(0, 8, 0, 1 << 20, &p), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_kmeans_plan_make(10, 0, 2, 1 << 20, &p), SX_EINVAL);
    ASSERT_OK(sx__gpu_kmeans_plan_make(4000000, 128, 1024, (size_t)64 << 30, &p));
    ASSERT(p.resident);
    ASSERT_EQ(p.batch_rows, SX__GPU_TILE_MAX / 1024);
    ASSERT_OK(sx__gpu_kmeans_plan_make(4000000, 128, 1024, (size_t)1 << 30, &p));
    ASSERT(!p.resident);
    ASSERT(p.n_batches > 1);
}

static void test_budget(void)
{
    const size_t G = (size_t)1 << 30, M = (size_t)1 << 20;
    ASSERT_EQ(sx__gpu_budget(100 * G, 141 * G, 0), 100 * G - 141 * G / 16);
    ASSERT_EQ(sx__gpu_budget(4 * G, 4 * G, 0), 4 * G - 512 * M);
    ASSERT_EQ(sx__gpu_budget(100 * M, 4 * G, 0), 0);
    ASSERT_EQ(sx__gpu_budget(100 * G, 141 * G, 3 * M), 3 * M);
    ASSERT_EQ(sx__gpu_budget(2 * G, 141 * G, 100 * G), 0);
}

/* ---------------------------------------------------------------- farthest rows, merge row */

typedef struct drow {
    float d;
    uint32_t row;
} drow;

static int cmp_far(const void *a, const void *b)
{
    const drow *x = a, *y = b;
    int xn = isnan(x->d), yn = isnan(y->d);
    if (xn != yn)
        return xn - yn;
    if (!xn && x->d != y->d)
        return x->d > y->d ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

static void test_pick_farthest(void)
{
    uint64_t s = seed ^ 0x77;
    for (int it = 0; it < 300; it++) {
        size_t n = (size_t)(test_rand(&s) % 300), want = (size_t)(test_rand(&s) % 40);
        float *d = malloc((n + 1) * sizeof *d);
        drow *ref = malloc((n + 1) * sizeof *ref);
        uint32_t *rows = malloc((want + 1) * sizeof *rows);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = test_rand(&s) % 100;
            d[i] = r < 5 ? NAN : (float)(r % 17); /* many ties, a few NaN */
            ref[i].d = d[i];
            ref[i].row = (uint32_t)i;
        }
        qsort(ref, n, sizeof *ref, cmp_far);
        size_t got = 99;
        ASSERT_OK(sx__gpu_pick_farthest(d, n, want, rows, &got));
        ASSERT_EQ(got, want < n ? want : n);
        for (size_t i = 0; i < got; i++)
            ASSERT_EQ(rows[i], ref[i].row);
        free(d);
        free(ref);
        free(rows);
    }
}

static void test_merge_row(void)
{
    const uint32_t N = SX__CAGRA_NONE;
    uint32_t out[8];
    /* protected prefix, then reverse edges (skipping ones already present), then the rest */
    {
        const uint32_t pr[6] = { 1, 2, 3, 4, 5, 6 }, rev[4] = { 9, 2, 8, 7 };
        sx__cagra_merge_row(pr, 6, rev, 4, out);
        const uint32_t want[6] = { 1, 2, 3, 9, 8, 7 };
        for (int i = 0; i < 6; i++)
            ASSERT_EQ(out[i], want[i]);
    }
    /* few reverse edges: the unprotected pruned edges fill up; duplicates skipped */
    {
        const uint32_t pr[6] = { 1, 2, 3, 4, 5, 6 }, rev[2] = { 5, 10 };
        sx__cagra_merge_row(pr, 6, rev, 2, out);
        const uint32_t want[6] = { 1, 2, 3, 5, 10, 4 };
        for (int i = 0; i < 6; i++)
            ASSERT_EQ(out[i], want[i]);
    }
    /* empty slots in the pruned row and in rev, padding at the end */
    {
        const uint32_t pr[5] = { 4, N, N, N, N }, rev[3] = { N, 4, 6 };
        sx__cagra_merge_row(pr, 5, rev, 3, out);
        const uint32_t want[5] = { 4, 6, N, N, N };
        for (int i = 0; i < 5; i++)
            ASSERT_EQ(out[i], want[i]);
    }
    /* degree 1: nothing protected, the reverse edge wins */
    {
        const uint32_t pr[1] = { 3 }, rev[1] = { 7 };
        sx__cagra_merge_row(pr, 1, rev, 1, out);
        ASSERT_EQ(out[0], 7);
        sx__cagra_merge_row(pr, 1, rev, 0, out);
        ASSERT_EQ(out[0], 3);
    }
    ASSERT(sx__cagra_prune_key(0, 5) < sx__cagra_prune_key(1, 0));
    ASSERT(sx__cagra_prune_key(2, 3) < sx__cagra_prune_key(2, 4));
    ASSERT(sx__cagra_prune_key(UINT32_MAX, 0) > sx__cagra_prune_key(1000, 1023));
}

static void test_no_gpu(void)
{
    const char *d = sx__gpu_describe();
    ASSERT(d && *d);
    fprintf(stderr, "  GPU: %s (available: %s)\n", d, sx__gpu_available() ? "yes" : "no");
    if (sx__gpu_available())
        return;
    float x[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    uint32_t ids[4], g[4];
    float dist[4];
    ASSERT_STATUS(sx__gpu_knn(x, 4, x, 4, 2, SX_METRIC_L2, 1, true, ids, dist), SX_EINVAL);
    ASSERT_STATUS(sx__gpu_kmeans(x, 4, 2, 2, 5, x, NULL, NULL), SX_EINVAL);
    sx__cagra_build_params bp = { .intermediate_degree = 2, .graph_degree = 1 };
    ASSERT_STATUS(sx__gpu_cagra_build(x, 4, 2, SX_METRIC_L2, &bp, g), SX_EINVAL);
    const uint32_t knn[8] = { 1, 2, 0, 2, 0, 1, 0, 1 };
    ASSERT_STATUS(sx__gpu_cagra_prune_merge(knn, 4, 2, 1, g), SX_EINVAL);
}

/* ---------------------------------------------------------------- GPU kNN vs exact */

typedef struct dhit {
    double d;
    uint32_t id;
} dhit;

static int cmp_dhit(const void *a, const void *b)
{
    const dhit *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Runs sx__gpu_knn and checks it against the double-precision oracle. Returns recall. */
static double check_gpu_knn(const float *base,
                            size_t n,
                            const float *q,
                            size_t nq,
                            size_t dim,
                            sx_metric m,
                            uint32_t k,
                            bool self)
{
    const float *queries = self ? base : q;
    uint32_t *ids = malloc(nq * k * sizeof *ids);
    float *dist = malloc(nq * k * sizeof *dist);
    dhit *all = malloc(n * sizeof *all);
    uint8_t *seen = calloc(n + 1, 1);
    double maxn = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t d = 0; d < dim; d++)
            s += (double)base[i * dim + d] * (double)base[i * dim + d];
        maxn = s > maxn ? s : maxn;
    }
    sx_status st = sx__gpu_knn(base, n, queries, nq, dim, m, k, self, ids, dist);
    if (st != SX_OK)
        FAILF("sx__gpu_knn: %s (%s)", sx_status_str(st), sx_errmsg());
    size_t hits = 0, total = 0;
    for (size_t qi = 0; qi < nq; qi++) {
        const float *qv = queries + qi * dim;
        double qn = 0;
        for (size_t d = 0; d < dim; d++)
            qn += (double)qv[d] * (double)qv[d];
        double tol = 2e-5 * (m == SX_METRIC_L2 ? qn + maxn : sqrt(qn * maxn)) + 1e-6;
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++) {
            if (self && i == qi)
                continue;
            all[cnt].d = test_dist_d(qv, base + i * dim, dim, m);
            all[cnt].id = (uint32_t)i;
            cnt++;
        }
        qsort(all, cnt, sizeof *all, cmp_dhit);
        size_t valid = cnt < k ? cnt : k;
        const uint32_t *ri = ids + qi * k;
        const float *rd = dist + qi * k;
        for (size_t t = 0; t < k; t++) {
            if (t >= valid) {
                if (ri[t] != UINT32_MAX || !isinf(rd[t]))
                    FAILF("query %zu slot %zu: want padding, got id %u dist %g", qi, t, ri[t],
                          (double)rd[t]);
                continue;
            }
            if (ri[t] >= n || (self && ri[t] == qi) || seen[ri[t]])
                FAILF("query %zu slot %zu: bad or repeated id %u", qi, t, ri[t]);
            seen[ri[t]] = 1;
            double td = test_dist_d(qv, base + (size_t)ri[t] * dim, dim, m);
            if (td > all[valid - 1].d + tol)
                FAILF("query %zu slot %zu: id %u at %.9g beyond the true k-th %.9g", qi, t, ri[t],
                      td, all[valid - 1].d);
            if (fabs((double)rd[t] - td) > tol)
                FAILF("query %zu slot %zu: reported %.9g, exact %.9g", qi, t, (double)rd[t], td);
            if (t > 0 && rd[t] < rd[t - 1])
                FAILF("query %zu: distances not ascending at %zu", qi, t);
        }
        for (size_t t = 0; t < valid; t++) {
            hits += seen[all[t].id];
            total++;
        }
        for (size_t t = 0; t < valid; t++)
            seen[ri[t]] = 0;
    }
    free(ids);
    free(dist);
    free(all);
    free(seen);
    return total ? (double)hits / (double)total : 1.0;
}

static void knn_cases(const char *label)
{
    uint64_t s = seed ^ 0x1234;

    struct {
        size_t n, nq, dim;
        uint32_t k;
        sx_metric m;
        bool self;
    } cs[] = {
        { 3000, 300, 33, 10, SX_METRIC_L2, false }, { 3000, 300, 33, 10, SX_METRIC_IP, false },
        { 2000, 2000, 16, 1, SX_METRIC_L2, true },  { 2500, 500, 128, 100, SX_METRIC_L2, false },
        { 700, 50, 7, 1024, SX_METRIC_L2, false },  { 900, 900, 5, 64, SX_METRIC_IP, true },
        { 5, 3, 3, 10, SX_METRIC_L2, true },        { 5000, 100, 3, 32, SX_METRIC_L2, false },
    };

    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        float *b = rand_vecs(cs[c].n, cs[c].dim, &s);
        float *q = rand_vecs(cs[c].nq, cs[c].dim, &s);
        double r = check_gpu_knn(b, cs[c].n, q, cs[c].nq, cs[c].dim, cs[c].m, cs[c].k, cs[c].self);
        fprintf(stderr, "  %s: n %zu nq %zu dim %zu k %u %s%s: recall %.4f\n", label, cs[c].n,
                cs[c].nq, cs[c].dim, cs[c].k, cs[c].m == SX_METRIC_L2 ? "L2" : "IP",
                cs[c].self ? " self" : "", r);
        ASSERT(r >= 0.99);
        free(b);
        free(q);
    }
}

static void test_gpu_knn(void)
{
    if (!gpu_or_skip("GPU kNN"))
        return;
    knn_cases("resident");
    /* a tiny budget: streamed base, many tiles and query batches */
    setenv("SX_GPU_MEM_LIMIT", "400000", 1);
    knn_cases("streamed");
    unsetenv("SX_GPU_MEM_LIMIT");
}

static void test_gpu_knn_bigann(void)
{
    if (!gpu_or_skip("GPU kNN on BIGANN-10k"))
        return;
    float *base = NULL, *q = NULL;
    int32_t *gt = NULL;
    size_t n, dim, nq, gtk;
    if (!load_bigann(&base, &n, &dim, &q, &nq, &gt, &gtk)) {
        free(base), free(q), free(gt);
        need_bigann();
    }
    const uint32_t k = 32;
    uint32_t *ids = malloc(n * k * sizeof *ids);
    float *dist = malloc(n * k * sizeof *dist);
    ASSERT_OK(sx__gpu_knn(base, n, base, n, dim, SX_METRIC_L2, k, true, ids, dist));
    /* CPU oracle: sx__flat_scan with k + 1 (self included), self dropped */
    sx__hit *store = malloc(n * (k + 1) * sizeof *store);
    sx__topk *heaps = malloc(n * sizeof *heaps);
    for (size_t i = 0; i < n; i++)
        sx__topk_init(&heaps[i], store + i * (k + 1), k + 1);
    ASSERT_OK(sx__flat_scan(base, n, dim, SX_METRIC_L2, 0, NULL, base, n, heaps));
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got = sx__topk_sort(&heaps[i]), m = 0;
        for (size_t t = 0; t < got && m < k; t++) {
            if (heaps[i].h[t].id == i)
                continue;
            m++;
            for (size_t u = 0; u < k; u++)
                if (ids[i * k + u] == heaps[i].h[t].id) {
                    hits++;
                    break;
                }
        }
    }
    double r = (double)hits / (double)(n * k);
    fprintf(stderr, "  BIGANN-10k self-kNN k=%u: GPU vs sx__flat_scan recall %.5f\n", k, r);
    ASSERT(r >= 0.999);
    free(ids), free(dist), free(store), free(heaps), free(base), free(q), free(gt);
}

/* ---------------------------------------------------------------- GPU k-means */

/* CPU Lloyd from the given centroids with the GPU's rules (mean update, empty clusters take the
 * farthest rows); returns the final inertia. */
static double cpu_lloyd(const float *x, size_t n, size_t dim, size_t k, uint32_t iters, float *cent)
{
    uint32_t *as = malloc(n * sizeof *as), *cnt = malloc(k * sizeof *cnt);
    uint32_t *empty = malloc(k * sizeof *empty), *far = malloc(k * sizeof *far);
    float *dist = malloc(n * sizeof *dist);
    double *sum = malloc(k * dim * sizeof *sum);
    for (uint32_t it = 0; it <= iters; it++) {
        if (sx__kmeans_assign(x, n, dim, dim, cent, k, as, dist) != SX_OK)
            return -1;
        if (it == iters)
            break;
        memset(cnt, 0, k * sizeof *cnt);
        memset(sum, 0, k * dim * sizeof *sum);
        for (size_t i = 0; i < n; i++) {
            cnt[as[i]]++;
            for (size_t d = 0; d < dim; d++)
                sum[as[i] * dim + d] += (double)x[i * dim + d];
        }
        size_t ne = 0, nf = 0;
        for (size_t j = 0; j < k; j++) {
            if (cnt[j] == 0)
                empty[ne++] = (uint32_t)j;
            else
                for (size_t d = 0; d < dim; d++)
                    cent[j * dim + d] = (float)(sum[j * dim + d] / cnt[j]);
        }
        if (ne > 0 && sx__gpu_pick_farthest(dist, n, ne, far, &nf) == SX_OK)
            for (size_t e = 0; e < nf; e++)
                memcpy(cent + (size_t)empty[e] * dim, x + (size_t)far[e] * dim,
                       dim * sizeof(float));
    }
    double in = 0;
    for (size_t i = 0; i < n; i++)
        in += (double)dist[i];
    free(as), free(cnt), free(empty), free(far), free(dist), free(sum);
    return in;
}

static void test_gpu_kmeans(void)
{
    if (!gpu_or_skip("GPU k-means"))
        return;
    float *x = NULL, *q = NULL;
    int32_t *gt = NULL;
    size_t n, dim, nq, gtk;
    uint64_t s = seed ^ 0x99;
    if (!load_bigann(&x, &n, &dim, &q, &nq, &gt, &gtk)) {
        free(x), free(q), free(gt);
        n = 20000, dim = 48;
        x = rand_vecs(n, dim, &s);
        q = NULL, gt = NULL;
        fprintf(stderr, "  BIGANN-10k absent: synthetic %zu x %zu\n", n, dim);
    }
    const size_t k = 64;
    const uint32_t iters = 20;
    float *init = malloc(k * dim * sizeof *init), *cg = malloc(k * dim * sizeof *cg);
    float *cc = malloc(k * dim * sizeof *cc), *ct = malloc(k * dim * sizeof *ct);
    uint32_t *rows = malloc(k * sizeof *rows), *as = malloc(n * sizeof *as);
    sx__kmeans_sample_rows(n, k, seed, rows);
    for (size_t j = 0; j < k; j++)
        memcpy(init + j * dim, x + (size_t)rows[j] * dim, dim * sizeof(float));

    double ig = 0, ic, it = 0, is = 0;
    memcpy(cg, init, k * dim * sizeof *cg);
    ASSERT_OK(sx__gpu_kmeans(x, n, dim, (uint32_t)k, iters, cg, as, &ig));
    for (size_t i = 0; i < n; i++)
        ASSERT(as[i] < k);
    memcpy(cc, init, k * dim * sizeof *cc);
    ic = cpu_lloyd(x, n, dim, k, iters, cc);
    sx__kmeans_opts o = { .k = k,
                          .iters = iters,
                          .seed = seed,
                          .max_sample = n,
                          .inertia_out = &it,
                          .init = SX__KMEANS_INIT_RANDOM };
    ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, ct));
    fprintf(stderr,
            "  k-means %zu x %zu, k %zu, %u iters: GPU %.6g, CPU same init %.6g (%.4f), "
            "sx__kmeans_train %.6g (%.4f)\n",
            n, dim, k, iters, ig, ic, ig / ic, it, ig / it);
    ASSERT(ic > 0 && fabs(ig - ic) <= 0.01 * ic);
    ASSERT(ig <= 1.03 * it); /* different initial centroids: a sanity bound */
    /* streamed batches (a budget far below the rows) */
    setenv("SX_GPU_MEM_LIMIT", "1500000", 1);
    memcpy(cg, init, k * dim * sizeof *cg);
    ASSERT_OK(sx__gpu_kmeans(x, n, dim, (uint32_t)k, iters, cg, NULL, &is));
    unsetenv("SX_GPU_MEM_LIMIT");
    fprintf(stderr, "  streamed: %.6g (%.5f of resident)\n", is, is / ig);
    ASSERT(fabs(is - ig) <= 0.01 * ig);
    /* iters 0: assignment only, centroids unchanged */
    memcpy(cg, init, k * dim * sizeof *cg);
    ASSERT_OK(sx__gpu_kmeans(x, n, dim, (uint32_t)k, 0, cg, as, &ig));
    ASSERT(memcmp(cg, init, k * dim * sizeof *cg) == 0);
    free(init), free(cg), free(cc), free(ct), free(rows), free(as), free(x), free(q), free(gt);
}

/* ---------------------------------------------------------------- GPU CAGRA */

/* Best-first search over a fixed-degree graph from node 0; recall@10 against gt. */
static double graph_recall(const uint32_t *g,
                           uint32_t deg,
                           const float *x,
                           size_t n,
                           size_t dim,
                           const float *q,
                           size_t nq,
                           const int32_t *gt,
                           size_t gtk)
{
    enum { EF = 64, KK = 10 };

    uint32_t *mark = calloc(n, sizeof *mark), stamp = 0;
    sx__hit *cand = malloc((n + 1) * sizeof *cand);
    sx__hit res_store[EF];
    size_t hits = 0;
    for (size_t qi = 0; qi < nq; qi++) {
        const float *qv = q + qi * dim;
        sx__topk res;
        size_t nc = 0;
        sx__topk_init(&res, res_store, EF);
        stamp++;
        sx__hit e = { (float)test_dist_d(qv, x, dim, SX_METRIC_L2), 0 };
        mark[0] = stamp;
        sx__minheap_push(cand, &nc, e);
        sx__topk_push(&res, e.dist, 0);
        while (nc > 0) {
            sx__hit c = sx__minheap_pop(cand, &nc);
            if (c.dist > sx__topk_bound(&res))
                break;
            const uint32_t *row = g + (size_t)c.id * deg;
            for (uint32_t t = 0; t < deg; t++) {
                uint32_t v = row[t];
                if (v >= n || mark[v] == stamp)
                    continue;
                mark[v] = stamp;
                float d = (float)test_dist_d(qv, x + (size_t)v * dim, dim, SX_METRIC_L2);
                if (d < sx__topk_bound(&res)) {
                    sx__topk_push(&res, d, v);
                    sx__hit h = { d, v };
                    sx__minheap_push(cand, &nc, h);
                }
            }
        }
        size_t got = sx__topk_sort(&res);
        for (size_t t = 0; t < got && t < KK; t++)
            for (size_t u = 0; u < KK; u++)
                if ((int32_t)res.h[t].id == gt[qi * gtk + u]) {
                    hits++;
                    break;
                }
    }
    free(mark);
    free(cand);
    return (double)hits / (double)(nq * KK);
}

static double graph_overlap(const uint32_t *a, const uint32_t *b, size_t n, uint32_t deg)
{
    size_t same = 0, tot = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < deg; t++) {
            uint32_t v = a[i * deg + t];
            if (v == SX__CAGRA_NONE)
                continue;
            tot++;
            same += sx__cagra_row_has(b + i * deg, deg, v);
        }
    return tot ? (double)same / (double)tot : 1.0;
}

static void test_gpu_cagra(void)
{
    if (!gpu_or_skip("GPU CAGRA"))
        return;
    float *x = NULL, *q = NULL;
    int32_t *gt = NULL;
    size_t n, dim, nq, gtk;
    if (!load_bigann(&x, &n, &dim, &q, &nq, &gt, &gtk)) {
        free(x), free(q), free(gt);
        need_bigann();
    }
    const uint32_t ideg = 64, deg = 32;
    uint32_t *knn = malloc(n * ideg * sizeof *knn), *pruned = malloc(n * deg * sizeof *pruned);
    uint32_t *cpu = malloc(n * deg * sizeof *cpu), *gpu = malloc(n * deg * sizeof *gpu);
    /* steps 2-4 alone: bit for bit the CPU twin's */
    ASSERT_OK(sx__cagra_knn_exact(x, n, dim, SX_METRIC_L2, ideg, 2, NULL, knn));
    ASSERT_OK(sx__cagra_prune(knn, n, ideg, deg, 2, NULL, pruned));
    ASSERT_OK(sx__cagra_merge(pruned, n, deg, 2, NULL, cpu));
    ASSERT_OK(sx__gpu_cagra_prune_merge(knn, n, ideg, deg, gpu));
    size_t diff = 0;
    for (size_t i = 0; i < n * deg; i++)
        diff += cpu[i] != gpu[i];
    fprintf(stderr, "  prune+merge on the same kNN graph: %zu of %zu slots differ\n", diff,
            n * deg);
    ASSERT_EQ(diff, 0);

    /* whole builds vs the CPU twin */
    sx__cagra_build_params bp = { .intermediate_degree = ideg,
                                  .graph_degree = deg,
                                  .build_algo = SX__CAGRA_ALGO_IVF_PQ,
                                  .nn_descent_iters = 20,
                                  .threads = 0,
                                  .seed = 1,
                                  .knn_fp32 = true };
    ASSERT_OK(sx__cagra_build_graph(x, n, dim, SX_METRIC_L2, &bp, NULL, cpu));
    double rc = graph_recall(cpu, deg, x, n, dim, q, nq, gt, gtk);
    for (int mode = 0; mode < 3; mode++) {
        bp.knn_fp32 = mode != 1;
        if (mode == 2)
            setenv("SX_GPU_MEM_LIMIT", "8000000", 1);
        ASSERT_OK(sx__gpu_cagra_build(x, n, dim, SX_METRIC_L2, &bp, gpu));
        unsetenv("SX_GPU_MEM_LIMIT");
        double ov = graph_overlap(gpu, cpu, n, deg);
        double rg = graph_recall(gpu, deg, x, n, dim, q, nq, gt, gtk);
        fprintf(stderr,
                "  CAGRA %s: neighbour overlap with the CPU twin %.4f, recall@10 GPU %.4f "
                "CPU %.4f\n",
                mode == 0   ? "FP32"
                : mode == 1 ? "TF32"
                            : "FP32 streamed",
                ov, rg, rc);
        ASSERT(ov >= (mode == 1 ? 0.85 : 0.95));
        ASSERT(rg >= rc - 0.02 && rg >= 0.9);
        for (size_t i = 0; i < n; i++) /* structure: ids valid, no self, no repeats */
            for (uint32_t t = 0; t < deg; t++) {
                uint32_t v = gpu[i * deg + t];
                ASSERT(v != i);
                ASSERT(v == SX__CAGRA_NONE || v < n);
                if (v != SX__CAGRA_NONE)
                    ASSERT(!sx__cagra_row_has(gpu + i * deg, t, v));
            }
    }
    free(knn), free(pruned), free(cpu), free(gpu), free(x), free(q), free(gt);
}

int main(void)
{
    seed = test_seed();
    RUN(test_knn_plan);
    RUN(test_kmeans_plan);
    RUN(test_budget);
    RUN(test_pick_farthest);
    RUN(test_merge_row);
    RUN(test_no_gpu);
    RUN(test_gpu_knn);
    RUN(test_gpu_knn_bigann);
    RUN(test_gpu_kmeans);
    RUN(test_gpu_cagra);
    return TEST_DONE();
}
