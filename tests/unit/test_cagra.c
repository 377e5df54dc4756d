/*
 * test_cagra.c: unit tests of the GPU_CAGRA index's CPU twin (src/index/cagra) and of the other
 * GPU_* index types without a GPU (GPU_IVF_FLAT, GPU_IVF_PQ, GPU_BRUTE_FORCE).
 *
 * Recall gates (k = 10; intermediate_graph_degree 64, graph_degree 32; search itopk_size 64):
 *   - BIGANN-10k ($SX_SHARED_DATA/bigann10k, shipped exact top-100): recall@10 >= 0.95 for the
 *     default (exact kNN, "IVF_PQ") route and for NN_DESCENT;
 *   - Fashion-MNIST slice: first 10,000 train images as base, first 200 t10k images as queries,
 *     exact ground truth in double in this file, a hit counts when its exact distance is <= the
 *     true 10th (pixel data has exact ties): recall >= 0.95. Skipped without the dataset.
 * Graph quality and structure:
 *   - NN-descent kNN graph (K = 32, first 5,000 BIGANN rows) vs the exact kNN graph: recall >= 0.9;
 *     identical for 1 and 2 threads (determinism), and for two runs with the same seed;
 *   - the pruned graph: exactly graph_degree distinct valid non-self ids per row, all from the
 *     row's kNN list, in the order of a naive reference (detours counted by linear search, sorted
 *     by sx__cagra_prune_key);
 *   - the merged graph: exactly graph_degree distinct valid non-self ids per row (sx__cagra_check
 *     plus the count), its first graph_degree/2 ids equal to the pruned row's; the whole build
 *     equals the phases run one by one; the fraction of nodes reachable from the entry points is
 *     printed (and must be 1: the build's repair, invariant 4 of cagra.h);
 *   - determinism: two builds with the same seed serialize to the same bytes.
 * Persistence: serialize -> deserialize -> identical results and identical bytes; every
 * truncation and seeded byte flips with the CRC left stale give SX_ECORRUPT; with the CRC
 * recomputed, a flip gives SX_ECORRUPT or an index that passes sx__cagra_check and can be
 * searched; specific corruptions (id out of range, self loop, duplicate, bad degree) are
 * SX_ECORRUPT; so is a structurally valid graph with a node unreachable from the entry points
 * (invariant 4), which sx__cagra_repair makes whole.
 * Filters: 30% of rows allowed -> every hit allowed, recall vs brute force over the allowed rows
 * >= 0.9 at itopk 200; the true nearest neighbours "deleted" -> never returned; nothing allowed ->
 * nothing returned.
 * Errors: graph_degree >= intermediate_graph_degree, zero degrees, unknown keys, bad build_algo,
 * bad search params -> SX_EINVAL.
 * Engine: sx_index_create(c, "GPU_CAGRA", ...) on a collection, sx_flush, sx_index_wait, search
 * recall >= 0.95 through sx_search, deleted rows never returned, the same results after reopening
 * (the index file is loaded by deserialize).
 * Other GPU types: GPU_IVF_FLAT / GPU_IVF_PQ build the same record as IVF_FLAT / IVF_PQ with the
 * same seed (no GPU: the CPU k-means); GPU_BRUTE_FORCE returns the exact top-k.
 * With SX_CAGRA_BENCH=1 the build times of CAGRA (both routes) and HNSW (M=16,
 * efConstruction=200) on all cores, and recall / single-thread QPS over itopk_size / ef, are
 * printed for both data sets (not a gate).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data.h"
#include "harness.h"
#include "index/cagra/cagra.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/crc32c.h"
#include "util/err.h"

#define K      10
#define FM_DIR "/usr/share/datasets/fashion-mnist"
#define FM_N   10000
#define FM_NQ  200

static const sx__index_ops *ops = &sx__cagra_index_ops;

typedef struct vecs {
    size_t n, dim;
    float *v;
} vecs;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t cpus(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (uint32_t)c : 1;
}

static vecs random_vecs(size_t n, size_t dim, uint64_t *seed)
{
    vecs v = { n, dim, malloc(n * dim * sizeof(float) + 1) };
    for (size_t i = 0; i < n * dim; i++)
        v.v[i] = test_randf(seed) * 2.0f - 1.0f;
    return v;
}

/* ---------------------------------------------------------------- helpers */

static sx__index *
build_p(const vecs *v, sx_metric m, const sx_param *p, size_t np, uint32_t threads, uint64_t seed)
{
    sx__build_ctx ctx = { .threads = threads, .seed = seed };
    sx__index *idx = NULL;
    ASSERT_OK(ops->build(p, np, v->v, v->n, v->dim, m, &ctx, &idx));
    ASSERT_OK(sx__cagra_check(idx));
    return idx;
}

static sx__index *build(const vecs *v,
                        sx_metric m,
                        const char *inter,
                        const char *gd,
                        const char *algo,
                        uint32_t threads)
{
    sx_param p[3] = { { "intermediate_graph_degree", inter },
                      { "graph_degree", gd },
                      { "build_algo", algo } };
    return build_p(v, m, p, 3, threads, 0);
}

