/*
 * cagra_index.c: the GPU_CAGRA index (cagra.h): build parameters, the build entry point that
 * chooses the GPU or the CPU twin, entry points, the memory estimate and the vtable; plus the
 * GPU_BRUTE_FORCE vtable and the once-per-process backend notes shared with the GPU IVF builds.
 *
 * Backend choice. When sx__gpu_available() (gpu.h) the graph is built by sx__gpu_cagra_build
 * (COSINE collections store normalised rows, so the GPU is asked for IP, as gpu.h specifies),
 * validated with sx__cagra_check_rows, repaired (sx__cagra_repair: every node reachable from the
 * entry points) and checked in full; a GPU error or an invalid graph falls back to the CPU twin
 * (sx__cagra_build_graph, then the same repair and check) with a note. Without a GPU the CPU twin
 * runs, with one note per process. Either way the index is this family's CPU-searchable graph: the
 * GPU only builds.
 *
 * Entry points: the row nearest the mean (by the metric's kernel), then rows drawn from the seed
 * (distinct), SX__CAGRA_MAX_ENTRIES in all (every row when n is smaller). Every search starts from
 * all of them (cagra_search.c), which stands in for CAGRA's per-query random seeding.
 *
 * GPU_BRUTE_FORCE is the FLAT index under another name: exact search by the CPU scan of flat.c
 * (SIMD per row; the engine's batched segment scan uses SGEMM). sx__gpu_knn is not used on the
 * search path: an index vtable searches one query at a time, and batching across queries is the
 * engine's (query.c), which recognises FLAT by name. The serialized form is FLAT's.
 *
 * Thread-safety: build allocates a new index and reads only the borrowed vectors; the notes use
 * one atomic flag per kind.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "index/cagra/cagra.h"
#include "util/alloc.h"
#include "util/err.h"

#define ENTRY_SEED 0xE27A1E5ull

/* ---------------------------------------------------------------- notes */

static atomic_bool noted[SX__GPU_NOTE_COUNT];

void sx__gpu_note_once(int kind, const char *fmt, ...)
{
    if (kind < 0 || kind >= SX__GPU_NOTE_COUNT)
        return;
    if (atomic_exchange_explicit(&noted[kind], true, memory_order_relaxed))
        return;
    const char *q = getenv("SX_QUIET");
    if (q && *q && strcmp(q, "0") != 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    (void)fprintf(stderr, "sextant: %s\n", line);
}

/* ---------------------------------------------------------------- params */

static bool tolerated_key(const char *k)
{
    return strcmp(k, "index_type") == 0 || strcmp(k, "metric_type") == 0 ||
           strcmp(k, "metricType") == 0;
}

static sx_status parse_bool(const sx_param *p, size_t np, const char *key, bool *out)
{
    for (size_t i = 0; i < np; i++) {
        if (strcmp(p[i].key, key) != 0)
            continue;
        const char *v = p[i].value ? p[i].value : "";
        if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
            *out = true;
        else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
            *out = false;
        else
            return sx__err(SX_EINVAL, "%s must be true or false, got \"%s\"", key, v);
    }
    return SX_OK;
}

static bool has_key(const sx_param *p, size_t np, const char *key)
{
    for (size_t i = 0; i < np; i++)
        if (strcmp(p[i].key, key) == 0)
            return true;
    return false;
}

sx_status sx__cagra_parse_build(const sx_param *p, size_t np, sx__cagra_opts *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key;
        if (!k)
            return sx__err(SX_EINVAL, "GPU_CAGRA build parameter %zu has no key", i);
        if (strcmp(k, "intermediate_graph_degree") == 0 || strcmp(k, "graph_degree") == 0 ||
            strcmp(k, "build_algo") == 0 || strcmp(k, "nn_descent_niter") == 0 ||
            strcmp(k, "cache_dataset_on_device") == 0 || strcmp(k, "adapt_for_cpu") == 0 ||
            tolerated_key(k))
            continue;
        return sx__err(SX_EINVAL,
                       "unknown GPU_CAGRA build parameter \"%s\" (allowed: "
                       "intermediate_graph_degree, graph_degree, build_algo, nn_descent_niter, "
                       "cache_dataset_on_device, adapt_for_cpu)",
                       k);
    }
    /* Defaults: Milvus's 128 / 64. With only one of the two given, the other follows it (the
     * intermediate degree twice the graph degree, capped), so "graph_degree=200" or
     * "intermediate_graph_degree=32" alone are valid requests. */
    long gd = SX__CAGRA_GRAPH_DEF, inter = SX__CAGRA_INTER_DEF;
    bool has_gd = has_key(p, np, "graph_degree");
    bool has_in = has_key(p, np, "intermediate_graph_degree");
    sx_status rc =
        sx__param_int(p, np, "graph_degree", 1, SX__CAGRA_DEGREE_MAX, SX__CAGRA_GRAPH_DEF, &gd);
    if (rc != SX_OK)
        return rc;
    long inter_def = SX__CAGRA_INTER_DEF;
    if (has_gd && !has_in && 2 * gd > inter_def)
        inter_def = 2 * gd > (long)SX__CAGRA_DEGREE_MAX ? (long)SX__CAGRA_DEGREE_MAX : 2 * gd;
    rc = sx__param_int(p, np, "intermediate_graph_degree", 2, SX__CAGRA_DEGREE_MAX, inter_def,
                       &inter);
    if (rc != SX_OK)
        return rc;
    if (has_in && !has_gd && gd >= inter)
        gd = inter / 2;
    if (gd >= inter)
        return sx__err(SX_EINVAL,
                       "graph_degree (%ld) must be smaller than intermediate_graph_degree (%ld)",
                       gd, inter);
    long iters;
    rc = sx__param_int(p, np, "nn_descent_niter", 1, SX__CAGRA_NND_ITERS_MAX, SX__CAGRA_NND_ITERS,
                       &iters);
    if (rc != SX_OK)
        return rc;
    o->bp.intermediate_degree = (uint32_t)inter;
    o->bp.graph_degree = (uint32_t)gd;
    o->bp.nn_descent_iters = (uint32_t)iters;
    o->bp.build_algo = SX__CAGRA_ALGO_IVF_PQ;
    for (size_t i = 0; i < np; i++) {
        if (strcmp(p[i].key, "build_algo") != 0)
            continue;
        const char *v = p[i].value ? p[i].value : "";
        if (strcasecmp(v, "IVF_PQ") == 0)
            o->bp.build_algo = SX__CAGRA_ALGO_IVF_PQ;
        else if (strcasecmp(v, "NN_DESCENT") == 0)
            o->bp.build_algo = SX__CAGRA_ALGO_NN_DESCENT;
        else
            return sx__err(SX_EINVAL, "build_algo must be IVF_PQ or NN_DESCENT, got \"%s\"", v);
    }
    rc = parse_bool(p, np, "cache_dataset_on_device", &o->cache_dataset_on_device);
    if (rc == SX_OK)
        rc = parse_bool(p, np, "adapt_for_cpu", &o->adapt_for_cpu);
    return rc;
}

