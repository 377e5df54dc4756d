/*
 * bin_ivf.c: BIN_IVF_FLAT, an inverted file over binary vectors (Milvus's index of that name,
 * FAISS's IndexBinaryIVF), metrics HAMMING and JACCARD. One file: parameters, build, search,
 * serialization and the structural check. The vtable is sx__bin_ivf_flat_index_ops (index.h);
 * it takes BINARY_VECTOR rows only (the typed members).
 *
 * Coarse quantizer. Binary centroids, trained as FAISS trains IndexBinaryIVF's: the rows of a
 * sample (at most nlist * 256, as the float k-means samples, and at most SAMPLE_BYTES of
 * unpacked floats) are unpacked to 0/1 floats, float k-means (vector/kmeans.h, squared L2) finds
 * nlist centres, and each centre is binarised at 0.5 (bit set when at least half its cluster has
 * it: the majority bit, which minimises the cluster's summed Hamming distance to a binary
 * centre). Every row then goes to its nearest binary centroid by the index's own metric (ties to
 * the lower list), so a query probes lists by the same distance that placed the rows.
 *
 * Memory layout (the index BORROWS the segment's rows, n x nbytes, nbytes = dim / 8):
 *   cent  nlist x nbytes binary centroids
 *   off   nlist + 1 uint32: list l holds list positions [off[l], off[l+1])
 *   ids   n uint32, row ids in list order (ascending within a list: a counting sort)
 *   lvec  a copy of the rows in list order (n x nbytes), so a list scan streams through memory
 *         (the same trade as IVF_FLAT's, ivf.h: an eighth of a float copy's size here); not
 *         serialized, rebuilt from the borrowed rows and ids on load.
 *
 * Format (little-endian; CRC32C of everything before it last):
 *   u32 magic "SXBI", u32 version 1, u64 n, u32 dim (bits), u32 metric | SX__VT_BIN << 16,
 *   u32 nlist_param, u32 nlist, nlist * nbytes centroid bytes, (nlist + 1) u32 off,
 *   n u32 ids, u32 crc.
 * Invariants (check(), after every build and on every load): n == 0 <=> nlist == 0; nlist <=
 * min(n, 65536); off[0] == 0, non-decreasing, off[nlist] == n; ids a permutation of [0, n).
 * Search never reads out of bounds on an index that satisfies them.
 *
 * Parameters. Build: nlist [1, 65536] (default 128); search: nprobe [1, 65536] (default 8; more
 * than nlist probes every list). "ef" and Milvus's generic keys are tolerated as IVF_FLAT does.
 * When the nprobe lists hold fewer than k rows (small lists, a selective filter), the next lists
 * by centroid distance are scanned until k rows are found or every list was (as IVF_FLAT does):
 * a search answers min(k, allowed rows) hits.
 *
 * Thread-safety: a built index is immutable; search allocates its own scratch (nlist hits).
 * Build: the assignment runs on ctx->threads threads, each over its own rows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "index/index.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "vector/dist.h"
#include "vector/kmeans.h"

#define BIN_IVF_MAGIC   0x49425853u /* "SXBI" */
#define BIN_IVF_VERSION 1u
#define NLIST_MAX       65536
#define NLIST_DEF       128
#define NPROBE_DEF      8
#define SAMPLE_BYTES    ((size_t)256 << 20) /* unpacked training floats, at most */
#define MAX_THREADS     64u
#define BLOCK           256u /* rows per call of the block kernel (dist.h sx__bdist_n_fn) */

typedef struct bin_ivf {
    const uint8_t *vecs; /* borrowed: n * nbytes */
    size_t n, dim, nbytes;
    sx_metric metric;
    sx__bdist_fn dist;
    sx__bdist_n_fn dist_n; /* the block form: a list (and the centroids) in blocks of rows */
    uint32_t nlist_param, nlist;
    uint8_t *cent; /* nlist * nbytes; owned */
    uint32_t *off; /* nlist + 1; owned */
    uint32_t *ids; /* n; owned */
    uint8_t *lvec; /* n * nbytes in list order; owned */
} bin_ivf;