static size_t search(const sx__index *idx,
                     const float *q,
                     size_t k,
                     const char *itopk,
                     const uint64_t *allow,
                     sx__hit *out)
{
    sx_param sp = { "itopk_size", itopk };
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

/* Per-query exact k-th distances (for threshold recall). */
static double *kth_all(const vecs *base, const float *queries, size_t nq, sx_metric m)
{
    double *scratch = malloc(base->n * sizeof *scratch);
    double *kth = malloc(nq * sizeof *kth);
    for (size_t q = 0; q < nq; q++) {
        size_t na;
        kth[q] = test_kth_dist(base->v, base->n, base->dim, m, queries + q * base->dim, K, NULL,
                               scratch, &na);
    }
    free(scratch);
    return kth;
}

typedef size_t (*search_fn)(
    const void *ctx, const float *q, size_t k, const char *param, sx__hit *out);

static size_t
cagra_search_cb(const void *ctx, const float *q, size_t k, const char *param, sx__hit *out)
{
    return search(ctx, q, k, param, NULL, out);
}

/* Threshold recall@10 of any searcher (kth from kth_all); *qps = single-thread queries/s. */
static double recall_thr(search_fn fn,
                         const void *ctx,
                         const vecs *base,
                         const float *queries,
                         size_t nq,
                         const double *kth,
                         sx_metric m,
                         const char *param,
                         double *qps)
{
    sx__hit out[K];
    size_t good = 0;
    double t0 = now_s();
    size_t *got = malloc(nq * sizeof *got);
    sx__hit *all = malloc(nq * K * sizeof *all);
    for (size_t q = 0; q < nq; q++) {
        got[q] = fn(ctx, queries + q * base->dim, K, param, out);
        memcpy(all + q * K, out, got[q] * sizeof *out);
    }
    if (qps)
        *qps = (double)nq / (now_s() - t0);
    for (size_t q = 0; q < nq; q++) {
        const float *qv = queries + q * base->dim;
        for (size_t i = 0; i < got[q]; i++) {
            double d =
                test_dist_d(qv, base->v + (size_t)all[q * K + i].id * base->dim, base->dim, m);
            if (d <= kth[q] + 1e-6 * (1.0 + fabs(kth[q])))
                good++;
        }
    }
    free(got);
    free(all);
    return (double)good / (double)(nq * K);
}

/* ---------------------------------------------------------------- data */

static vecs bigann;
static float *bq;
static int32_t *bgt;
static size_t bnq, bgtk;

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

/* Recall@10 against the shipped ground truth (id overlap). */
static double bigann_recall(const sx__index *idx, const char *itopk, double *qps)
{
    sx__hit out[K];
    size_t good = 0;
    double t0 = now_s();
    for (size_t q = 0; q < bnq; q++) {
        size_t got = search(idx, bq + q * bigann.dim, K, itopk, NULL, out);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                if ((int32_t)out[i].id == bgt[q * bgtk + j]) {
                    good++;
                    break;
                }
    }
    if (qps)
        *qps = (double)bnq / (now_s() - t0);
    return (double)good / (double)(bnq * K);
}

static vecs fm;
static float *fmq;
static double *fm_kth;

static int load_fmnist(void)
{
    if (fm.v)
        return 1;
    size_t dim, dq;
    float *base = test_read_idx(FM_DIR "/train-images-idx3-ubyte.gz", FM_N, &dim);
    float *queries = test_read_idx(FM_DIR "/t10k-images-idx3-ubyte.gz", FM_NQ, &dq);
    if (!base || !queries || dq != dim) {
        free(base);
        free(queries);
        return 0;
    }
    fm = (vecs){ FM_N, dim, base };
    fmq = queries;
    fm_kth = kth_all(&fm, fmq, FM_NQ, SX_METRIC_L2);
    return 1;
}

/* ---------------------------------------------------------------- parameters */

static void test_params(void)
{
    sx__cagra_opts o;
    ASSERT_OK(sx__cagra_parse_build(NULL, 0, &o));
    ASSERT_EQ(o.bp.intermediate_degree, 128);
    ASSERT_EQ(o.bp.graph_degree, 64);
    ASSERT_EQ(o.bp.build_algo, SX__CAGRA_ALGO_IVF_PQ);
    sx_param a[] = { { "intermediate_graph_degree", "32" } };
    ASSERT_OK(sx__cagra_parse_build(a, 1, &o));
    ASSERT_EQ(o.bp.graph_degree, 16);
    sx_param b[] = { { "graph_degree", "200" } };
    ASSERT_OK(sx__cagra_parse_build(b, 1, &o));
    ASSERT_EQ(o.bp.intermediate_degree, 400);
    sx_param c[] = { { "intermediate_graph_degree", "64" },
                     { "graph_degree", "32" },
                     { "build_algo", "NN_DESCENT" },
                     { "cache_dataset_on_device", "true" },
                     { "adapt_for_cpu", "false" },
                     { "index_type", "GPU_CAGRA" },
                     { "metric_type", "L2" } };
    ASSERT_OK(sx__cagra_parse_build(c, 7, &o));
    ASSERT_EQ(o.bp.build_algo, SX__CAGRA_ALGO_NN_DESCENT);
    ASSERT(o.cache_dataset_on_device);
    ASSERT(!o.adapt_for_cpu);

    struct {
        sx_param p[2];
        size_t np;
        const char *needle;
    } bad[] = {
        { { { "intermediate_graph_degree", "64" }, { "graph_degree", "64" } }, 2, "graph_degree" },
        { { { "intermediate_graph_degree", "32" }, { "graph_degree", "64" } }, 2, "graph_degree" },
        { { { "graph_degree", "0" } }, 1, "graph_degree" },
        { { { "intermediate_graph_degree", "0" } }, 1, "intermediate_graph_degree" },
        { { { "intermediate_graph_degree", "2000" } }, 1, "intermediate_graph_degree" },
        { { { "graph_degree", "1024" } }, 1, "graph_degree" },
        { { { "build_algo", "CAGRA" } }, 1, "build_algo" },
        { { { "cache_dataset_on_device", "maybe" } }, 1, "cache_dataset_on_device" },
        { { { "nn_descent_niter", "0" } }, 1, "nn_descent_niter" },
        { { { "M", "16" } }, 1, "M" },
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_STATUS(ops->check_build_params(bad[i].p, bad[i].np), SX_EINVAL);
        ASSERT(strstr(sx_errmsg(), bad[i].needle) != NULL);
        sx__index *idx = NULL;
        float x[8] = { 0 };
        sx__build_ctx ctx = { .threads = 1 };
        ASSERT_STATUS(ops->build(bad[i].p, bad[i].np, x, 2, 4, SX_METRIC_L2, &ctx, &idx),
                      SX_EINVAL);
        ASSERT(idx == NULL);
    }
    /* search params */
    ASSERT_OK(ops->check_search_params(NULL, 0, 10));
    sx_param s1[] = { { "itopk_size", "32" },
                      { "search_width", "4" },
                      { "team_size", "8" },
                      { "min_iterations", "0" },
                      { "max_iterations", "100" } };
    ASSERT_OK(ops->check_search_params(s1, 5, 10));
    sx_param sb[][1] = { { { "itopk_size", "0" } }, { { "search_width", "0" } },
                         { { "team_size", "3" } },  { { "max_iterations", "-1" } },
                         { { "itopk_size", "x" } }, { { "ef", "0" } } };
    for (size_t i = 0; i < sizeof sb / sizeof sb[0]; i++)
        ASSERT_STATUS(ops->check_search_params(sb[i], 1, 10), SX_EINVAL);
    sx_param mm[] = { { "min_iterations", "5" }, { "max_iterations", "4" } };
    ASSERT_STATUS(ops->check_search_params(mm, 2, 10), SX_EINVAL);
    /* registry */
    ASSERT(sx__index_lookup("GPU_CAGRA") == &sx__cagra_index_ops);
    ASSERT(sx__index_lookup("gpu_cagra") == &sx__cagra_index_ops);
    ASSERT(sx__index_lookup("GPU_IVF_FLAT") == &sx__gpu_ivf_flat_index_ops);
    ASSERT(sx__index_lookup("GPU_IVF_PQ") == &sx__gpu_ivf_pq_index_ops);
    ASSERT(sx__index_lookup("GPU_BRUTE_FORCE") == &sx__gpu_brute_force_index_ops);
    ASSERT(sx__index_lookup("GPU_NOPE") == NULL);
}

/* ---------------------------------------------------------------- graph phases */

/* |a-row ∩ b-row| / (n K) for two kNN graphs. */
static double graph_recall(const uint32_t *a, const uint32_t *b, size_t n, uint32_t Kg)
{
    size_t hit = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t x = 0; x < Kg; x++)
            for (uint32_t y = 0; y < Kg; y++)
                if (a[i * Kg + x] == b[i * Kg + y]) {
                    hit++;
                    break;
                }
    return (double)hit / ((double)n * Kg);
}

