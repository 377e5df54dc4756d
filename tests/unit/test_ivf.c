/*
 * test_ivf.c: unit tests of the IVF family (src/index/ivf: IVF_FLAT, IVF_SQ8, IVF_PQ) and of the
 * SQ8 codec (src/vector/quant_sq8.c), through the vtables.
 *
 * Recall gates, recall@10 by id-set overlap with exact ground truth (k = 10):
 *   BIGANN-10k ($SX_SHARED_DATA/bigann10k, shipped exact top-100; skipped with a message when
 *   absent), nlist = 64:
 *     IVF_FLAT nprobe = nlist  -> results identical to FLAT (ids and distances), recall 1.0
 *     IVF_FLAT nprobe = 12     -> >= 0.95   (measured 0.973)
 *     IVF_SQ8  nprobe = 12     -> >= 0.90   (measured 0.965)
 *     IVF_PQ   m = 16, nprobe = 12, refine = true, refine_k = 8 -> >= 0.90   (measured 0.973;
 *                                 0.752 without refine)
 *   Generated clustered set (synthetic: 20,000 x 32, 100 Gaussian-like blobs, 200 queries from
 *   the same distribution; ground truth = FLAT), nlist = 64, same params with m = 8:
 *     the same thresholds (measured: 1.0, 0.979, 0.985); IVF_FLAT nprobe = nlist identical to
 *     FLAT. IP and COSINE sets (8,000 x 24, nlist 32, nprobe 8, m 6): IVF_FLAT >= 0.9 (1.0),
 *     IVF_SQ8 >= 0.85 (0.98 / 0.95), IVF_PQ refine_k = 10 >= 0.85 (1.0).
 * Structure: sx__ivf_check after every build and deserialize; serialize -> deserialize gives
 * identical results and identical bytes on re-serialization; truncations at many lengths and
 * seeded byte flips (seed printed; CRC stale -> always SX_ECORRUPT; CRC recomputed -> SX_ECORRUPT
 * or an index that passes the check and can be searched) never crash.
 * Filters: 30% random rows allowed -> every hit allowed, recall against brute force over the
 * allowed rows >= 0.9; 5 rows allowed -> exactly those 5 (the search continues past nprobe).
 * Errors: bad build/search params are SX_EINVAL naming the parameter; a build under a memory
 * limit far below its estimate is SX_ENOMEM naming the limit; cancel gives SX_ECANCELED.
 * Allocation failures: failing the 1st, 2nd, ... allocation of build and deserialize gives
 * SX_ENOMEM (and no leak under ASan) until one succeeds; a search whose scratch allocation fails
 * returns SX_ENOMEM.
 * Kernels: SQ8 and ADC SIMD tables against the scalar ones; SQ8 round-trip error <= scale/2.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "index/index.h"
#include "index/ivf/ivf.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "vector/quant_sq8.h"

#define K 10

static uint64_t g_seed;

/* ---------------------------------------------------------------- data */

typedef struct dataset {
    const char *name;
    size_t n, dim, nq;
    float *base;
    float *queries;
    uint32_t *gt; /* nq x K exact ids */
    sx_metric metric;
    const char *pq_m;
} dataset;

static float *read_bvecs(const char *path, size_t *n, size_t *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int32_t dd;
    if (fread(&dd, 4, 1, f) != 1 || dd <= 0) {
        (void)fclose(f);
        return NULL;
    }
    (void)fseek(f, 0, SEEK_END);
    long len = ftell(f);
    (void)fseek(f, 0, SEEK_SET);
    size_t rec = 4 + (size_t)dd;
    *n = (size_t)len / rec;
    *d = (size_t)dd;
    uint8_t *raw = malloc(rec);
    float *out = malloc(*n * *d * sizeof(float));
    for (size_t i = 0; i < *n; i++) {
        if (fread(raw, rec, 1, f) != 1)
            break;
        for (size_t j = 0; j < *d; j++)
            out[i * *d + j] = (float)raw[4 + j];
    }
    free(raw);
    (void)fclose(f);
    return out;
}

static uint32_t *read_gt(const char *path, size_t nq)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint32_t *gt = malloc(nq * K * sizeof *gt);
    for (size_t q = 0; q < nq; q++) {
        int32_t d, row[100];
        if (fread(&d, 4, 1, f) != 1 || d < K || d > 100 ||
            fread(row, 4, (size_t)d, f) != (size_t)d) {
            free(gt);
            (void)fclose(f);
            return NULL;
        }
        for (size_t j = 0; j < K; j++)
            gt[q * K + j] = (uint32_t)row[j];
    }
    (void)fclose(f);
    return gt;
}

static dataset bigann;
static int have_bigann;

/* Runs in main, outside any test: an absent or unreadable file leaves have_bigann 0, and
 * need_bigann ends the tests that need the data. */
static void load_bigann(void)
{
    const char *p = test_data("bigann10k/bigann10k_base.bvecs");
    if (!p)
        return;
    bigann.name = "bigann10k";
    bigann.base = read_bvecs(p, &bigann.n, &bigann.dim);
    size_t qd;
    p = test_data("bigann10k/bigann10k_query.bvecs");
    bigann.queries = p ? read_bvecs(p, &bigann.nq, &qd) : NULL;
    p = test_data("bigann10k/bigann10k_groundtruth_l2_k100.ivecs");
    bigann.gt = p && bigann.queries ? read_gt(p, bigann.nq) : NULL;
    bigann.metric = SX_METRIC_L2;
    bigann.pq_m = "16";
    have_bigann = bigann.base && bigann.queries && bigann.gt && bigann.dim == 128;
}

