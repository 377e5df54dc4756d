/*
 * test_kmeans.c: unit tests of k-means (src/vector/kmeans.c).
 *
 *   - inertia never increases with more Lloyd iterations (same seed, k-means++ and random
 *     seeding; relative slack 1e-5 for float rounding at convergence);
 *   - determinism: the same seed gives bit-identical centroids, another seed different ones;
 *   - well-separated clusters are recovered exactly (each true cluster is one k-means cluster);
 *   - empty-cluster repair: 60% duplicate rows with random seeding (many seeds coincide) still
 *     ends with every cluster non-empty; fewer distinct rows than k ends with finite centroids
 *     and zero inertia;
 *   - sx__kmeans_assign agrees with a double-precision brute force (the chosen centroid is within
 *     a relative 1e-4 of the true nearest; dist_out within 1e-3 relative);
 *   - small dimensions (PQ sub-spaces: dim 2..16, k = 256) train and assign correctly;
 *   - sample_rows: sorted, distinct, exact count, deterministic;
 *   - errors: k = 0, k > n, stride < dim are SX_EINVAL; a set cancel flag gives SX_ECANCELED.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "util/err.h"
#include "vector/kmeans.h"

static uint64_t g_seed;

static float *gaussian_blobs(
    size_t n, size_t dim, size_t nc, float spread, float sep, uint64_t *s, uint32_t *label)
{
    float *centers = malloc(nc * dim * sizeof(float));
    for (size_t i = 0; i < nc * dim; i++)
        centers[i] = (test_randf(s) * 2.0f - 1.0f) * sep;
    float *x = malloc(n * dim * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        size_t c = test_rand(s) % nc;
        if (label)
            label[i] = (uint32_t)c;
        for (size_t d = 0; d < dim; d++) {
            /* sum of 4 uniforms: roughly normal */
            float g = test_randf(s) + test_randf(s) + test_randf(s) + test_randf(s) - 2.0f;
            x[i * dim + d] = centers[c * dim + d] + g * spread;
        }
    }
    free(centers);
    return x;
}

static double exact_l2(const float *a, const float *b, size_t dim)
{
    double s = 0;
    for (size_t d = 0; d < dim; d++) {
        double e = (double)a[d] - (double)b[d];
        s += e * e;
    }
    return s;
}

static void inertia_decreases(void)
{
    uint64_t s = g_seed;
    size_t n = 4000, dim = 16, k = 24;
    float *x = gaussian_blobs(n, dim, 16, 0.6f, 4.0f, &s, NULL);
    float *c = malloc(k * dim * sizeof(float));
    int inits[2] = { SX__KMEANS_INIT_PP, SX__KMEANS_INIT_RANDOM };
    for (int ii = 0; ii < 2; ii++) {
        double prev = INFINITY;
        uint32_t its[] = { 1, 2, 3, 5, 8, 13, 25 };
        for (size_t t = 0; t < sizeof its / sizeof its[0]; t++) {
            double in = -1;
            sx__kmeans_opts o = {
                .k = k, .iters = its[t], .seed = 7, .inertia_out = &in, .init = inits[ii]
            };
            ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, c));
            ASSERT(in >= 0);
            if (!(in <= prev * (1 + 1e-5)))
                FAILF("init %d: inertia %.6g after %u iterations > %.6g before", inits[ii], in,
                      its[t], prev);
            prev = in;
        }
    }
    free(c);
    free(x);
}

static void deterministic(void)
{
    uint64_t s = g_seed + 1;
    size_t n = 3000, dim = 20, k = 32;
    float *x = gaussian_blobs(n, dim, 10, 1.0f, 3.0f, &s, NULL);
    float *a = malloc(k * dim * sizeof(float)), *b = malloc(k * dim * sizeof(float));
    for (int init = SX__KMEANS_INIT_PP; init <= SX__KMEANS_INIT_RANDOM; init++) {
        sx__kmeans_opts o = { .k = k, .seed = 42, .init = init, .max_sample = 2000 };
        ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, a));
        ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, b));
        ASSERT(memcmp(a, b, k * dim * sizeof(float)) == 0);
        o.seed = 43;
        ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, b));
        ASSERT(memcmp(a, b, k * dim * sizeof(float)) != 0);
    }
    free(a);
    free(b);
    free(x);
}

