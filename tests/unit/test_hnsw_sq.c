/*
 * test_hnsw_sq.c: unit tests of the HNSW_SQ index (src/index/hnsw_sq) through its vtable.
 *
 * Recall gates (M=16, efConstruction=200, k=10; default refine = min(ef, 2k) candidates):
 *   - BIGANN-10k ($SX_SHARED_DATA/bigann10k), shipped exact top-100: recall@10 >= 0.95 at
 *     ef=64 (default refine) and at ef=20 refine_k=1, index built with 2 threads (measured:
 *     1.000 / 0.988); index memory (graph + codes) below 400 bytes per vector (hnswlib: 660);
 *   - Fashion-MNIST slice: first 10,000 train images as base, first 200 t10k images as queries,
 *     exact ground truth by brute force in double here; a returned row counts when its exact
 *     distance is <= the true 10th distance (pixel data has ties): recall >= 0.95 at ef=64
 *     (measured: 0.9995). Skipped with a message when /usr/share/datasets/fashion-mnist is
 *     absent.
 * Kernels: every integer dot kernel the CPU has (scalar, avx2, avx2vnni, avx512vnni) equals the
 * scalar reference exactly on random codes and queries of many lengths (every tail), single and
 * batched; the query preparation gives the same int8 query on every ISA; a code distance is
 * close to the exact distance to the decoded vector.
 * Structure: sx__hnsw_sq_check after every build and deserialize; serialize -> deserialize gives
 * identical results and bytes; truncations at every length and random byte flips (CRC stale and
 * recomputed) give SX_ECORRUPT or a valid searchable index; hand-made corruptions of each
 * validated field give SX_ECORRUPT.
 * Filters: 30% allowed -> every hit allowed, recall vs brute force over the allowed rows >= 0.9;
 * 5 rows allowed -> exactly those; nothing allowed -> nothing.
 * Threads: 4 threads searching one index at once get the single-threaded results.
 * Build context: progress reaches n, cancel gives SX_ECANCELED, a memory limit below the
 * estimate gives SX_ENOMEM naming the limit; allocation failure at every step never crashes.
 * Errors: bad build/search params are SX_EINVAL naming the parameter.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "data.h"
#include "harness.h"
#include "index/hnsw_sq/hnsw_sq.h"
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

/* While index.h declares the vtable weak, a reference to it does not pull the family's object
 * out of libsextant.a; this strong one does (harmless once the declaration is strong). */
void (*volatile test_keep_hnsw_sq)(sx__index *) = sx__hnsw_sq_free;

static const sx__index_ops *ops = &sx__hnsw_sq_index_ops;

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

static sx__index *build_p(const vecs *v, sx_metric m, const sx_param *p, size_t np, uint32_t thr)
{
    sx__build_ctx ctx = { .threads = thr };
    sx__index *idx = NULL;
    ASSERT_OK(ops->build(p, np, v->v, v->n, v->dim, m, &ctx, &idx));
    ASSERT_OK(sx__hnsw_sq_check(idx));
    return idx;
}

static sx__index *
build(const vecs *v, sx_metric m, const char *M, const char *efc, uint32_t threads)
{
    sx_param p[2] = { { "M", M }, { "efConstruction", efc } };
    return build_p(v, m, p, 2, threads);
}

/* Searches with ef and refine_k (NULL: default); hits sorted best first into out. */
static size_t search_rk(const sx__index *idx,
                        const float *q,
                        size_t k,
                        const char *ef,
                        const char *rk,
                        const uint64_t *allow,
                        sx__hit *out)
{
    sx_param sp[2] = { { "ef", ef }, { "refine_k", rk } };
    sx__topk t;
    sx__topk_init(&t, out, k);
    ASSERT_OK(ops->search(idx, q, k, sp, rk ? 2 : 1, allow, &t));
    return sx__topk_sort(&t);
}

static size_t search(const sx__index *idx,
                     const float *q,
                     size_t k,
                     const char *ef,
                     const uint64_t *allow,
                     sx__hit *out)
{
    return search_rk(idx, q, k, ef, NULL, allow, out);
}

