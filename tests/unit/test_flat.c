/*
 * test_flat.c: exact search (src/index/flat/flat.c) and the FLAT index ops (flat_index.c).
 *
 * sx__flat_scan is compared with a naive double-precision oracle for L2, IP and COSINE, on the
 * row path (nq 1 and 3) and the GEMM path (nq 37), with id_base != 0 (also not a multiple of 64,
 * so allow words are read shifted), with and without an allow bitset (10% random: gathered GEMM
 * tiles; long runs and all-set: in-place tiles; 99% random: the few-deletes case, gathered
 * tiles with gaps of one row). Random data, so there are no exact ties; the top-k sets
 * must equal the oracle's except between candidates whose true distances are within the float
 * tolerance of the k-th (a near-tie, which the test proves is one before accepting a swap).
 * Reported distances must match the oracle's within that tolerance, and every id must be allowed.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "index/flat/flat.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "vector/dist.h"

static uint64_t seed;

typedef struct ohit {
    double dist;
    uint32_t id;
} ohit;

static int cmp_ohit(const void *pa, const void *pb)
{
    const ohit *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static double oracle_dist(sx_metric m, const float *q, const float *x, size_t dim)
{
    double s = 0.0;
    for (size_t i = 0; i < dim; i++) {
        if (m == SX_METRIC_L2) {
            double d = (double)q[i] - (double)x[i];
            s += d * d;
        } else {
            s -= (double)q[i] * (double)x[i];
        }
    }
    return s;
}

static void fill(float *v, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = test_randf(s) * 2.0f - 1.0f;
}

static void normalize_rows(float *v, size_t n, size_t dim)
{
    for (size_t i = 0; i < n; i++)
        (void)sx__normalize(v + i * dim, dim);
}

/* Checks one query's heap against the oracle over the allowed rows. */
static void check_query(sx_metric m,
                        const float *base,
                        size_t n,
                        size_t dim,
                        uint32_t id_base,
                        const uint64_t *allow,
                        const float *q,
                        size_t k,
                        sx__topk *h,
                        double tol)
{
    ohit *all = sx__malloc((n ? n : 1) * sizeof *all);
    ASSERT(all);
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        if (allow && !sx__bits_test(allow, id_base + i))
            continue;
        all[na].id = id_base + (uint32_t)i;
        all[na].dist = oracle_dist(m, q, base + i * dim, dim);
        na++;
    }
    qsort(all, na, sizeof *all, cmp_ohit);
    size_t want = na < k ? na : k;
    size_t got = sx__topk_sort(h);
    if (got != want)
        FAILF("got %zu hits, want %zu (n %zu, allowed %zu, k %zu)", got, want, n, na, k);
    if (want == 0) {
        sx__free(all);
        return;
    }
    double dk = all[want - 1].dist;
    for (size_t r = 0; r < got; r++) {
        uint32_t id = h->h[r].id;
        if (id < id_base || id >= id_base + n)
            FAILF("id %u outside [%u, %zu)", id, id_base, id_base + n);
        if (allow && !sx__bits_test(allow, id))
            FAILF("id %u reported but not allowed", id);
        if (r > 0 && h->h[r].id == h->h[r - 1].id)
            FAILF("id %u reported twice", id);
        double truth = oracle_dist(m, q, base + (size_t)(id - id_base) * dim, dim);
        if (fabs((double)h->h[r].dist - truth) > tol)
            FAILF("id %u: distance %.9g, oracle %.9g (tol %g)", id, (double)h->h[r].dist, truth,
                  tol);
        /* a hit outside the oracle's top-k is only acceptable as a proven near-tie */
        if (truth > dk + 2.0 * tol)
            FAILF("id %u (oracle %.9g) is not in the top %zu (k-th %.9g)", id, truth, want, dk);
    }
    /* every oracle hit clearly inside the top-k must be reported */
    for (size_t r = 0; r < want && all[r].dist < dk - 2.0 * tol; r++) {
        size_t j = 0;
        while (j < got && h->h[j].id != all[r].id)
            j++;
        if (j == got)
            FAILF("oracle rank %zu (id %u, %.9g) missing", r, all[r].id, all[r].dist);
    }
    sx__free(all);
}

typedef struct scase {
    sx_metric metric;
    size_t dim, n, nq, k;
    uint32_t id_base;
    int allow_mode; /* 0 none, 1 random 10%, 2 runs of allowed rows, 3 all set, 4 random 99% */
} scase;