static void need_bigann(void)
{
    test_need_bigann(have_bigann);
}

static sx__index *flat_build(const dataset *ds)
{
    sx__index *f = NULL;
    sx__build_ctx ctx = { .threads = 1 };
    ASSERT_OK(sx__flat_index_ops.build(NULL, 0, ds->base, ds->n, ds->dim, ds->metric, &ctx, &f));
    return f;
}

/* Exact top-K ids of every query, through the FLAT index. */
static uint32_t *flat_gt(const dataset *ds)
{
    sx__index *f = flat_build(ds);
    uint32_t *gt = malloc(ds->nq * K * sizeof *gt);
    sx__hit h[K];
    for (size_t q = 0; q < ds->nq; q++) {
        sx__topk t;
        sx__topk_init(&t, h, K);
        ASSERT_OK(sx__flat_index_ops.search(f, ds->queries + q * ds->dim, K, NULL, 0, NULL, &t));
        ASSERT_EQ(sx__topk_sort(&t), K);
        for (size_t j = 0; j < K; j++)
            gt[q * K + j] = h[j].id;
    }
    sx__flat_index_ops.free(f);
    return gt;
}

static void blobs(
    dataset *ds, const char *name, size_t n, size_t dim, size_t nq, sx_metric metric, uint64_t seed)
{
    uint64_t s = seed;
    size_t nc = 100;
    float *centers = malloc(nc * dim * sizeof(float));
    for (size_t i = 0; i < nc * dim; i++)
        centers[i] = (test_randf(&s) * 2.0f - 1.0f) * 3.0f;
    float *all = malloc((n + nq) * dim * sizeof(float));
    for (size_t i = 0; i < n + nq; i++) {
        size_t c = test_rand(&s) % nc;
        for (size_t d = 0; d < dim; d++) {
            float g = test_randf(&s) + test_randf(&s) + test_randf(&s) - 1.5f;
            all[i * dim + d] = centers[c * dim + d] + g;
        }
        if (metric == SX_METRIC_COSINE) {
            float nn = 0;
            for (size_t d = 0; d < dim; d++)
                nn += all[i * dim + d] * all[i * dim + d];
            nn = sqrtf(nn);
            for (size_t d = 0; d < dim; d++)
                all[i * dim + d] /= nn;
        }
    }
    free(centers);
    ds->name = name;
    ds->n = n;
    ds->dim = dim;
    ds->nq = nq;
    ds->base = all;
    ds->queries = all + n * dim;
    ds->metric = metric;
    ds->pq_m = "8";
    ds->gt = flat_gt(ds);
}

static dataset gen;

/* ---------------------------------------------------------------- helpers */

static const sx__index_ops *ops_of(sx__ivf_kind k)
{
    return sx__ivf_ops(k);
}

static sx__index *build(sx__ivf_kind kind, const dataset *ds, const char *nlist, uint32_t threads)
{
    sx_param p[3] = { { "nlist", nlist }, { "m", ds->pq_m }, { "nbits", "8" } };
    size_t np = kind == SX__IVF_KIND_PQ ? 3 : 1;
    sx__build_ctx ctx = { .threads = threads, .seed = 12345 };
    sx__index *idx = NULL;
    ASSERT_OK(ops_of(kind)->build(p, np, ds->base, ds->n, ds->dim, ds->metric, &ctx, &idx));
    ASSERT_OK(sx__ivf_check(idx));
    return idx;
}

typedef struct sparams {
    sx_param p[3];
    size_t n;
} sparams;

static sparams sp_make(const char *nprobe, const char *refine, const char *refine_k)
{
    sparams s = { { { "nprobe", nprobe } }, 1 };
    if (refine) {
        s.p[s.n].key = "refine";
        s.p[s.n++].value = refine;
    }
    if (refine_k) {
        s.p[s.n].key = "refine_k";
        s.p[s.n++].value = refine_k;
    }
    return s;
}

static size_t search1(const sx__index *idx,
                      const float *q,
                      size_t k,
                      const sparams *sp,
                      const uint64_t *allow,
                      sx__hit *out)
{
    sx__topk t;
    sx__topk_init(&t, out, k);
    ASSERT_OK(sx__ivf_search(idx, q, k, sp->p, sp->n, allow, &t));
    return sx__topk_sort(&t);
}

static double recall(const sx__index *idx, const dataset *ds, const sparams *sp)
{
    size_t hit = 0;
    sx__hit out[K];
    for (size_t q = 0; q < ds->nq; q++) {
        size_t got = search1(idx, ds->queries + q * ds->dim, K, sp, NULL, out);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                hit += out[i].id == ds->gt[q * K + j];
    }
    return (double)hit / (double)(ds->nq * K);
}

static sx__wbuf serialize(const sx__index *idx)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(sx__ivf_serialize(idx, &w));
    return w;
}

/* ---------------------------------------------------------------- recall */