static sx__wbuf serialize(const sx__index *idx)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(ops->serialize(idx, &w));
    return w;
}

/* Recall@k by distance threshold; also checks that every hit is allowed and carries its exact
 * distance (refine). */
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
            ASSERT_NEAR(out[i].dist, d, 1e-3 * (1.0 + fabs(d)));
            if (d <= kth + 1e-6 * (1.0 + fabs(kth)))
                good++;
        }
        total += nallowed < K ? nallowed : K;
    }
    free(scratch);
    return (double)good / (double)total;
}

/* ---------------------------------------------------------------- kernels */

static void test_kernels(void)
{
    uint64_t seed = test_seed();
    static const char *isas[] = { "scalar", "avx2", "avx2vnni", "avx512vnni" };
    const sx__hsq_kernels *ref = sx__hsq_kernels_for("scalar");
    ASSERT(ref != NULL);
    ASSERT(sx__hsq_kernels_for("nope") == NULL);
    fprintf(stderr, "  dispatched: %s\n", sx__hsq_kernels_get()->isa);
    const size_t maxdim = 1100, nrec = 9, stride = 1152;
    uint8_t *codes = sx__malloc_aligned(nrec * stride);
    int8_t *q = sx__malloc_aligned(sx__hsq_q8_bytes(maxdim));
    int8_t *q8a = sx__malloc_aligned(sx__hsq_q8_bytes(maxdim));
    int8_t *q8b = sx__malloc_aligned(sx__hsq_q8_bytes(maxdim));
    float *fq = malloc(maxdim * sizeof *fq), *fmu = malloc(maxdim * sizeof *fmu);
    float *famu = malloc(maxdim * sizeof *famu), *fs = malloc(maxdim * sizeof *fs);
    for (int i = 0; i < 4; i++) {
        const sx__hsq_kernels *k = sx__hsq_kernels_for(isas[i]);
        if (!k) {
            fprintf(stderr, "  %s: not available on this CPU\n", isas[i]);
            continue;
        }
        ASSERT(strcmp(k->isa, isas[i]) == 0);
        for (size_t dim = 1; dim <= maxdim; dim += (dim < 200 ? 1 : 37)) {
            for (size_t b = 0; b < nrec * stride; b++)
                codes[b] = (uint8_t)test_rand(&seed);
            memset(q, 0, sx__hsq_q8_bytes(dim));
            for (size_t d = 0; d < dim; d++)
                q[d] = (int8_t)((int)(test_rand(&seed) % 255) - 127);
            /* extremes: saturation would show here */
            if (dim % 3 == 0)
                for (size_t d = 0; d < dim; d++) {
                    codes[d] = 255;
                    q[d] = (d & 1) ? 127 : -127;
                }
            uint32_t ids[9] = { 3, 0, 8, 1, 1, 7, 2, 5, 4 };
            int32_t got[9], want[9];
            for (size_t n = 0; n <= 9; n++) {
                k->dot_batch(codes, stride, ids, n, q, dim, got);
                ref->dot_batch(codes, stride, ids, n, q, dim, want);
                for (size_t j = 0; j < n; j++) {
                    ASSERT_EQ(got[j], want[j]);
                    ASSERT_EQ(k->dot(codes + (size_t)ids[j] * stride, q, dim), want[j]);
                }
            }
            /* preparation: same int8 query and maximum on every ISA */
            for (size_t d = 0; d < dim; d++) {
                fq[d] = (test_randf(&seed) - 0.5f) * 300.0f;
                fmu[d] = (test_randf(&seed) - 0.5f) * 10.0f;
                famu[d] = test_randf(&seed) - 0.5f;
                fs[d] = test_randf(&seed) * 2.0f;
            }
            int has_nan = dim > 5 && dim % 2 == 0;
            if (has_nan)
                fq[2] = NAN; /* ignored by the maximum, rounds to 0 */
            if (dim > 5)
                fs[4] = 0.0f;
            float B1, n1, B2, n2;
            float m1 = k->scan(fmu, famu, fs, fq, dim, &B1, &n1);
            float m2 = ref->scan(fmu, famu, fs, fq, dim, &B2, &n2);
            ASSERT(m1 == m2);
            if (!has_nan) {
                ASSERT_NEAR(B1, B2, 1e-3 * (1.0 + fabs((double)B2)));
                ASSERT_NEAR(n1, n2, 1e-3 * (1.0 + fabs((double)n2)));
            }
            float inv = m2 > 0 ? 127.0f / m2 : 0.0f;
            k->round(fmu, fs, fq, dim, inv, q8a);
            ref->round(fmu, fs, fq, dim, inv, q8b);
            for (size_t d = 0; d < dim; d++)
                ASSERT_EQ(q8a[d], q8b[d]);
            if (has_nan)
                ASSERT_EQ(q8b[2], 0);
        }
    }
    sx__free_aligned(codes);
    sx__free_aligned(q);
    sx__free_aligned(q8a);
    sx__free_aligned(q8b);
    free(fq);
    free(fmu);
    free(famu);
    free(fs);
}