static void run_case(const scase *c, uint64_t *s)
{
    size_t dim = c->dim, n = c->n, nq = c->nq, k = c->k;
    float *base = sx__malloc_aligned(n * dim * sizeof(float) + 64);
    float *qs = sx__malloc(nq * dim * sizeof(float));
    size_t words = sx__bits_words((size_t)c->id_base + n);
    uint64_t *allow = c->allow_mode ? sx__calloc(words, sizeof(uint64_t)) : NULL;
    sx__topk *heaps = sx__malloc(nq * sizeof *heaps);
    sx__hit *store = sx__malloc(nq * (k ? k : 1) * sizeof *store);
    ASSERT(base && qs && heaps && store && (allow || !c->allow_mode));
    fill(base, n * dim, s);
    fill(qs, nq * dim, s);
    if (c->metric == SX_METRIC_COSINE) {
        normalize_rows(base, n, dim);
        normalize_rows(qs, nq, dim);
    }
    /* bits below id_base are set too: they belong to other blocks and must not matter */
    for (size_t i = 0; c->allow_mode && i < (size_t)c->id_base + n; i++) {
        int on = c->allow_mode == 1   ? test_rand(s) % 10 == 0
                 : c->allow_mode == 2 ? (i / 100) % 3 != 1
                 : c->allow_mode == 4 ? test_rand(s) % 100 != 0
                                      : 1;
        if (on)
            sx__bits_set(allow, i);
    }
    for (size_t q = 0; q < nq; q++)
        sx__topk_init(&heaps[q], store + q * k, k);

    ASSERT_OK(sx__flat_scan(base, n, dim, c->metric, c->id_base, allow, qs, nq, heaps));

    /* float error of the GEMM expansion ~ eps * (|q|^2 + |x|^2) * dim-ish; data in [-1,1] */
    double tol = 2e-6 * (double)dim + 1e-6;
    for (size_t q = 0; q < nq; q++)
        check_query(c->metric, base, n, dim, c->id_base, allow, qs + q * dim, k, &heaps[q], tol);
    sx__free_aligned(base);
    sx__free(qs);
    sx__free(allow);
    sx__free(heaps);
    sx__free(store);
}

static void test_vs_oracle(void)
{
    uint64_t s = seed;
    static const sx_metric metrics[] = { SX_METRIC_L2, SX_METRIC_IP, SX_METRIC_COSINE };
    static const size_t nqs[] = { 1, 3, 37 };
    static const size_t dims[] = { 3, 32, 128, 200 };
    static const uint32_t bases[] = { 0, 1000, 77 };
    for (size_t mi = 0; mi < 3; mi++)
        for (size_t qi = 0; qi < 3; qi++)
            for (size_t di = 0; di < 4; di++)
                for (size_t bi = 0; bi < 3; bi++)
                    for (int am = 0; am < 5; am++) {
                        scase c = { .metric = metrics[mi],
                                    .dim = dims[di],
                                    .n = 1500 + (size_t)(test_rand(&s) % 1500),
                                    .nq = nqs[qi],
                                    .k = 10,
                                    .id_base = bases[bi],
                                    .allow_mode = am };
                        run_case(&c, &s);
                    }
}

static void test_k_larger_than_n(void)
{
    uint64_t s = seed + 1;
    for (size_t qi = 0; qi < 2; qi++) {
        /* n < k: every row; with the 10% filter, every allowed row */
        scase c = { .metric = SX_METRIC_L2, .dim = 16, .n = 40, .nq = qi ? 37 : 1, .k = 100 };
        run_case(&c, &s);
        c.allow_mode = 1;
        c.n = 300;
        c.k = 200;
        run_case(&c, &s);
        c.metric = SX_METRIC_IP;
        c.allow_mode = 0;
        c.n = 1;
        run_case(&c, &s);
    }
}

static void test_large_k_and_many_tiles(void)
{
    uint64_t s = seed + 2;
    scase c = { .metric = SX_METRIC_L2, .dim = 64, .n = 9000, .nq = 300, .k = 100 };
    run_case(&c, &s);
    c.metric = SX_METRIC_IP;
    c.allow_mode = 1;
    c.id_base = 5;
    run_case(&c, &s);
}

/* Two result lists for the same query: same length, distances equal within tol rank by rank,
 * and the same id at each rank unless the two distances there are a near-tie (within tol). */