static void test_nn_descent_quality(void)
{
    need_bigann();
    const size_t n = 5000;
    const uint32_t Kg = 32;
    uint32_t *ex = malloc(n * Kg * sizeof *ex), *nd1 = malloc(n * Kg * sizeof *nd1);
    uint32_t *nd2 = malloc(n * Kg * sizeof *nd2), *nd3 = malloc(n * Kg * sizeof *nd3);
    double t0 = now_s();
    ASSERT_OK(sx__cagra_knn_exact(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 2, NULL, ex));
    double t1 = now_s();
    uint32_t it = 0;
    ASSERT_OK(sx__cagra_knn_nn_descent(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 20, 7, 2, NULL,
                                       nd1, &it));
    double t2 = now_s();
    double r = graph_recall(nd1, ex, n, Kg);
    fprintf(stderr,
            "  NN-descent 5000 x 128, K=32: graph recall %.4f after %u iterations (%.3f s; exact "
            "%.3f s)\n",
            r, it, t2 - t1, t1 - t0);
    ASSERT(r >= 0.9);
    /* rows: distinct, non-self, in range */
    for (size_t i = 0; i < n; i++)
        for (uint32_t x = 0; x < Kg; x++) {
            uint32_t id = nd1[i * Kg + x];
            ASSERT(id < n && id != (uint32_t)i);
            for (uint32_t y = x + 1; y < Kg; y++)
                ASSERT(nd1[i * Kg + y] != id);
        }
    /* determinism: thread count and repetition do not matter; the seed does */
    ASSERT_OK(sx__cagra_knn_nn_descent(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 20, 7, 1, NULL,
                                       nd2, NULL));
    ASSERT(memcmp(nd1, nd2, n * Kg * sizeof *nd1) == 0);
    ASSERT_OK(sx__cagra_knn_nn_descent(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 20, 7, 3, NULL,
                                       nd2, NULL));
    ASSERT(memcmp(nd1, nd2, n * Kg * sizeof *nd1) == 0);
    ASSERT_OK(sx__cagra_knn_nn_descent(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 20, 8, 2, NULL,
                                       nd3, NULL));
    ASSERT(memcmp(nd1, nd3, n * Kg * sizeof *nd1) != 0);
    /* an exact graph is a fixed point of... nothing: but the exact rows are sorted by distance */
    for (size_t i = 0; i < 50; i++)
        for (uint32_t x = 0; x + 1 < Kg; x++)
            ASSERT(test_dist_d(bigann.v + i * 128, bigann.v + (size_t)ex[i * Kg + x] * 128, 128,
                               SX_METRIC_L2) <=
                   test_dist_d(bigann.v + i * 128, bigann.v + (size_t)ex[i * Kg + x + 1] * 128, 128,
                               SX_METRIC_L2) +
                       1e-3);
    free(ex);
    free(nd1);
    free(nd2);
    free(nd3);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Naive reference of the pruning of one row (linear membership tests, key sort). */
static void
prune_ref(const uint32_t *knn, size_t n, uint32_t Kg, uint32_t D, size_t a, uint32_t *out)
{
    const uint32_t *row = knn + a * Kg;
    uint64_t keys[256];
    for (uint32_t r = 0; r < Kg; r++) {
        uint32_t det = 0;
        for (uint32_t d = 0; d < r; d++) {
            const uint32_t *drow = knn + (size_t)row[d] * Kg;
            for (uint32_t x = 0; x < Kg; x++)
                if (drow[x] == row[r]) {
                    det++;
                    break;
                }
        }
        keys[r] = sx__cagra_prune_key(row[r] < n ? det : UINT32_MAX, r);
    }
    qsort(keys, Kg, sizeof keys[0], cmp_u64);
    for (uint32_t c = 0; c < D; c++)
        out[c] = row[(uint32_t)(keys[c] & 0xFFFFFFFFu)];
}

static void test_prune_merge(void)
{
    need_bigann();
    const size_t n = bigann.n;
    const uint32_t Kg = 64, D = 32;
    uint32_t *knn = malloc(n * Kg * sizeof *knn), *pr = malloc(n * D * sizeof *pr);
    uint32_t *g = malloc(n * D * sizeof *g), *g2 = malloc(n * D * sizeof *g2);
    ASSERT_OK(sx__cagra_knn_exact(bigann.v, n, bigann.dim, SX_METRIC_L2, Kg, 2, NULL, knn));
    ASSERT_OK(sx__cagra_prune(knn, n, Kg, D, 2, NULL, pr));
    uint32_t ref[64];
    for (size_t a = 0; a < n; a++) {
        const uint32_t *row = pr + a * D;
        for (uint32_t c = 0; c < D; c++) {
            ASSERT(row[c] < n && row[c] != (uint32_t)a);
            bool in_knn = false;
            for (uint32_t x = 0; x < Kg; x++)
                in_knn = in_knn || knn[a * Kg + x] == row[c];
            ASSERT(in_knn);
            for (uint32_t e = c + 1; e < D; e++)
                ASSERT(row[e] != row[c]);
        }
        if (a % 37 == 0) {
            prune_ref(knn, n, Kg, D, a, ref);
            ASSERT(memcmp(ref, row, D * sizeof *row) == 0);
        }
    }
    ASSERT_OK(sx__cagra_merge(pr, n, D, 2, NULL, g));
    size_t rev_slots = 0;
    for (size_t a = 0; a < n; a++) {
        const uint32_t *row = g + a * D;
        ASSERT(memcmp(row, pr + a * D, (D / 2) * sizeof *row) == 0);
        for (uint32_t c = 0; c < D; c++) {
            ASSERT(row[c] < n && row[c] != (uint32_t)a);
            for (uint32_t e = c + 1; e < D; e++)
                ASSERT(row[e] != row[c]);
            bool in_pr = false;
            for (uint32_t e = 0; e < D; e++)
                in_pr = in_pr || pr[a * D + e] == row[c];
            rev_slots += !in_pr;
        }
    }
    fprintf(stderr, "  merge: %.1f%% of the slots hold reverse edges not in the pruned row\n",
            100.0 * (double)rev_slots / ((double)n * D));
    ASSERT(rev_slots > 0);
    /* the whole build = the phases */
    sx__cagra_build_params bp = {
        .intermediate_degree = Kg, .graph_degree = D, .build_algo = 0, .threads = 2
    };
    ASSERT_OK(sx__cagra_build_graph(bigann.v, n, bigann.dim, SX_METRIC_L2, &bp, NULL, g2));
    ASSERT(memcmp(g, g2, n * D * sizeof *g) == 0);
    free(knn);
    free(pr);
    free(g);
    free(g2);
}

/* Fraction of nodes reachable from the entry points. */
static double reachable(const sx__index *idx)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    uint8_t *seen = calloc(g->n, 1);
    uint32_t *q = malloc(g->n * sizeof *q);
    size_t head = 0, tail = 0;
    for (uint32_t e = 0; e < g->n_entries; e++)
        if (!seen[g->entries[e]]) {
            seen[g->entries[e]] = 1;
            q[tail++] = g->entries[e];
        }
    while (head < tail) {
        const uint32_t *row = sx__cagra_row(g, q[head++]);
        for (uint32_t j = 0; j < g->degree && row[j] != SX__CAGRA_NONE; j++)
            if (!seen[row[j]]) {
                seen[row[j]] = 1;
                q[tail++] = row[j];
            }
    }
    free(seen);
    free(q);
    return (double)tail / (double)g->n;
}

