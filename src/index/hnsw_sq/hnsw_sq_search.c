/*
 * hnsw_sq_search.c: HNSW_SQ search: HNSW's K-NN-SEARCH (Malkov & Yashunin, arXiv 1603.09320,
 * Alg. 5: greedy descent through the upper levels, Alg. 2 ef-search at level 0) on code
 * distances (hnsw_sq.h), then an exact re-rank of the best candidates from the float vectors.
 *
 * Steps of one query:
 *   1. prepare: quantize the query to int8 and fold the constants (hnsw_sq_quant.c);
 *   2. greedy descent from the entry point through levels max_level..1 on code distances;
 *   3. ef-search at level 0 on code distances with a pool of max(ef, refine candidates) entries.
 *      As in hnsw_search.c the candidate set C and result set W are one array sorted by distance
 *      (the "pool"), the top id bit marks an expanded entry, the search expands the best
 *      unexpanded entry and stops when all are expanded. Each expansion gathers the unvisited
 *      neighbours (uint16 epoch tags, no clearing between queries), then one batch kernel call
 *      computes all their dot products two records at a time while prefetching the next two;
 *   4. refine: the best ncand candidates of the pool by code distance (ncand below) get their
 *      exact distance from the borrowed float vectors (prefetch: refine()); the k best go to the
 *      caller's top-k with EXACT distances. With refine=false (build param) the k best code
 *      distances are returned as they are.
 * A clipped node (an outlier beyond the quantizer's ranges, hnsw_sq.h) has a NaN code distance;
 * every site that computes one (the entry seed, greedy, expand, gather_scored) takes the exact
 * distance instead (sx__hsq_fix), so an outlier is neither reported nor steered to at the
 * distance of its clamped code.
 *
 * Filtered search (`allow`): rows not allowed are traversed (they keep the graph connected) but
 * never enter the results: the two-heap form of Alg. 2 (candidates C, allowed results W with at
 * most `cap` entries, bound = worst of a full W), as in hnsw_search.c, on code distances; then W
 * is sorted and refined as above. A very selective filter degrades to a walk of the whole
 * connected graph (never a hang); the engine switches to exact search for those.
 *
 * Search parameters (Milvus names):
 *   ef        [1, 65536] (SX__HNSW_EF_MAX), default max(k, 64); ef < k is SX_EINVAL (as HNSW);
 *   refine_k  a number in [1, 65536] (Milvus's magnification factor): ncand = ceil(k * refine_k)
 *             candidates are re-ranked and the pool holds cap = max(ef, ncand) entries.
 *             Default (absent): ncand = min(ef, 2k) and cap = ef, i.e. up to 2k candidates but
 *             never a larger pool than ef asks for. Ignored with refine=false.
 * Why that default. Measured single-thread on Fashion-MNIST (60k x 784, 2,000 queries, M=16,
 * efConstruction=200; bench/hnsw_sq_bench.c, QPS by CPU time on the shared 2-core VM):
 *     ef  refine_k=1        refine_k=1.5      refine_k=2        hnswlib
 *     10  0.929 / 47.7k     0.965 / 37.3k     0.979 / 28.6k     0.934 / 12.8k
 *     20  0.972 / 33.6k     0.979 / 29.2k     0.979 / 27.7k     0.979 /  8.8k
 *     40  0.987 / 23.6k     0.995 / 21.2k     0.995 / 19.8k     0.994 /  4.5k
 *     60  0.989 / 17.7k     0.997 / 17.1k     0.997 / 16.0k     0.997 /  3.1k
 *   (recall@10 / QPS). The code order is good enough that the true top 10 lies in the first ~2k
 *   candidates; re-ranking k only tops out near 0.99, because neighbours near rank 10 swap
 *   places in the code order. Each re-ranked candidate costs a float vector fetched from memory
 *   (3 KiB here), so re-ranking more than needed is the largest avoidable cost at small ef.
 *   min(ef, 2k) gives refine_k=1's speed at ef = k and refine_k=2's recall from ef = 2k on.
 *
 * Layout: codes next to the level-0 lists in one record per node (hnsw_sq.h). Measured against
 * codes (+ norm) and lists in two arrays, same bytes per node: equal within noise on
 * Fashion-MNIST (ef 20: 32.8k vs 32.3k QPS; lists padded to 64 bytes 32.7k) and BIGANN-10k
 * (ef 10: 236k-242k vs 229k-246k), so the simpler single array stays.
 *
 * Seeding. As in hnsw_search.c, level 0 starts from the descent's result and from the entry
 * point (invariant 5 of hnsw_sq.h: every node is reachable from the entry), the entry offered
 * late (sx__pool_late_seed) in the plain search; with ef = n every row is found.
 *
 * Scratch. Each thread keeps one scratch (graph.h's sx__graph_scratch: tags for n nodes, the pool,
 * the gathered ids, the heaps of the filtered search; plus the dot products and the int8 query)
 * in graph.h's TLS, freed at thread exit; steady-state searches do not allocate. The pool and the
 * filtered loop are graph.h's drivers, specialised by this file's inline callbacks.
 *
 * Thread-safety: read-only on the index; any number of threads may search it at once.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define REFINE_K_MAX   65536.0
/* lines of each gathered neighbour's record prefetched at once (the batch kernel fetches the
 * rest two records ahead): 0, 1 and 2 measured equal within noise */