static void same_results(sx__topk *a, sx__topk *b, size_t k, double tol)
{
    ASSERT_EQ(sx__topk_sort(a), k);
    ASSERT_EQ(sx__topk_sort(b), k);
    for (size_t r = 0; r < k; r++) {
        double da = (double)a->h[r].dist, db = (double)b->h[r].dist;
        if (fabs(da - db) > tol)
            FAILF("rank %zu: distance %.9g vs %.9g", r, da, db);
        if (a->h[r].id == b->h[r].id)
            continue;
        int tied = (r > 0 && fabs((double)a->h[r - 1].dist - da) <= 2.0 * tol) ||
                   (r + 1 < k && fabs((double)a->h[r + 1].dist - da) <= 2.0 * tol);
        if (!tied)
            FAILF("rank %zu: id %u vs %u without a near-tie", r, a->h[r].id, b->h[r].id);
    }
}

/* A caller scanning a segment in two chunks into the same heaps gets the one-scan answer. */
static void test_chunks_share_heaps(void)
{
    uint64_t s = seed + 3;
    const size_t n = 2000, dim = 24, k = 15;
    static const size_t nqs[] = { 1, 20 };
    float *base = sx__malloc(n * dim * sizeof(float));
    float q[20 * 24];
    ASSERT(base);
    fill(base, n * dim, &s);
    fill(q, 20 * dim, &s);
    for (size_t qi = 0; qi < 2; qi++) {
        size_t nq = nqs[qi];
        sx__hit st1[20 * 15], st2[20 * 15];
        sx__topk h1[20], h2[20];
        for (size_t i = 0; i < nq; i++) {
            sx__topk_init(&h1[i], st1 + i * k, k);
            sx__topk_init(&h2[i], st2 + i * k, k);
        }
        ASSERT_OK(sx__flat_scan(base, n, dim, SX_METRIC_L2, 500, NULL, q, nq, h1));
        ASSERT_OK(sx__flat_scan(base, 700, dim, SX_METRIC_L2, 500, NULL, q, nq, h2));
        ASSERT_OK(
            sx__flat_scan(base + 700 * dim, n - 700, dim, SX_METRIC_L2, 1200, NULL, q, nq, h2));
        /* the row path is bit-identical; GEMM tiles fall differently, so allow rounding */
        for (size_t i = 0; i < nq; i++)
            same_results(&h1[i], &h2[i], k, nq == 1 ? 0.0 : 1e-4);
    }
    sx__free(base);
}

/* The row path and the GEMM path agree (same ids; distances within the GEMM tolerance). */
static void test_paths_agree(void)
{
    uint64_t s = seed + 4;
    const size_t n = 3000, dim = 100, k = 20, nq = SX__FLAT_GEMM_MIN_NQ;
    float *base = sx__malloc(n * dim * sizeof(float));
    float *q = sx__malloc(nq * dim * sizeof(float));
    sx__hit *st = sx__malloc(2 * nq * k * sizeof *st);
    ASSERT(base && q && st);
    fill(base, n * dim, &s);
    fill(q, nq * dim, &s);
    for (int m = 0; m < 2; m++) {
        sx_metric metric = m ? SX_METRIC_IP : SX_METRIC_L2;
        sx__topk g[SX__FLAT_GEMM_MIN_NQ], r[SX__FLAT_GEMM_MIN_NQ];
        for (size_t i = 0; i < nq; i++) {
            sx__topk_init(&g[i], st + i * k, k);
            sx__topk_init(&r[i], st + (nq + i) * k, k);
        }
        ASSERT_OK(sx__flat_scan(base, n, dim, metric, 0, NULL, q, nq, g));
        for (size_t i = 0; i < nq; i++)
            ASSERT_OK(sx__flat_scan(base, n, dim, metric, 0, NULL, q + i * dim, 1, &r[i]));
        for (size_t i = 0; i < nq; i++)
            same_results(&g[i], &r[i], k, 1e-4);
    }
    sx__free(base);
    sx__free(q);
    sx__free(st);
}