/* A code distance is close to the exact distance to the decoded vector (the query's int8
 * rounding is the only difference); refine=false returns these. */
static void test_code_distance(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(500, 40, &seed);
    sx_metric ms[2] = { SX_METRIC_L2, SX_METRIC_IP };
    for (int mi = 0; mi < 2; mi++) {
        sx__index *idx = build(&v, ms[mi], "8", "60", 1);
        const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
        int8_t *q8 = sx__malloc_aligned(sx__hsq_q8_bytes(v.dim));
        float dec[40];
        for (size_t qi = 0; qi < 20; qi++) {
            const float *q = v.v + qi * 17 * v.dim;
            sx__hsq_query pq = { .q8 = q8 };
            sx__hsq_prepare(h, q, &pq);
            for (uint32_t id = 0; id < v.n; id += 7) {
                const uint8_t *c = sx__hsq_code(h, id);
                for (size_t d = 0; d < v.dim; d++) {
                    dec[d] = h->qmin[d] + h->qscale[d] * (float)c[d];
                    /* the code is within half a step of the vector */
                    ASSERT(fabsf(dec[d] - v.v[id * v.dim + d]) <= h->qscale[d] * 0.5f + 1e-5f);
                }
                double exact = test_dist_d(q, dec, v.dim, ms[mi]);
                /* query rounding: each w8 is within 1/2 of w / t, so the dot product is within
                 * t/2 * sum c; |c1| is 2t (L2) or t (IP) */
                double csum = 0;
                for (size_t d = 0; d < v.dim; d++)
                    csum += c[d];
                double bound = fabs((double)pq.c1) * 0.5 * csum + 1e-4 * (1.0 + fabs(exact));
                ASSERT_NEAR(sx__hsq_dist(h, &pq, id), exact, bound);
            }
        }
        sx__free_aligned(q8);
        ops->free(idx);
    }
    /* refine=false: results carry code distances, close to the exact ones */
    sx_param p[2] = { { "M", "8" }, { "refine", "false" } };
    sx__index *idx = build_p(&v, SX_METRIC_L2, p, 2, 1);
    sx__hit out[K];
    size_t got = search(idx, v.v, K, "50", NULL, out);
    ASSERT_EQ(got, K);
    for (size_t i = 0; i < got; i++) {
        double exact = test_dist_d(v.v, v.v + (size_t)out[i].id * v.dim, v.dim, SX_METRIC_L2);
        ASSERT_NEAR(out[i].dist, exact, 0.1 * (1.0 + exact));
    }
    sx__wbuf w = serialize(idx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &idx2));
    ASSERT(!((const sx__hnsw_sq *)idx2)->refine);
    ops->free(idx2);
    sx__wbuf_fini(&w);
    ops->free(idx);
    free(v.v);
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
    size_t d2, ngt;
    snprintf(path, sizeof path, "%sbigann10k_base.bvecs", base);
    bigann.v = test_read_texmex(path, 1, &bigann.n, &bigann.dim);
    snprintf(path, sizeof path, "%sbigann10k_query.bvecs", base);
    bq = test_read_texmex(path, 1, &bnq, &d2);
    snprintf(path, sizeof path, "%sbigann10k_groundtruth_l2_k100.ivecs", base);
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