static const bin_ivf *as_bin(const sx__index *idx)
{
    return (const bin_ivf *)(const void *)idx;
}

static void bin_free(sx__index *idx)
{
    bin_ivf *v = (bin_ivf *)(void *)idx;
    if (!v)
        return;
    sx__free(v->cent);
    sx__free(v->off);
    sx__free(v->ids);
    sx__free(v->lvec);
    sx__free(v);
}

/* ---------------------------------------------------------------- parameters */

static bool generic_key(const char *k)
{
    return strcmp(k, "index_type") == 0 || strcmp(k, "metric_type") == 0 ||
           strcmp(k, "metricType") == 0;
}

static sx_status parse_build(const sx_param *p, size_t np, long *nlist)
{
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key ? p[i].key : "";
        if (strcmp(k, "nlist") != 0 && !generic_key(k))
            return sx__err(SX_EINVAL,
                           "unknown BIN_IVF_FLAT build parameter \"%s\" (allowed: nlist)", k);
    }
    return sx__param_int(p, np, "nlist", 1, NLIST_MAX, NLIST_DEF, nlist);
}

static sx_status check_build_params(const sx_param *p, size_t np)
{
    long nlist;
    return parse_build(p, np, &nlist);
}

static sx_status parse_search(const sx_param *p, size_t np, long *nprobe)
{
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key ? p[i].key : "";
        if (strcmp(k, "nprobe") != 0 && strcmp(k, "ef") != 0 && !generic_key(k))
            return sx__err(SX_EINVAL,
                           "unknown BIN_IVF_FLAT search parameter \"%s\" (allowed: nprobe)", k);
    }
    return sx__param_int(p, np, "nprobe", 1, NLIST_MAX, NPROBE_DEF, nprobe);
}

static sx_status check_search_params(const sx_param *p, size_t np, size_t k)
{
    (void)k;
    long nprobe;
    return parse_search(p, np, &nprobe);
}

/* ---------------------------------------------------------------- structure */

static sx_status check(const bin_ivf *v)
{
    if ((v->n == 0) != (v->nlist == 0) || v->nlist > NLIST_MAX || v->nlist > v->n)
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT: %u lists for %zu rows", v->nlist, v->n);
    if (v->n == 0)
        return SX_OK;
    if (v->off[0] != 0 || v->off[v->nlist] != v->n)
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT: list offsets do not cover the rows");
    for (uint32_t l = 0; l < v->nlist; l++)
        if (v->off[l + 1] < v->off[l])
            return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT: list %u has a negative size", l);
    uint64_t *seen = sx__calloc((v->n + 63) / 64, sizeof *seen);
    if (!seen)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: check");
    sx_status st = SX_OK;
    for (size_t p = 0; p < v->n && st == SX_OK; p++) {
        uint32_t id = v->ids[p];
        if (id >= v->n || (seen[id >> 6] >> (id & 63) & 1u))
            st = sx__err(SX_ECORRUPT,
                         "BIN_IVF_FLAT: list position %zu holds row %u twice or "
                         "out of range",
                         p, id);
        else
            seen[id >> 6] |= (uint64_t)1 << (id & 63);
    }
    sx__free(seen);
    return st;
}

/* The rows in list order (lvec), from the borrowed rows and ids. */
static sx_status finish(bin_ivf *v)
{
    v->lvec = sx__malloc(v->n * v->nbytes + 1);
    if (!v->lvec)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: cannot allocate the list copy");
    for (size_t p = 0; p < v->n; p++)
        memcpy(v->lvec + p * v->nbytes, v->vecs + (size_t)v->ids[p] * v->nbytes, v->nbytes);
    return SX_OK;
}