/* Issue 13: the GEMM path against the row path on data where the L2 expansion ||q||^2 - 2 q.x +
 * ||x||^2 is unsafe in float.
 *   offset:  rows and queries 1e4 + U[-1, 1] (the expansion's error ~1e3 dwarfs distances ~40,
 *            so before the fix the batched top-k was noise, distance 0 included): every
 *            candidate is recomputed with the kernel, so the answers are IDENTICAL to nq = 1;
 *   near:    queries are rows of norm up to 1e6 plus noise of 1 (near duplicates far out): the
 *            unsafe pairs recomputed, the others within 2^-10;
 *   extreme: rows like [3e38, ...] stored before SX_MAX_SQNORM existed (norm +inf in float:
 *            the expansion gave inf - inf = NaN, clamped to 0, so that row was top-1 at distance
 *            0 for every query), +-3e38 alternating, 1e19: never at distance 0; IP: no NaN (a
 *            sum of products near FLT_MAX has no meaningful float value, so the two paths'
 *            summation orders may differ arbitrarily: the reason for SX_MAX_SQNORM).
 * Checked for every query (L2): the distances of nq = 1 rank by rank (within 2^-10; offset:
 * equal), no reported distance NaN, no row of norm >= 1e19 reported at a finite distance below
 * 1e30. */
static void test_gemm_unsafe_expansion(void)
{
    uint64_t s = seed + 9;
    const size_t n = 1500, k = 12, nq = 32;
    static const size_t dims[] = { 1, 17, 128 };
    for (size_t di = 0; di < 3; di++) {
        size_t dim = dims[di];
        float *base = sx__malloc(n * dim * sizeof(float));
        float *q = sx__malloc(nq * dim * sizeof(float));
        sx__hit *st = sx__malloc(2 * nq * k * sizeof *st);
        ASSERT(base && q && st);
        for (int kind = 0; kind < 3; kind++) {
            for (size_t i = 0; i < n * dim; i++)
                base[i] = (kind == 0   ? 1e4f
                           : kind == 1 ? 1e6f * test_randf(&s)
                                       : 0.0f) +
                          test_randf(&s) * 2.0f - 1.0f;
            for (size_t i = 0; i < nq; i++) {
                const float *src = base + (size_t)(test_rand(&s) % n) * dim;
                for (size_t d = 0; d < dim; d++)
                    q[i * dim + d] = kind == 1   ? src[d] + test_randf(&s) - 0.5f
                                     : kind == 0 ? 1e4f + test_randf(&s) * 2.0f - 1.0f
                                                 : test_randf(&s) * 2.0f - 1.0f;
            }
            if (kind == 2) {
                for (size_t d = 0; d < dim; d++) {
                    base[5 * dim + d] = 3e38f;
                    base[700 * dim + d] = d % 2 ? 3e38f : -3e38f;
                    base[1499 * dim + d] = d == 0 ? 1e19f : 0.5f;
                }
            }
            for (int m = 0; m < 2; m++) {
                sx_metric metric = m ? SX_METRIC_IP : SX_METRIC_L2;
                if (kind < 2 && m)
                    continue; /* no expansion for IP: the normal tests cover it */
                sx__topk g[32], r[32];
                for (size_t i = 0; i < nq; i++) {
                    sx__topk_init(&g[i], st + i * k, k);
                    sx__topk_init(&r[i], st + (nq + i) * k, k);
                }
                ASSERT_OK(sx__flat_scan(base, n, dim, metric, 0, NULL, q, nq, g));
                for (size_t i = 0; i < nq; i++)
                    ASSERT_OK(sx__flat_scan(base, n, dim, metric, 0, NULL, q + i * dim, 1, &r[i]));
                for (size_t i = 0; i < nq; i++) {
                    ASSERT_EQ(sx__topk_sort(&g[i]), k);
                    ASSERT_EQ(sx__topk_sort(&r[i]), k);
                    for (size_t j = 0; j < k; j++) {
                        float dg = g[i].h[j].dist, dr = r[i].h[j].dist;
                        uint32_t id = g[i].h[j].id;
                        ASSERT(dg == dg);
                        if (kind == 0) { /* all recomputed: the very values of nq = 1 */
                            if (dg != dr || id != r[i].h[j].id)
                                FAILF("dim %zu kind %d query %zu rank %zu: (%u, %.9g) batched, "
                                      "(%u, %.9g) nq=1",
                                      dim, kind, i, j, id, (double)dg, r[i].h[j].id, (double)dr);
                        } else if (!m && dg != dr &&
                                   !(fabsf(dg - dr) <= fabsf(dr) * 0x1p-9f + 1e-3f)) {
                            FAILF("dim %zu kind %d %s query %zu rank %zu: %.9g batched, %.9g "
                                  "nq=1",
                                  dim, kind, m ? "IP" : "L2", i, j, (double)dg, (double)dr);
                        }
                        if (kind == 2 && !m && (id == 5 || id == 700 || id == 1499) && dg < 1e30f)
                            FAILF("dim %zu: extreme row %u at %.9g for query %zu (nq=1: row %u "
                                  "at %.9g)",
                                  dim, id, (double)dg, i, r[i].h[j].id, (double)dr);
                    }
                }
            }
        }
        sx__free(base);
        sx__free(q);
        sx__free(st);
    }
}