static double bigann_recall(const sx__index *idx, const char *ef, const char *rk)
{
    sx__hit out[K];
    size_t good = 0;
    for (size_t q = 0; q < bnq; q++) {
        size_t got = search_rk(idx, bq + q * bigann.dim, K, ef, rk, NULL, out);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                if ((int32_t)out[i].id == bgt[q * bgtk + j]) {
                    good++;
                    break;
                }
    }
    return (double)good / (double)(bnq * K);
}

static void test_bigann_recall(void)
{
    need_bigann();
    atomic_size_t progress = 0;
    sx_param p[3] = { { "M", "16" }, { "efConstruction", "200" }, { "sq_type", "SQ8" } };
    sx__build_ctx ctx = { .threads = 2, .progress = &progress };
    ASSERT_OK(ops->build(p, 3, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &bidx));
    ASSERT_EQ(atomic_load(&progress), bigann.n);
    ASSERT_OK(sx__hnsw_sq_check(bidx));
    double r = bigann_recall(bidx, RECALL_EF, NULL);
    double r1 = bigann_recall(bidx, "20", "1");
    size_t mem = ops->memory_bytes(bidx);
    fprintf(stderr,
            "  BIGANN-10k: recall@10 = %.4f at ef=%s (default refine_k), %.4f at ef=20 "
            "refine_k=1; %.1f bytes/vector (graph + codes)\n",
            r, RECALL_EF, r1, (double)mem / (double)bigann.n);
    ASSERT(r >= 0.95);
    ASSERT(r1 >= 0.95);
    /* below hnswlib's 4*(2M+1) + 16 + 4*dim = 660 bytes per vector */
    ASSERT(mem < bigann.n * 400);
    ASSERT(ops->estimate_build_bytes(p, 3, bigann.n, bigann.dim) > mem);
}

static void test_bigann_roundtrip(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall did not build it");
    }
    sx__wbuf w = serialize(bidx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &idx2));
    ASSERT_OK(sx__hnsw_sq_check(idx2));
    ASSERT_EQ(ops->memory_bytes(idx2), ops->memory_bytes(bidx));
    sx__hit a[K], b[K];
    const char *rks[3] = { NULL, "1", "3.5" };
    for (int r = 0; r < 3; r++) {
        for (size_t q = 0; q < bnq; q++) {
            size_t na = search_rk(bidx, bq + q * bigann.dim, K, "40", rks[r], NULL, a);
            size_t nb = search_rk(idx2, bq + q * bigann.dim, K, "40", rks[r], NULL, b);
            ASSERT_EQ(na, nb);
            for (size_t i = 0; i < na; i++) {
                ASSERT_EQ(a[i].id, b[i].id);
                ASSERT(a[i].dist == b[i].dist);
            }
        }
    }
    sx__wbuf w2 = serialize(idx2);
    ASSERT_EQ(w2.len, w.len);
    ASSERT(memcmp(w.data, w2.data, w.len) == 0);
    sx__wbuf_fini(&w2);
    sx__wbuf_fini(&w);
    ops->free(idx2);
}

