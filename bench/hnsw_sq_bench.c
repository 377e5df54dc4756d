/*
 * hnsw_sq_bench.c: HNSW_SQ (src/index/hnsw_sq, through its vtable) against hnswlib (the peer shim,
 * linked directly when the sx_peer_hnswlib target exists) and, optionally, Sextant's HNSW, on
 * BIGANN-10k and Fashion-MNIST: recall@10 and single-thread QPS per ef (and per refine_k), build
 * time, memory. The figures behind the HNSW_SQ row of the README and the defaults documented in
 * src/index/hnsw_sq.
 *
 * Protocol (as bench/hnsw_vs_hnswlib.c): M=16, efConstruction=200 for every index, builds with
 * --threads threads (timed, wall clock); search one query per call from one thread, QPS = best of
 * --reps passes over the queries (each pass >= 0.2 s); with --cpu-time QPS uses the thread's CPU
 * time (a shared machine then does not distort ratios). Recall@10 by distance threshold
 * (benchmarks.md §1): a returned row counts when its exact Euclidean distance is <= the true
 * 10th + 1e-3 (Fashion-MNIST: shipped _dist.fvecs; BIGANN-10k: the distance of GT rank 10
 * recomputed). "QPS at recall 0.95" is interpolated linearly between the two ef around it (a
 * lower bound, marked >=, when the smallest ef already reaches it).
 * Memory: HNSW_SQ's memory_bytes (graph + codes + quantizer; the float vectors are the segment's,
 * borrowed, and listed separately) vs hnswlib's allocation (vectors inside).
 *
 * Usage: hnsw_sq_bench [bigann|fmnist|all] [--threads N] [--reps N] [--data DIR] [--cpu-time]
 *                      [--ef 10,20,...] [--refine_k default,1,2,...] [--nq N] [--hnsw] [--no-peer]
 * (--refine_k: one HNSW_SQ curve per value; "default" sends no refine_k.)
 * Not a test: nothing is asserted.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/heap.h"

#if defined(SX_HAVE_PEER_HNSWLIB)
# include "peer.h"
# define HAVE_PEER 1
#else
# define HAVE_PEER 0
#endif

#define K      10
#define MAX_EF 32
#define MAX_RK 8
#define TARGET 0.95

typedef struct dataset {
    const char *name;
    size_t n, nq, dim;
    float *base, *queries;
    int32_t *gt;
    float *gt_dist; /* nq Euclidean 10th distances */
    size_t gt_k;
} dataset;

typedef struct curve {
    char label[64];
    int nef;
    double recall[MAX_EF], qps[MAX_EF];
    double build_s;
    size_t index_bytes; /* what the index allocates beyond the borrowed vectors */
    size_t vec_bytes;   /* borrowed vectors (0 for hnswlib: inside index_bytes) */
} curve;

/* While index.h declares the family's vtable weak, a reference to it does not pull the object
 * out of libsextant.a; this strong reference to a function of the same object does (harmless
 * once the declaration is strong). */
void (*volatile sx_bench_keep_hnsw_sq)(sx__index *) = sx__hnsw_sq_free;