static void test_gemm_enomem(void)
{
    uint64_t s = seed + 5;
    const size_t n = 100, dim = 8, nq = SX__FLAT_GEMM_MIN_NQ; /* the GEMM path allocates */
    float base[100 * 8], q[SX__FLAT_GEMM_MIN_NQ * 8];
    sx__hit st[SX__FLAT_GEMM_MIN_NQ];
    sx__topk h[SX__FLAT_GEMM_MIN_NQ];
    fill(base, n * dim, &s);
    fill(q, nq * dim, &s);
    for (size_t i = 0; i < nq; i++)
        sx__topk_init(&h[i], st + i, 1);
    sx__alloc_fail_after(1);
    sx_status rc = sx__flat_scan(base, n, dim, SX_METRIC_L2, 0, NULL, q, nq, h);
    sx__alloc_fail_after(0);
    ASSERT_STATUS(rc, SX_ENOMEM);
    for (size_t i = 0; i < nq; i++)
        ASSERT_EQ(h[i].n, 0);
    /* and the row path allocates nothing */
    sx__alloc_fail_after(1);
    rc = sx__flat_scan(base, n, dim, SX_METRIC_L2, 0, NULL, q, 1, h);
    sx__alloc_fail_after(0);
    ASSERT_OK(rc);
    ASSERT_EQ(h[0].n, 1);
}

static void test_edge_args(void)
{
    float v[4] = { 0 };
    sx__hit st[1];
    sx__topk h;
    sx__topk_init(&h, st, 1);
    ASSERT_OK(sx__flat_scan(v, 0, 4, SX_METRIC_L2, 0, NULL, v, 1, &h));
    ASSERT_EQ(h.n, 0);
    ASSERT_STATUS(sx__flat_scan(v, 1, 4, (sx_metric)9, 0, NULL, v, 1, &h), SX_EINVAL);
    ASSERT_STATUS(sx__flat_scan(v, 1, 0, SX_METRIC_L2, 0, NULL, v, 1, &h), SX_EINVAL);
    ASSERT_STATUS(sx__flat_scan(v, 2, 2, SX_METRIC_L2, UINT32_MAX, NULL, v, 1, &h), SX_EINVAL);
    ASSERT_OK(sx__flat_scan(v, 1, 4, SX_METRIC_L2, UINT32_MAX, NULL, v, 1, &h));
    ASSERT_EQ(h.n, 1);
    ASSERT_EQ(h.h[0].id, UINT32_MAX);
    /* k = 0 heaps take nothing on either path */
    sx__topk z[8];
    float q[8 * 4] = { 0 };
    for (size_t i = 0; i < 8; i++)
        sx__topk_init(&z[i], NULL, 0);
    ASSERT_OK(sx__flat_scan(v, 1, 4, SX_METRIC_IP, 0, NULL, q, 1, z));
    ASSERT_OK(sx__flat_scan(v, 1, 4, SX_METRIC_IP, 0, NULL, q, 8, z));
    ASSERT_EQ(z[0].n, 0);
}

/* ---------------------------------------------------------------- FLAT index ops */