static sx_status shell(const void *vecs, size_t n, size_t dim, sx_metric metric, bin_ivf **out)
{
    if (dim == 0 || dim % 8 != 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT: dim %zu must be a multiple of 8 in [8, %u]", dim,
                       SX_MAX_DIM);
    if (metric != SX_METRIC_HAMMING && metric != SX_METRIC_JACCARD)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT: metric must be HAMMING or JACCARD");
    if ((uint64_t)n > UINT32_MAX)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT: %zu rows exceed the 32-bit id space", n);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT: no vectors for %zu rows", n);
    bin_ivf *v = sx__calloc(1, sizeof *v);
    if (!v)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: out of memory");
    v->vecs = vecs;
    v->n = n;
    v->dim = dim;
    v->nbytes = dim / 8;
    v->metric = metric;
    v->dist = sx__bdist_for(metric);
    v->dist_n = sx__bdist_n_for(metric);
    *out = v;
    return SX_OK;
}

/* ---------------------------------------------------------------- build */

typedef struct assign_job {
    const bin_ivf *v;
    uint32_t *assign;
    size_t r0, r1;
    const atomic_bool *cancel;
    pthread_t tid;
    bool started;
} assign_job;

static void *assign_rows(void *arg)
{
    assign_job *j = arg;
    const bin_ivf *v = j->v;
    for (size_t r = j->r0; r < j->r1; r++) {
        if ((r & 1023) == 0 && j->cancel && atomic_load_explicit(j->cancel, memory_order_relaxed))
            break;
        const uint8_t *x = v->vecs + r * v->nbytes;
        uint32_t best = 0;
        float bd = v->dist(x, v->cent, v->nbytes);
        for (uint32_t l = 1; l < v->nlist; l++) {
            float d = v->dist(x, v->cent + (size_t)l * v->nbytes, v->nbytes);
            if (d < bd) {
                bd = d;
                best = l;
            }
        }
        j->assign[r] = best;
    }
    return NULL;
}

/* Binary centroids (see the header): float k-means on the unpacked sample, majority bits. */
static sx_status train(bin_ivf *v, const sx__build_ctx *ctx)
{
    size_t max_rows = (size_t)v->nlist * SX__KMEANS_SAMPLE_PER_CENTROID;
    size_t cap = SAMPLE_BYTES / (v->dim * sizeof(float));
    if (max_rows > cap)
        max_rows = cap > v->nlist ? cap : v->nlist;
    size_t ns = v->n < max_rows ? v->n : max_rows;
    uint32_t *rows = sx__malloc(ns * sizeof *rows);
    float *x = sx__malloc(ns * v->dim * sizeof *x);
    float *c = sx__malloc((size_t)v->nlist * v->dim * sizeof *c);
    sx_status st = rows && x && c ? SX_OK : sx__err(SX_ENOMEM, "BIN_IVF_FLAT: training sample");
    if (st == SX_OK) {
        sx__kmeans_sample_rows(v->n, ns, ctx && ctx->seed ? ctx->seed : 0x5A17B1u, rows);
        for (size_t i = 0; i < ns; i++) {
            const uint8_t *r = v->vecs + (size_t)rows[i] * v->nbytes;
            for (size_t b = 0; b < v->dim; b++)
                x[i * v->dim + b] = (float)((r[b >> 3] >> (7 - (b & 7))) & 1u);
        }
        sx__kmeans_opts o = { .k = v->nlist,
                              .seed = ctx && ctx->seed ? ctx->seed : 0x5A17B1u,
                              .max_sample = ns,
                              .cancel = ctx ? ctx->cancel : NULL };
        st = sx__kmeans_train(x, ns, v->dim, v->dim, &o, c);
    }
    if (st == SX_OK) {
        memset(v->cent, 0, (size_t)v->nlist * v->nbytes);
        for (size_t l = 0; l < v->nlist; l++)
            for (size_t b = 0; b < v->dim; b++)
                if (c[l * v->dim + b] >= 0.5f)
                    v->cent[l * v->nbytes + (b >> 3)] |= (uint8_t)(0x80u >> (b & 7));
    }
    sx__free(rows);
    sx__free(x);
    sx__free(c);
    return st;
}