static void test_bigann_filter(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall did not build it");
    }
    uint64_t seed = test_seed();
    uint64_t *allow = calloc(sx__bits_words(bigann.n), sizeof *allow);
    for (size_t i = 0; i < bigann.n; i++)
        if (test_rand(&seed) % 100 < 30)
            sx__bits_set(allow, i);
    double r = recall_threshold(bidx, &bigann, bq, bnq, SX_METRIC_L2, "200", allow);
    fprintf(stderr, "  30%% allowed: recall@10 = %.4f at ef=200\n", r);
    ASSERT(r >= 0.9);
    /* 5 rows allowed: the filtered search walks the whole graph and returns exactly them */
    memset(allow, 0, sx__bits_words(bigann.n) * sizeof *allow);
    const uint32_t rows[5] = { 3, 777, 4242, 8001, 9999 };
    for (int i = 0; i < 5; i++)
        sx__bits_set(allow, rows[i]);
    sx__hit out[K];
    for (size_t q = 0; q < 10; q++) {
        size_t got = search(bidx, bq + q * bigann.dim, K, "64", allow, out);
        ASSERT_EQ(got, 5);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
        got = search_rk(bidx, bq + q * bigann.dim, 3, "3", "1", allow, out);
        ASSERT_EQ(got, 3);
        for (size_t i = 0; i < got; i++)
            ASSERT(sx__bits_test(allow, out[i].id));
    }
    memset(allow, 0, sx__bits_words(bigann.n) * sizeof *allow);
    ASSERT_EQ(search(bidx, bq, K, "64", allow, out), 0);
    /* all allowed: same hits as unfiltered at a large ef */
    memset(allow, 0xFF, sx__bits_words(bigann.n) * sizeof *allow);
    double ra = recall_threshold(bidx, &bigann, bq, bnq, SX_METRIC_L2, "100", allow);
    ASSERT(ra >= 0.95);
    free(allow);
}

/* Concurrent searches (per-thread scratch) give the single-threaded results. */
typedef struct conc_arg {
    const sx__hit *want; /* bnq x K */
    int bad;
} conc_arg;

static void *conc_main(void *p)
{
    conc_arg *a = p;
    sx_param sp[2] = { { "ef", "30" }, { "refine_k", "1.5" } };
    for (int rep = 0; rep < 3; rep++) {
        for (size_t q = 0; q < bnq; q++) {
            sx__hit out[K];
            sx__topk t;
            sx__topk_init(&t, out, K);
            if (ops->search(bidx, bq + q * bigann.dim, K, sp, 2, NULL, &t) != SX_OK) {
                a->bad = 1;
                return NULL;
            }
            size_t m = sx__topk_sort(&t);
            for (size_t i = 0; i < m; i++)
                if (out[i].id != a->want[q * K + i].id || out[i].dist != a->want[q * K + i].dist)
                    a->bad = 1;
        }
    }
    return NULL;
}

