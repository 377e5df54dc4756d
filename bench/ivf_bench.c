/*
 * ivf_bench.c: single-thread recall/QPS sweep of the IVF indexes (IVF_FLAT, IVF_SQ8, IVF_PQ)
 * straight through their vtables, without the engine: the figures behind the IVF rows of the
 * README and the choices documented in src/index/ivf.
 *
 * Protocol (ann-benchmarks'): one query per call from one thread, k = 10; QPS = queries / wall
 * time of the whole pass, best of --runs passes; recall@10 as in benchmarks.md §1: a returned
 * row counts when its exact distance (recomputed in double from the vectors) is within d_10 +
 * 1e-3 of the query's true 10th distance (Euclidean, from the shipped ground truth for
 * Fashion-MNIST, recomputed from the GT ids for BIGANN-10k, whose GT has no ties). The build
 * (timed, ctx threads = --threads) is not part of QPS. "QPS at recall 0.95" is interpolated
 * linearly in (recall, log QPS) between the two settings around 0.95.
 *
 * Usage:
 *   ivf_bench --data bigann|fmnist [--type IVF_FLAT|IVF_SQ8|IVF_PQ] [--nlist N] [--m M]
 *             [--nprobe 1,2,4,...] [--refine_k 1,2,4 (IVF_PQ/SQ8: one sweep per value)]
 *             [--nq Q] [--runs R] [--threads T] [--data-dir DIR]
 * Data: bigann = $SX_SHARED_DATA (default ../shared/data)/bigann10k, 10,000 x 128, 100 queries;
 * fmnist = /usr/share/datasets/fashion-mnist (60,000 x 784, first Q of the 10,000 test images)
 * with ../shared/data/fashion-mnist ground truth.
 * Not a test: nothing is asserted.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "index/index.h"
#include "index/ivf/ivf.h"
#include "util/heap.h"

#define K 10

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct data {
    size_t n, nq, dim;
    float *base, *q;
    int32_t *gt; /* nq x gtk ids */
    size_t gtk;
    double *kth; /* nq: true Euclidean distance of the 10th neighbour */
} data;

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

/* records of int32 d then d 4-byte values; returns nq x d */
static void *read_vecs4(const char *path, size_t nq, size_t *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int32_t dd;
    if (fread(&dd, 4, 1, f) != 1 || dd <= 0) {
        (void)fclose(f);
        return NULL;
    }
    *d = (size_t)dd;
    (void)fseek(f, 0, SEEK_SET);
    uint32_t *out = malloc(nq * *d * 4);
    for (size_t i = 0; i < nq; i++) {
        if (fread(&dd, 4, 1, f) != 1 || fread(out + i * *d, 4, *d, f) != *d) {
            free(out);
            (void)fclose(f);
            return NULL;
        }
    }
    (void)fclose(f);
    return out;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static float *read_idx(const char *path, size_t want, size_t *dim)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    uint8_t hdr[16];
    if (gzread(g, hdr, 16) != 16 || be32(hdr) != 0x803 || be32(hdr + 4) < want) {
        (void)gzclose(g);
        return NULL;
    }
    *dim = (size_t)be32(hdr + 8) * be32(hdr + 12);
    size_t bytes = want * *dim;
    uint8_t *px = malloc(bytes);
    if (gzread(g, px, (unsigned)bytes) != (int)bytes) {
        free(px);
        (void)gzclose(g);
        return NULL;
    }
    (void)gzclose(g);
    float *out = malloc(bytes * sizeof *out);
    for (size_t i = 0; i < bytes; i++)
        out[i] = (float)px[i];
    free(px);
    return out;
}

static double l2d(const float *a, const float *b, size_t dim)
{
    double s = 0;
    for (size_t i = 0; i < dim; i++) {
        double e = (double)a[i] - (double)b[i];
        s += e * e;
    }
    return sqrt(s);
}