static sx_status cagra_check_build_params(const sx_param *p, size_t np)
{
    sx__cagra_opts o;
    return sx__cagra_parse_build(p, np, &o);
}

/* ---------------------------------------------------------------- build */

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Entry points (see the header). mean: dim floats of scratch. */
static void pick_entries(sx__cagra *g, uint64_t seed, float *mean)
{
    size_t n = g->n, dim = g->dim;
    if (n <= SX__CAGRA_MAX_ENTRIES) {
        for (size_t i = 0; i < n; i++)
            g->entries[i] = (uint32_t)i;
        g->n_entries = (uint32_t)n;
        return;
    }
    for (size_t j = 0; j < dim; j++) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += (double)g->vecs[i * dim + j];
        mean[j] = (float)(s / (double)n);
    }
    uint32_t best = 0;
    float bd = __builtin_inff();
    for (size_t i = 0; i < n; i++) {
        float d = g->dist(mean, sx__cagra_vec(g, (uint32_t)i), dim);
        if (d < bd) {
            bd = d;
            best = (uint32_t)i;
        }
    }
    g->entries[0] = best;
    uint32_t c = 1;
    uint64_t r = mix(seed ^ ENTRY_SEED);
    while (c < SX__CAGRA_MAX_ENTRIES) {
        r = mix(r);
        uint32_t id = (uint32_t)(r % n);
        bool dup = false;
        for (uint32_t e = 0; e < c && !dup; e++)
            dup = g->entries[e] == id;
        if (!dup)
            g->entries[c++] = id;
    }
    g->n_entries = c;
}

/* sx__graph_repair's distance: between the rows of nodes a and b. */
static float node_dist(const void *ctx, uint32_t a, uint32_t b)
{
    const sx__cagra *g = ctx;
    return g->dist(sx__cagra_vec(g, a), sx__cagra_vec(g, b), g->dim);
}

sx_status sx__cagra_repair(sx__cagra *g)
{
    sx__graph_view v = sx__cagra_view(g);
    sx__graph_repair_opts o = { node_dist, g, SX__CAGRA_ITOPK_DEF };
    return sx__graph_repair(&v, g->entries, g->n_entries, &o, NULL);
}