static void full_rows(const sx__index *idx)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    uint32_t want = g->n - 1 < g->degree ? (uint32_t)(g->n - 1) : g->degree;
    for (size_t i = 0; i < g->n; i++) {
        uint32_t c = 0;
        const uint32_t *row = sx__cagra_row(g, (uint32_t)i);
        while (c < g->degree && row[c] != SX__CAGRA_NONE)
            c++;
        ASSERT_EQ(c, want);
    }
}

/* ---------------------------------------------------------------- recall */

static sx__index *bidx; /* BIGANN, exact route, 64/32, shared by later tests */

static void test_bigann_recall(void)
{
    need_bigann();
    atomic_size_t progress = 0;
    sx_param p[2] = { { "intermediate_graph_degree", "64" }, { "graph_degree", "32" } };
    sx__build_ctx ctx = { .threads = 2, .progress = &progress };
    double t0 = now_s();
    ASSERT_OK(ops->build(p, 2, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &bidx));
    double bt = now_s() - t0;
    ASSERT_EQ(atomic_load(&progress), bigann.n);
    ASSERT_OK(sx__cagra_check(bidx));
    full_rows(bidx);
    double reach = reachable(bidx);
    double qps64, qps128;
    double r64 = bigann_recall(bidx, "64", &qps64), r128 = bigann_recall(bidx, "128", &qps128);
    fprintf(stderr,
            "  BIGANN-10k exact route 64/32: build %.3f s, reachable %.4f, recall@10 %.4f at "
            "itopk 64 (%.0f QPS), %.4f at 128 (%.0f QPS), %zu bytes\n",
            bt, reach, r64, qps64, r128, qps128, ops->memory_bytes(bidx));
    ASSERT(reach == 1.0); /* invariant 4 of cagra.h: the build's repair */
    ASSERT(r64 >= 0.95);
    ASSERT(r128 >= r64 - 0.005);
    /* search_width 4 and a capped iteration count still work; max_iterations 1 is worse */
    sx_param sw[2] = { { "itopk_size", "64" }, { "search_width", "4" } };
    sx__hit out[K];
    sx__topk t;
    sx__topk_init(&t, out, K);
    ASSERT_OK(ops->search(bidx, bq, K, sw, 2, NULL, &t));
    ASSERT_EQ(t.n, K);
}

static void test_bigann_nn_descent_recall(void)
{
    need_bigann();
    double t0 = now_s();
    sx__index *idx = build(&bigann, SX_METRIC_L2, "64", "32", "NN_DESCENT", 2);
    double bt = now_s() - t0;
    full_rows(idx);
    double qps;
    double r = bigann_recall(idx, "64", &qps);
    fprintf(stderr, "  BIGANN-10k NN_DESCENT 64/32: build %.3f s, recall@10 %.4f at itopk 64\n", bt,
            r);
    ASSERT(r >= 0.95);
    ops->free(idx);
}

static void test_fmnist_recall(void)
{
    if (!load_fmnist()) {
        need_fmnist_files();
        FAILF("Fashion-MNIST in " FM_DIR " is present but unreadable");
    }
    double t0 = now_s();
    sx__index *idx = build(&fm, SX_METRIC_L2, "64", "32", "IVF_PQ", 2);
    double bt = now_s() - t0;
    full_rows(idx);
    double q64, q128;
    double r64 =
        recall_thr(cagra_search_cb, idx, &fm, fmq, FM_NQ, fm_kth, SX_METRIC_L2, "64", &q64);
    double r128 =
        recall_thr(cagra_search_cb, idx, &fm, fmq, FM_NQ, fm_kth, SX_METRIC_L2, "128", &q128);
    fprintf(stderr,
            "  Fashion-MNIST 10k/200 exact route 64/32: build %.3f s, reachable %.4f, recall@10 "
            "%.4f at itopk 64, %.4f at 128\n",
            bt, reachable(idx), r64, r128);
    ASSERT(r64 >= 0.95);
    ops->free(idx);
#if defined(__SANITIZE_ADDRESS__)
    /* ~50 s under ASan (784-d distances in instrumented code): the release pass covers it */
    fprintf(stderr, "  Fashion-MNIST NN_DESCENT: skipped under the sanitizers\n");
    return;
#endif
    t0 = now_s();
    idx = build(&fm, SX_METRIC_L2, "64", "32", "NN_DESCENT", 2);
    bt = now_s() - t0;
    r64 = recall_thr(cagra_search_cb, idx, &fm, fmq, FM_NQ, fm_kth, SX_METRIC_L2, "64", NULL);
    fprintf(stderr, "  Fashion-MNIST NN_DESCENT 64/32: build %.3f s, recall@10 %.4f at itopk 64\n",
            bt, r64);
    ASSERT(r64 >= 0.95);
    ops->free(idx);
}