static void recall_gates(const dataset *ds)
{
    sx__index *flat = flat_build(ds);
    sparams all = sp_make("64", NULL, NULL), mod = sp_make("12", NULL, NULL);
    sparams ref = sp_make("12", "true", "8");

    sx__index *iv = build(SX__IVF_KIND_FLAT, ds, "64", 2);
    /* nprobe = nlist: exactly FLAT */
    sx__hit a[K], b[K];
    for (size_t q = 0; q < ds->nq; q++) {
        const float *qv = ds->queries + q * ds->dim;
        size_t na = search1(iv, qv, K, &all, NULL, a);
        sx__topk t;
        sx__topk_init(&t, b, K);
        ASSERT_OK(sx__flat_index_ops.search(flat, qv, K, NULL, 0, NULL, &t));
        size_t nb = sx__topk_sort(&t);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++) {
            ASSERT_EQ(a[i].id, b[i].id);
            ASSERT(a[i].dist == b[i].dist);
        }
    }
    double r = recall(iv, ds, &mod);
    fprintf(stderr, "  %s IVF_FLAT nlist=64 nprobe=12: recall@10 %.4f\n", ds->name, r);
    ASSERT(r >= 0.95);
    sx__ivf_free(iv);

    iv = build(SX__IVF_KIND_SQ8, ds, "64", 2);
    r = recall(iv, ds, &mod);
    fprintf(stderr, "  %s IVF_SQ8 nlist=64 nprobe=12: recall@10 %.4f\n", ds->name, r);
    ASSERT(r >= 0.90);
    sx__ivf_free(iv);

    iv = build(SX__IVF_KIND_PQ, ds, "64", 2);
    double r0 = recall(iv, ds, &mod);
    r = recall(iv, ds, &ref);
    fprintf(stderr, "  %s IVF_PQ nlist=64 m=%s nprobe=12: recall@10 %.4f, refine_k=8: %.4f\n",
            ds->name, ds->pq_m, r0, r);
    ASSERT(r >= 0.90);
    ASSERT(r >= r0);
    sx__ivf_free(iv);
    sx__flat_index_ops.free(flat);
}

static void test_bigann_recall(void)
{
    need_bigann();
    recall_gates(&bigann);
}

static void test_generated_recall(void)
{
    recall_gates(&gen);
}

static void test_generated_ip(void)
{
    dataset ip;
    blobs(&ip, "blobs-ip", 8000, 24, 100, SX_METRIC_IP, g_seed ^ 0x1b);
    ip.pq_m = "6";
    dataset cs;
    blobs(&cs, "blobs-cosine", 8000, 24, 100, SX_METRIC_COSINE, g_seed ^ 0x2c);
    cs.pq_m = "6";
    dataset *sets[2] = { &ip, &cs };
    for (int s = 0; s < 2; s++) {
        dataset *ds = sets[s];
        sparams all = sp_make("32", NULL, NULL), mod = sp_make("8", NULL, NULL);
        sx__index *iv = build(SX__IVF_KIND_FLAT, ds, "32", 1);
        ASSERT_NEAR(recall(iv, ds, &all), 1.0, 1e-12);
        double r = recall(iv, ds, &mod);
        fprintf(stderr, "  %s IVF_FLAT nprobe=8: %.4f\n", ds->name, r);
        ASSERT(r >= 0.9);
        sx__ivf_free(iv);
        iv = build(SX__IVF_KIND_SQ8, ds, "32", 1);
        r = recall(iv, ds, &mod);
        fprintf(stderr, "  %s IVF_SQ8 nprobe=8: %.4f\n", ds->name, r);
        ASSERT(r >= 0.85);
        sx__ivf_free(iv);
        iv = build(SX__IVF_KIND_PQ, ds, "32", 1);
        sparams ref = sp_make("8", "true", "10");
        r = recall(iv, ds, &ref);
        fprintf(stderr, "  %s IVF_PQ refine nprobe=8: %.4f\n", ds->name, r);
        ASSERT(r >= 0.85);
        sx__ivf_free(iv);
        free(ds->base);
        free(ds->gt);
    }
}

/* ---------------------------------------------------------------- round trip, corruption */

static void
same_results(const sx__index *x, const sx__index *y, const dataset *ds, const sparams *sp)
{
    sx__hit a[K], b[K];
    for (size_t q = 0; q < ds->nq; q += 7) {
        const float *qv = ds->queries + q * ds->dim;
        size_t na = search1(x, qv, K, sp, NULL, a);
        size_t nb = search1(y, qv, K, sp, NULL, b);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++) {
            ASSERT_EQ(a[i].id, b[i].id);
            ASSERT(a[i].dist == b[i].dist);
        }
    }
}

static void roundtrip_kind(sx__ivf_kind kind)
{
    const sx__index_ops *ops = ops_of(kind);
    sx__index *iv = build(kind, &gen, "64", 2);
    sx__wbuf w = serialize(iv);
    sx__index *back = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, gen.base, gen.n, gen.dim, gen.metric, &back));
    ASSERT_EQ(ops->memory_bytes(back), ops->memory_bytes(iv));
    sparams sp = sp_make("8", NULL, NULL), ref = sp_make("4", "true", "3");
    same_results(iv, back, &gen, &sp);
    if (kind != SX__IVF_KIND_FLAT)
        same_results(iv, back, &gen, &ref);
    sx__wbuf w2 = serialize(back);
    ASSERT_EQ(w2.len, w.len);
    ASSERT(memcmp(w.data, w2.data, w.len) == 0);
    /* a record of another kind or shape is refused */
    const sx__index_ops *other = ops_of((sx__ivf_kind)(((int)kind + 1) % 3));
    sx__index *bad = NULL;
    ASSERT_STATUS(other->deserialize(w.data, w.len, gen.base, gen.n, gen.dim, gen.metric, &bad),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, gen.base, gen.n - 1, gen.dim, gen.metric, &bad),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, gen.base, gen.n, gen.dim, SX_METRIC_IP, &bad),
                  SX_ECORRUPT);
    sx__wbuf_fini(&w2);
    sx__wbuf_fini(&w);
    ops->free(back);
    ops->free(iv);
}