static void separated_clusters_recovered(void)
{
    uint64_t s = g_seed + 2;
    size_t n = 2000, dim = 8, k = 8;
    uint32_t *label = malloc(n * sizeof *label);
    /* spread 0.05 around centers up to 10 apart: no overlap */
    float *x = gaussian_blobs(n, dim, k, 0.05f, 10.0f, &s, label);
    float *c = malloc(k * dim * sizeof(float)), *try_c = malloc(k * dim * sizeof(float));
    uint32_t *as = malloc(n * sizeof *as);
    /* The best of three trainings (lowest inertia, as FAISS's nredo): k-means++ seeding can put
     * two seeds in one cluster and none in another, a local minimum Lloyd's iterations keep. It
     * is rare (none in 60 data seeds tried) but it happens (SX_SEED=1796160206), so one training
     * made this test fail by chance; all three independent trainings landing there would mean
     * the seeding is broken. */
    double best = INFINITY;
    for (uint64_t seed = 3; seed < 6; seed++) {
        double in = -1;
        sx__kmeans_opts o = { .k = k, .seed = seed, .inertia_out = &in };
        ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, try_c));
        ASSERT(in >= 0);
        if (in < best) {
            best = in;
            memcpy(c, try_c, k * dim * sizeof(float));
        }
    }
    free(try_c);
    ASSERT_OK(sx__kmeans_assign(x, n, dim, dim, c, k, as, NULL));
    uint32_t map[8];
    for (size_t t = 0; t < k; t++)
        map[t] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        if (map[label[i]] == UINT32_MAX)
            map[label[i]] = as[i];
        ASSERT_EQ(map[label[i]], as[i]);
    }
    /* distinct true clusters map to distinct centroids (when each was sampled at all) */
    for (size_t a = 0; a < k; a++)
        for (size_t b = a + 1; b < k; b++)
            if (map[a] != UINT32_MAX && map[b] != UINT32_MAX)
                ASSERT(map[a] != map[b]);
    free(as);
    free(c);
    free(x);
    free(label);
}

static void empty_cluster_repair(void)
{
    uint64_t s = g_seed + 3;
    size_t n = 1000, dim = 6, k = 32;
    float *x = malloc(n * dim * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < dim; d++)
            x[i * dim + d] = i < 600 ? 1.5f : test_randf(&s) * 4.0f;
    float *c = malloc(k * dim * sizeof(float));
    uint32_t *as = malloc(n * sizeof *as);
    size_t *cnt = calloc(k, sizeof *cnt);
    sx__kmeans_opts o = { .k = k, .seed = 11, .init = SX__KMEANS_INIT_RANDOM, .iters = 30 };
    ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o, c));
    for (size_t i = 0; i < k * dim; i++)
        ASSERT(isfinite(c[i]));
    ASSERT_OK(sx__kmeans_assign(x, n, dim, dim, c, k, as, NULL));
    for (size_t i = 0; i < n; i++)
        cnt[as[i]]++;
    for (size_t j = 0; j < k; j++)
        if (cnt[j] == 0)
            FAILF("cluster %zu is empty after repair", j);

    /* 10 distinct rows, 16 clusters: nothing to split, but no NaN and a perfect fit */
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < dim; d++)
            x[i * dim + d] = (float)(i % 10) + (float)d;
    /* the inertia is summed from ||x||^2 - 2 x.c + ||c||^2 in float: zero up to rounding */
    double norms = 0;
    for (size_t i = 0; i < n * dim; i++)
        norms += (double)x[i] * (double)x[i];
    double in = -1;
    sx__kmeans_opts o2 = { .k = 16, .seed = 5, .init = SX__KMEANS_INIT_RANDOM, .inertia_out = &in };
    ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o2, c));
    for (size_t i = 0; i < 16 * dim; i++)
        ASSERT(isfinite(c[i]));
    ASSERT_NEAR(in, 0.0, norms * 1e-6);
    o2.init = SX__KMEANS_INIT_PP;
    ASSERT_OK(sx__kmeans_train(x, n, dim, dim, &o2, c));
    ASSERT_NEAR(in, 0.0, norms * 1e-6);
    free(cnt);
    free(as);
    free(c);
    free(x);
}