static void test_ip_cosine(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(3000, 24, &seed);
    for (size_t i = 0; i < v.n; i++)
        sx__normalize(v.v + i * v.dim, v.dim);
    vecs q = random_vecs(50, 24, &seed);
    sx_metric ms[2] = { SX_METRIC_IP, SX_METRIC_COSINE };
    for (int m = 0; m < 2; m++) {
        sx__index *idx = build(&v, ms[m], "32", "16", m ? "NN_DESCENT" : "IVF_PQ", 2);
        double *kth = kth_all(&v, q.v, q.n, ms[m]);
        double r = recall_thr(cagra_search_cb, idx, &v, q.v, q.n, kth, ms[m], "64", NULL);
        fprintf(stderr, "  metric %d: recall@10 = %.4f at itopk 64\n", (int)ms[m], r);
        ASSERT(r >= 0.95);
        free(kth);
        ops->free(idx);
    }
    free(v.v);
    free(q.v);
}

/* ---------------------------------------------------------------- persistence */

static void test_roundtrip_determinism(void)
{
    if (!bidx) {
        need_bigann();
        FAILF("no BIGANN index: test_bigann_recall did not build it");
    }
    sx__wbuf w = serialize(bidx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &idx2));
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
    sx__wbuf w2 = serialize(idx2);
    ASSERT_EQ(w2.len, w.len);
    ASSERT(memcmp(w.data, w2.data, w.len) == 0);
    sx__wbuf_fini(&w2);
    ops->free(idx2);
    /* same seed, same threads: the same bytes (a new build of the same data) */
    sx_param p[2] = { { "intermediate_graph_degree", "64" }, { "graph_degree", "32" } };
    sx__index *idx3 = build_p(&bigann, SX_METRIC_L2, p, 2, 2, 0);
    w2 = serialize(idx3);
    ASSERT_EQ(w2.len, w.len);
    ASSERT(memcmp(w.data, w2.data, w.len) == 0);
    sx__wbuf_fini(&w2);
    ops->free(idx3);
    /* NN-descent route: seeded, thread-count independent */
    sx_param pn[3] = { { "intermediate_graph_degree", "48" },
                       { "graph_degree", "24" },
                       { "build_algo", "NN_DESCENT" } };
    sx__index *n1 = build_p(&bigann, SX_METRIC_L2, pn, 3, 1, 99);
    sx__index *n2 = build_p(&bigann, SX_METRIC_L2, pn, 3, 2, 99);
    sx__wbuf x1 = serialize(n1), x2 = serialize(n2);
    ASSERT_EQ(x1.len, x2.len);
    ASSERT(memcmp(x1.data, x2.data, x1.len) == 0);
    sx__wbuf_fini(&x1);
    sx__wbuf_fini(&x2);
    ops->free(n1);
    ops->free(n2);
    sx__wbuf_fini(&w);
}

/* Rewrites the CRC of a record after editing it. */
static void fix_crc(uint8_t *b, size_t len)
{
    sx__put_le32(b + len - 4, sx__crc32c(0, b, len - 4));
}

static void test_corruption(void)
{
    uint64_t seed = test_seed();
    vecs v = random_vecs(600, 8, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "16", "8", "IVF_PQ", 2);
    sx__wbuf w = serialize(idx);
    uint8_t *b = malloc(w.len);
    sx__index *out = NULL;
    /* every truncation */
    for (size_t len = 0; len < w.len; len += (len < 200 ? 1 : 37))
        ASSERT_STATUS(ops->deserialize(w.data, len, v.v, v.n, v.dim, SX_METRIC_L2, &out),
                      SX_ECORRUPT);
    /* wrong segment shape */
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n - 1, v.dim, SX_METRIC_L2, &out),
                  SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_IP, &out),
                  SX_ECORRUPT);
    /* seeded flips: stale CRC -> always corrupt; fixed CRC -> corrupt or a valid graph */
    size_t valid_after_fix = 0;
    for (int t = 0; t < 400; t++) {
        memcpy(b, w.data, w.len);
        size_t pos = (size_t)(test_rand(&seed) % (w.len - 4));
        uint8_t bit = (uint8_t)(1u << (test_rand(&seed) % 8));
        b[pos] ^= bit;
        ASSERT_STATUS(ops->deserialize(b, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &out), SX_ECORRUPT);
        fix_crc(b, w.len);
        sx_status st = ops->deserialize(b, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &out);
        ASSERT(st == SX_OK || st == SX_ECORRUPT);
        if (st == SX_OK) {
            valid_after_fix++;
            ASSERT_OK(sx__cagra_check(out));
            sx__hit h[K];
            (void)search(out, v.v, K, "16", NULL, h);
            ops->free(out);
        }
    }
    fprintf(stderr, "  400 flips: %zu still valid graphs after the CRC was recomputed\n",
            valid_after_fix);
    /* targeted: header offsets 24.. (degree, inter, algo, flags, entries), then graph cells */
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    size_t graph_off = 44 + 4 * (size_t)g->n_entries;

    struct {
        size_t off;
        uint32_t val;
    } edits[] = {
        { 24, 0 },                           /* degree 0 */
        { 24, 16 },                          /* degree == inter */
        { 28, 2000 },                        /* inter too big */
        { 32, 7 },                           /* unknown build_algo */
        { 36, 2 },                           /* unknown flag */
        { 40, 17 },                          /* too many entries */
        { 44, 600 },                         /* entry out of range */
        { graph_off, 600 },                  /* id out of range */
        { graph_off, 0 },                    /* self loop of node 0 */
        { graph_off + 4 * 15, 0xFFFFFFFFu }, /* padding at the end of node 1's row */
    };

    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        memcpy(b, w.data, w.len);
        sx__put_le32(b + edits[i].off, edits[i].val);
        fix_crc(b, w.len);
        sx_status st = ops->deserialize(b, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &out);
        if (i == sizeof edits / sizeof edits[0] - 1) {
            /* a shorter row is structurally valid (GPU graphs may have empty slots) */
            ASSERT_OK(st);
            ops->free(out);
        } else {
            ASSERT_STATUS(st, SX_ECORRUPT);
        }
    }
    /* duplicate id in a row */
    memcpy(b, w.data, w.len);
    memcpy(b + graph_off + 4, b + graph_off, 4);
    fix_crc(b, w.len);
    ASSERT_STATUS(ops->deserialize(b, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &out), SX_ECORRUPT);
    free(b);
    sx__wbuf_fini(&w);
    ops->free(idx);
    free(v.v);
}

/* A structurally valid graph with a node no entry point reaches (every link to it removed, the
 * rows shifted left and padded) fails sx__cagra_check and is SX_ECORRUPT on load (the engine
 * then rebuilds it); sx__cagra_repair makes it valid again and the node is found. */