static void test_roundtrip(void)
{
    roundtrip_kind(SX__IVF_KIND_FLAT);
    roundtrip_kind(SX__IVF_KIND_SQ8);
    roundtrip_kind(SX__IVF_KIND_PQ);
}

/* A small index per kind so that corrupting every prefix stays cheap. */
static void corrupt_kind(sx__ivf_kind kind, uint64_t *s)
{
    dataset small;
    blobs(&small, "small", 600, 16, 5, SX_METRIC_L2, 77);
    small.pq_m = "4";
    const sx__index_ops *ops = ops_of(kind);
    sx__index *iv = build(kind, &small, "16", 1);
    sx__wbuf w = serialize(iv);
    uint8_t *copy = malloc(w.len);
    sx__index *x = NULL;
    /* truncations */
    for (size_t len = 0; len < w.len; len += 1 + len / 16) {
        memcpy(copy, w.data, len);
        ASSERT_STATUS(ops->deserialize(copy, len, small.base, small.n, small.dim, small.metric, &x),
                      SX_ECORRUPT);
    }
    /* flips: stale CRC -> always corrupt; recomputed CRC -> corrupt or a sound index */
    sparams sp = sp_make("4", "true", "2");
    sx__hit out[K];
    size_t accepted = 0;
    for (int t = 0; t < 400; t++) {
        memcpy(copy, w.data, w.len);
        size_t at = test_rand(s) % (w.len - 4);
        copy[at] ^= (uint8_t)(1u << (test_rand(s) % 8));
        ASSERT_STATUS(
            ops->deserialize(copy, w.len, small.base, small.n, small.dim, small.metric, &x),
            SX_ECORRUPT);
        sx__put_le32(copy + w.len - 4, sx__crc32c(0, copy, w.len - 4));
        sx_status st =
            ops->deserialize(copy, w.len, small.base, small.n, small.dim, small.metric, &x);
        if (st == SX_OK) {
            accepted++;
            ASSERT_OK(sx__ivf_check(x));
            for (size_t q = 0; q < small.nq; q++)
                search1(x, small.queries + q * small.dim, K, &sp, NULL, out);
            ops->free(x);
        } else {
            ASSERT_EQ(st, SX_ECORRUPT);
        }
    }
    fprintf(stderr, "  %s: %zu of 400 CRC-fixed flips loaded (still sound)\n",
            sx__ivf_kind_name(kind), accepted);
    /* trailing garbage */
    uint8_t *longer = malloc(w.len + 4);
    memcpy(longer, w.data, w.len - 4);
    memset(longer + w.len - 4, 0, 4);
    sx__put_le32(longer + w.len, sx__crc32c(0, longer, w.len));
    ASSERT_STATUS(
        ops->deserialize(longer, w.len + 4, small.base, small.n, small.dim, small.metric, &x),
        SX_ECORRUPT);
    free(longer);
    free(copy);
    sx__wbuf_fini(&w);
    ops->free(iv);
    free(small.base);
    free(small.gt);
}

static void test_corrupt(void)
{
    uint64_t s = g_seed ^ 0xC0;
    corrupt_kind(SX__IVF_KIND_FLAT, &s);
    corrupt_kind(SX__IVF_KIND_SQ8, &s);
    corrupt_kind(SX__IVF_KIND_PQ, &s);
}

/* ---------------------------------------------------------------- filters */

static void filter_kind(sx__ivf_kind kind, const dataset *ds)
{
    sx__index *iv = build(kind, ds, "64", 1);
    uint64_t s = g_seed ^ 0xF1;
    uint64_t *allow = calloc(sx__bits_words(ds->n), 8);
    for (size_t i = 0; i < ds->n; i++)
        if (test_rand(&s) % 10 < 3)
            sx__bits_set(allow, i);
    /* exact answers over the allowed rows */
    sx__index *flat = flat_build(ds);
    sparams sp = kind == SX__IVF_KIND_PQ ? sp_make("16", "true", "8") : sp_make("16", NULL, NULL);
    size_t hit = 0;
    sx__hit out[K], ex[K];
    for (size_t q = 0; q < ds->nq; q++) {
        const float *qv = ds->queries + q * ds->dim;
        size_t got = search1(iv, qv, K, &sp, allow, out);
        ASSERT_EQ(got, K);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
        sx__topk t;
        sx__topk_init(&t, ex, K);
        ASSERT_OK(sx__flat_index_ops.search(flat, qv, K, NULL, 0, allow, &t));
        ASSERT_EQ(sx__topk_sort(&t), K);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                hit += out[i].id == ex[j].id;
    }
    double r = (double)hit / (double)(ds->nq * K);
    fprintf(stderr, "  %s 30%% filter nprobe=16: recall %.4f\n", sx__ivf_kind_name(kind), r);
    ASSERT(r >= 0.9);
    /* five allowed rows: all five come back, nothing else */
    memset(allow, 0, sx__bits_words(ds->n) * 8);
    uint32_t five[5] = { 3, 999, 4321, 12345, (uint32_t)ds->n - 1 };
    for (int i = 0; i < 5; i++)
        sx__bits_set(allow, five[i]);
    sparams one = sp_make("1", NULL, NULL);
    for (size_t q = 0; q < ds->nq; q += 20) {
        size_t got = search1(iv, ds->queries + q * ds->dim, K, &one, allow, out);
        ASSERT_EQ(got, 5);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
    }
    /* nothing allowed */
    memset(allow, 0, sx__bits_words(ds->n) * 8);
    ASSERT_EQ(search1(iv, ds->queries, K, &one, allow, out), 0);
    sx__flat_index_ops.free(flat);
    free(allow);
    sx__ivf_free(iv);
}