static void assign_matches_brute_force(void)
{
    uint64_t s = g_seed + 4;
    size_t dims[] = { 1, 3, 8, 17, 64, 130 };
    size_t ks[] = { 1, 7, 16, 33, 300 };
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            size_t dim = dims[di], k = ks[ki], n = 500, stride = dim + 3;
            float *x = malloc(n * stride * sizeof(float));
            float *c = malloc(k * dim * sizeof(float));
            for (size_t i = 0; i < n * stride; i++)
                x[i] = test_randf(&s) * 10.0f - 5.0f;
            for (size_t i = 0; i < k * dim; i++)
                c[i] = test_randf(&s) * 10.0f - 5.0f;
            uint32_t *as = malloc(n * sizeof *as);
            float *dd = malloc(n * sizeof *dd);
            ASSERT_OK(sx__kmeans_assign(x, n, dim, stride, c, k, as, dd));
            for (size_t i = 0; i < n; i++) {
                double best = INFINITY;
                for (size_t j = 0; j < k; j++) {
                    double e = exact_l2(x + i * stride, c + j * dim, dim);
                    if (e < best)
                        best = e;
                }
                ASSERT(as[i] < k);
                double got = exact_l2(x + i * stride, c + (size_t)as[i] * dim, dim);
                if (got > best * (1 + 1e-4) + 1e-4)
                    FAILF("dim %zu k %zu row %zu: assigned at %.9g, nearest at %.9g", dim, k, i,
                          got, best);
                ASSERT_NEAR(dd[i], got, 1e-3 * (got + 1.0));
            }
            free(dd);
            free(as);
            free(c);
            free(x);
        }
    }
}

static void small_dims_pq_like(void)
{
    uint64_t s = g_seed + 5;
    size_t n = 6000, full = 32;
    float *x = gaussian_blobs(n, full, 50, 1.0f, 3.0f, &s, NULL);
    size_t dsubs[] = { 2, 4, 8, 16 };
    for (size_t t = 0; t < 4; t++) {
        size_t dsub = dsubs[t], k = 256;
        float *c = malloc(k * dsub * sizeof(float));
        double in = -1, in1 = -1;
        /* train on the column slice starting at dimension dsub (stride = full row) */
        sx__kmeans_opts o = { .k = k, .seed = 9, .inertia_out = &in };
        ASSERT_OK(sx__kmeans_train(x + dsub, n, dsub, full, &o, c));
        sx__kmeans_opts o1 = { .k = k, .seed = 9, .iters = 1, .inertia_out = &in1 };
        ASSERT_OK(sx__kmeans_train(x + dsub, n, dsub, full, &o1, c));
        ASSERT(in <= in1 * (1 + 1e-5));
        /* 256 centroids on 6000 points of the slice: mean squared error well below the data's */
        double var = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t d = 0; d < dsub; d++)
                var += (double)x[i * full + dsub + d] * (double)x[i * full + dsub + d];
        ASSERT(in < var * 0.5);
        free(c);
    }
    free(x);
}

static void sample_rows(void)
{
    uint32_t a[100], b[100];
    sx__kmeans_sample_rows(1000, 100, 77, a);
    sx__kmeans_sample_rows(1000, 100, 77, b);
    ASSERT(memcmp(a, b, sizeof a) == 0);
    for (size_t i = 1; i < 100; i++)
        ASSERT(a[i] > a[i - 1]);
    ASSERT(a[99] < 1000);
    sx__kmeans_sample_rows(100, 100, 1, a);
    for (uint32_t i = 0; i < 100; i++)
        ASSERT_EQ(a[i], i);
}

static void errors_and_cancel(void)
{
    float x[40] = { 0 };
    float c[40];
    for (int i = 0; i < 40; i++)
        x[i] = (float)i;
    sx__kmeans_opts o = { .k = 0 };
    ASSERT_STATUS(sx__kmeans_train(x, 10, 4, 4, &o, c), SX_EINVAL);
    o.k = 11;
    ASSERT_STATUS(sx__kmeans_train(x, 10, 4, 4, &o, c), SX_EINVAL);
    o.k = 2;
    ASSERT_STATUS(sx__kmeans_train(x, 10, 4, 3, &o, c), SX_EINVAL);
    uint32_t as[10];
    ASSERT_STATUS(sx__kmeans_assign(x, 10, 4, 4, c, 0, as, NULL), SX_EINVAL);
    atomic_bool stop;
    atomic_init(&stop, true);
    o.cancel = &stop;
    ASSERT_STATUS(sx__kmeans_train(x, 10, 4, 4, &o, c), SX_ECANCELED);
    atomic_store(&stop, false);
    ASSERT_OK(sx__kmeans_train(x, 10, 4, 4, &o, c));
    /* k == n: every row its own centroid */
    double in = -1;
    sx__kmeans_opts o3 = { .k = 10, .seed = 1, .inertia_out = &in };
    ASSERT_OK(sx__kmeans_train(x, 10, 4, 4, &o3, c));
    ASSERT_NEAR(in, 0.0, 1e-6);
}

int main(void)
{
    g_seed = test_seed();
    RUN(inertia_decreases);
    RUN(deterministic);
    RUN(separated_clusters_recovered);
    RUN(empty_cluster_repair);
    RUN(assign_matches_brute_force);
    RUN(small_dims_pq_like);
    RUN(sample_rows);
    RUN(errors_and_cancel);
    return TEST_DONE();
}
