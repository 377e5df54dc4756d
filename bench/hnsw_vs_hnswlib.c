/*
 * hnsw_vs_hnswlib.c: side-by-side benchmark of Sextant's HNSW (src/index/hnsw, through the
 * sx__hnsw_index_ops vtable) and hnswlib (bench/peers/hnswlib_shim.cpp, linked directly when the
 * sx_peer_hnswlib target exists; otherwise only Sextant is measured).
 *
 * Data sets (skipped with a message when absent):
 *   BIGANN-10k     $SX_SHARED_DATA/bigann10k/ (or --data DIR): 10,000 base, 100 queries, uint8 x
 * 128 TEXMEX .bvecs (per record: int32 d, then d bytes), exact top-100 in .ivecs. recall@10 =
 * |returned top 10 ∩ true top 10| / 10. Fashion-MNIST
 * /usr/share/datasets/fashion-mnist/{train,t10k}-images-idx3-ubyte.gz (IDX: big-endian magic 0x803,
 * count, rows, cols, then uint8 pixels), 60,000 base x 784, 10,000 queries; ground truth
 * fmnist_groundtruth_l2_k100{,_dist} (.ivecs/.fvecs, Euclidean distances). Distance-threshold
 * recall: a returned point counts if its exact Euclidean distance <= d_10 + 1e-3 (ties in pixel
 * space are common). Protocol: M=16, efConstruction=200, both builds with the same thread count
 * (--threads, default all cores); for ef in 10,20,40,80,120,200: recall@10 and single-thread QPS
 * (one query at a time, best of --reps passes over the query set, each pass at least ~0.2 s).
 * Memory: Sextant's graph (memory_bytes) plus the borrowed vectors vs what hnswlib allocates
 * (vectors inside). The QPS at recall 0.95 is interpolated linearly between the two ef points
 * around it.
 *
 * Usage: hnsw_vs_hnswlib [bigann|fmnist|all] [--threads N] [--reps N] [--data DIR] [--cpu-time]
 * (--cpu-time: QPS from the search thread's CPU time instead of the wall clock, for shared
 * machines; build times stay wall clock.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "index/index.h"
#include "peer.h"
#include "util/alloc.h"
#include "util/heap.h"

#if defined(SX_HAVE_PEER_HNSWLIB)
# define HAVE_PEER 1
#else
# define HAVE_PEER 0
#endif

#define K      10
#define N_EF   6
#define TARGET 0.95

static const int efs[N_EF] = { 10, 20, 40, 80, 120, 200 };

typedef struct dataset {
    const char *name;
    size_t n, nq, dim;
    float *base;    /* n*dim */
    float *queries; /* nq*dim */
    int32_t *gt;    /* nq*gt_k */
    float *gt_dist; /* nq*gt_k Euclidean, or NULL (id-overlap recall) */
    size_t gt_k;
} dataset;

typedef struct curve {
    double recall[N_EF];
    double qps[N_EF];
    double build_s;
    size_t graph_bytes; /* index structure without vectors */
    size_t total_bytes; /* what a search needs resident: graph + vectors */
} curve;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --cpu-time: QPS from this thread's CPU time, so a busy shared machine (descheduling) does not
 * distort the comparison; wall clock otherwise. */
static int use_cpu_clock;

