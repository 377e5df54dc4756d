/*
 * hnsw_sq_build.c: HNSW_SQ construction, parameters, memory estimate and the vtable.
 *
 * Build, in order (each step checks ctx->cancel):
 *   1. parameters and shape; the peak-memory estimate against ctx->memory_limit_bytes (SX_ENOMEM
 *      naming the limit before anything is allocated);
 *   2. the graph: sx__hnsw_build (src/index/hnsw) on the float vectors with M / efConstruction,
 *      ctx->threads workers, ctx->progress counting inserted rows, ctx->cancel honoured. The
 *      graph is built on exact distances, so it is the same graph HNSW would search;
 *   3. the quantizer: per-dimension min/max over all rows (hnsw_sq_quant.c);
 *   4. re-layout: every node's code, norm and level-0 list into its record (hnsw_sq.h), the
 *      upper levels copied as they are; then the float graph is freed and sx__hnsw_sq_check
 *      verifies the result (invariants 1-6, reachability from the entry point included).
 * Peak memory is the float graph plus its build scratch plus the new records (both exist during
 * step 4): see estimate_build_bytes.
 *
 * Rejected: building the graph on code distances. It would make the build faster (the insertion
 * searches dominate it) but gives a worse graph for the same M/efConstruction, and the build
 * speed of HNSW is the HNSW family's concern, shared by both indexes.
 *
 * Parameters (Milvus names): build M [2, 2048] (16), efConstruction [1, 4096] (200),
 * sq_type "SQ8" (the only one), refine "true"/"false" (true: re-rank from the float vectors),
 * refine_type "FP32" (the only source: the segment's vectors); index_type / metric_type /
 * metricType are accepted and ignored. Search params: hnsw_sq_search.c.
 *
 * Thread-safety: build uses ctx->threads threads inside sx__hnsw_build; the rest is
 * single-threaded and touches only the new index.
 */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "util/alloc.h"
#include "util/err.h"
#include "vector/range.h"

#define CANCEL_ROWS 4096u

typedef struct build_params {
    long M, efc;
    uint32_t sq_type;
    bool refine;
} build_params;

static bool is_key(const char *k, const char *const *allowed, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, allowed[i]) == 0)
            return true;
    return false;
}

static const char *param_value(const sx_param *p, size_t np, const char *key)
{
    for (size_t i = 0; i < np; i++)
        if (strcmp(p[i].key, key) == 0)
            return p[i].value ? p[i].value : "";
    return NULL;
}

static sx_status parse_build(const sx_param *p, size_t np, build_params *bp)
{
    static const char *const keys[] = {
        "M",           "efConstruction", "sq_type",     "refine",
        "refine_type", "index_type",     "metric_type", "metricType"
    };
    for (size_t i = 0; i < np; i++) {
        if (!p[i].key)
            return sx__err(SX_EINVAL, "HNSW_SQ build parameter %zu has no key", i);
        if (!is_key(p[i].key, keys, sizeof keys / sizeof keys[0]))
            return sx__err(SX_EINVAL,
                           "unknown HNSW_SQ build parameter \"%s\" (allowed: M, efConstruction, "
                           "sq_type, refine, refine_type)",
                           p[i].key);
    }
    sx_status rc =
        sx__param_int(p, np, "M", SX__HNSW_M_MIN, SX__HNSW_M_MAX, SX__HNSW_M_DEF, &bp->M);
    if (rc != SX_OK)
        return rc;
    rc = sx__param_int(p, np, "efConstruction", 1, SX__HNSW_EFC_MAX, SX__HNSW_EFC_DEF, &bp->efc);
    if (rc != SX_OK)
        return rc;
    const char *v = param_value(p, np, "sq_type");
    bp->sq_type = SX__HNSW_SQ_SQ8;
    if (v && strcasecmp(v, "SQ8") != 0)
        return sx__err(SX_EINVAL, "sq_type must be \"SQ8\", got \"%s\"", v);
    v = param_value(p, np, "refine");
    bp->refine = true;
    if (v) {
        if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
            bp->refine = true;
        else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
            bp->refine = false;
        else
            return sx__err(SX_EINVAL, "refine must be \"true\" or \"false\", got \"%s\"", v);
    }
    v = param_value(p, np, "refine_type");
    if (v && strcasecmp(v, "FP32") != 0)
        return sx__err(SX_EINVAL,
                       "refine_type must be \"FP32\" (re-ranking reads the segment's float32 "
                       "vectors), got \"%s\"",
                       v);
    return SX_OK;
}

static sx_status check_build_params(const sx_param *p, size_t np)
{
    build_params bp;
    return parse_build(p, np, &bp);
}

/* ---------------------------------------------------------------- allocation */

size_t sx__hnsw_sq_rec_bytes(size_t dim, uint32_t M0, size_t *norm_off, size_t *links_off)
{
    size_t off = (dim + 3) / 4 * 4;
    *norm_off = off;
    off += sizeof(float);
    *links_off = off;
    off += ((size_t)M0 + 1) * sizeof(uint32_t);
    return (off + 63) / 64 * 64;
}