static void test_index_ops(void)
{
    uint64_t s = seed + 6;
    const sx__index_ops *ops = &sx__flat_index_ops;
    const size_t n = 500, dim = 20, k = 7;
    float *base = sx__malloc(n * dim * sizeof(float));
    float q[20];
    ASSERT(base);
    fill(base, n * dim, &s);
    fill(q, dim, &s);
    ASSERT(strcmp(ops->name, "FLAT") == 0);

    sx_param bad = { "M", "16" };
    ASSERT_STATUS(ops->check_build_params(&bad, 1), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "M") != NULL);
    ASSERT_OK(ops->check_build_params(NULL, 0));
    sx_param sp[2] = { { "ef", "64" }, { "nprobe", "8" } };
    ASSERT_OK(ops->check_search_params(sp, 2, k));
    sx_param sbad = { "efSearch", "1" };
    ASSERT_STATUS(ops->check_search_params(&sbad, 1, k), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "efSearch") != NULL);

    sx__index *idx = NULL;
    ASSERT_STATUS(ops->build(&bad, 1, base, n, dim, SX_METRIC_L2, NULL, &idx), SX_EINVAL);
    ASSERT(idx == NULL);
    atomic_size_t progress = 0;
    atomic_bool cancel = true;
    sx__build_ctx ctx = { .threads = 1, .progress = &progress, .cancel = &cancel };
    ASSERT_STATUS(ops->build(NULL, 0, base, n, dim, SX_METRIC_L2, &ctx, &idx), SX_ECANCELED);
    cancel = false;
    ASSERT_OK(ops->build(NULL, 0, base, n, dim, SX_METRIC_L2, &ctx, &idx));
    ASSERT_EQ(atomic_load(&progress), n);
    ASSERT(ops->memory_bytes(idx) > 0);

    sx__hit st[7];
    sx__topk h;
    sx__topk_init(&h, st, k);
    ASSERT_OK(ops->search(idx, q, k, sp, 2, NULL, &h));
    check_query(SX_METRIC_L2, base, n, dim, 0, NULL, q, k, &h, 1e-4);

    uint64_t allow[8] = { 0 };
    for (size_t i = 0; i < n; i += 9)
        sx__bits_set(allow, i);
    sx__topk_init(&h, st, k);
    ASSERT_OK(ops->search(idx, q, k, NULL, 0, allow, &h));
    check_query(SX_METRIC_L2, base, n, dim, 0, allow, q, k, &h, 1e-4);

    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(ops->serialize(idx, &w));
    ASSERT_EQ(w.len, 28);
    ASSERT(memcmp(w.data, "SXFL", 4) == 0);

    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, base, n, dim, SX_METRIC_L2, &idx2));
    sx__topk_init(&h, st, k);
    ASSERT_OK(ops->search(idx2, q, k, NULL, 0, NULL, &h));
    check_query(SX_METRIC_L2, base, n, dim, 0, NULL, q, k, &h, 1e-4);
    ops->free(idx2);

    /* shape mismatches */
    idx2 = NULL;
    ASSERT_STATUS(ops->deserialize(w.data, w.len, base, n - 1, dim, SX_METRIC_L2, &idx2),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, base, n, dim + 1, SX_METRIC_L2, &idx2),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, base, n, dim, SX_METRIC_IP, &idx2), SX_ECORRUPT);
    /* every single-byte corruption, truncation and extension is caught */
    for (size_t i = 0; i < w.len; i++) {
        w.data[i] ^= 0x5a;
        ASSERT_STATUS(ops->deserialize(w.data, w.len, base, n, dim, SX_METRIC_L2, &idx2),
                      SX_ECORRUPT);
        w.data[i] ^= 0x5a;
    }
    for (size_t len = 0; len < w.len; len++)
        ASSERT_STATUS(ops->deserialize(w.data, len, base, n, dim, SX_METRIC_L2, &idx2),
                      SX_ECORRUPT);
    sx__wbuf_u8(&w, 0);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, base, n, dim, SX_METRIC_L2, &idx2), SX_ECORRUPT);
    ASSERT(idx2 == NULL);

    sx__wbuf_fini(&w);
    ops->free(idx);
    sx__free(base);
}

/* An empty segment still builds, searches and round-trips; dim 0 does not build. */
static void test_index_empty(void)
{
    const sx__index_ops *ops = &sx__flat_index_ops;
    sx__index *idx = NULL;
    ASSERT_OK(ops->build(NULL, 0, NULL, 0, 4, SX_METRIC_COSINE, NULL, &idx));
    sx__hit st[3];
    sx__topk h;
    sx__topk_init(&h, st, 3);
    float q[4] = { 1, 0, 0, 0 };
    ASSERT_OK(ops->search(idx, q, 3, NULL, 0, NULL, &h));
    ASSERT_EQ(h.n, 0);
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(ops->serialize(idx, &w));
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, NULL, 0, 4, SX_METRIC_COSINE, &idx2));
    ops->free(idx2);
    sx__wbuf_fini(&w);
    ops->free(idx);
    ASSERT_STATUS(ops->build(NULL, 0, NULL, 0, 0, SX_METRIC_L2, NULL, &idx), SX_EINVAL);
}

int main(void)
{
    seed = test_seed();
    RUN(test_vs_oracle);
    RUN(test_k_larger_than_n);
    RUN(test_large_k_and_many_tiles);
    RUN(test_chunks_share_heaps);
    RUN(test_paths_agree);
    RUN(test_gemm_unsafe_expansion);
    RUN(test_gemm_enomem);
    RUN(test_edge_args);
    RUN(test_index_ops);
    RUN(test_index_empty);
    return TEST_DONE();
}