static void test_bigann_concurrent(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall did not build it");
    }
    sx__hit *want = calloc(bnq * K, sizeof *want);
    for (size_t q = 0; q < bnq; q++)
        ASSERT_EQ(search_rk(bidx, bq + q * bigann.dim, K, "30", "1.5", NULL, want + q * K), K);
    pthread_t th[4];
    conc_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].want = want;
        args[i].bad = 0;
        ASSERT_EQ(pthread_create(&th[i], NULL, conc_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(args[i].bad, 0);
    free(want);
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
    fprintf(stderr, "  Fashion-MNIST 10k/200: recall@10 = %.4f at ef=%s, %.1f bytes/vector\n", r,
            RECALL_EF, (double)ops->memory_bytes(idx) / (double)FM_N);
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
    sx_metric ms[3] = { SX_METRIC_IP, SX_METRIC_COSINE, SX_METRIC_L2 };
    for (int m = 0; m < 3; m++) {
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
    ASSERT_OK(sx__hnsw_sq_check(idx2));
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
    /* all rows identical: constant dimensions (scale 0) code exactly */
    vecs same = { 500, 4, malloc(sizeof(float) * 500 * 4) };
    for (size_t i = 0; i < (size_t)500 * 4; i++)
        same.v[i] = 1.0f;
    idx = build(&same, SX_METRIC_L2, "4", "20", 2);
    ASSERT_EQ(search(idx, same.v, K, "10", NULL, out), K);
    ASSERT(out[0].dist == 0.0f);
    ops->free(idx);
    free(same.v);
    /* k > n, minimum M and efConstruction, refine_k beyond n, odd dimension */
    vecs few = random_vecs(20, 3, &seed);
    sx__hit big[50];
    /* the graph is HNSW's, repaired by its build: every row reachable from the entry point,
     * which level-0 search starts from (graph.h invariant R), whatever the interleaving */
    idx = build(&few, SX_METRIC_L2, "2", "1", 8);
    ASSERT_EQ(search(idx, few.v, 50, "50", NULL, big), 20);
    ASSERT_EQ(big[0].id, 0);
    ASSERT_EQ(search_rk(idx, few.v, 5, "5", "65536", NULL, big), 5);
    ASSERT_EQ(big[0].id, 0);
    ops->free(idx);
    free(few.v);
    /* a dimension with a huge range next to ordinary ones; a zero query (IP) */
    vecs odd = random_vecs(300, 7, &seed);
    for (size_t i = 0; i < odd.n; i += 10)
        odd.v[i * odd.dim + 3] = 1e15f;
    idx = build(&odd, SX_METRIC_IP, "6", "40", 1);
    float zq[7] = { 0 };
    ASSERT(search(idx, zq, K, "20", NULL, out) == K);
    ASSERT(search(idx, odd.v + 10 * odd.dim, K, "20", NULL, out) == K);
    ops->free(idx);
    idx = build(&odd, SX_METRIC_L2, "6", "40", 1);
    ASSERT(search(idx, odd.v + 10 * odd.dim, K, "20", NULL, out) == K);
    ASSERT_EQ(out[0].id, 10);
    ops->free(idx);
    free(odd.v);
}

static void test_build_ctx(void)
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
    /* a memory limit below the estimate fails before building, naming the limit */
    uint64_t need = ops->estimate_build_bytes(NULL, 0, v.n, v.dim);
    ctx.memory_limit_bytes = need - 1;
    ASSERT_STATUS(ops->build(NULL, 0, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx), SX_ENOMEM);
    ASSERT(strstr(sx_errmsg(), "index_build_memory_limit") != NULL);
    ASSERT(idx == NULL);
    ASSERT_EQ(atomic_load(&progress), 0);
    ctx.memory_limit_bytes = need;
    ASSERT_OK(ops->build(NULL, 0, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx));
    ASSERT_EQ(atomic_load(&progress), v.n);
    ASSERT_OK(sx__hnsw_sq_check(idx));
    ASSERT(ops->memory_bytes(idx) < need);
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

static void expect_search_einval(const char *key, const char *value, size_t k, const char *needle)
{
    sx_param p = { key, value };
    ASSERT_STATUS(ops->check_search_params(&p, 1, k), SX_EINVAL);
    if (!strstr(sx_errmsg(), needle))
        FAILF("message \"%s\" does not name \"%s\"", sx_errmsg(), needle);
}

static void test_params(void)
{
    ASSERT(strcmp(ops->name, "HNSW_SQ") == 0);
    ASSERT(sx__index_lookup("hnsw_sq") == ops);
    ASSERT_OK(ops->check_build_params(NULL, 0));
    sx_param ok[8] = { { "M", "2048" },           { "efConstruction", "1" },
                       { "sq_type", "sq8" },      { "refine", "true" },
                       { "refine_type", "FP32" }, { "index_type", "HNSW_SQ" },
                       { "metric_type", "L2" },   { "metricType", "IP" } };
    ASSERT_OK(ops->check_build_params(ok, 8));
    expect_build_einval("M", "1", "M");
    expect_build_einval("M", "2049", "M");
    expect_build_einval("M", "16x", "M");
    expect_build_einval("efConstruction", "0", "efConstruction");
    expect_build_einval("efConstruction", "2147483648", "efConstruction");
    expect_build_einval("sq_type", "SQ4U", "sq_type");
    expect_build_einval("sq_type", "", "sq_type");
    expect_build_einval("refine", "maybe", "refine");
    expect_build_einval("refine_type", "FP16", "refine_type");
    expect_build_einval("nlist", "128", "nlist");
    expect_build_einval("ef", "10", "\"ef\"");

    ASSERT_OK(ops->check_search_params(NULL, 0, 100));
    expect_search_einval("ef", "5", 10, "ef");
    expect_search_einval("ef", "abc", 1, "ef");
    expect_search_einval("ef", "2147483648", 1, "ef");
    expect_search_einval("refine_k", "0.5", 10, "refine_k");
    expect_search_einval("refine_k", "abc", 10, "refine_k");
    expect_search_einval("refine_k", "65537", 10, "refine_k");
    expect_search_einval("refine_k", "nan", 10, "refine_k");
    expect_search_einval("refine_k", "", 10, "refine_k");
    sx_param sp[2] = { { "ef", "10" }, { "refine_k", "1.5" } };
    ASSERT_OK(ops->check_search_params(sp, 2, 10));

    /* search itself rejects bad params and writes nothing */
    uint64_t seed = 3;
    vecs v = random_vecs(100, 4, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "8", "50", 1);
    sx__hit out[K];
    sx__topk t;
    sx__topk_init(&t, out, K);
    sx_param ef = { "ef", "9" };
    ASSERT_STATUS(ops->search(idx, v.v, K, &ef, 1, NULL, &t), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "ef") != NULL);
    ASSERT_EQ(t.n, 0);
    sx_param rk = { "refine_k", "0" };
    ASSERT_STATUS(ops->search(idx, v.v, K, &rk, 1, NULL, &t), SX_EINVAL);
    ASSERT_EQ(t.n, 0);
    /* defaults; the largest ef (65536) is capped at n */
    ASSERT_OK(ops->search(idx, v.v, K, NULL, 0, NULL, &t));
    ASSERT_EQ(t.n, K);
    ASSERT_EQ(search(idx, v.v, K, "65536", NULL, out), K);
    ASSERT_EQ(out[0].id, 0);
    ops->free(idx);
    free(v.v);
}

/* ---------------------------------------------------------------- corruption */

static int try_load(const uint8_t *d, size_t len, const vecs *v)
{
    sx__index *idx = NULL;
    sx_status st = ops->deserialize(d, len, v->v, v->n, v->dim, SX_METRIC_L2, &idx);
    if (st != SX_OK) {
        if (st != SX_ECORRUPT)
            FAILF("deserialize of %zu bytes returned %s (%s)", len, sx_status_str(st), sx_errmsg());
        ASSERT(idx == NULL);
        return 0;
    }
    ASSERT_OK(sx__hnsw_sq_check(idx));
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

/* Offsets of the serialized fields for the index below (see hnsw_sq_io.c). */
static void test_corrupt_fields(void)
{
    uint64_t seed = 5;
    vecs v = random_vecs(200, 6, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "4", "40", 1);
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    sx__wbuf w = serialize(idx);
    uint8_t *d = malloc(w.len);
    const size_t qoff = 52, loff = qoff + 8 * v.dim, l0off = loff + v.n;
#define CORRUPT(stmt)                   \
 do {                                   \
  memcpy(d, w.data, w.len);             \
  stmt;                                 \
  fix_crc(d, w.len);                    \
  ASSERT_EQ(try_load(d, w.len, &v), 0); \
 } while (0)
    CORRUPT(sx__put_le32(d, 0x12345678));                        /* magic */
    CORRUPT(sx__put_le32(d + 4, 2));                             /* version */
    CORRUPT(sx__put_le32(d + 24, 1));                            /* M below range */
    CORRUPT(sx__put_le32(d + 28, 9));                            /* M0 != 2M */
    CORRUPT(sx__put_le32(d + 32, 0));                            /* efConstruction */
    CORRUPT(sx__put_le32(d + 36, 4));                            /* sq_type */
    CORRUPT(sx__put_le32(d + 40, 6));                            /* flags */
    CORRUPT(sx__put_le32(d + 44, (uint32_t)v.n));                /* entry out of range */
    CORRUPT(sx__put_le32(d + 48, SX__HNSW_MAX_LEVEL + 1));       /* max level */
    CORRUPT(sx__put_le32(d + 48, h->max_level + 1));             /* max level != entry's */
    CORRUPT(sx__put_le32(d + qoff, 0x7FC00000));                 /* qmin NaN */
    CORRUPT(sx__put_le32(d + qoff + 4 * v.dim, 0xBF800000));     /* scale -1 */
    CORRUPT(sx__put_le32(d + qoff + 4 * v.dim + 4, 0x7F800000)); /* scale inf */
    CORRUPT(d[loff + 3] = SX__HNSW_MAX_LEVEL + 1);               /* a level too high */
    CORRUPT(d[loff + (h->entry == 0 ? 1 : 0)] = (uint8_t)(h->max_level + 1)); /* above entry */
    /* node 0's level-0 list: count, then ids */
    CORRUPT(sx__put_le32(d + l0off, h->M0 + 1));                        /* count > M0 */
    CORRUPT(sx__put_le32(d + l0off + 4, (uint32_t)v.n));                /* id out of range */
    CORRUPT(sx__put_le32(d + l0off + 4, 0));                            /* self link */
    CORRUPT(sx__put_le32(d + l0off + 8, sx__le32(w.data + l0off + 4))); /* duplicate */
    /* wrong segment shape, no CRC fix needed */
    sx__index *x = NULL;
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n - 1, v.dim, SX_METRIC_L2, &x),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim + 1, SX_METRIC_L2, &x),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_IP, &x), SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(NULL, 0, v.v, v.n, v.dim, SX_METRIC_L2, &x), SX_ECORRUPT);
    ASSERT(x == NULL);
    /* trailing byte */
    uint8_t *longer = malloc(w.len + 1);
    memcpy(longer, w.data, w.len - 4);
    longer[w.len - 4] = 0;
    fix_crc(longer, w.len + 1);
    ASSERT_EQ(try_load(longer, w.len + 1, &v), 0);
    free(longer);