#define PF_FIRST_LINES 2u
/* lines of every re-rank candidate's vector prefetched up front (refine()) */
#define PF_VEC_FIRST   4u

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    sx__graph_scratch g; /* tags, pool, gathered ids, filtered heaps */
    int32_t *dots;       /* dot products of the gathered ids, dots_cap */
    size_t dots_cap;
    int8_t *q8; /* prepared query, 64-byte aligned */
    size_t q8_cap;
} scratch;

static void scratch_fini(void *p)
{
    scratch *s = p;
    sx__graph_scratch_fini(&s->g);
    sx__free(s->dots);
    sx__free_aligned(s->q8);
    memset(s, 0, sizeof *s);
}

static const sx__graph_tls_class tls_class = { SX__GRAPH_TLS_HNSW_SQ, sizeof(scratch),
                                               scratch_fini };

static sx_status scratch_reserve(scratch *s, size_t n, size_t pool, size_t deg, size_t q8)
{
    sx_status rc = sx__graph_scratch_reserve(&s->g, n, pool, deg, "HNSW_SQ");
    if (rc != SX_OK)
        return rc;
    if (!sx__graph_grow((void **)&s->dots, &s->dots_cap, deg, sizeof *s->dots))
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
    if (q8 > s->q8_cap) {
        int8_t *b = sx__malloc_aligned(q8);
        if (!b)
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
        sx__free_aligned(s->q8);
        s->q8 = b;
        s->q8_cap = q8;
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- helpers */

static inline void prefetch_links(const sx__hnsw_sq *h, uint32_t id)
{
    const char *p = (const char *)sx__hsq_links(h, id, 0);
    size_t bytes = ((size_t)h->M0 + 1) * sizeof(uint32_t);
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch(p + o, 0, 3);
}

/* Collects the unvisited ids of list ll into s->todo (marking them visited) and prefetches the
 * first lines of their records. Returns how many. */
static inline size_t gather(const sx__hnsw_sq *h, scratch *s, const uint32_t *ll)
{
    uint32_t cnt = ll[0];
    uint16_t *tags = s->g.vis.tags, ep = s->g.vis.epoch;
    uint32_t *todo = s->g.todo;
    size_t nt = 0;
    for (uint32_t j = 1; j <= cnt; j++)
        __builtin_prefetch(tags + ll[j], 1, 3);
    for (uint32_t j = 1; j <= cnt; j++) {
        uint32_t id = ll[j];
        if (tags[id] == ep)
            continue;
        tags[id] = ep;
        todo[nt++] = id;
        const char *r = (const char *)sx__hsq_code(h, id);
        for (size_t l = 0; l < PF_FIRST_LINES; l++)
            __builtin_prefetch(r + 64 * l, 0, 3);
    }
    return nt;
}

/* Greedy descent on code distances through levels top..1: each step computes the distances of
 * the whole list with one batch call and moves to the best node if it beats the current one. */
static uint32_t greedy(const sx__hnsw_sq *h,
                       scratch *s,
                       const sx__hsq_query *q,
                       const float *query,
                       uint32_t cur,
                       float *cur_dist,
                       uint32_t top)
{
    float cd = *cur_dist;
    const uint8_t *base = h->rec;
    const size_t stride = h->rec_bytes, norm_off = h->norm_off;
    for (uint32_t l = top; l > 0; l--) {
        bool changed = true;
        while (changed) {
            changed = false;
            const uint32_t *ll = sx__hsq_links(h, cur, l);
            uint32_t cnt = ll[0];
            for (uint32_t j = 1; j <= cnt; j++)
                __builtin_prefetch(base + (size_t)ll[j] * stride, 0, 3);
            h->kern->dot_batch(base, stride, ll + 1, cnt, q->q8, h->dim, s->dots);
            uint32_t best = cur;
            for (uint32_t j = 0; j < cnt; j++) {
                float nv;
                memcpy(&nv, base + (size_t)ll[1 + j] * stride + norm_off, sizeof nv);
                float d = sx__hsq_fix(h, query, ll[1 + j], nv + q->c0 + q->c1 * (float)s->dots[j]);
                if (d < cd) {
                    cd = d;
                    best = ll[1 + j];
                    changed = true;
                }
            }
            cur = best;
        }
    }
    *cur_dist = cd;
    return cur;
}

/* ---------------------------------------------------------------- pool search */

/* What the graph.h drivers' callbacks need (the index's fields copied: the pool's memmove may
 * alias them, so reading them through h would reload them after every insertion). */
typedef struct sctx {
    const sx__hnsw_sq *h;
    scratch *s;
    const sx__hsq_query *q;
    const float *query; /* the float query: exact distances of clipped nodes */
    size_t cap;
    const uint8_t *base;
    size_t stride, norm_off;
    float c0, c1;
} sctx;

static inline sctx
make_ctx(const sx__hnsw_sq *h, scratch *s, const sx__hsq_query *q, const float *query, size_t cap)
{
    sctx x = { h, s, q, query, cap, h->rec, h->rec_bytes, h->norm_off, q->c0, q->c1 };
    return x;
}

/* Gathers c's unvisited neighbours and computes their dot products (one batch kernel call).
 * Returns how many; ids in s->g.todo, dots in s->dots. */
static inline __attribute__((always_inline)) size_t gather_dots(const sctx *x, uint32_t c)
{
    const sx__hnsw_sq *h = x->h;
    size_t nt = gather(h, x->s, sx__hsq_links(h, c, 0));
    h->kern->dot_batch(h->rec, h->rec_bytes, x->s->g.todo, nt, x->q->q8, h->dim, x->s->dots);
    return nt;
}

/* The code distance of gathered id `id` with dot product `dot` (exact for a clipped node). */
static inline float code_dist(const sctx *x, uint32_t id, int32_t dot)
{
    float nv;
    memcpy(&nv, x->base + (size_t)id * x->stride + x->norm_off, sizeof nv);
    return sx__hsq_fix(x->h, x->query, id, nv + x->c0 + x->c1 * (float)dot);
}

/* graph.h's sx__graph_expand_fn for level 0. */
static size_t expand(void *vx, uint32_t c, float cd, size_t *size)
{
    (void)cd;
    const sctx *x = vx;
    size_t nt = gather_dots(x, c);
    const uint32_t *todo = x->s->g.todo;
    sx__hit *pool = x->s->g.pool;
    size_t lowest = SIZE_MAX;
    for (size_t t = 0; t < nt; t++) {
        uint32_t id = todo[t];
        size_t p = sx__pool_insert(pool, size, x->cap, code_dist(x, id, x->s->dots[t]), id);
        if (p < lowest && p < x->cap) {
            lowest = p;
            prefetch_links(x->h, id);
        }
    }
    return lowest;
}

static void prefetch_list(void *vx, uint32_t id)
{
    const sctx *x = vx;
    prefetch_links(x->h, id);
}

/* graph.h's sx__graph_gather_fn (filtered search): ids and code distances. */
static size_t gather_scored(void *vx, uint32_t c)
{
    const sctx *x = vx;
    size_t nt = gather_dots(x, c);
    for (size_t t = 0; t < nt; t++)
        x->s->g.dists[t] = code_dist(x, x->s->g.todo[t], x->s->dots[t]);
    return nt;
}

/* ---------------------------------------------------------------- refine */

/* Exact distances of cands[0..m) (ids without FLAG after masking) into out. */
/* Exact distances of cands[0..m) into out. The first PF_VEC_FIRST lines of every candidate's
 * vector are prefetched up front, the rest of a vector while the previous one is compared: of
 * the variants measured on Fashion-MNIST (ef 20, refine_k 2: 20 vectors of 49 lines), this was
 * ~15% faster than fetching each whole vector one ahead, and than fetching 8 lines two ahead
 * and leaving the rest to the hardware prefetcher. */
static void
refine(const sx__hnsw_sq *h, const float *query, const sx__hit *cands, size_t m, sx__topk *out)
{
    const size_t dim = h->dim;
    const size_t lines = (dim * sizeof(float) + 63) / 64;
    for (size_t i = 0; i < m; i++) {
        const char *v = (const char *)(h->vecs + (size_t)(cands[i].id & SX__GRAPH_ID_MASK) * dim);
        for (size_t l = 0; l < PF_VEC_FIRST && l < lines; l++)
            __builtin_prefetch(v + 64 * l, 0, 3);
    }
    for (size_t i = 0; i < m; i++) {
        if (i + 1 < m) {
            const char *v =
                (const char *)(h->vecs + (size_t)(cands[i + 1].id & SX__GRAPH_ID_MASK) * dim);
            for (size_t l = PF_VEC_FIRST; l < lines; l++)
                __builtin_prefetch(v + 64 * l, 0, 3);
        }
        uint32_t id = cands[i].id & SX__GRAPH_ID_MASK;
        sx__topk_push(out, h->dist(query, h->vecs + (size_t)id * dim, dim), id);
    }
}

/* ---------------------------------------------------------------- params */

typedef struct search_params {
    long ef;
    double refine_k;
} search_params;

static sx_status parse_search(const sx_param *p, size_t np, size_t k, search_params *sp)
{
    long def = k > SX__HNSW_EF_DEF ? (long)k : SX__HNSW_EF_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, SX__HNSW_EF_MAX, def, &sp->ef);
    if (rc != SX_OK)
        return rc;
    if ((size_t)sp->ef < k)
        return sx__err(SX_EINVAL, "ef(%ld) should be larger than or equal to k(%zu)", sp->ef, k);
    sp->refine_k = 0.0; /* absent: the default rule of the header */
    for (size_t i = 0; i < np; i++) {
        if (!p[i].key || strcmp(p[i].key, "refine_k") != 0)
            continue;
        const char *s = p[i].value ? p[i].value : "";
        char *end = NULL;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || *end != '\0' || errno != 0 || !(v >= 1.0) || v > REFINE_K_MAX)
            return sx__err(SX_EINVAL, "refine_k must be a number in [1, %.0f], got \"%s\"",
                           REFINE_K_MAX, s);
        sp->refine_k = v;
    }
    return SX_OK;
}