static uint64_t estimate(const sx__cagra_opts *o, size_t n, uint32_t threads)
{
    uint32_t K = o->bp.intermediate_degree;
    if (n > 0 && (size_t)K > n - 1)
        K = (uint32_t)(n - 1);
    uint64_t graph =
        (uint64_t)n * o->bp.graph_degree * 4 + 64 + (uint64_t)SX__CAGRA_MAX_ENTRIES * 4;
    if (n <= 1 || K == 0)
        return graph + sizeof(sx__cagra);
    /* the repair runs after the build's scratch is freed */
    uint64_t b = sx__cagra_build_graph_bytes(n, K, o->bp.graph_degree, o->bp.build_algo, threads);
    uint64_t r = sx__graph_repair_bytes(n, o->bp.graph_degree, SX__CAGRA_ITOPK_DEF);
    return graph + sizeof(sx__cagra) + (b > r ? b : r);
}

static uint64_t cagra_estimate(const sx_param *p, size_t np, size_t n, size_t dim)
{
    sx__cagra_opts o;
    (void)dim;
    if (sx__cagra_parse_build(p, np, &o) != SX_OK) {
        memset(&o, 0, sizeof o);
        o.bp.intermediate_degree = SX__CAGRA_INTER_DEF;
        o.bp.graph_degree = SX__CAGRA_GRAPH_DEF;
    }
    return estimate(&o, n, 0);
}

/* Tries the GPU; true when g->graph now holds a valid GPU-built graph. */
static bool build_on_gpu(sx__cagra *g, const sx__cagra_build_params *bp)
{
    if (!sx__gpu_available()) {
        sx__gpu_note_once(SX__GPU_NOTE_CAGRA_CPU,
                          "GPU_CAGRA: building the graph with the CPU twin (multi-threaded C, "
                          "same algorithm); GPU: %s",
                          sx__gpu_describe());
        return false;
    }
    sx__gpu_note_once(SX__GPU_NOTE_CAGRA_GPU, "GPU_CAGRA: building the graph on the GPU (%s)",
                      sx__gpu_describe());
    sx_metric m = g->metric == SX_METRIC_COSINE ? SX_METRIC_IP : g->metric;
    sx_status rc = sx__gpu_cagra_build(g->vecs, g->n, g->dim, m, bp, g->graph);
    if (rc == SX_OK)
        rc = sx__cagra_check_rows((const sx__index *)(const void *)g);
    if (rc == SX_OK) {
        /* the GPU graph gets the CPU repair before it is accepted (invariant 4) */
        rc = sx__cagra_repair(g);
        if (rc == SX_OK)
            rc = sx__cagra_check((const sx__index *)(const void *)g);
        if (rc == SX_OK) {
            g->flags |= SX__CAGRA_FLAG_GPU;
            return true;
        }
    }
    sx__gpu_note_once(SX__GPU_NOTE_CAGRA_FAIL,
                      "GPU_CAGRA: the GPU build failed (%s): using the CPU twin", sx_errmsg());
    return false;
}

static sx_status cagra_build(const sx_param *p,
                             size_t np,
                             const float *vecs,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             const sx__build_ctx *ctx,
                             sx__index **out)
{
    sx__cagra_opts o;
    sx_status rc = sx__cagra_parse_build(p, np, &o);
    if (rc != SX_OK)
        return rc;
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "GPU_CAGRA: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: unknown metric %d", (int)metric);
    /* the search marks expanded candidates with the top id bit */
    if (n > (size_t)0x7FFFFFFF)
        return sx__err(SX_EINVAL, "GPU_CAGRA: %zu rows exceed the limit of %zu per index", n,
                       (size_t)0x7FFFFFFF);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "GPU_CAGRA: no vectors");
    uint32_t threads = ctx ? ctx->threads : 0;
    uint64_t need = estimate(&o, n, threads);
    if (ctx && ctx->memory_limit_bytes && need > ctx->memory_limit_bytes)
        return sx__err(SX_ENOMEM,
                       "GPU_CAGRA: building %zu x %zu needs about %llu bytes, above the memory "
                       "limit of %llu bytes (index_build_memory_limit)",
                       n, dim, (unsigned long long)need,
                       (unsigned long long)ctx->memory_limit_bytes);
    if (ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed))
        return sx__err(SX_ECANCELED, "GPU_CAGRA build canceled");
    uint32_t ne = n < SX__CAGRA_MAX_ENTRIES ? (uint32_t)n : SX__CAGRA_MAX_ENTRIES;
    sx__cagra *g = NULL;
    rc = sx__cagra_alloc(vecs, n, dim, metric, o.bp.graph_degree, o.bp.intermediate_degree, ne, &g);
    if (rc != SX_OK)
        return rc;
    g->build_algo = (uint32_t)o.bp.build_algo;
    o.bp.threads = threads;
    o.bp.seed = ctx && ctx->seed ? ctx->seed : 0;
    if (n > 0) {
        float *mean = sx__malloc(dim * sizeof *mean);
        if (!mean) {
            sx__cagra_free((sx__index *)(void *)g);
            return sx__err(SX_ENOMEM, "GPU_CAGRA: out of memory");
        }
        pick_entries(g, o.bp.seed, mean);
        sx__free(mean);
        if (!build_on_gpu(g, &o.bp)) {
            rc = sx__cagra_build_graph(vecs, n, dim, metric, &o.bp, ctx, g->graph);
            if (rc == SX_OK)
                rc = sx__cagra_repair(g);
            if (rc == SX_OK)
                rc = sx__cagra_check((const sx__index *)(void *)g);
        }
    }
    if (rc != SX_OK) {
        sx__cagra_free((sx__index *)(void *)g);
        return rc;
    }
    if (ctx && ctx->progress)
        atomic_store_explicit(ctx->progress, n, memory_order_relaxed);
    *out = (sx__index *)(void *)g;
    return SX_OK;
}