#undef CORRUPT
    free(d);
    sx__wbuf_fini(&w);
    ops->free(idx);
    free(v.v);
}

/* An unreachable node: rebuild a serialized index where every link to node u is removed. */
static void test_corrupt_unreachable(void)
{
    uint64_t seed = 9;
    vecs v = random_vecs(150, 5, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "4", "40", 1);
    sx__hnsw_sq *h = (sx__hnsw_sq *)idx;
    uint32_t u = h->entry == 7 ? 8 : 7;
    for (uint32_t i = 0; i < h->n; i++) {
        for (uint32_t l = 0; l <= h->levels[i]; l++) {
            uint32_t *ll = sx__hsq_links(h, i, l);
            uint32_t c = 0;
            for (uint32_t j = 1; j <= ll[0]; j++)
                if (ll[j] != u)
                    ll[1 + c++] = ll[j];
            ll[0] = c;
        }
    }
    ASSERT_STATUS(sx__hnsw_sq_check(idx), SX_ECORRUPT);
    sx__wbuf w = serialize(idx);
    ASSERT_EQ(try_load(w.data, w.len, &v), 0);
    ASSERT(strstr(sx_errmsg(), "unreachable") != NULL);
    sx__wbuf_fini(&w);
    ops->free(idx);
    free(v.v);
}