sx_status sx__hnsw_sq_check_search_params(const sx_param *p, size_t np, size_t k)
{
    search_params sp;
    return parse_search(p, np, k, &sp);
}

/* The traversal's result capacity (cap) and how many of its best are re-ranked or returned
 * (ncand), for k and the search params. */
static void
sizes(const sx__hnsw_sq *h, const search_params *prm, size_t k, size_t *cap_out, size_t *ncand_out)
{
    size_t cap = (size_t)prm->ef < h->n ? (size_t)prm->ef : h->n;
    size_t ncand = k;
    if (h->refine && prm->refine_k > 0.0) {
        double want = ceil((double)k * prm->refine_k);
        ncand = want < (double)h->n ? (size_t)want : h->n;
        cap = ncand > cap ? ncand : cap;
    } else if (h->refine) {
        ncand = 2 * k < cap ? 2 * k : cap;
    }
    *cap_out = cap;
    *ncand_out = ncand;
}

/* index.h's filter_cost, in float32 gathered distances. The traversal is graph.h's filtered
 * loop, so it computes sx__graph_filtered_visits code distances. One costs less than a float32 one:
 * with each plan forced (`sextant bench --filter-plan`, one thread, M=16, filters keeping 50-2%) a
 * code distance took 61-62 ns at 128 dimensions (BIGANN-10k, ef 100) and 149-167 ns at 784
 * (Fashion-MNIST, ef 10 and 100), about 43 ns + 0.15 ns per dimension, against HNSW's 24 ns +
 * 0.52 ns per dimension: the ratio below. A re-rank adds ncand float32 distances. */