sx_status sx__hnsw_sq_alloc(
    const float *vecs, size_t n, size_t dim, sx_metric metric, uint32_t M, sx__hnsw_sq **out)
{
    sx__hnsw_sq *h = sx__calloc(1, sizeof *h);
    if (!h) {
        (void)sx__err(SX_ENOMEM, "HNSW_SQ: out of memory");
        return SX_ENOMEM;
    }
    h->vecs = vecs;
    h->n = n;
    h->dim = dim;
    h->metric = metric;
    h->dist = sx__dist_for_metric(metric);
    h->M = M;
    h->M0 = 2 * M;
    h->sq_type = SX__HNSW_SQ_SQ8;
    h->refine = true;
    h->entry = SX__HNSW_NONE;
    h->kern = sx__hsq_kernels_get();
    h->rec_bytes = sx__hnsw_sq_rec_bytes(dim, h->M0, &h->norm_off, &h->links_off);
    size_t qbytes = (dim * sizeof(float) + 63) / 64 * 64;
    h->qmin = sx__malloc_aligned(qbytes);
    h->qscale = sx__malloc_aligned(qbytes);
    h->qmu = sx__malloc_aligned(qbytes);
    h->qamu = sx__malloc_aligned(qbytes);
    h->rec = sx__malloc_aligned(n ? n * h->rec_bytes : 64);
    h->levels = sx__calloc(n ? n : 1, 1);
    h->up_off = sx__malloc((n ? n : 1) * sizeof *h->up_off);
    if (!h->qmin || !h->qscale || !h->qmu || !h->qamu || !h->rec || !h->levels || !h->up_off) {
        size_t rec_bytes = h->rec_bytes;
        sx__hnsw_sq_free((sx__index *)h);
        (void)sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate %zu records of %zu bytes", n, rec_bytes);
        return SX_ENOMEM;
    }
    memset(h->qmin, 0, qbytes);
    memset(h->qscale, 0, qbytes);
    memset(h->qmu, 0, qbytes);
    memset(h->qamu, 0, qbytes);
    memset(h->rec, 0, n ? n * h->rec_bytes : 64);
    *out = h;
    return SX_OK;
}

sx_status sx__hnsw_sq_alloc_up(sx__hnsw_sq *h)
{
    sx_status rc = sx__hnsw_upper_alloc(h->levels, h->n, h->M, h->up_off, &h->up, &h->n_up);
    if (rc == SX_ENOMEM)
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate the upper-level lists");
    if (rc != SX_OK)
        return sx__err(SX_ECORRUPT, "HNSW_SQ: too many upper-level lists");
    return SX_OK;
}

void sx__hnsw_sq_free(sx__index *idx)
{
    sx__hnsw_sq *h = (sx__hnsw_sq *)idx;
    if (!h)
        return;
    sx__free_aligned(h->qmin);
    sx__free_aligned(h->qscale);
    sx__free_aligned(h->qmu);
    sx__free_aligned(h->qamu);
    sx__free_aligned(h->rec);
    sx__free(h->levels);
    sx__free(h->up_off);
    sx__free(h->up);
    sx__free(h);
}

size_t sx__hnsw_sq_memory_bytes(const sx__index *idx)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    size_t qbytes = (h->dim * sizeof(float) + 63) / 64 * 64;
    return sizeof *h + 4 * qbytes + h->n * h->rec_bytes + h->n * (1 + sizeof(uint32_t)) +
           h->n_up * (h->M + 1) * sizeof(uint32_t);
}

/* The params of the float graph's build: M and efConstruction, formatted into the buffers. */
static void graph_params(const build_params *bp, char *mbuf, char *ebuf, size_t cap, sx_param *gp)
{
    (void)snprintf(mbuf, cap, "%ld", bp->M);
    (void)snprintf(ebuf, cap, "%ld", bp->efc);
    gp[0].key = "M";
    gp[0].value = mbuf;
    gp[1].key = "efConstruction";
    gp[1].value = ebuf;
}

/* Peak bytes of a build: the float graph's build (HNSW's own estimate: graph, build state,
 * per-thread scratch; all alive until the re-layout ends), plus this index (records, levels,
 * up_off, the upper blocks ~ n/(M-1) of M+1 ids, the quantizer arrays). */
static uint64_t estimate_build_bytes(const sx_param *p, size_t np, size_t n, size_t dim)
{
    build_params bp;
    if (parse_build(p, np, &bp) != SX_OK) {
        bp.M = SX__HNSW_M_DEF;
        bp.efc = SX__HNSW_EFC_DEF;
    }
    uint64_t M = (uint64_t)bp.M, M0 = 2 * M, nn = n;
    uint64_t up = (nn / (M - 1) + 1) * (M + 1) * 4;
    uint64_t graph;
    if (sx__hnsw_index_ops.estimate_build_bytes) {
        char mbuf[24], ebuf[24];
        sx_param gp[2];
        graph_params(&bp, mbuf, ebuf, sizeof mbuf, gp);
        graph = sx__hnsw_index_ops.estimate_build_bytes(gp, 2, n, dim);
    } else {
        /* level-0 lists, levels, offsets, upper lists; locks; visited tags for 16 workers */
        graph = nn * (M0 + 1) * 4 + nn * 5 + up + nn + 16 * nn * 4;
    }
    size_t no, lo;
    uint64_t rec = nn * sx__hnsw_sq_rec_bytes(dim, (uint32_t)M0, &no, &lo);
    return graph + rec + nn * 5 + up + 4 * ((uint64_t)dim * 4 + 64) +
           sx__range_train_bytes(n, dim) + 4096;
}