static sx_status build_lists(bin_ivf *v, const sx__build_ctx *ctx)
{
    uint32_t *assign = sx__malloc(v->n * sizeof *assign);
    if (!assign)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: assignment");
    size_t nt = ctx && ctx->threads > 0 ? ctx->threads : 1;
    nt = nt > MAX_THREADS ? MAX_THREADS : nt;
    if (nt > (v->n + 4095) / 4096)
        nt = (v->n + 4095) / 4096;
    assign_job jobs[MAX_THREADS];
    for (size_t t = 0; t < nt; t++) {
        jobs[t] = (assign_job){ .v = v,
                                .assign = assign,
                                .r0 = v->n * t / nt,
                                .r1 = v->n * (t + 1) / nt,
                                .cancel = ctx ? ctx->cancel : NULL };
        jobs[t].started = t > 0 && pthread_create(&jobs[t].tid, NULL, assign_rows, &jobs[t]) == 0;
    }
    for (size_t t = 0; t < nt; t++)
        if (!jobs[t].started)
            assign_rows(&jobs[t]);
    for (size_t t = 0; t < nt; t++)
        if (jobs[t].started)
            pthread_join(jobs[t].tid, NULL);
    if (ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed)) {
        sx__free(assign);
        return sx__err(SX_ECANCELED, "BIN_IVF_FLAT build canceled");
    }
    /* counting sort: lists in row order */
    memset(v->off, 0, ((size_t)v->nlist + 1) * sizeof *v->off);
    for (size_t r = 0; r < v->n; r++)
        v->off[assign[r] + 1]++;
    for (uint32_t l = 0; l < v->nlist; l++)
        v->off[l + 1] += v->off[l];
    uint32_t *fill = sx__malloc((size_t)v->nlist * sizeof *fill);
    if (!fill) {
        sx__free(assign);
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: lists");
    }
    memcpy(fill, v->off, (size_t)v->nlist * sizeof *fill);
    for (size_t r = 0; r < v->n; r++)
        v->ids[fill[assign[r]]++] = (uint32_t)r;
    sx__free(fill);
    sx__free(assign);
    return SX_OK;
}

static sx_status alloc_arrays(bin_ivf *v)
{
    v->cent = sx__malloc((size_t)v->nlist * v->nbytes + 1);
    v->off = sx__malloc(((size_t)v->nlist + 1) * sizeof *v->off);
    v->ids = sx__malloc(v->n * sizeof *v->ids + 1);
    if (!v->cent || !v->off || !v->ids)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: cannot allocate %u lists for %zu rows", v->nlist,
                       v->n);
    return SX_OK;
}

static sx_status build_typed(const sx_param *p,
                             size_t np,
                             const void *vecs,
                             sx__vtype vt,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             const sx__build_ctx *ctx,
                             sx__index **out)
{
    if (vt != SX__VT_BIN)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT needs a BINARY_VECTOR field");
    long nlist;
    sx_status st = parse_build(p, np, &nlist);
    if (st != SX_OK)
        return st;
    bin_ivf *v = NULL;
    st = shell(vecs, n, dim, metric, &v);
    if (st != SX_OK)
        return st;
    v->nlist_param = (uint32_t)nlist;
    v->nlist = n < (size_t)nlist ? (uint32_t)n : (uint32_t)nlist;
    st = alloc_arrays(v);
    if (st == SX_OK && n > 0)
        st = train(v, ctx);
    if (st == SX_OK && n > 0)
        st = build_lists(v, ctx);
    if (st == SX_OK && n > 0)
        st = finish(v);
    if (st == SX_OK)
        st = check(v);
    if (st != SX_OK) {
        bin_free((sx__index *)(void *)v);
        return st;
    }
    if (ctx && ctx->progress)
        atomic_store_explicit(ctx->progress, n, memory_order_relaxed);
    *out = (sx__index *)(void *)v;
    return SX_OK;
}