static void test_filters(void)
{
    filter_kind(SX__IVF_KIND_FLAT, &gen);
    filter_kind(SX__IVF_KIND_SQ8, &gen);
    filter_kind(SX__IVF_KIND_PQ, &gen);
}

/* ---------------------------------------------------------------- params, limits, cancel */

static void expect_einval(sx_status st, const char *name)
{
    ASSERT_EQ(st, SX_EINVAL);
    if (!strstr(sx_errmsg(), name))
        FAILF("message \"%s\" does not name %s", sx_errmsg(), name);
}

static void test_bad_params(void)
{
    const sx__index_ops *f = ops_of(SX__IVF_KIND_FLAT), *pq = ops_of(SX__IVF_KIND_PQ);
    sx_param p;
    p = (sx_param){ "nlist", "0" };
    expect_einval(f->check_build_params(&p, 1), "nlist");
    p = (sx_param){ "nlist", "65537" };
    expect_einval(f->check_build_params(&p, 1), "nlist");
    p = (sx_param){ "nlist", "12x" };
    expect_einval(ops_of(SX__IVF_KIND_SQ8)->check_build_params(&p, 1), "nlist");
    p = (sx_param){ "bogus", "1" };
    expect_einval(f->check_build_params(&p, 1), "bogus");
    p = (sx_param){ "m", "8" };
    expect_einval(f->check_build_params(&p, 1), "\"m\"");
    p = (sx_param){ "nbits", "4" };
    expect_einval(pq->check_build_params(&p, 1), "nbits");
    p = (sx_param){ "m", "0" };
    expect_einval(pq->check_build_params(&p, 1), "m must");
    sx_param ok[3] = { { "index_type", "IVF_PQ" }, { "nlist", "16" }, { "nbits", "8" } };
    ASSERT_OK(pq->check_build_params(ok, 3));
    /* m must divide dim: only known at build */
    sx_param pm[2] = { { "nlist", "16" }, { "m", "7" } };
    sx__build_ctx ctx = { .threads = 1 };
    sx__index *idx = NULL;
    expect_einval(pq->build(pm, 2, gen.base, gen.n, gen.dim, gen.metric, &ctx, &idx), "m (7)");
    /* search params */
    p = (sx_param){ "nprobe", "0" };
    expect_einval(f->check_search_params(&p, 1, K), "nprobe");
    p = (sx_param){ "nprobe", "65537" };
    expect_einval(f->check_search_params(&p, 1, K), "nprobe");
    p = (sx_param){ "refine", "true" };
    expect_einval(f->check_search_params(&p, 1, K), "refine");
    p = (sx_param){ "refine", "maybe" };
    expect_einval(pq->check_search_params(&p, 1, K), "refine");
    p = (sx_param){ "refine_k", "0.5" };
    expect_einval(pq->check_search_params(&p, 1, K), "refine_k");
    p = (sx_param){ "refine_k", "nan" };
    expect_einval(pq->check_search_params(&p, 1, K), "refine_k");
    p = (sx_param){ "efSearch", "3" };
    expect_einval(pq->check_search_params(&p, 1, K), "efSearch");
    sx_param sok[4] = {
        { "nprobe", "3" }, { "refine", "TRUE" }, { "refine_k", "2.5" }, { "ef", "64" }
    };
    ASSERT_OK(pq->check_search_params(sok, 4, K));
    ASSERT_OK(ops_of(SX__IVF_KIND_SQ8)->check_search_params(sok, 4, K));
    ASSERT_OK(f->check_search_params(sok, 1, K));
    /* search itself rejects bad values of known keys, ignores unknown keys */
    sx__index *iv = build(SX__IVF_KIND_FLAT, &gen, "16", 1);
    sx__hit out[K];
    sx__topk t;
    sx__topk_init(&t, out, K);
    p = (sx_param){ "nprobe", "-1" };
    expect_einval(sx__ivf_search(iv, gen.queries, K, &p, 1, NULL, &t), "nprobe");
    p = (sx_param){ "whatever", "1" };
    ASSERT_OK(sx__ivf_search(iv, gen.queries, K, &p, 1, NULL, &t));
    ASSERT_EQ(t.n, K);
    /* nprobe above the lists built is clamped */
    sparams big = sp_make("60000", NULL, NULL);
    ASSERT_EQ(search1(iv, gen.queries, K, &big, NULL, out), K);
    sx__ivf_free(iv);
}

