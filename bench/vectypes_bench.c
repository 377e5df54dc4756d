/*
 * vectypes_bench.c: float16 / bfloat16 / binary vectors (docs/internals/VECTYPES.md) against
 * float32 and against FAISS (the peer shim, linked directly when the sx_peer_faiss target
 * exists), in one run: what halving the bytes per value costs in recall and buys in speed, and
 * how the binary indexes compare.
 *
 * Data (generated, seeded): n rows and nq queries of dim float32 values around 1,000 Gaussian
 * centres (x = c + 0.35 g, c and g standard normal), the shape of embedding data; the 16-bit rows
 * are the float32 rows rounded to the type (util/half.h: to nearest even); the binary rows are
 * their signs (binary quantization, dim bits). Ground truth: the exact float32 top-10 (FLAT over
 * the float32 rows), and for binary the exact Hamming top-10 (BIN_FLAT, checked against a count
 * here). Recall@10 by distance threshold (benchmarks.md 1): a returned row counts when its exact
 * distance (float32 rows; Hamming) is at most the true 10th's (+1e-4 relative).
 *
 * Sections, each index through its vtable (src/index), searched one query per call from one
 * thread (pin with taskset: bench/vectypes_bench.sh), QPS = best of --reps passes:
 *   1. FLAT over float32, float16 and bfloat16 rows: QPS and recall (the 16-bit rows read at
 *      half the bytes by the widening kernels);
 *   2. HNSW (M 16, efConstruction 200, --threads build threads) over the three, and FAISS
 *      IndexHNSWFlat (float32) and IndexHNSWSQ QT_fp16 (its float16 HNSW): build time, recall
 *      and QPS per ef, vector + graph bytes;
 *   3. binary: BIN_FLAT vs FAISS IndexBinaryFlat; BIN_IVF_FLAT (nlist 256) vs FAISS
 *      IndexBinaryIVF (nlist 256) per nprobe: recall, QPS, build time.
 * Prints tables, then one JSON object. Not a test: nothing is asserted.
 *
 * usage: vectypes_bench [--n N] [--nq N] [--dim D] [--threads T] [--reps R] [--seed S]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/flat/flat.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/half.h"
#include "util/heap.h"
#include "vector/dist.h"

#if defined(SX_HAVE_PEER_FAISS)
# include "peer.h"
# define HAVE_PEER 1
#else
# define HAVE_PEER 0
#endif

#define K 10

static size_t n = 100000, nq = 1000, dim = 128;
static int threads = 2, reps = 3;
static uint64_t seed = 42;

static float *xf, *qf;       /* float32 rows, queries */
static uint16_t *xh, *xb;    /* float16, bfloat16 rows */
static uint8_t *xbin, *qbin; /* sign bits */
static int64_t *gt;          /* nq x K float32 ground truth */
static float *gt10;          /* the true 10th distance per query (squared L2) */
static int64_t *gtb;         /* binary ground truth */
static float *gtb10;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static double gauss(void)
{
    double u = ((double)(rnd() >> 11) + 0.5) * 0x1p-53, v = ((double)(rnd() >> 11) + 0.5) * 0x1p-53;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void *xmalloc(size_t bytes)
{
    void *p = sx__malloc_aligned(bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static void make_data(void)
{
    rng_state = seed | 1;

    enum { NC = 1000 };

    float *cen = xmalloc((size_t)NC * dim * sizeof *cen);
    for (size_t i = 0; i < NC * dim; i++)
        cen[i] = (float)gauss();
    xf = xmalloc(n * dim * sizeof *xf);
    qf = xmalloc(nq * dim * sizeof *qf);
    for (size_t i = 0; i < n + nq; i++) {
        const float *c = cen + (rnd() % NC) * dim;
        float *row = i < n ? xf + i * dim : qf + (i - n) * dim;
        for (size_t d = 0; d < dim; d++)
            row[d] = c[d] + 0.35f * (float)gauss();
    }
    sx__free_aligned(cen);
    xh = xmalloc(n * dim * 2);
    xb = xmalloc(n * dim * 2);
    for (size_t i = 0; i < n * dim; i++) {
        xh[i] = sx__f32_to_f16(xf[i]);
        xb[i] = sx__f32_to_bf16(xf[i]);
    }
    size_t nb = dim / 8;
    xbin = xmalloc(n * nb);
    qbin = xmalloc(nq * nb);
    memset(xbin, 0, n * nb);
    memset(qbin, 0, nq * nb);
    for (size_t i = 0; i < n + nq; i++) {
        const float *row = i < n ? xf + i * dim : qf + (i - n) * dim;
        uint8_t *out = i < n ? xbin + i * nb : qbin + (i - n) * nb;
        for (size_t d = 0; d < dim; d++)
            if (row[d] > 0)
                out[d / 8] |= (uint8_t)(0x80u >> (d % 8));
    }
}

/* Exact top-K of every query over rows of type vt (FLAT in batches of 256 queries). */
static void
exact(sx__vtype vt, const void *rows, const void *queries, sx_metric m, int64_t *ids, float *tenth)
{
    size_t qb = vt == SX__VT_BIN ? dim / 8 : dim * sizeof(float);
    sx__hit *store = malloc(256 * K * sizeof *store);
    sx__topk heaps[256];
    for (size_t q0 = 0; q0 < nq; q0 += 256) {
        size_t m2 = nq - q0 < 256 ? nq - q0 : 256;
        for (size_t j = 0; j < m2; j++)
            sx__topk_init(&heaps[j], store + j * K, K);
        if (sx__flat_scan_typed(rows, vt, n, dim, m, 0, NULL, (const char *)queries + q0 * qb, m2,
                                heaps) != SX_OK) {
            fprintf(stderr, "ground truth: %s\n", sx_errmsg());
            exit(1);
        }
        for (size_t j = 0; j < m2; j++) {
            sx__topk_sort(&heaps[j]);
            for (size_t h = 0; h < K; h++)
                ids[(q0 + j) * K + h] = heaps[j].h[h].id;
            tenth[q0 + j] = heaps[j].h[K - 1].dist;
        }
    }
    free(store);
}

/* Exact distance of row id to query q: squared L2 over the float32 rows, or Hamming. */
static double dist_of(bool bin, size_t q, int64_t id)
{
    if (bin) {
        size_t nb = dim / 8;
        unsigned c = 0;
        for (size_t i = 0; i < nb; i++)
            c += (unsigned)__builtin_popcount(
                (unsigned)(qbin[q * nb + i] ^ xbin[(size_t)id * nb + i]));
        return c;
    }
    double s = 0;
    for (size_t d = 0; d < dim; d++) {
        double t = (double)qf[q * dim + d] - (double)xf[(size_t)id * dim + d];
        s += t * t;
    }
    return s;
}

static double recall(bool bin, const int64_t *ids, const size_t *got)
{
    size_t hit = 0;
    for (size_t q = 0; q < nq; q++) {
        double lim = (double)(bin ? gtb10[q] : gt10[q]);
        lim += 1e-4 * (1 + fabs(lim));
        for (size_t h = 0; h < got[q]; h++)
            hit += dist_of(bin, q, ids[q * K + h]) <= lim;
    }
    return (double)hit / (double)(nq * K);
}

/* ---------------------------------------------------------------- one searcher */

typedef size_t (*search_fn)(void *ctx, size_t q, int64_t *ids);

/* Best of reps passes over the queries: QPS; ids of the last pass. */
static double run_qps(search_fn fn, void *ctx, int64_t *ids, size_t *got)
{
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (size_t q = 0; q < nq; q++)
            got[q] = fn(ctx, q, ids + q * K);
        double qps = (double)nq / (now_s() - t0);
        best = qps > best ? qps : best;
    }
    return best;
}

typedef struct sx_ctx {
    const sx__index_ops *ops;
    sx__index *idx;
    sx__vtype vt;
    sx_param p[1];
    size_t np;
} sx_ctx;

static size_t sx_search_one(void *c, size_t q, int64_t *ids)
{
    sx_ctx *x = c;
    sx__hit hits[K];
    sx__topk t;
    sx__topk_init(&t, hits, K);
    const void *qv =
        x->vt == SX__VT_BIN ? (const void *)(qbin + q * (dim / 8)) : (const void *)(qf + q * dim);
    sx_status st = x->vt == SX__VT_F32 ? x->ops->search(x->idx, qv, K, x->p, x->np, NULL, &t)
                                       : x->ops->search_typed(x->idx, qv, K, x->p, x->np, NULL, &t);
    if (st != SX_OK)
        return 0;
    sx__topk_sort(&t);
    for (size_t h = 0; h < t.n; h++)
        ids[h] = t.h[h].id;
    return t.n;
}

static sx__index *build(const char *type,
                        sx__vtype vt,
                        const void *rows,
                        sx_metric m,
                        const sx_param *p,
                        size_t np,
                        double *secs)
{
    const sx__index_ops *ops = sx__index_lookup(type);
    sx__build_ctx ctx = { .threads = (uint32_t)threads };
    sx__index *idx = NULL;
    double t0 = now_s();
    sx_status st = vt == SX__VT_F32 ? ops->build(p, np, rows, n, dim, m, &ctx, &idx)
                                    : ops->build_typed(p, np, rows, vt, n, dim, m, &ctx, &idx);
    *secs = now_s() - t0;
    if (st != SX_OK) {
        fprintf(stderr, "build %s: %s\n", type, sx_errmsg());
        exit(1);
    }
    return idx;
}

#if HAVE_PEER
typedef struct peer_ctx {
    void *h;
    bool bin;
} peer_ctx;

static size_t peer_search_one(void *c, size_t q, int64_t *ids)
{
    peer_ctx *x = c;
    if (x->bin) {
        int32_t d[K];
        return sx_peer_faiss_bin_search(x->h, qbin + q * (dim / 8), K, ids, d);
    }
    return sx_peer_faiss_search(x->h, qf + q * dim, K, ids, NULL);
}
#endif

static int64_t *ids;
static size_t *got;

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--nq"))
            nq = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dim"))
            dim = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: %s [--n N] [--nq N] [--dim D] [--threads T] [--reps R] "
                    "[--seed S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (dim % 8 || n < K || nq == 0) {
        fprintf(stderr, "dim must be a multiple of 8, n >= %d, nq >= 1\n", K);
        return 2;
    }
    printf("vectypes_bench: n %zu, nq %zu, dim %zu (binary: %zu bits), build threads %d, search "
           "1 thread, ISA %s, FAISS peer %s\n",
           n, nq, dim, dim, threads, sx__dist()->isa, HAVE_PEER ? "yes" : "no");
    make_data();
    ids = malloc(nq * K * sizeof *ids);
    got = malloc(nq * sizeof *got);
    gt = malloc(nq * K * sizeof *gt);
    gt10 = malloc(nq * sizeof *gt10);
    gtb = malloc(nq * K * sizeof *gtb);
    gtb10 = malloc(nq * sizeof *gtb10);
    exact(SX__VT_F32, xf, qf, SX_METRIC_L2, gt, gt10);
    exact(SX__VT_BIN, xbin, qbin, SX_METRIC_HAMMING, gtb, gtb10);
    for (size_t q = 0; q < nq; q++) /* the binary ground truth against a count here */
        if (dist_of(true, q, gtb[q * K + K - 1]) != (double)gtb10[q]) {
            fprintf(stderr, "binary ground truth disagrees with a direct count\n");
            return 1;
        }

    const char *vnames[3] = { "float32", "float16", "bfloat16" };
    const sx__vtype vts[3] = { SX__VT_F32, SX__VT_F16, SX__VT_BF16 };
    const void *vrows[3] = { xf, xh, xb };
    double flat_qps[3], flat_rec[3];
    printf("\n1. FLAT, one query per call\n%-9s %12s %10s %10s %9s\n", "rows", "row bytes", "QPS",
           "vs f32", "recall@10");
    for (int v = 0; v < 3; v++) {
        double secs;
        sx_ctx c = { sx__index_lookup("FLAT"),
                     build("FLAT", vts[v], vrows[v], SX_METRIC_L2, NULL, 0, &secs),
                     vts[v],
                     { { NULL, NULL } },
                     0 };
        flat_qps[v] = run_qps(sx_search_one, &c, ids, got);
        flat_rec[v] = recall(false, ids, got);
        printf("%-9s %12zu %10.1f %9.2fx %9.4f\n", vnames[v], sx__vtype_row_bytes(vts[v], dim),
               flat_qps[v], flat_qps[v] / flat_qps[0], flat_rec[v]);
        c.ops->free(c.idx);
    }

    static const char *efs[] = { "16", "32", "64", "128" };

    enum { NE = 4 };

    double hq[5][NE], hr[5][NE], hb[5];
    size_t hmem[5];
    const char *hn[5] = { "float32", "float16", "bfloat16", "FAISS HNSWFlat", "FAISS HNSWSQ fp16" };
    int nh = 3;
    sx_param hp[2] = { { "M", "16" }, { "efConstruction", "200" } };
    for (int v = 0; v < 3; v++) {
        sx_ctx c = { sx__index_lookup("HNSW"),
                     build("HNSW", vts[v], vrows[v], SX_METRIC_L2, hp, 2, &hb[v]),
                     vts[v],
                     { { "ef", NULL } },
                     1 };
        hmem[v] = c.ops->memory_bytes(c.idx) + n * sx__vtype_row_bytes(vts[v], dim);
        for (int e = 0; e < NE; e++) {
            c.p[0].value = efs[e];
            hq[v][e] = run_qps(sx_search_one, &c, ids, got);
            hr[v][e] = recall(false, ids, got);
        }
        c.ops->free(c.idx);
    }
#if HAVE_PEER
    for (int kind = 0; kind < 2; kind++) {
        sx_peer_faiss_params fp = { .kind =
                                        kind ? SX_PEER_FAISS_HNSW_FP16 : SX_PEER_FAISS_HNSW_FLAT,
                                    .dim = (int)dim,
                                    .metric = 0,
                                    .M = 16,
                                    .ef_construction = 200,
                                    .threads = threads };
        char err[256] = "";
        void *h = sx_peer_faiss_new(&fp, err, sizeof err);
        double t0 = now_s();
        if (!h || sx_peer_faiss_build(h, xf, n, err, sizeof err) != 0) {
            fprintf(stderr, "faiss: %s\n", err);
            return 1;
        }
        hb[3 + kind] = now_s() - t0;
        hmem[3 + kind] = sx_peer_faiss_memory(h);
        peer_ctx pc = { h, false };
        for (int e = 0; e < NE; e++) {
            (void)sx_peer_faiss_set(h, "efSearch", atof(efs[e]));
            hq[3 + kind][e] = run_qps(peer_search_one, &pc, ids, got);
            hr[3 + kind][e] = recall(false, ids, got);
        }
        sx_peer_faiss_free(h);
        nh++;
    }
#endif
    printf("\n2. HNSW M=16 efConstruction=200 (build: %d threads)\n%-18s %8s %12s", threads,
           "index", "build s", "vec+graph MB");
    for (int e = 0; e < NE; e++)
        printf("  ef=%-3s rec / QPS   ", efs[e]);
    printf("\n");
    for (int v = 0; v < nh; v++) {
        printf("%-18s %8.2f %12.1f", hn[v], hb[v], (double)hmem[v] / 1048576.0);
        for (int e = 0; e < NE; e++)
            printf("  %.4f / %8.1f", hr[v][e], hq[v][e]);
        printf("\n");
    }

    /* 3. binary */
    double bq[2], br[2], bb[2];
    size_t bmem[2];
    int nbp = 0;
    {
        double secs;
        sx_ctx c = { sx__index_lookup("BIN_FLAT"),
                     build("BIN_FLAT", SX__VT_BIN, xbin, SX_METRIC_HAMMING, NULL, 0, &secs),
                     SX__VT_BIN,
                     { { NULL, NULL } },
                     0 };
        bq[0] = run_qps(sx_search_one, &c, ids, got);
        br[0] = recall(true, ids, got);
        bb[0] = secs;
        bmem[0] = n * (dim / 8);
        c.ops->free(c.idx);
    }
#if HAVE_PEER
    {
        char err[256] = "";
        void *h = sx_peer_faiss_bin_new((int)dim, 0, threads, err, sizeof err);
        double t0 = now_s();
        if (!h || sx_peer_faiss_bin_build(h, xbin, n, err, sizeof err) != 0) {
            fprintf(stderr, "faiss: %s\n", err);
            return 1;
        }
        bb[1] = now_s() - t0;
        bmem[1] = sx_peer_faiss_bin_memory(h);
        peer_ctx pc = { h, true };
        bq[1] = run_qps(peer_search_one, &pc, ids, got);
        br[1] = recall(true, ids, got);
        sx_peer_faiss_bin_free(h);
        nbp = 1;
    }
#endif
    printf("\n3. binary (%zu bits, HAMMING)\n%-22s %8s %8s %10s %9s %9s\n", dim, "index", "build s",
           "MB", "QPS", "recall@10", "vs peer");
    printf("%-22s %8.3f %8.1f %10.1f %9.4f %8.2fx\n", "BIN_FLAT", bb[0],
           (double)bmem[0] / 1048576.0, bq[0], br[0], nbp ? bq[0] / bq[1] : 0.0);
    if (nbp)
        printf("%-22s %8.3f %8.1f %10.1f %9.4f\n", "FAISS IndexBinaryFlat", bb[1],
               (double)bmem[1] / 1048576.0, bq[1], br[1]);

    static const char *nps[] = { "4", "16", "64" };

    enum { NP = 3 };

    double iq[2][NP], ir[2][NP], ib[2];
    size_t imem[2];
    sx_param ip[1] = { { "nlist", "256" } };
    {
        sx_ctx c = { sx__index_lookup("BIN_IVF_FLAT"),
                     build("BIN_IVF_FLAT", SX__VT_BIN, xbin, SX_METRIC_HAMMING, ip, 1, &ib[0]),
                     SX__VT_BIN,
                     { { "nprobe", NULL } },
                     1 };
        imem[0] = c.ops->memory_bytes(c.idx);
        for (int p = 0; p < NP; p++) {
            c.p[0].value = nps[p];
            iq[0][p] = run_qps(sx_search_one, &c, ids, got);
            ir[0][p] = recall(true, ids, got);
        }
        c.ops->free(c.idx);
    }
#if HAVE_PEER
    {
        char err[256] = "";
        void *h = sx_peer_faiss_bin_new((int)dim, 256, threads, err, sizeof err);
        double t0 = now_s();
        if (!h || sx_peer_faiss_bin_build(h, xbin, n, err, sizeof err) != 0) {
            fprintf(stderr, "faiss: %s\n", err);
            return 1;
        }
        ib[1] = now_s() - t0;
        imem[1] = sx_peer_faiss_bin_memory(h);
        peer_ctx pc = { h, true };
        for (int p = 0; p < NP; p++) {
            sx_peer_faiss_bin_set_nprobe(h, atoi(nps[p]));
            iq[1][p] = run_qps(peer_search_one, &pc, ids, got);
            ir[1][p] = recall(true, ids, got);
        }
        sx_peer_faiss_bin_free(h);
    }
#endif
    printf("\n%-22s %8s %8s", "index (nlist 256)", "build s", "MB");
    for (int p = 0; p < NP; p++)
        printf("  nprobe=%-3s rec / QPS  ", nps[p]);
    printf("\n");
    for (int v = 0; v <= nbp; v++) {
        printf("%-22s %8.3f %8.1f", v ? "FAISS IndexBinaryIVF" : "BIN_IVF_FLAT", ib[v],
               (double)imem[v] / 1048576.0);
        for (int p = 0; p < NP; p++)
            printf("  %.4f / %9.1f", ir[v][p], iq[v][p]);
        printf("\n");
    }

    /* JSON */
    printf("\n{\"n\":%zu,\"nq\":%zu,\"dim\":%zu,\"threads\":%d,\"isa\":\"%s\",\"flat\":{", n, nq,
           dim, threads, sx__dist()->isa);
    for (int v = 0; v < 3; v++)
        printf("%s\"%s\":{\"qps\":%.1f,\"recall\":%.4f}", v ? "," : "", vnames[v], flat_qps[v],
               flat_rec[v]);
    printf("},\"hnsw\":{");
    for (int v = 0; v < nh; v++) {
        printf("%s\"%s\":{\"build_s\":%.3f,\"bytes\":%zu,\"ef\":[", v ? "," : "", hn[v], hb[v],
               hmem[v]);
        for (int e = 0; e < NE; e++)
            printf("%s{\"ef\":%s,\"recall\":%.4f,\"qps\":%.1f}", e ? "," : "", efs[e], hr[v][e],
                   hq[v][e]);
        printf("]}");
    }
    printf("},\"bin_flat\":{\"qps\":%.1f,\"recall\":%.4f%s", bq[0], br[0], nbp ? "" : "}");
    if (nbp)
        printf(",\"faiss_qps\":%.1f}", bq[1]);
    printf(",\"bin_ivf_flat\":[");
    for (int p = 0; p < NP; p++) {
        printf("%s{\"nprobe\":%s,\"recall\":%.4f,\"qps\":%.1f", p ? "," : "", nps[p], ir[0][p],
               iq[0][p]);
        if (nbp)
            printf(",\"faiss_recall\":%.4f,\"faiss_qps\":%.1f", ir[1][p], iq[1][p]);
        printf("}");
    }
    printf("]}\n");
    return 0;
}