/* ---------------------------------------------------------------- build */

static bool canceled(const sx__build_ctx *ctx)
{
    return ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed);
}

/* Copies the graph g into h's records and upper lists, and encodes every row. */
static sx_status relayout(sx__hnsw_sq *h, const sx__hnsw *g, const sx__build_ctx *ctx)
{
    memcpy(h->levels, g->levels, h->n);
    sx_status rc = sx__hnsw_sq_alloc_up(h);
    if (rc != SX_OK)
        return rc;
    h->entry = g->entry;
    h->max_level = g->max_level;
    rc = sx__hsq_train(h);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < h->n; i++) {
        if (i % CANCEL_ROWS == 0 && canceled(ctx))
            return sx__err(SX_ECANCELED, "HNSW_SQ build canceled");
        uint32_t id = (uint32_t)i;
        sx__hsq_encode(h, id, h->vecs + i * h->dim);
        const uint32_t *src = sx__hnsw_links(g, id, 0);
        memcpy(sx__hsq_links(h, id, 0), src, ((size_t)src[0] + 1) * sizeof(uint32_t));
        for (uint32_t l = 1; l <= h->levels[i]; l++) {
            src = sx__hnsw_links(g, id, l);
            memcpy(sx__hsq_links(h, id, l), src, ((size_t)src[0] + 1) * sizeof(uint32_t));
        }
    }
    return SX_OK;
}

static sx_status build(const sx_param *p,
                       size_t np,
                       const float *vecs,
                       size_t n,
                       size_t dim,
                       sx_metric metric,
                       const sx__build_ctx *ctx,
                       sx__index **out)
{
    build_params bp;
    sx_status rc = parse_build(p, np, &bp);
    if (rc != SX_OK)
        return rc;
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "HNSW_SQ: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    if (n > SX__HNSW_MAX_N)
        return sx__err(SX_EINVAL, "HNSW_SQ: %zu rows exceed the limit of %zu per index", n,
                       SX__HNSW_MAX_N);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "HNSW_SQ: no vectors");
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "HNSW_SQ: unknown metric %d", (int)metric);
    uint64_t need = estimate_build_bytes(p, np, n, dim);
    if (ctx && ctx->memory_limit_bytes && need > ctx->memory_limit_bytes)
        return sx__err(SX_ENOMEM,
                       "HNSW_SQ: building %zu x %zu needs about %llu bytes, above the memory "
                       "limit of %llu bytes (index_build_memory_limit)",
                       n, dim, (unsigned long long)need,
                       (unsigned long long)ctx->memory_limit_bytes);
    if (canceled(ctx))
        return sx__err(SX_ECANCELED, "HNSW_SQ build canceled");

    char mbuf[24], ebuf[24];
    sx_param gp[2];
    graph_params(&bp, mbuf, ebuf, sizeof mbuf, gp);
    sx__index *gi = NULL;
    rc = sx__hnsw_index_ops.build(gp, 2, vecs, n, dim, metric, ctx, &gi);
    if (rc != SX_OK)
        return rc;
    const sx__hnsw *g = (const sx__hnsw *)gi;

    sx__hnsw_sq *h = NULL;
    rc = sx__hnsw_sq_alloc(vecs, n, dim, metric, (uint32_t)bp.M, &h);
    if (rc == SX_OK) {
        h->efc = (uint32_t)bp.efc;
        h->sq_type = bp.sq_type;
        h->refine = bp.refine;
        rc = relayout(h, g, ctx);
    }
    if (rc == SX_OK)
        rc = sx__hnsw_sq_check((const sx__index *)h);
    sx__hnsw_index_ops.free(gi);
    if (rc != SX_OK) {
        sx__hnsw_sq_free((sx__index *)h);
        return rc;
    }
    *out = (sx__index *)h;
    return SX_OK;
}

/* ---------------------------------------------------------------- vtable */

const sx__index_ops sx__hnsw_sq_index_ops = {
    .name = "HNSW_SQ",
    .check_build_params = check_build_params,
    .check_search_params = sx__hnsw_sq_check_search_params,
    .build = build,
    .search = sx__hnsw_sq_search,
    .filter_cost = sx__hnsw_sq_filter_cost,
    .serialize = sx__hnsw_sq_serialize,
    .deserialize = sx__hnsw_sq_deserialize,
    .memory_bytes = sx__hnsw_sq_memory_bytes,
    .free = sx__hnsw_sq_free,
    .estimate_build_bytes = estimate_build_bytes,
};