static void test_memory_limit(void)
{
    for (int k = 0; k < 3; k++) {
        const sx__index_ops *ops = ops_of((sx__ivf_kind)k);
        sx_param p[2] = { { "nlist", "64" }, { "m", "8" } };
        size_t np = k == SX__IVF_KIND_PQ ? 2 : 1;
        uint64_t est = ops->estimate_build_bytes(p, np, gen.n, gen.dim);
        ASSERT(est > (uint64_t)gen.n * 4);
        sx__build_ctx ctx = { .threads = 1, .memory_limit_bytes = 64 << 10 };
        sx__index *idx = NULL;
        sx_status st = ops->build(p, np, gen.base, gen.n, gen.dim, gen.metric, &ctx, &idx);
        ASSERT_EQ(st, SX_ENOMEM);
        if (!strstr(sx_errmsg(), "memory limit") || !strstr(sx_errmsg(), "65536"))
            FAILF("message \"%s\" does not name the limit", sx_errmsg());
        ASSERT(idx == NULL);
        /* the estimate itself is enough */
        ctx.memory_limit_bytes = est;
        ASSERT_OK(ops->build(p, np, gen.base, gen.n, gen.dim, gen.metric, &ctx, &idx));
        ops->free(idx);
    }
}

typedef struct cancel_arg {
    sx__ivf_kind kind;
    atomic_bool stop;
    atomic_size_t progress;
    sx_status st;
    sx__index *idx;
} cancel_arg;

static void *cancel_builder(void *p)
{
    cancel_arg *a = p;
    sx_param pp[2] = { { "nlist", "64" }, { "m", "8" } };
    sx__build_ctx ctx = { .threads = 2, .cancel = &a->stop, .progress = &a->progress };
    a->st = ops_of(a->kind)->build(pp, a->kind == SX__IVF_KIND_PQ ? 2 : 1, gen.base, gen.n, gen.dim,
                                   gen.metric, &ctx, &a->idx);
    return NULL;
}

static void test_cancel(void)
{
    for (int k = 0; k < 3; k++) {
        /* set before the build */
        cancel_arg a;
        memset(&a, 0, sizeof a);
        a.kind = (sx__ivf_kind)k;
        atomic_init(&a.stop, true);
        atomic_init(&a.progress, 0);
        cancel_builder(&a);
        ASSERT_EQ(a.st, SX_ECANCELED);
        ASSERT(a.idx == NULL);
        /* set while it runs: cancelled, or finished first */
        atomic_store(&a.stop, false);
        pthread_t th;
        ASSERT_EQ(pthread_create(&th, NULL, cancel_builder, &a), 0);
        usleep(2000);
        atomic_store(&a.stop, true);
        pthread_join(th, NULL);
        ASSERT(a.st == SX_ECANCELED || a.st == SX_OK);
        if (a.st == SX_OK) {
            ASSERT_EQ(atomic_load(&a.progress), gen.n);
            ops_of(a.kind)->free(a.idx);
        }
    }
}

/* ---------------------------------------------------------------- allocation failures */

typedef struct oom_arg {
    const sx__index *idx;
    const float *q;
    const sparams *sp;
    sx__topk *t;
    sx_status st;
} oom_arg;

static void *oom_search_thread(void *p)
{
    oom_arg *a = p;
    a->st = sx__ivf_search(a->idx, a->q, K, a->sp->p, a->sp->n, NULL, a->t);
    return NULL;
}

/* Fails the 1st, 2nd, ... allocation of build, deserialize and search on a small set until one
 * succeeds: every failure must be SX_ENOMEM and leave nothing behind (ASan's leak check). */
static void test_oom_loop(void)
{
    dataset small;
    blobs(&small, "small", 700, 16, 3, SX_METRIC_L2, 99);
    small.pq_m = "4";
    sparams sp = sp_make("4", "true", "2");
    sx__hit out[K];
    for (int k = 0; k < 3; k++) {
        const sx__index_ops *ops = ops_of((sx__ivf_kind)k);
        sx_param p[2] = { { "nlist", "8" }, { "m", "4" } };
        size_t np = k == SX__IVF_KIND_PQ ? 2 : 1;
        sx__build_ctx ctx = { .threads = 2 };
        sx__index *idx = NULL;
        int fails = 0;
        for (long nth = 1;; nth++) {
            sx__alloc_fail_after(nth);
            sx_status st =
                ops->build(p, np, small.base, small.n, small.dim, small.metric, &ctx, &idx);
            sx__alloc_fail_after(0);
            if (st == SX_OK)
                break;
            ASSERT_EQ(st, SX_ENOMEM);
            fails++;
            ASSERT(nth < 10000);
        }
        ASSERT(fails > 3);
        sx__wbuf w = serialize(idx);
        for (long nth = 1;; nth++) {
            sx__index *back = NULL;
            sx__alloc_fail_after(nth);
            sx_status st = ops->deserialize(w.data, w.len, small.base, small.n, small.dim,
                                            small.metric, &back);
            sx__alloc_fail_after(0);
            if (st == SX_OK) {
                ops->free(back);
                break;
            }
            ASSERT_EQ(st, SX_ENOMEM);
            ASSERT(nth < 10000);
        }
        /* search on a fresh thread (no scratch yet): its first allocation fails cleanly */
        sx__alloc_fail_after(1);
        sx__topk t;
        sx__topk_init(&t, out, K);
        pthread_t th;
        oom_arg a = { idx, small.queries, &sp, &t, SX_OK };
        ASSERT_EQ(pthread_create(&th, NULL, oom_search_thread, &a), 0);
        pthread_join(th, NULL);
        sx__alloc_fail_after(0);
        ASSERT(a.st == SX_ENOMEM || a.st == SX_OK);
        ASSERT_EQ(search1(idx, small.queries, K, &sp, NULL, out), K);
        sx__wbuf_fini(&w);
        ops->free(idx);
    }
    free(small.base);
    free(small.gt);
}