static void test_unreachable_rejected(void)
{
    uint64_t seed = 5;
    vecs v = random_vecs(300, 8, &seed);
    sx__index *idx = build(&v, SX_METRIC_L2, "16", "8", "IVF_PQ", 2);
    sx__cagra *g = (sx__cagra *)(void *)idx;
    uint32_t u = 0;
    for (bool is_entry = true; is_entry; u++) {
        is_entry = false;
        for (uint32_t e = 0; e < g->n_entries; e++)
            is_entry |= g->entries[e] == u;
        if (!is_entry)
            break;
    }
    for (size_t i = 0; i < g->n; i++) {
        uint32_t *row = g->graph + i * g->degree, c = 0;
        for (uint32_t j = 0; j < g->degree; j++)
            if (row[j] != u && row[j] != SX__CAGRA_NONE)
                row[c++] = row[j];
        while (c < g->degree)
            row[c++] = SX__CAGRA_NONE;
    }
    ASSERT_OK(sx__cagra_check_rows(idx));
    ASSERT_STATUS(sx__cagra_check(idx), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "unreachable") != NULL);
    sx__wbuf w = serialize(idx);
    sx__index *out = NULL;
    ASSERT_STATUS(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &out),
                  SX_ECORRUPT);
    sx__wbuf_fini(&w);
    ASSERT_OK(sx__cagra_repair(g));
    ASSERT_OK(sx__cagra_check(idx));
    sx__hit h[300];
    ASSERT_EQ(search(idx, v.v + (size_t)u * v.dim, 300, "300", NULL, h), 300);
    ASSERT_EQ(h[0].dist, 0.0f);
    ops->free(idx);
    free(v.v);
}

/* ---------------------------------------------------------------- filters */

static void test_filters(void)
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
    double *scratch = malloc(bigann.n * sizeof *scratch);
    sx__hit out[K];
    size_t good = 0, total = 0;
    for (size_t q = 0; q < bnq; q++) {
        const float *qv = bq + q * bigann.dim;
        size_t na;
        double kth =
            test_kth_dist(bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, qv, K, allow, scratch, &na);
        size_t got = search(bidx, qv, K, "200", allow, out);
        for (size_t i = 0; i < got; i++) {
            ASSERT(sx__bits_test(allow, out[i].id));
            double d = test_dist_d(qv, bigann.v + (size_t)out[i].id * bigann.dim, bigann.dim,
                                   SX_METRIC_L2);
            good += d <= kth + 1e-6 * (1.0 + fabs(kth));
        }
        total += K;
    }
    double r = (double)good / (double)total;
    fprintf(stderr, "  30%% allowed: recall@10 = %.4f at itopk 200\n", r);
    ASSERT(r >= 0.9);
    /* deletes: the true top-10 of each query are not allowed and never come back */
    for (size_t q = 0; q < 20; q++) {
        memset(allow, 0xFF, sx__bits_words(bigann.n) * sizeof *allow);
        for (size_t j = 0; j < K; j++)
            sx__bits_clear(allow, (size_t)bgt[q * bgtk + j]);
        size_t got = search(bidx, bq + q * bigann.dim, K, "64", allow, out);
        ASSERT_EQ(got, K);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                ASSERT((int32_t)out[i].id != bgt[q * bgtk + j]);
    }
    /* nothing allowed: nothing returned */
    memset(allow, 0, sx__bits_words(bigann.n) * sizeof *allow);
    ASSERT_EQ(search(bidx, bq, K, "64", allow, out), 0);
    free(scratch);
    free(allow);
}

/* ---------------------------------------------------------------- edge cases */

static void test_edge_cases(void)
{
    uint64_t seed = 42;
    sx__hit out[K];
    float q[4] = { 0, 0, 0, 0 };
    /* empty */
    vecs e = { 0, 4, NULL };
    sx__index *idx = build(&e, SX_METRIC_L2, "64", "32", "IVF_PQ", 2);
    ASSERT_EQ(search(idx, q, K, "64", NULL, out), 0);
    sx__wbuf w = serialize(idx);
    sx__index *idx2 = NULL;
    ASSERT_OK(ops->deserialize(w.data, w.len, NULL, 0, 4, SX_METRIC_L2, &idx2));
    ops->free(idx2);
    sx__wbuf_fini(&w);
    ops->free(idx);
    /* one row, a few rows (fewer than graph_degree + 1: padded rows) */
    for (size_t n = 1; n <= 40; n += 13) {
        vecs v = random_vecs(n, 4, &seed);
        idx = build(&v, SX_METRIC_L2, "64", "32", "NN_DESCENT", 3);
        full_rows(idx);
        sx__hit big[64];
        ASSERT_EQ(search(idx, v.v, 64, "64", NULL, big), n);
        ASSERT_EQ(big[0].id, 0);
        w = serialize(idx);
        ASSERT_OK(ops->deserialize(w.data, w.len, v.v, v.n, v.dim, SX_METRIC_L2, &idx2));
        ops->free(idx2);
        sx__wbuf_fini(&w);
        ops->free(idx);
        free(v.v);
    }
    /* identical rows */
    vecs same = { 3000, 4, malloc(3000 * 4 * sizeof(float)) };
    for (size_t i = 0; i < 3000 * 4; i++)
        same.v[i] = 1.0f;
    idx = build(&same, SX_METRIC_L2, "16", "8", "IVF_PQ", 2);
    full_rows(idx);
    ASSERT_EQ(search(idx, same.v, K, "16", NULL, out), K);
    ops->free(idx);
    idx = build(&same, SX_METRIC_L2, "16", "8", "NN_DESCENT", 2);
    full_rows(idx);
    ASSERT_EQ(search(idx, same.v, K, "16", NULL, out), K);
    ops->free(idx);
    free(same.v);
    /* k > itopk: the buffer grows to k */
    vecs v = random_vecs(500, 6, &seed);
    idx = build(&v, SX_METRIC_L2, "32", "16", "IVF_PQ", 2);
    sx__hit big[100];
    ASSERT_EQ(search(idx, v.v, 100, "10", NULL, big), 100);
    ASSERT_EQ(big[0].id, 0);
    ops->free(idx);
    free(v.v);
}

static void test_cancel_progress_memory(void)
{
    uint64_t seed = 7;
    vecs v = random_vecs(5000, 16, &seed);
    atomic_bool cancel = true;
    atomic_size_t progress = 0;
    sx__build_ctx ctx = { .threads = 2, .progress = &progress, .cancel = &cancel };
    sx__index *idx = NULL;
    sx_param pn[] = { { "build_algo", "NN_DESCENT" }, { "intermediate_graph_degree", "32" } };
    ASSERT_STATUS(ops->build(pn, 2, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx), SX_ECANCELED);
    ASSERT(idx == NULL);
    atomic_store(&cancel, false);
    ASSERT_OK(ops->build(pn, 2, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx));
    ASSERT_EQ(atomic_load(&progress), v.n);
    ops->free(idx);
    /* memory limit: refused before allocating, naming the limit */
    uint64_t need = ops->estimate_build_bytes(pn, 2, v.n, v.dim);
    ASSERT(need > v.n * 32 * 4);
    ctx.memory_limit_bytes = need / 2;
    ASSERT_STATUS(ops->build(pn, 2, v.v, v.n, v.dim, SX_METRIC_L2, &ctx, &idx), SX_ENOMEM);
    ASSERT(strstr(sx_errmsg(), "limit") != NULL);
    free(v.v);
}