double sx__hnsw_sq_filter_cost(
    const sx__index *idx, const sx_param *sp, size_t nsp, size_t k, size_t n_allowed)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    search_params prm;
    if (parse_search(sp, nsp, k, &prm) != SX_OK || h->n == 0)
        return -1.0;
    sx__err_clear();
    size_t cap, ncand;
    sizes(h, &prm, k, &cap, &ncand);
    double d = (double)h->dim;
    double v = sx__graph_filtered_visits(h->n, h->M0, cap, n_allowed) * (43.0 + 0.15 * d) /
               (24.0 + 0.52 * d);
    return v + (h->refine ? (double)ncand : 0.0);
}

/* ---------------------------------------------------------------- vtable: search */

sx_status sx__hnsw_sq_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    search_params prm;
    sx_status rc = parse_search(sp, nsp, k, &prm);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || h->n == 0)
        return SX_OK;
    /* candidates to re-rank, and the pool that must hold them */
    size_t cap, ncand;
    sizes(h, &prm, k, &cap, &ncand);
    scratch *s = sx__graph_tls_get(&tls_class);
    if (!s)
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
    rc = scratch_reserve(s, h->n, cap, h->M0, sx__hsq_q8_bytes(h->dim));
    if (rc != SX_OK)
        return rc;

    sx__hsq_query q = { .q8 = s->q8 };
    sx__hsq_prepare(h, query, &q);
    /* level 0 starts from the descent's result and from the entry point (see the header) */
    sx__hit seeds[2];
    seeds[1].id = h->entry;
    seeds[1].dist = sx__hsq_fix(h, query, h->entry, sx__hsq_dist(h, &q, h->entry));
    seeds[0] = seeds[1];
    if (h->max_level > 0)
        seeds[0].id = greedy(h, s, &q, query, h->entry, &seeds[0].dist, h->max_level);

    sctx x = make_ctx(h, s, &q, query, cap);
    const sx__hit *cands;
    size_t size = 0;
    if (allow) {
        rc = sx__graph_scratch_filtered(&s->g, cap, (size_t)h->M0 + 2, "HNSW_SQ");
        if (rc == SX_OK)
            rc = sx__graph_filtered_search(&s->g, seeds, 2, cap, allow, gather_scored, &x,
                                           "HNSW_SQ", &size);
        if (rc != SX_OK)
            return rc;
        sx__maxheap_sort(s->g.res, size);
        cands = s->g.res;
    } else {
        size = sx__pool_start(&s->g.vis, s->g.pool, cap, seeds, 1, SX__GRAPH_NONE);
        size = sx__graph_pool_search(s->g.pool, size, 1, 0, NULL, expand, prefetch_list, &x);
        if (sx__pool_late_seed(&s->g.vis, s->g.pool, &size, cap, seeds[1]))
            size = sx__graph_pool_search(s->g.pool, size, 1, 0, NULL, expand, prefetch_list, &x);
        cands = s->g.pool;
    }
    size_t m = size < ncand ? size : ncand;
    if (h->refine) {
        refine(h, query, cands, m, out);
    } else {
        for (size_t i = 0; i < m; i++)
            sx__topk_push(out, cands[i].dist, cands[i].id & SX__GRAPH_ID_MASK);
    }
    return SX_OK;
}