static sx_status build_f32(const sx_param *p,
                           size_t np,
                           const float *vecs,
                           size_t n,
                           size_t dim,
                           sx_metric metric,
                           const sx__build_ctx *ctx,
                           sx__index **out)
{
    return build_typed(p, np, vecs, SX__VT_F32, n, dim, metric, ctx, out);
}

/* ---------------------------------------------------------------- search */

/* Scans list l into out (rows that allow admits, under out's bound). d: BLOCK scratch. */
static void scan_list(
    const bin_ivf *v, const uint8_t *q, uint32_t l, const uint64_t *allow, sx__topk *out, float *d)
{
    float bound = sx__topk_bound(out);
    for (uint32_t p0 = v->off[l]; p0 < v->off[l + 1]; p0 += BLOCK) {
        uint32_t m = v->off[l + 1] - p0 < BLOCK ? v->off[l + 1] - p0 : BLOCK;
        v->dist_n(q, v->lvec + (size_t)p0 * v->nbytes, m, v->nbytes, d);
        for (uint32_t j = 0; j < m; j++) {
            if (!(d[j] <= bound))
                continue;
            uint32_t id = v->ids[p0 + j];
            if (allow && !(__atomic_load_n(&allow[id >> 6], __ATOMIC_RELAXED) >> (id & 63) & 1u))
                continue;
            sx__topk_push(out, d[j], id);
            bound = sx__topk_bound(out);
        }
    }
}