const sx__index_ops sx__cagra_index_ops = {
    .name = "GPU_CAGRA",
    .check_build_params = cagra_check_build_params,
    .check_search_params = sx__cagra_check_search_params,
    .build = cagra_build,
    .search = sx__cagra_search,
    .serialize = sx__cagra_serialize,
    .deserialize = sx__cagra_deserialize,
    .memory_bytes = sx__cagra_memory_bytes,
    .free = sx__cagra_free,
    .estimate_build_bytes = cagra_estimate,
};

/* ---------------------------------------------------------------- GPU_BRUTE_FORCE */

static sx_status bf_check_build(const sx_param *p, size_t np)
{
    for (size_t i = 0; i < np; i++)
        if (!p[i].key || !tolerated_key(p[i].key))
            return sx__err(SX_EINVAL, "GPU_BRUTE_FORCE takes no build parameters, got \"%s\"",
                           p[i].key ? p[i].key : "");
    return SX_OK;
}

static sx_status bf_check_search(const sx_param *p, size_t np, size_t k)
{
    return sx__flat_index_ops.check_search_params(p, np, k);
}

static sx_status bf_build(const sx_param *p,
                          size_t np,
                          const float *vecs,
                          size_t n,
                          size_t dim,
                          sx_metric metric,
                          const sx__build_ctx *ctx,
                          sx__index **out)
{
    sx_status rc = bf_check_build(p, np);
    if (rc != SX_OK)
        return rc;
    sx__gpu_note_once(SX__GPU_NOTE_BRUTE_FORCE,
                      "GPU_BRUTE_FORCE: exact search by the CPU FLAT scan; GPU: %s",
                      sx__gpu_available() ? "present, not on the search path" : sx__gpu_describe());
    return sx__flat_index_ops.build(NULL, 0, vecs, n, dim, metric, ctx, out);
}

static sx_status bf_search(const sx__index *idx,
                           const float *query,
                           size_t k,
                           const sx_param *sp,
                           size_t nsp,
                           const uint64_t *allow,
                           sx__topk *out)
{
    return sx__flat_index_ops.search(idx, query, k, sp, nsp, allow, out);
}

static sx_status bf_serialize(const sx__index *idx, sx__wbuf *w)
{
    return sx__flat_index_ops.serialize(idx, w);
}

static sx_status bf_deserialize(const void *data,
                                size_t len,
                                const float *vecs,
                                size_t n,
                                size_t dim,
                                sx_metric metric,
                                sx__index **out)
{
    return sx__flat_index_ops.deserialize(data, len, vecs, n, dim, metric, out);
}

static size_t bf_memory_bytes(const sx__index *idx)
{
    return sx__flat_index_ops.memory_bytes(idx);
}

static void bf_free(sx__index *idx)
{
    sx__flat_index_ops.free(idx);
}

const sx__index_ops sx__gpu_brute_force_index_ops = {
    .name = "GPU_BRUTE_FORCE",
    .check_build_params = bf_check_build,
    .check_search_params = bf_check_search,
    .build = bf_build,
    .search = bf_search,
    .serialize = bf_serialize,
    .deserialize = bf_deserialize,
    .memory_bytes = bf_memory_bytes,
    .free = bf_free,
};