static int efs[MAX_EF], n_ef;
static const char *rks[MAX_RK];
static int n_rk;
static int use_cpu_clock;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double query_clock_s(void)
{
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = sx__malloc(n ? n : 1);
    if (!p) {
        (void)fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* ---------------------------------------------------------------- loaders */

static uint8_t *slurp(const char *path, size_t *len)
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

/* TEXMEX .bvecs (elem 1, to floats) / .ivecs / .fvecs (elem 4, raw) */
static void *read_vecs(const char *path, size_t elem, size_t *n, size_t *d)
{
    size_t len;
    uint8_t *buf = slurp(path, &len);
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
    void *out = xmalloc(*n * *d * 4);
    for (size_t i = 0; i < *n; i++) {
        const uint8_t *r = buf + i * rec + 4;
        if (elem == 1)
            for (size_t j = 0; j < *d; j++)
                ((float *)out)[i * *d + j] = (float)r[j];
        else
            memcpy((uint8_t *)out + i * *d * 4, r, *d * 4);
    }
    sx__free(buf);
    return out;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

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
    size_t bytes = *n * *dim, got = 0;
    uint8_t *px = xmalloc(bytes);
    while (got < bytes) {
        int r =
            gzread(g, px + got, (unsigned)(bytes - got > (1u << 30) ? (1u << 30) : bytes - got));
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

static double euclid(const float *a, const float *b, size_t dim)
{
    double s = 0;
    for (size_t i = 0; i < dim; i++) {
        double t = (double)a[i] - (double)b[i];
        s += t * t;
    }
    return sqrt(s);
}

static int load_bigann(const char *dir, dataset *ds)
{
    char p1[1024], p2[1024], p3[1024];
    (void)snprintf(p1, sizeof p1, "%s/bigann10k/bigann10k_base.bvecs", dir);
    (void)snprintf(p2, sizeof p2, "%s/bigann10k/bigann10k_query.bvecs", dir);
    (void)snprintf(p3, sizeof p3, "%s/bigann10k/bigann10k_groundtruth_l2_k100.ivecs", dir);
    size_t d2 = 0, ngt = 0;
    ds->name = "BIGANN-10k";
    ds->base = read_vecs(p1, 1, &ds->n, &ds->dim);
    ds->queries = read_vecs(p2, 1, &ds->nq, &d2);
    ds->gt = read_vecs(p3, 4, &ngt, &ds->gt_k);
    if (!ds->base || !ds->queries || !ds->gt || d2 != ds->dim || ngt != ds->nq || ds->gt_k < K)
        return -1;
    ds->gt_dist = xmalloc(ds->nq * sizeof(float));
    for (size_t q = 0; q < ds->nq; q++)
        ds->gt_dist[q] =
            (float)euclid(ds->queries + q * ds->dim,
                          ds->base + (size_t)ds->gt[q * ds->gt_k + K - 1] * ds->dim, ds->dim);
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
    ds->name = "Fashion-MNIST";
    ds->base = read_idx(p1, &ds->n, &ds->dim);
    ds->queries = read_idx(p2, &ds->nq, &d2);
    ds->gt = read_vecs(p3, 4, &ngt, &ds->gt_k);
    float *gd = read_vecs(p4, 4, &ngd, &kd);
    if (!ds->base || !ds->queries || !ds->gt || !gd || d2 != ds->dim || ngt != ds->nq ||
        ngd != ds->nq || kd != ds->gt_k || ds->gt_k < K) {
        sx__free(gd);
        return -1;
    }
    ds->gt_dist = xmalloc(ds->nq * sizeof(float));
    for (size_t q = 0; q < ds->nq; q++)
        ds->gt_dist[q] = gd[q * kd + K - 1];
    sx__free(gd);
    return 0;
}

static void free_dataset(dataset *ds)
{
    sx__free(ds->base);
    sx__free(ds->queries);
    sx__free(ds->gt);
    sx__free(ds->gt_dist);
    memset(ds, 0, sizeof *ds);
}

/* ---------------------------------------------------------------- measuring */

typedef size_t (*search_fn)(void *ctx, const float *q, int64_t *ids);

static size_t hits(const dataset *ds, size_t qi, const int64_t *ids, size_t m)
{
    double thr = (double)ds->gt_dist[qi] + 1e-3;
    size_t h = 0;
    for (size_t i = 0; i < m; i++)
        if (ids[i] >= 0 && (size_t)ids[i] < ds->n &&
            euclid(ds->queries + qi * ds->dim, ds->base + (size_t)ids[i] * ds->dim, ds->dim) <= thr)
            h++;
    return h;
}

static void
measure(const dataset *ds, search_fn fn, void *ctx, int reps, double *recall, double *qps)
{
    int64_t ids[K];
    size_t tot = 0;
    for (size_t q = 0; q < ds->nq; q++)
        tot += hits(ds, q, ids, fn(ctx, ds->queries + q * ds->dim, ids));
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
        best = v > best ? v : best;
    }
    *qps = best;
}

static double qps_at_target(const curve *c, int *lower_bound)
{
    *lower_bound = 0;
    if (c->nef > 0 && c->recall[0] >= TARGET) {
        *lower_bound = 1;
        return c->qps[0];
    }
    for (int i = 1; i < c->nef; i++) {
        if (c->recall[i] >= TARGET) {
            double r0 = c->recall[i - 1], r1 = c->recall[i];
            double t = r1 > r0 ? (TARGET - r0) / (r1 - r0) : 1.0;
            return c->qps[i - 1] + t * (c->qps[i] - c->qps[i - 1]);
        }
    }
    return -1;
}

typedef struct sx_ctx {
    const sx__index_ops *ops;
    const sx__index *idx;
    sx_param sp[2];
    size_t nsp;
} sx_ctx;

static size_t sx_search_one(void *c, const float *q, int64_t *ids)
{
    sx_ctx *s = c;
    sx__hit store[K];
    sx__topk t;
    sx__topk_init(&t, store, K);
    if (s->ops->search(s->idx, q, K, s->sp, s->nsp, NULL, &t) != SX_OK)
        return 0;
    size_t m = sx__topk_sort(&t);
    for (size_t i = 0; i < m; i++)
        ids[i] = store[i].id;
    return m;
}

/* Builds with ops and sweeps ef for each refine_k (HNSW_SQ) or once (HNSW). */
static int run_sextant(
    const dataset *ds, const sx__index_ops *ops, int threads, int reps, curve *cs, int *ncurves)
{
    sx_param bp[2] = { { "M", "16" }, { "efConstruction", "200" } };
    sx__build_ctx bctx = { .threads = (uint32_t)threads };
    sx__index *idx = NULL;
    double t0 = now_s();
    sx_status st = ops->build(bp, 2, ds->base, ds->n, ds->dim, SX_METRIC_L2, &bctx, &idx);
    double build_s = now_s() - t0;
    if (st != SX_OK) {
        (void)fprintf(stderr, "%s build failed: %s %s\n", ops->name, sx_status_str(st),
                      sx_errmsg());
        return -1;
    }
    int is_sq = strcmp(ops->name, "HNSW") != 0;
    int nc = is_sq ? (n_rk > 0 ? n_rk : 1) : 1;
    for (int r = 0; r < nc; r++) {
        curve *c = &cs[r];
        memset(c, 0, sizeof *c);
        if (is_sq && n_rk > 0)
            (void)snprintf(c->label, sizeof c->label, "%s rk=%s", ops->name, rks[r]);
        else
            (void)snprintf(c->label, sizeof c->label, "%s", ops->name);
        c->build_s = build_s;
        c->index_bytes = ops->memory_bytes(idx);
        c->vec_bytes = ds->n * ds->dim * sizeof(float);
        c->nef = n_ef;
        char efbuf[16];
        sx_ctx sc = { .ops = ops, .idx = idx, .nsp = 1 };
        sc.sp[0].key = "ef";
        sc.sp[0].value = efbuf;
        if (is_sq && n_rk > 0 && strcmp(rks[r], "default") != 0) {
            sc.sp[1].key = "refine_k";
            sc.sp[1].value = rks[r];
            sc.nsp = 2;
        }
        for (int e = 0; e < n_ef; e++) {
            (void)snprintf(efbuf, sizeof efbuf, "%d", efs[e]);
            measure(ds, sx_search_one, &sc, reps, &c->recall[e], &c->qps[e]);
        }
    }
    *ncurves = nc;
    ops->free(idx);
    return 0;
}

#if HAVE_PEER
static size_t peer_search_one(void *c, const float *q, int64_t *ids)
{
    float d[K];
    return sx_peer_hnsw_search(c, q, K, ids, d);
}

static int run_hnswlib(const dataset *ds, int threads, int reps, curve *c)
{
    memset(c, 0, sizeof *c);
    (void)snprintf(c->label, sizeof c->label, "hnswlib");
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
    c->index_bytes = sx_peer_hnsw_memory(h);
    c->nef = n_ef;
    for (int e = 0; e < n_ef; e++) {
        sx_peer_hnsw_set_ef(h, efs[e]);
        measure(ds, peer_search_one, h, reps, &c->recall[e], &c->qps[e]);
    }
    sx_peer_hnsw_free(h);
    return 0;
}
#endif

static void report(const dataset *ds, int threads, const curve *cs, int nc, const curve *ref)
{
    printf("\n== %s: n=%zu dim=%zu queries=%zu, M=16 efConstruction=200, build threads=%d%s\n",
           ds->name, ds->n, ds->dim, ds->nq, threads, use_cpu_clock ? ", QPS by CPU time" : "");
    for (int c = 0; c < nc; c++) {
        printf("%-22s", cs[c].label);
        for (int e = 0; e < n_ef; e++)
            printf(" | ef=%-4d %.4f %7.0f", efs[e], cs[c].recall[e], cs[c].qps[e]);
        printf("\n");
    }
    double qref = -1;
    int lbr = 0;
    if (ref)
        qref = qps_at_target(ref, &lbr);
    for (int c = 0; c < nc; c++) {
        int lb;
        double q = qps_at_target(&cs[c], &lb);
        printf("%-22s QPS@%.2f %s%8.0f", cs[c].label, TARGET, lb ? ">=" : "  ", q);
        if (ref && q > 0 && qref > 0 && &cs[c] != ref)
            printf("  (%.2fx hnswlib)", q / qref);
        printf("  build %.2f s", cs[c].build_s);
        if (ref && &cs[c] != ref)
            printf(" (%.2fx)", cs[c].build_s / ref->build_s);
        printf("  index %.1f B/vec", (double)cs[c].index_bytes / (double)ds->n);
        if (cs[c].vec_bytes)
            printf(" + borrowed vectors %.1f B/vec", (double)cs[c].vec_bytes / (double)ds->n);
        printf("\n");
    }
    (void)fflush(stdout);
}

static void run(const dataset *ds, int threads, int reps, int with_hnsw, int with_peer)
{
    curve cs[MAX_RK + 2];
    int nc = 0, got = 0;
    const curve *ref = NULL;
    if (run_sextant(ds, &sx__hnsw_sq_index_ops, threads, reps, cs, &got) == 0)
        nc += got;
    if (with_hnsw && run_sextant(ds, &sx__hnsw_index_ops, threads, reps, cs + nc, &got) == 0)
        nc += got;
#if HAVE_PEER
    if (with_peer && run_hnswlib(ds, threads, reps, cs + nc) == 0) {
        ref = cs + nc;
        nc++;
    }
#else
    (void)with_peer;
#endif
    report(ds, threads, cs, nc, ref);
}

static int parse_list_int(char *s, int *out, int max)
{
    int n = 0;
    for (char *tok = s; tok && *tok && n < max;) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        out[n++] = (int)strtol(tok, NULL, 10);
        tok = comma ? comma + 1 : NULL;
    }
    return n;
}

static int parse_list_str(char *s, const char **out, int max)
{
    int n = 0;
    for (char *tok = s; tok && *tok && n < max;) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        out[n++] = tok;
        tok = comma ? comma + 1 : NULL;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *which = "all";
    const char *dir = getenv("SX_SHARED_DATA");
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    int reps = 3, with_hnsw = 0, with_peer = 1;
    long nq = 0;
    static const int def_efs[] = { 10, 15, 20, 30, 40, 60, 80, 120, 200 };
    n_ef = (int)(sizeof def_efs / sizeof def_efs[0]);
    memcpy(efs, def_efs, sizeof def_efs);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--nq") == 0 && i + 1 < argc)
            nq = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--ef") == 0 && i + 1 < argc)
            n_ef = parse_list_int(argv[++i], efs, MAX_EF);
        else if (strcmp(argv[i], "--refine_k") == 0 && i + 1 < argc)
            n_rk = parse_list_str(argv[++i], rks, MAX_RK);
        else if (strcmp(argv[i], "--cpu-time") == 0)
            use_cpu_clock = 1;
        else if (strcmp(argv[i], "--hnsw") == 0)
            with_hnsw = 1;
        else if (strcmp(argv[i], "--no-peer") == 0)
            with_peer = 0;
        else if (argv[i][0] != '-')
            which = argv[i];
        else {
            (void)fprintf(stderr,
                          "usage: %s [bigann|fmnist|all] [--threads N] [--reps N] [--data DIR] "
                          "[--cpu-time] [--ef 10,20,...] [--refine_k 1,2,...] [--nq N] [--hnsw] "
                          "[--no-peer]\n",
                          argv[0]);
            return 2;
        }
    }
    if (!dir)
        dir = "../shared/data";
    threads = threads < 1 ? 1 : threads;
    reps = reps < 1 ? 1 : reps;
    if (!HAVE_PEER)
        printf("hnswlib peer not linked: no hnswlib column\n");
    dataset ds;
    memset(&ds, 0, sizeof ds);
    if (strcmp(which, "all") == 0 || strcmp(which, "bigann") == 0) {
        if (load_bigann(dir, &ds) == 0) {
            if (nq > 0 && (size_t)nq < ds.nq)
                ds.nq = (size_t)nq;
            run(&ds, (int)threads, reps, with_hnsw, with_peer);
        } else {
            (void)fprintf(stderr, "BIGANN-10k: cannot read %s/bigann10k/ (skipped)\n", dir);
        }
        free_dataset(&ds);
    }
    if (strcmp(which, "all") == 0 || strcmp(which, "fmnist") == 0) {
        if (load_fmnist(dir, &ds) == 0) {
            if (nq > 0 && (size_t)nq < ds.nq)
                ds.nq = (size_t)nq;
            run(&ds, (int)threads, reps, with_hnsw, with_peer);
        } else {
            (void)fprintf(stderr, "Fashion-MNIST: data files missing (skipped)\n");
        }
        free_dataset(&ds);
    }
    return 0;
}