static void test_corrupt_random(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(400, 6, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "4", "40", 2);
    sx__wbuf w = serialize(idx);
    uint8_t *d = malloc(w.len);
    for (size_t len = 0; len < w.len; len++) {
        memcpy(d, w.data, len);
        ASSERT_EQ(try_load(d, len, &v), 0);
    }
    for (size_t len = 4; len < w.len; len += 3) {
        memcpy(d, w.data, len);
        fix_crc(d, len);
        ASSERT_EQ(try_load(d, len, &v), 0);
    }
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
    fprintf(stderr, "  %zu of 1500 CRC-fixed corruptions still formed a valid index\n", valid);
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
            ASSERT_OK(sx__hnsw_sq_check(idx));
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
    RUN(test_kernels);
    RUN(test_code_distance);
    RUN(test_edge_cases);
    RUN(test_build_ctx);
    RUN(test_ip_cosine);
    RUN(test_corrupt_fields);
    RUN(test_corrupt_unreachable);
    RUN(test_corrupt_random);
    RUN(test_oom);
    RUN(test_bigann_recall);
    RUN(test_bigann_roundtrip);
    RUN(test_bigann_filter);
    RUN(test_bigann_concurrent);
    RUN(test_fmnist_recall);
    if (bidx)
        ops->free(bidx);
    free(bigann.v);
    free(bq);
    free(bgt);
    return TEST_DONE();
}