/* ---------------------------------------------------------------- other GPU_* types */

static void test_gpu_ivf_brute_force(void)
{
    need_bigann();
    const sx__index_ops *pairs[2][2] = {
        { &sx__ivf_flat_index_ops, &sx__gpu_ivf_flat_index_ops },
        { &sx__ivf_pq_index_ops, &sx__gpu_ivf_pq_index_ops },
    };
    sx_param p[2] = { { "nlist", "64" }, { "m", "16" } };
    for (int i = 0; i < 2; i++) {
        sx__build_ctx ctx = { .threads = 2, .seed = 5 };
        sx__index *a = NULL, *b = NULL;
        size_t np = i == 0 ? 1 : 2;
        ASSERT_OK(
            pairs[i][0]->build(p, np, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &a));
        ASSERT_OK(
            pairs[i][1]->build(p, np, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &b));
        sx__wbuf wa, wb;
        sx__wbuf_init(&wa);
        sx__wbuf_init(&wb);
        ASSERT_OK(pairs[i][0]->serialize(a, &wa));
        ASSERT_OK(pairs[i][1]->serialize(b, &wb));
        if (!sx__gpu_available()) {
            /* no GPU: the CPU k-means, so the same record */
            ASSERT_EQ(wa.len, wb.len);
            ASSERT(memcmp(wa.data, wb.data, wa.len) == 0);
        }
        sx__index *c = NULL;
        ASSERT_OK(pairs[i][1]->deserialize(wb.data, wb.len, bigann.v, bigann.n, bigann.dim,
                                           SX_METRIC_L2, &c));
        pairs[i][0]->free(a);
        pairs[i][1]->free(b);
        pairs[i][1]->free(c);
        sx__wbuf_fini(&wa);
        sx__wbuf_fini(&wb);
    }
    sx_param cd[2] = { { "nlist", "64" }, { "cache_dataset_on_device", "true" } };
    ASSERT_OK(sx__gpu_ivf_flat_index_ops.check_build_params(cd, 2));
    ASSERT_STATUS(sx__ivf_flat_index_ops.check_build_params(cd, 2), SX_EINVAL);
    sx_param cdb[1] = { { "cache_dataset_on_device", "yes" } };
    ASSERT_STATUS(sx__gpu_ivf_pq_index_ops.check_build_params(cdb, 1), SX_EINVAL);
    /* brute force: exact */
    const sx__index_ops *bf = &sx__gpu_brute_force_index_ops;
    sx_param it = { "index_type", "GPU_BRUTE_FORCE" };
    ASSERT_OK(bf->check_build_params(&it, 1));
    sx_param bad = { "nlist", "3" };
    ASSERT_STATUS(bf->check_build_params(&bad, 1), SX_EINVAL);
    sx__build_ctx ctx = { .threads = 2 };
    sx__index *x = NULL;
    ASSERT_OK(bf->build(&it, 1, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &ctx, &x));
    size_t good = 0;
    for (size_t q = 0; q < bnq; q++) {
        sx__hit out[K];
        sx__topk t;
        sx__topk_init(&t, out, K);
        ASSERT_OK(bf->search(x, bq + q * bigann.dim, K, NULL, 0, NULL, &t));
        size_t got = sx__topk_sort(&t);
        for (size_t i = 0; i < got; i++)
            for (size_t j = 0; j < K; j++)
                good += (int32_t)out[i].id == bgt[q * bgtk + j];
    }
    ASSERT(good >= bnq * K - 2); /* exact (distance ties aside) */
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(bf->serialize(x, &w));
    sx__index *y = NULL;
    ASSERT_OK(bf->deserialize(w.data, w.len, bigann.v, bigann.n, bigann.dim, SX_METRIC_L2, &y));
    bf->free(y);
    bf->free(x);
    sx__wbuf_fini(&w);
}

/* ---------------------------------------------------------------- engine */

static double engine_recall(sx_collection *c, const int64_t *deleted, size_t ndel)
{
    sx_search_req req = { 0 };
    req.queries = bq;
    req.nq = bnq;
    req.k = K;
    req.metric = -1;
    sx_param sp = { "itopk_size", "64" };
    req.params = &sp;
    req.n_params = 1;
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &req, &rs));
    ASSERT_EQ(rs->nq, bnq);
    const int64_t *ids = rs->cols[0].data;
    size_t off = 0, good = 0;
    for (size_t q = 0; q < bnq; q++) {
        for (size_t i = 0; i < rs->topks[q]; i++) {
            int64_t id = ids[off + i];
            for (size_t d = 0; d < ndel; d++)
                ASSERT(id != deleted[d]);
            for (size_t j = 0; j < K; j++)
                good += id == bgt[q * bgtk + j];
        }
        off += rs->topks[q];
    }
    sx_rowset_free(rs);
    return (double)good / (double)(bnq * K);
}