static int hit_order(const void *a, const void *b)
{
    const sx__hit *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Fewer than k rows in the probed lists: the other lists in order of centroid distance until out
 * is full or every list was scanned. probed: the np lists already scanned. */
static sx_status probe_more(const bin_ivf *v,
                            const uint8_t *q,
                            const sx__hit *probed,
                            size_t np,
                            const uint64_t *allow,
                            sx__topk *out,
                            float *d)
{
    sx__hit *all = sx__malloc((size_t)v->nlist * sizeof *all);
    uint64_t *seen = sx__calloc(((size_t)v->nlist + 63) / 64, sizeof *seen);
    if (!all || !seen) {
        sx__free(all);
        sx__free(seen);
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: search scratch");
    }
    for (size_t i = 0; i < np; i++)
        seen[probed[i].id >> 6] |= 1ull << (probed[i].id & 63);
    size_t n = 0;
    for (uint32_t l0 = 0; l0 < v->nlist; l0 += BLOCK) {
        uint32_t m = v->nlist - l0 < BLOCK ? v->nlist - l0 : BLOCK;
        v->dist_n(q, v->cent + (size_t)l0 * v->nbytes, m, v->nbytes, d);
        for (uint32_t j = 0; j < m; j++)
            if (!(seen[(l0 + j) >> 6] >> ((l0 + j) & 63) & 1u))
                all[n++] = (sx__hit){ .dist = d[j], .id = l0 + j };
    }
    qsort(all, n, sizeof *all, hit_order);
    for (size_t i = 0; i < n && out->n < out->k; i++)
        scan_list(v, q, (uint32_t)all[i].id, allow, out, d);
    sx__free(all);
    sx__free(seen);
    return SX_OK;
}

static sx_status search_typed(const sx__index *idx,
                              const void *query,
                              size_t k,
                              const sx_param *sp,
                              size_t nsp,
                              const uint64_t *allow,
                              sx__topk *out)
{
    (void)k; /* out has capacity k */
    const bin_ivf *v = as_bin(idx);
    long nprobe;
    sx_status st = parse_search(sp, nsp, &nprobe);
    if (st != SX_OK || v->n == 0 || out->k == 0)
        return st;
    size_t np = (size_t)nprobe < v->nlist ? (size_t)nprobe : v->nlist;
    sx__hit *probe = sx__malloc(np * sizeof *probe);
    if (!probe)
        return sx__err(SX_ENOMEM, "BIN_IVF_FLAT: search scratch");
    const uint8_t *q = query;
    float d[BLOCK];
    sx__topk lists;
    sx__topk_init(&lists, probe, np);
    for (uint32_t l0 = 0; l0 < v->nlist; l0 += BLOCK) {
        uint32_t m = v->nlist - l0 < BLOCK ? v->nlist - l0 : BLOCK;
        v->dist_n(q, v->cent + (size_t)l0 * v->nbytes, m, v->nbytes, d);
        for (uint32_t j = 0; j < m; j++)
            sx__topk_push(&lists, d[j], l0 + j);
    }
    for (size_t i = 0; i < lists.n; i++)
        scan_list(v, q, probe[i].id, allow, out, d);
    if (out->n < out->k && lists.n < v->nlist)
        st = probe_more(v, q, probe, lists.n, allow, out, d);
    sx__free(probe);
    return st;
}

static sx_status search_f32(const sx__index *idx,
                            const float *query,
                            size_t k,
                            const sx_param *sp,
                            size_t nsp,
                            const uint64_t *allow,
                            sx__topk *out)
{
    (void)idx, (void)query, (void)k, (void)sp, (void)nsp, (void)allow, (void)out;
    return sx__err(SX_EINVAL, "BIN_IVF_FLAT is searched with binary queries");
}

/* ---------------------------------------------------------------- serialization */

static sx_status serialize(const sx__index *idx, sx__wbuf *w)
{
    const bin_ivf *v = as_bin(idx);
    size_t start = w->len;
    sx__wbuf_u32(w, BIN_IVF_MAGIC);
    sx__wbuf_u32(w, BIN_IVF_VERSION);
    sx__wbuf_u64(w, v->n);
    sx__wbuf_u32(w, (uint32_t)v->dim);
    sx__wbuf_u32(w, (uint32_t)v->metric | (uint32_t)SX__VT_BIN << 16);
    sx__wbuf_u32(w, v->nlist_param);
    sx__wbuf_u32(w, v->nlist);
    sx__wbuf_put(w, v->cent, (size_t)v->nlist * v->nbytes);
    for (uint32_t l = 0; l <= v->nlist; l++)
        sx__wbuf_u32(w, v->off[l]);
    for (size_t p = 0; p < v->n; p++)
        sx__wbuf_u32(w, v->ids[p]);
    if (sx__wbuf_ok(w))
        sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    return sx__wbuf_ok(w) ? SX_OK : sx__err(SX_ENOMEM, "BIN_IVF_FLAT: out of memory serializing");
}

static sx_status deserialize_typed(const void *data,
                                   size_t len,
                                   const void *vecs,
                                   sx__vtype vt,
                                   size_t n,
                                   size_t dim,
                                   sx_metric metric,
                                   sx__index **out)
{
    if (vt != SX__VT_BIN)
        return sx__err(SX_EINVAL, "BIN_IVF_FLAT needs a BINARY_VECTOR field");
    if (!data || len < 36)
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: %zu bytes is too short", len);
    const uint8_t *b = data;
    if (sx__crc32c(0, b, len - 4) != sx__le32(b + len - 4))
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: checksum mismatch");
    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r);
    uint64_t fn = sx__rbuf_u64(&r);
    uint32_t fdim = sx__rbuf_u32(&r), fmetric = sx__rbuf_u32(&r);
    uint32_t nlist_param = sx__rbuf_u32(&r), nlist = sx__rbuf_u32(&r);
    if (magic != BIN_IVF_MAGIC || version != BIN_IVF_VERSION)
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: bad magic or version");
    if (fn != n || fdim != dim || fmetric != ((uint32_t)metric | (uint32_t)SX__VT_BIN << 16))
        return sx__err(SX_ECORRUPT,
                       "BIN_IVF_FLAT index: built for n=%llu dim=%u metric=%u, segment has "
                       "n=%zu dim=%zu metric=%d",
                       (unsigned long long)fn, fdim, fmetric & 0xFFFFu, n, dim, (int)metric);
    if (nlist_param < 1 || nlist_param > NLIST_MAX || nlist > NLIST_MAX || nlist > n ||
        (n > 0) != (nlist > 0))
        return sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: bad header (nlist %u of %u)", nlist,
                       nlist_param);
    bin_ivf *v = NULL;
    sx_status st = shell(vecs, n, dim, metric, &v);
    if (st != SX_OK)
        return st;
    v->nlist_param = nlist_param;
    v->nlist = nlist;
    size_t need = (size_t)nlist * v->nbytes + ((size_t)nlist + 1) * 4 + n * 4;
    if (sx__rbuf_left(&r) != need)
        st = sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: %zu bytes of lists, want %zu",
                     sx__rbuf_left(&r), need);
    if (st == SX_OK)
        st = alloc_arrays(v);
    if (st == SX_OK) {
        memcpy(v->cent, sx__rbuf_bytes(&r, (size_t)nlist * v->nbytes), (size_t)nlist * v->nbytes);
        for (uint32_t l = 0; l <= nlist; l++)
            v->off[l] = sx__rbuf_u32(&r);
        for (size_t p = 0; p < n; p++)
            v->ids[p] = sx__rbuf_u32(&r);
        st = sx__rbuf_ok(&r) ? check(v) : sx__err(SX_ECORRUPT, "BIN_IVF_FLAT index: truncated");
    }
    if (st == SX_OK && n > 0)
        st = finish(v);
    if (st != SX_OK) {
        bin_free((sx__index *)(void *)v);
        return st;
    }
    *out = (sx__index *)(void *)v;
    return SX_OK;
}