static int load(const char *which, const char *dir, size_t nq_cap, data *d)
{
    char p[1024];
    memset(d, 0, sizeof *d);
    if (strcmp(which, "bigann") == 0) {
        snprintf(p, sizeof p, "%s/bigann10k/bigann10k_base.bvecs", dir);
        d->base = read_bvecs(p, &d->n, &d->dim);
        size_t qd;
        snprintf(p, sizeof p, "%s/bigann10k/bigann10k_query.bvecs", dir);
        d->q = read_bvecs(p, &d->nq, &qd);
        snprintf(p, sizeof p, "%s/bigann10k/bigann10k_groundtruth_l2_k100.ivecs", dir);
        d->gt = d->q ? read_vecs4(p, d->nq, &d->gtk) : NULL;
        if (!d->base || !d->gt)
            return -1;
        d->kth = malloc(d->nq * sizeof *d->kth);
        for (size_t i = 0; i < d->nq; i++)
            d->kth[i] = l2d(d->q + i * d->dim, d->base + (size_t)d->gt[i * d->gtk + K - 1] * d->dim,
                            d->dim);
    } else if (strcmp(which, "fmnist") == 0) {
        size_t qd;
        d->n = 60000;
        d->nq = nq_cap && nq_cap < 10000 ? nq_cap : 10000;
        d->base =
            read_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", d->n, &d->dim);
        d->q = read_idx("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", d->nq, &qd);
        snprintf(p, sizeof p, "%s/fashion-mnist/fmnist_groundtruth_l2_k100_dist.fvecs", dir);
        size_t dk;
        float *gd = read_vecs4(p, d->nq, &dk);
        if (!d->base || !d->q || !gd)
            return -1;
        d->kth = malloc(d->nq * sizeof *d->kth);
        for (size_t i = 0; i < d->nq; i++)
            d->kth[i] = gd[i * dk + K - 1];
        free(gd);
    } else {
        return -1;
    }
    if (nq_cap && nq_cap < d->nq)
        d->nq = nq_cap;
    return 0;
}

typedef struct point {
    char label[64];
    double recall, qps;
} point;

/* one pass: returns recall, *secs = wall time */
static double pass(const sx__index_ops *ops,
                   const sx__index *idx,
                   const data *d,
                   const sx_param *sp,
                   size_t nsp,
                   double *secs,
                   uint32_t *ids)
{
    sx__hit h[K];
    double t0 = now_s();
    for (size_t i = 0; i < d->nq; i++) {
        sx__topk t;
        sx__topk_init(&t, h, K);
        if (ops->search(idx, d->q + i * d->dim, K, sp, nsp, NULL, &t) != SX_OK) {
            fprintf(stderr, "search failed: %s\n", sx_errmsg());
            exit(1);
        }
        size_t got = sx__topk_sort(&t);
        for (size_t j = 0; j < K; j++)
            ids[i * K + j] = j < got ? h[j].id : UINT32_MAX;
    }
    *secs = now_s() - t0;
    size_t hit = 0;
    for (size_t i = 0; i < d->nq; i++)
        for (size_t j = 0; j < K; j++) {
            uint32_t id = ids[i * K + j];
            if (id != UINT32_MAX &&
                l2d(d->q + i * d->dim, d->base + (size_t)id * d->dim, d->dim) <= d->kth[i] + 1e-3)
                hit++;
        }
    return (double)hit / (double)(d->nq * K);
}

static void report_095(const point *pts, size_t np, const char *what)
{
    for (size_t i = 0; i < np; i++) {
        if (pts[i].recall < 0.95)
            continue;
        if (i == 0 || pts[i - 1].recall >= 0.95) {
            printf("%s: QPS at recall 0.95: >= %.0f (first setting %s already at %.4f)\n", what,
                   pts[i].qps, pts[i].label, pts[i].recall);
            return;
        }
        const point *a = &pts[i - 1], *b = &pts[i];
        double f = (0.95 - a->recall) / (b->recall - a->recall);
        double q = exp(log(a->qps) + f * (log(b->qps) - log(a->qps)));
        printf("%s: QPS at recall 0.95: %.0f (between %s and %s)\n", what, q, a->label, b->label);
        return;
    }
    printf("%s: recall 0.95 not reached\n", what);
}