/* ---------------------------------------------------------------- shapes */

static void test_small_and_empty(void)
{
    for (int k = 0; k < 3; k++) {
        const sx__index_ops *ops = ops_of((sx__ivf_kind)k);
        sx_param p[2] = { { "nlist", "128" }, { "m", "4" } };
        size_t np = k == SX__IVF_KIND_PQ ? 2 : 1;
        sx__build_ctx ctx = { .threads = 1 };
        sx__hit out[K];
        sparams sp = sp_make("8", NULL, NULL);
        /* empty */
        sx__index *idx = NULL;
        ASSERT_OK(ops->build(p, np, NULL, 0, 16, SX_METRIC_L2, &ctx, &idx));
        ASSERT_OK(sx__ivf_check(idx));
        ASSERT_EQ(search1(idx, gen.queries, K, &sp, NULL, out), 0);
        sx__wbuf w = serialize(idx);
        sx__index *back = NULL;
        ASSERT_OK(ops->deserialize(w.data, w.len, NULL, 0, 16, SX_METRIC_L2, &back));
        ASSERT_EQ(search1(back, gen.queries, K, &sp, NULL, out), 0);
        ops->free(back);
        ops->free(idx);
        sx__wbuf_fini(&w);
        /* 7 rows, nlist 128 -> 7 lists; every row findable */
        float x[7 * 16];
        for (int i = 0; i < 7 * 16; i++)
            x[i] = (float)((i * 37) % 11);
        ASSERT_OK(ops->build(p, np, x, 7, 16, SX_METRIC_L2, &ctx, &idx));
        ASSERT_EQ(((const sx__ivf *)(const void *)idx)->nlist, 7);
        ASSERT_EQ(search1(idx, x, K, &sp, NULL, out), 7);
        w = serialize(idx);
        ASSERT_OK(ops->deserialize(w.data, w.len, x, 7, 16, SX_METRIC_L2, &back));
        ASSERT_EQ(search1(back, x + 16, K, &sp, NULL, out), 7);
        ops->free(back);
        ops->free(idx);
        sx__wbuf_fini(&w);
    }
}

static void test_threads_deterministic(void)
{
    for (int k = 0; k < 3; k++) {
        sx__index *a = build((sx__ivf_kind)k, &gen, "32", 1);
        sx__index *b = build((sx__ivf_kind)k, &gen, "32", k == SX__IVF_KIND_PQ ? 1 : 2);
        sx__wbuf wa = serialize(a), wb = serialize(b);
        ASSERT_EQ(wa.len, wb.len);
        ASSERT(memcmp(wa.data, wb.data, wa.len) == 0);
        sx__wbuf_fini(&wa);
        sx__wbuf_fini(&wb);
        sx__ivf_free(a);
        sx__ivf_free(b);
    }
}

static void test_memory_bytes(void)
{
    sx__index *f = build(SX__IVF_KIND_FLAT, &gen, "64", 1);
    sx__index *q = build(SX__IVF_KIND_SQ8, &gen, "64", 1);
    sx__index *p = build(SX__IVF_KIND_PQ, &gen, "64", 1);
    size_t raw = gen.n * gen.dim * sizeof(float);
    size_t mf = sx__ivf_memory_bytes(f), mq = sx__ivf_memory_bytes(q), mp = sx__ivf_memory_bytes(p);
    fprintf(stderr, "  memory: raw %zu, IVF_FLAT %zu, IVF_SQ8 %zu, IVF_PQ %zu\n", raw, mf, mq, mp);
    ASSERT(mf >= raw + gen.n * 4 && mf < raw * 2); /* the copy in list order + ids */
    ASSERT(mq >= gen.n * gen.dim && mq < raw / 2);
    ASSERT(mp >= gen.n * 8 && mp < raw / 2);
    sx__ivf_free(f);
    sx__ivf_free(q);
    sx__ivf_free(p);
}

/* ---------------------------------------------------------------- kernels */