static sx_status deserialize_f32(const void *data,
                                 size_t len,
                                 const float *vecs,
                                 size_t n,
                                 size_t dim,
                                 sx_metric metric,
                                 sx__index **out)
{
    return deserialize_typed(data, len, vecs, SX__VT_F32, n, dim, metric, out);
}

static size_t memory_bytes(const sx__index *idx)
{
    const bin_ivf *v = as_bin(idx);
    return sizeof *v + (size_t)v->nlist * v->nbytes + ((size_t)v->nlist + 1) * 4 + v->n * 4 +
           v->n * v->nbytes;
}

/* Peak of a build: the lists and their copy, the assignment, and the unpacked training sample
 * with k-means' own scratch. */
static uint64_t estimate_build_bytes(const sx_param *p, size_t np, size_t n, size_t dim)
{
    long nlist = NLIST_DEF;
    if (sx__param_int(p, np, "nlist", 1, NLIST_MAX, NLIST_DEF, &nlist) != SX_OK)
        nlist = NLIST_DEF;
    uint64_t nl = (uint64_t)nlist < n ? (uint64_t)nlist : (n ? n : 1);
    uint64_t nbytes = dim / 8;
    uint64_t built = nl * nbytes + (nl + 1) * 4 + (uint64_t)n * 4 + (uint64_t)n * nbytes;
    size_t ns = (size_t)nl * SX__KMEANS_SAMPLE_PER_CENTROID;
    if (ns > n)
        ns = n;
    uint64_t sample = (uint64_t)ns * dim * 4 + (uint64_t)ns * 4 + nl * dim * 4;
    uint64_t km = dim ? sx__kmeans_train_bytes(ns ? ns : 1, dim, (size_t)nl, ns) : 0;
    uint64_t during_train = nl * nbytes + sample + km;
    uint64_t during_lists = built + (uint64_t)n * 4 + nl * 4;
    return during_train > during_lists ? during_train : during_lists;
}

const sx__index_ops sx__bin_ivf_flat_index_ops = {
    .name = "BIN_IVF_FLAT",
    .check_build_params = check_build_params,
    .check_search_params = check_search_params,
    .build = build_f32,
    .search = search_f32,
    .serialize = serialize,
    .deserialize = deserialize_f32,
    .memory_bytes = memory_bytes,
    .free = bin_free,
    .estimate_build_bytes = estimate_build_bytes,
    .vtypes = 1u << SX__VT_BIN,
    .build_typed = build_typed,
    .deserialize_typed = deserialize_typed,
    .search_typed = search_typed,
};