static double query_clock_s(void)
{
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = sx__malloc(n);
    if (!p) {
        (void)fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* ---------------------------------------------------------------- loaders */

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : (1u << 20);
            uint8_t *nb = sx__realloc(buf, cap);
            if (!nb) {
                sx__free(buf);
                (void)fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    (void)fclose(f);
    *len = n;
    return buf;
}

static int32_t le_i32(const uint8_t *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, 4);
    return r;
}

/* TEXMEX .bvecs (elem 1) / .ivecs / .fvecs (elem 4): records of int32 d + d elements. */
static void *read_vecs(const char *path, size_t elem, size_t *n, size_t *d)
{
    size_t len;
    uint8_t *buf = read_file(path, &len);
    if (!buf || len < 4) {
        sx__free(buf);
        return NULL;
    }
    int32_t dd = le_i32(buf);
    size_t rec = 4 + (size_t)dd * elem;
    if (dd <= 0 || len % rec != 0) {
        sx__free(buf);
        return NULL;
    }
    *n = len / rec;
    *d = (size_t)dd;
    void *out = xmalloc(*n * *d * (elem == 1 ? sizeof(float) : 4));
    for (size_t i = 0; i < *n; i++) {
        const uint8_t *r = buf + i * rec + 4;
        if (elem == 1) {
            float *o = (float *)out + i * *d;
            for (size_t j = 0; j < *d; j++)
                o[j] = (float)r[j];
        } else {
            memcpy((uint8_t *)out + i * *d * 4, r, *d * 4);
        }
    }
    sx__free(buf);
    return out;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* IDX images (gzip): returns n*rows*cols floats. */
static float *read_idx(const char *path, size_t *n, size_t *dim)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    uint8_t hdr[16];
    if (gzread(g, hdr, 16) != 16 || be32(hdr) != 0x803) {
        (void)gzclose(g);
        return NULL;
    }
    *n = be32(hdr + 4);
    *dim = (size_t)be32(hdr + 8) * be32(hdr + 12);
    size_t bytes = *n * *dim;
    uint8_t *px = xmalloc(bytes ? bytes : 1);
    size_t got = 0;
    while (got < bytes) {
        size_t chunk = bytes - got > (1u << 30) ? (1u << 30) : bytes - got;
        int r = gzread(g, px + got, (unsigned)chunk);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    (void)gzclose(g);
    if (got != bytes) {
        sx__free(px);
        return NULL;
    }
    float *out = xmalloc(bytes * sizeof(float));
    for (size_t i = 0; i < bytes; i++)
        out[i] = (float)px[i];
    sx__free(px);
    return out;
}

static int load_bigann(const char *dir, dataset *ds)
{
    char p1[1024], p2[1024], p3[1024];
    (void)snprintf(p1, sizeof p1, "%s/bigann10k/bigann10k_base.bvecs", dir);
    (void)snprintf(p2, sizeof p2, "%s/bigann10k/bigann10k_query.bvecs", dir);
    (void)snprintf(p3, sizeof p3, "%s/bigann10k/bigann10k_groundtruth_l2_k100.ivecs", dir);
    size_t d2 = 0, ngt = 0;
    memset(ds, 0, sizeof *ds);
    ds->name = "BIGANN-10k";
    ds->base = read_vecs(p1, 1, &ds->n, &ds->dim);
    ds->queries = read_vecs(p2, 1, &ds->nq, &d2);
    ds->gt = read_vecs(p3, 4, &ngt, &ds->gt_k);
    if (!ds->base || !ds->queries || !ds->gt || d2 != ds->dim || ngt != ds->nq || ds->gt_k < K) {
        (void)fprintf(stderr, "BIGANN-10k: cannot read %s/bigann10k/ (skipped)\n", dir);
        return -1;
    }
    return 0;
}

static int load_fmnist(const char *dir, dataset *ds)
{
    const char *fm = "/usr/share/datasets/fashion-mnist";
    char p1[1024], p2[1024], p3[1024], p4[1024];
    (void)snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", fm);
    (void)snprintf(p2, sizeof p2, "%s/t10k-images-idx3-ubyte.gz", fm);
    (void)snprintf(p3, sizeof p3, "%s/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs", dir);
    (void)snprintf(p4, sizeof p4, "%s/fashion-mnist/fmnist_groundtruth_l2_k100_dist.fvecs", dir);
    size_t d2 = 0, ngt = 0, ngd = 0, kd = 0;
    memset(ds, 0, sizeof *ds);
    ds->name = "Fashion-MNIST";
    ds->base = read_idx(p1, &ds->n, &ds->dim);
    ds->queries = read_idx(p2, &ds->nq, &d2);
    ds->gt = read_vecs(p3, 4, &ngt, &ds->gt_k);
    ds->gt_dist = read_vecs(p4, 4, &ngd, &kd);
    if (!ds->base || !ds->queries || !ds->gt || !ds->gt_dist || d2 != ds->dim || ngt != ds->nq ||
        ngd != ds->nq || kd != ds->gt_k || ds->gt_k < K) {
        (void)fprintf(stderr, "Fashion-MNIST: data files missing (skipped)\n");
        return -1;
    }
    return 0;
}

static void free_dataset(dataset *ds)
{
    sx__free(ds->base);
    sx__free(ds->queries);
    sx__free(ds->gt);
    sx__free(ds->gt_dist);
}

/* ---------------------------------------------------------------- recall */

static double euclid(const float *a, const float *b, size_t dim)
{
    double s = 0;
    for (size_t i = 0; i < dim; i++) {
        double t = (double)a[i] - (double)b[i];
        s += t * t;
    }
    return sqrt(s);
}

/* hits of one query's returned ids[0..m) (m <= K) */
static size_t hits(const dataset *ds, size_t qi, const int64_t *ids, size_t m)
{
    const int32_t *gt = ds->gt + qi * ds->gt_k;
    size_t h = 0;
    if (ds->gt_dist) {
        double thr = (double)ds->gt_dist[qi * ds->gt_k + K - 1] + 1e-3;
        for (size_t i = 0; i < m; i++)
            if (ids[i] >= 0 && (size_t)ids[i] < ds->n &&
                euclid(ds->queries + qi * ds->dim, ds->base + (size_t)ids[i] * ds->dim, ds->dim) <=
                    thr)
                h++;
        return h;
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < K; j++)
            if (ids[i] == gt[j]) {
                h++;
                break;
            }
    return h;
}

/* ---------------------------------------------------------------- runners */

typedef size_t (*search_fn)(void *ctx, const float *q, int64_t *ids);

typedef struct sx_ctx {
    const sx__index *idx;
    sx_param ef;
    char efbuf[16];
} sx_ctx;

static size_t sx_search_one(void *c, const float *q, int64_t *ids)
{
    sx_ctx *s = c;
    sx__hit store[K];
    sx__topk t;
    sx__topk_init(&t, store, K);
    if (sx__hnsw_index_ops.search(s->idx, q, K, &s->ef, 1, NULL, &t) != SX_OK)
        return 0;
    size_t m = sx__topk_sort(&t);
    for (size_t i = 0; i < m; i++)
        ids[i] = store[i].id;
    return m;
}

#if HAVE_PEER
static size_t peer_search_one(void *c, const float *q, int64_t *ids)
{
    float d[K];
    return sx_peer_hnsw_search(c, q, K, ids, d);
}
#endif

/* recall over all queries, then the best QPS of `reps` timed passes */
static void
measure(const dataset *ds, search_fn fn, void *ctx, int reps, double *recall, double *qps)
{
    int64_t ids[K];
    size_t tot = 0;
    for (size_t q = 0; q < ds->nq; q++) {
        size_t m = fn(ctx, ds->queries + q * ds->dim, ids);
        tot += hits(ds, q, ids, m);
    }
    *recall = (double)tot / (double)(ds->nq * K);
    double best = 0;
    for (int r = 0; r < reps; r++) {
        size_t done = 0;
        double t0 = query_clock_s(), el;
        do {
            for (size_t q = 0; q < ds->nq; q++)
                (void)fn(ctx, ds->queries + q * ds->dim, ids);
            done += ds->nq;
            el = query_clock_s() - t0;
        } while (el < 0.2);
        double v = (double)done / el;
        if (v > best)
            best = v;
    }
    *qps = best;
}

/* QPS at recall TARGET by linear interpolation between the bracketing points; < 0 when the
 * curve never reaches it; the first point's QPS (a lower bound) if already above at ef=10. */
static double qps_at_target(const curve *c, int *lower_bound)
{
    *lower_bound = 0;
    if (c->recall[0] >= TARGET) {
        *lower_bound = 1;
        return c->qps[0];
    }
    for (int i = 1; i < N_EF; i++) {
        if (c->recall[i] >= TARGET) {
            double r0 = c->recall[i - 1], r1 = c->recall[i];
            double t = r1 > r0 ? (TARGET - r0) / (r1 - r0) : 1.0;
            return c->qps[i - 1] + t * (c->qps[i] - c->qps[i - 1]);
        }
    }
    return -1;
}

static int run_sextant(const dataset *ds, int threads, int reps, curve *c)
{
    sx_param bp[2] = { { "M", "16" }, { "efConstruction", "200" } };
    sx__build_ctx bctx = { .threads = (uint32_t)threads, .progress = NULL, .cancel = NULL };
    sx__index *idx = NULL;
    double t0 = now_s();
    sx_status st =
        sx__hnsw_index_ops.build(bp, 2, ds->base, ds->n, ds->dim, SX_METRIC_L2, &bctx, &idx);
    c->build_s = now_s() - t0;
    if (st != SX_OK) {
        (void)fprintf(stderr, "sextant build failed: %s %s\n", sx_status_str(st), sx_errmsg());
        return -1;
    }
    c->graph_bytes = sx__hnsw_index_ops.memory_bytes(idx);
    c->total_bytes = c->graph_bytes + ds->n * ds->dim * sizeof(float);
    sx_ctx sc = { .idx = idx };
    for (int e = 0; e < N_EF; e++) {
        (void)snprintf(sc.efbuf, sizeof sc.efbuf, "%d", efs[e]);
        sc.ef.key = "ef";
        sc.ef.value = sc.efbuf;
        measure(ds, sx_search_one, &sc, reps, &c->recall[e], &c->qps[e]);
    }
    sx__hnsw_index_ops.free(idx);
    return 0;
}

#if HAVE_PEER
static int run_hnswlib(const dataset *ds, int threads, int reps, curve *c)
{
    void *h = sx_peer_hnsw_new((int)ds->dim, 0, ds->n, 16, 200);
    if (!h)
        return -1;
    double t0 = now_s();
    int rc = sx_peer_hnsw_add(h, ds->base, ds->n, threads);
    c->build_s = now_s() - t0;
    if (rc != 0) {
        sx_peer_hnsw_free(h);
        return -1;
    }
    c->total_bytes = sx_peer_hnsw_memory(h);
    c->graph_bytes = c->total_bytes - ds->n * ds->dim * sizeof(float);
    for (int e = 0; e < N_EF; e++) {
        sx_peer_hnsw_set_ef(h, efs[e]);
        measure(ds, peer_search_one, h, reps, &c->recall[e], &c->qps[e]);
    }
    sx_peer_hnsw_free(h);
    return 0;
}
#endif

static void report(const dataset *ds, int threads, const curve *s, const curve *p, int have_p)
{
    printf("\n== %s: n=%zu dim=%zu queries=%zu, M=16 efConstruction=200, build threads=%d\n",
           ds->name, ds->n, ds->dim, ds->nq, threads);
    printf("%5s | %10s %10s | %10s %10s | %8s\n", "ef", "sx recall", "sx QPS", "hl recall",
           "hl QPS", "QPS x");
    for (int e = 0; e < N_EF; e++) {
        if (have_p)
            printf("%5d | %10.4f %10.0f | %10.4f %10.0f | %8.2f\n", efs[e], s->recall[e], s->qps[e],
                   p->recall[e], p->qps[e], s->qps[e] / p->qps[e]);
        else
            printf("%5d | %10.4f %10.0f | %10s %10s | %8s\n", efs[e], s->recall[e], s->qps[e], "-",
                   "-", "-");
    }
    int lb_s, lb_p = 0;
    double qs = qps_at_target(s, &lb_s), qp = have_p ? qps_at_target(p, &lb_p) : -1;
    printf("QPS at recall@10 = %.2f: sextant %s%.0f", TARGET, lb_s ? ">=" : "", qs);
    if (have_p) {
        printf(", hnswlib %s%.0f", lb_p ? ">=" : "", qp);
        if (qs > 0 && qp > 0)
            printf(", ratio %.2fx", qs / qp);
    }
    printf("\n");
    printf("build time: sextant %.2f s", s->build_s);
    if (have_p)
        printf(", hnswlib %.2f s, ratio %.2fx", p->build_s, s->build_s / p->build_s);
    printf("\n");
    printf("memory/vector: sextant graph %.1f B + vectors %.1f B = %.1f B",
           (double)s->graph_bytes / (double)ds->n,
           (double)(s->total_bytes - s->graph_bytes) / (double)ds->n,
           (double)s->total_bytes / (double)ds->n);
    if (have_p)
        printf("; hnswlib %.1f B (of which links+label %.1f B)",
               (double)p->total_bytes / (double)ds->n, (double)p->graph_bytes / (double)ds->n);
    printf("\n");
    (void)fflush(stdout);
}

static void run(const dataset *ds, int threads, int reps)
{
    curve s, p;
    memset(&s, 0, sizeof s);
    memset(&p, 0, sizeof p);
    int have_p = 0;
    if (run_sextant(ds, threads, reps, &s) != 0)
        return;
#if HAVE_PEER
    have_p = run_hnswlib(ds, threads, reps, &p) == 0;
#endif
    report(ds, threads, &s, &p, have_p);
}

int main(int argc, char **argv)
{
    const char *which = "all";
    const char *dir = getenv("SX_SHARED_DATA");
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--cpu-time") == 0)
            use_cpu_clock = 1;
        else if (argv[i][0] != '-')
            which = argv[i];
        else {
            (void)fprintf(stderr,
                          "usage: %s [bigann|fmnist|all] [--threads N] [--reps N] "
                          "[--data DIR] [--cpu-time]\n",
                          argv[0]);
            return 2;
        }
    }
    if (!dir)
        dir = "../shared/data";
    if (threads < 1)
        threads = 1;
    if (reps < 1)
        reps = 1;
    if (!HAVE_PEER)
        printf("hnswlib peer not linked: measuring Sextant only\n");
    dataset ds;
    if (strcmp(which, "all") == 0 || strcmp(which, "bigann") == 0) {
        if (load_bigann(dir, &ds) == 0)
            run(&ds, (int)threads, reps);
        free_dataset(&ds);
    }
    if (strcmp(which, "all") == 0 || strcmp(which, "fmnist") == 0) {
        if (load_fmnist(dir, &ds) == 0)
            run(&ds, (int)threads, reps);
        free_dataset(&ds);
    }
    return 0;
}