static void test_sq8_codec(void)
{
    uint64_t s = g_seed ^ 0x58;
    const sx__sq8_kernels *sc = sx__sq8_kernels_for("scalar");
    const char *isas[2] = { "avx2", "avx512" };
    for (size_t dim = 1; dim <= 70; dim++) {
        size_t n = 50;
        float *x = malloc(n * dim * sizeof(float));
        for (size_t i = 0; i < n * dim; i++)
            x[i] = test_randf(&s) * 20.0f - 7.0f;
        sx__sq8 sq;
        ASSERT_OK(sx__sq8_train(&sq, x, n, dim, dim));
        uint8_t *codes = malloc(n * dim);
        sx__sq8_encode(&sq, x, n, dim, codes);
        float *dec = malloc(dim * sizeof(float)), *prep = malloc(dim * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            sx__sq8_decode(&sq, codes + i * dim, dec);
            for (size_t d = 0; d < dim; d++)
                ASSERT(fabsf(dec[d] - x[i * dim + d]) <= sq.scale[d] * 0.5f + 1e-5f);
        }
        for (int m = 0; m < 2; m++) {
            sx_metric metric = m ? SX_METRIC_IP : SX_METRIC_L2;
            float bias;
            sx__sq8_prepare(&sq, x, metric, prep, &bias);
            for (size_t i = 0; i < n; i++) {
                /* the quantized distance is the exact distance to the decoded vector */
                sx__sq8_decode(&sq, codes + i * dim, dec);
                double want = 0;
                for (size_t d = 0; d < dim; d++)
                    want += m ? -(double)x[d] * (double)dec[d]
                              : ((double)x[d] - (double)dec[d]) * ((double)x[d] - (double)dec[d]);
                float got = sx__sq8_dist(&sq, metric, prep, bias, codes + i * dim);
                ASSERT_NEAR(got, want, 1e-3 * (fabs(want) + 1.0));
                float ref = m ? sc->dot(prep, codes + i * dim, dim)
                              : sc->l2(prep, sq.scale, codes + i * dim, dim);
                for (int t = 0; t < 2; t++) {
                    const sx__sq8_kernels *kk = sx__sq8_kernels_for(isas[t]);
                    if (!kk)
                        continue;
                    float v = m ? kk->dot(prep, codes + i * dim, dim)
                                : kk->l2(prep, sq.scale, codes + i * dim, dim);
                    ASSERT_NEAR(v, ref, 1e-4 * (fabs((double)ref) + 1.0));
                }
            }
        }
        /* serialization round trip and rejection of a bad range */
        sx__wbuf w;
        sx__wbuf_init(&w);
        ASSERT_OK(sx__sq8_serialize(&sq, &w));
        sx__rbuf r;
        sx__rbuf_init(&r, w.data, w.len);
        sx__sq8 back;
        ASSERT_OK(sx__sq8_deserialize(&back, &r, dim));
        ASSERT(memcmp(back.scale, sq.scale, dim * sizeof(float)) == 0);
        sx__sq8_fini(&back);
        sx__put_le32(w.data + 4 + 4 * dim, 0xFF800000u); /* scale[0] = -inf */
        sx__rbuf_init(&r, w.data, w.len);
        ASSERT_STATUS(sx__sq8_deserialize(&back, &r, dim), SX_ECORRUPT);
        sx__rbuf_init(&r, w.data, w.len - 1);
        ASSERT_STATUS(sx__sq8_deserialize(&back, &r, dim), SX_ECORRUPT);
        sx__wbuf_fini(&w);
        sx__sq8_fini(&sq);
        free(prep);
        free(dec);
        free(codes);
        free(x);
    }
}

static void test_adc_kernels(void)
{
    uint64_t s = g_seed ^ 0xADC;
    sx__ivf_adc_fn ref = sx__ivf_adc_for("scalar");
    const char *isas[2] = { "avx2", "avx512" };
    size_t ms[] = { 1, 3, 8, 16, 49 };
    for (size_t mi = 0; mi < 5; mi++) {
        size_t m = ms[mi], ksub = mi == 1 ? 100 : 256;
        float *tab = malloc(m * ksub * sizeof(float));
        for (size_t i = 0; i < m * ksub; i++)
            tab[i] = test_randf(&s) * 100.0f;
        uint8_t *blk = malloc(m * SX__IVF_PQ_BLOCK);
        for (size_t i = 0; i < m * SX__IVF_PQ_BLOCK; i++)
            blk[i] = (uint8_t)(test_rand(&s) % ksub);
        float a[SX__IVF_PQ_BLOCK], b[SX__IVF_PQ_BLOCK], term[SX__IVF_PQ_BLOCK];
        for (size_t t = 0; t < SX__IVF_PQ_BLOCK; t++)
            term[t] = test_randf(&s) * 50.0f;
        const float *tm = mi % 2 ? term : NULL;
        ref(tab, ksub, blk, m, 3.25f, tm, a);
        for (size_t t = 0; t < SX__IVF_PQ_BLOCK; t++) {
            float want = tm ? 3.25f + tm[t] : 3.25f;
            for (size_t j = 0; j < m; j++)
                want += tab[j * ksub + blk[j * SX__IVF_PQ_BLOCK + t]];
            ASSERT(a[t] == want);
        }
        for (int i = 0; i < 2; i++) {
            sx__ivf_adc_fn f = sx__ivf_adc_for(isas[i]);
            if (!f)
                continue;
            f(tab, ksub, blk, m, 3.25f, tm, b);
            for (size_t t = 0; t < SX__IVF_PQ_BLOCK; t++)
                ASSERT(a[t] == b[t]); /* bit-identical: same summation order */
        }
        free(blk);
        free(tab);
    }
}

int main(void)
{
    g_seed = test_seed();
    load_bigann();
    blobs(&gen, "blobs", 20000, 32, 200, SX_METRIC_L2, 20240601);
    RUN(test_sq8_codec);
    RUN(test_adc_kernels);
    RUN(test_bigann_recall);
    RUN(test_generated_recall);
    RUN(test_generated_ip);
    RUN(test_roundtrip);
    RUN(test_corrupt);
    RUN(test_filters);
    RUN(test_bad_params);
    RUN(test_memory_limit);
    RUN(test_cancel);
    RUN(test_oom_loop);
    RUN(test_small_and_empty);
    RUN(test_threads_deterministic);
    RUN(test_memory_bytes);
    free(gen.base);
    free(gen.gt);
    free(bigann.base);
    free(bigann.queries);
    free(bigann.gt);
    return TEST_DONE();
}