/* splits s at commas in place */
static size_t split(char *s, char **out, size_t cap)
{
    size_t n = 0;
    while (s && *s && n < cap) {
        out[n++] = s;
        char *c = strchr(s, ',');
        if (c)
            *c++ = '\0';
        s = c;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *which = "bigann", *type = "IVF_FLAT", *nlist = "128", *m = NULL;
    const char *dir = getenv("SX_SHARED_DATA") ? getenv("SX_SHARED_DATA") : "../shared/data";
    char nprobes[256] = "1,2,4,8,16,32,64", rks[256] = "";
    size_t nq = 0;
    int runs = 3;
    unsigned threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--data"))
            which = v;
        else if (!strcmp(k, "--type"))
            type = v;
        else if (!strcmp(k, "--nlist"))
            nlist = v;
        else if (!strcmp(k, "--m"))
            m = v;
        else if (!strcmp(k, "--nprobe"))
            snprintf(nprobes, sizeof nprobes, "%s", v);
        else if (!strcmp(k, "--refine_k"))
            snprintf(rks, sizeof rks, "%s", v);
        else if (!strcmp(k, "--nq"))
            nq = strtoul(v, NULL, 10);
        else if (!strcmp(k, "--runs"))
            runs = (int)strtol(v, NULL, 10);
        else if (!strcmp(k, "--threads"))
            threads = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--data-dir"))
            dir = v;
        else {
            fprintf(stderr, "unknown option %s\n", k);
            return 2;
        }
    }
    data d;
    if (load(which, dir, nq, &d) != 0) {
        fprintf(stderr, "cannot load %s\n", which);
        return 1;
    }
    /* sx__ivf_ops, not sx__index_lookup: its weak references do not link the family in */
    const sx__index_ops *ops = !strcmp(type, "IVF_FLAT")  ? sx__ivf_ops(SX__IVF_KIND_FLAT)
                               : !strcmp(type, "IVF_SQ8") ? sx__ivf_ops(SX__IVF_KIND_SQ8)
                               : !strcmp(type, "IVF_PQ")  ? sx__ivf_ops(SX__IVF_KIND_PQ)
                                                          : NULL;
    if (!ops) {
        fprintf(stderr, "unknown index type %s\n", type);
        return 1;
    }
    sx_param bp[2] = { { "nlist", nlist }, { "m", m } };
    size_t nbp = m ? 2 : 1;
    sx__build_ctx ctx = { .threads = threads };
    sx__index *idx = NULL;
    double t0 = now_s();
    if (ops->build(bp, nbp, d.base, d.n, d.dim, SX_METRIC_L2, &ctx, &idx) != SX_OK) {
        fprintf(stderr, "build failed: %s\n", sx_errmsg());
        return 1;
    }
    double bs = now_s() - t0;
    printf("%s %s n=%zu dim=%zu nq=%zu nlist=%s%s%s: build %.2f s, index memory %zu bytes\n", which,
           type, d.n, d.dim, d.nq, nlist, m ? " m=" : "", m ? m : "", bs, ops->memory_bytes(idx));
    char *np_list[64], *rk_list[64];
    size_t nnp = split(nprobes, np_list, 64);
    size_t nrk = rks[0] ? split(rks, rk_list, 64) : 0;
    uint32_t *ids = malloc(d.nq * K * sizeof *ids);
    for (size_t r = 0; r < (nrk ? nrk : 1); r++) {
        point pts[64];
        size_t npts = 0;
        for (size_t i = 0; i < nnp; i++) {
            sx_param sp[3] = { { "nprobe", np_list[i] },
                               { "refine", "true" },
                               { "refine_k", nrk ? rk_list[r] : "1" } };
            size_t nsp = nrk ? 3 : 1;
            double best = INFINITY, rec = 0;
            for (int run = 0; run < runs; run++) {
                double s;
                rec = pass(ops, idx, &d, sp, nsp, &s, ids);
                if (s < best)
                    best = s;
            }
            point *p = &pts[npts++];
            snprintf(p->label, sizeof p->label, "nprobe=%s%s%s", np_list[i],
                     nrk ? " refine_k=" : "", nrk ? rk_list[r] : "");
            p->recall = rec;
            p->qps = (double)d.nq / best;
            printf("  %-28s recall@10 %.4f  QPS %9.0f\n", p->label, rec, p->qps);
        }
        char what[96];
        snprintf(what, sizeof what, "%s %s%s%s", which, type, nrk ? " refine_k=" : "",
                 nrk ? rk_list[r] : "");
        report_095(pts, npts, what);
    }
    free(ids);
    ops->free(idx);
    return 0;
}