static void test_engine(void)
{
    need_bigann();
    const char *dir = test_tmpdir("cagra_engine");
    char path[512];
    snprintf(path, sizeof path, "%s", dir);
    sx_db_options opts = { 0 };
    opts.sync_mode = SX_SYNC_NONE;
    opts.build_threads = 2;
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(path, &opts, &db));
    sx_field_def f[2] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                          { .name = "vec", .type = SX_FIELD_FLOAT_VECTOR, .dim = 128 } };
    sx_collection_def def = { .name = "c", .fields = f, .n_fields = 2, .metric = SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    int64_t *ids = malloc(bigann.n * sizeof *ids);
    for (size_t i = 0; i < bigann.n; i++)
        ids[i] = (int64_t)i;
    for (size_t i = 0; i < bigann.n; i += 2500) {
        sx_column cols[2] = { { "id", SX_FIELD_INT64, ids + i },
                              { "vec", SX_FIELD_FLOAT_VECTOR, bigann.v + i * 128 } };
        sx_batch b = { 2500, cols, 2 };
        ASSERT_OK(sx_insert(c, &b, NULL));
    }
    sx_param bad[] = { { "intermediate_graph_degree", "32" }, { "graph_degree", "32" } };
    ASSERT_STATUS(sx_index_create(c, "GPU_CAGRA", bad, 2), SX_EINVAL);
    sx_param p[] = { { "intermediate_graph_degree", "64" },
                     { "graph_degree", "32" },
                     { "build_algo", "IVF_PQ" },
                     { "adapt_for_cpu", "true" } };
    ASSERT_OK(sx_index_create(c, "GPU_CAGRA", p, 4));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 600000));
    sx_index_info info;
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT(strcmp(info.type, "GPU_CAGRA") == 0);
    ASSERT_EQ(info.state, SX_INDEX_FINISHED);
    ASSERT_EQ(info.indexed_rows, bigann.n);
    double r = engine_recall(c, NULL, 0);
    fprintf(stderr, "  engine: GPU_CAGRA recall@10 %.4f (itopk 64), index %llu bytes\n", r,
            (unsigned long long)info.memory_bytes);
    ASSERT(r >= 0.95);
    /* delete the first true neighbour of the first 20 queries */
    int64_t del[20];
    for (size_t q = 0; q < 20; q++)
        del[q] = bgt[q * bgtk];
    sx_keys keys = { 20, del, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    double r2 = engine_recall(c, del, 20);
    ASSERT(r2 >= 0.9);
    sx_collection_release(c);
    sx_db_close(db);
    /* reopen: the index file is deserialized */
    ASSERT_OK(sx_db_open(path, &opts, &db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_FINISHED);
    double r3 = engine_recall(c, del, 20);
    ASSERT(fabs(r3 - r2) < 1e-9);
    sx_collection_release(c);
    sx_db_close(db);
    free(ids);
}

/* ---------------------------------------------------------------- comparison (not a gate) */

static size_t
hnsw_search_cb(const void *ctx, const float *q, size_t k, const char *param, sx__hit *out)
{
    sx_param sp = { "ef", param };
    sx__topk t;
    sx__topk_init(&t, out, k);
    ASSERT_OK(sx__hnsw_index_ops.search(ctx, q, k, &sp, 1, NULL, &t));
    return sx__topk_sort(&t);
}

static void sweep(const char *what,
                  search_fn fn,
                  const void *idx,
                  const vecs *base,
                  const float *queries,
                  size_t nq,
                  const double *kth)
{
    static const char *const vals[] = { "10", "16", "24", "32", "48", "64", "96", "128" };
    bool reached = false;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        double qps = 0, best = 0, r = 0;
        for (int run = 0; run < 3; run++) {
            r = recall_thr(fn, idx, base, queries, nq, kth, SX_METRIC_L2, vals[i], &qps);
            best = qps > best ? qps : best;
        }
        fprintf(stderr, "    %-22s %4s: recall@10 %.4f  %8.0f QPS (1 thread)%s\n", what, vals[i], r,
                best, !reached && r >= 0.95 ? "  <- first >= 0.95" : "");
        reached = reached || r >= 0.95;
    }
}

static void
compare_one(const char *name, const vecs *base, const float *queries, size_t nq, const double *kth)
{
    uint32_t threads = cpus();
    fprintf(stderr, "  %s (%zu x %zu, %u build threads):\n", name, base->n, base->dim, threads);
    sx__build_ctx ctx = { .threads = threads };
    sx_param hp[2] = { { "M", "16" }, { "efConstruction", "200" } };
    /* best of three builds each (the machine may be shared) */
    sx__index *h = NULL;
    double th = INFINITY;
    for (int run = 0; run < 3; run++) {
        if (h)
            sx__hnsw_index_ops.free(h);
        double t0 = now_s();
        ASSERT_OK(
            sx__hnsw_index_ops.build(hp, 2, base->v, base->n, base->dim, SX_METRIC_L2, &ctx, &h));
        th = fmin(th, now_s() - t0);
    }
    const char *algos[2] = { "IVF_PQ", "NN_DESCENT" };
    sx__index *g[2] = { NULL, NULL };
    double tg[2] = { INFINITY, INFINITY };
    for (int a = 0; a < 2; a++) {
        sx_param cp[3] = { { "intermediate_graph_degree", "64" },
                           { "graph_degree", "32" },
                           { "build_algo", algos[a] } };
        for (int run = 0; run < 3; run++) {
            if (g[a])
                ops->free(g[a]);
            double t0 = now_s();
            ASSERT_OK(ops->build(cp, 3, base->v, base->n, base->dim, SX_METRIC_L2, &ctx, &g[a]));
            tg[a] = fmin(tg[a], now_s() - t0);
        }
    }
    fprintf(stderr,
            "    build: HNSW M=16 efC=200 %.3f s; CAGRA 64/32 exact kNN %.3f s (%.2fx faster), "
            "NN-descent %.3f s (%.2fx)\n",
            th, tg[0], th / tg[0], tg[1], th / tg[1]);
    sweep("HNSW ef", hnsw_search_cb, h, base, queries, nq, kth);
    sweep("CAGRA exact itopk", cagra_search_cb, g[0], base, queries, nq, kth);
    sweep("CAGRA NN-descent itopk", cagra_search_cb, g[1], base, queries, nq, kth);
    sx__hnsw_index_ops.free(h);
    ops->free(g[0]);
    ops->free(g[1]);
}

static void test_compare_hnsw(void)
{
    const char *e = getenv("SX_CAGRA_BENCH");
    if (!e || strcmp(e, "1") != 0) {
        fprintf(stderr, "skip: set SX_CAGRA_BENCH=1 for the CAGRA vs HNSW comparison\n");
        return;
    }
    if (load_bigann()) {
        double *kth = kth_all(&bigann, bq, bnq, SX_METRIC_L2);
        compare_one("BIGANN-10k", &bigann, bq, bnq, kth);
        free(kth);
    }
    if (load_fmnist())
        compare_one("Fashion-MNIST 10k/200", &fm, fmq, FM_NQ, fm_kth);
}

int main(void)
{
    RUN(test_params);
    RUN(test_nn_descent_quality);
    RUN(test_prune_merge);
    RUN(test_bigann_recall);
    RUN(test_bigann_nn_descent_recall);
    RUN(test_fmnist_recall);
    RUN(test_ip_cosine);
    RUN(test_roundtrip_determinism);
    RUN(test_corruption);
    RUN(test_unreachable_rejected);
    RUN(test_filters);
    RUN(test_edge_cases);
    RUN(test_cancel_progress_memory);
    RUN(test_gpu_ivf_brute_force);
    RUN(test_engine);
    RUN(test_compare_hnsw);
    if (bidx)
        ops->free(bidx);
    free(bigann.v);
    free(bq);
    free(bgt);
    free(fm.v);
    free(fmq);
    free(fm_kth);
    return TEST_DONE();
}
