/*
 * hnsw_search.c: HNSW search (Malkov & Yashunin, arXiv 1603.09320, Alg. 2 SEARCH-LAYER and Alg. 5
 * K-NN-SEARCH): greedy descent with ef = 1 through the upper levels, then an ef-search at level 0.
 *
 * The ef-search. Alg. 2 keeps a min-heap of candidates C and a max-heap of results W (|W| <= ef)
 * and stops when the nearest candidate is farther than the farthest result. A candidate farther
 * than the worst of a full W is never expanded, so C can be cut to the ef best, and C and W merge
 * into one array sorted by distance (the "pool", as in NSG/DiskANN): a node's top id bit marks it
 * expanded, the search expands the best unexpanded entry and stops when all ef entries are
 * expanded. Same result as Alg. 2, but one binary search + memmove of <= ef 8-byte entries per
 * accepted candidate instead of two heap operations, and no separate C to pop.
 *
 * Filtered search (`allow` bitset). Rows not allowed are still traversed (they keep the graph
 * connected) but never enter the results. Here C and W differ, so the classic two-heap form is
 * used: C holds every candidate closer than the worst allowed result (or all, while fewer than ef
 * allowed rows have been found), W holds allowed rows only. With a very selective filter W rarely
 * fills, the bound stays infinite and the search degrades to a traversal of the whole reachable
 * graph (O(n) distance computations, never a hang); the caller (engine) switches to exact search
 * for such filters anyway.
 *
 * Memory traffic. Vectors are borrowed from the segment, so a neighbour costs a cache miss on its
 * vector, and the expanded node one on its level-0 list. For each expanded node the unvisited
 * neighbours are gathered first (visited = epoch tag, no clearing between queries) and their
 * vectors prefetched, then the distances are computed while the next vector's remaining lines are
 * prefetched; when a new best candidate is accepted, its link list is prefetched too.
 *
 * Seeding. Level 0 starts from the greedy-descent result AND the entry point (whose distance the
 * descent computed first anyway): links are directed, so a node reachable from the entry (the
 * build's repair guarantees every node is, graph.h invariant R) need not be reachable from the
 * descent's result. The plain search offers the entry after searching from the descent's result
 * and resumes only when it could still count (graph.h's sx__pool_late_seed: the pool is not full,
 * or the entry beats its worst), so with a small ef it costs one tag load (seeding it up front
 * cost ~1% of the search's instructions, callgrind, BIGANN-10k); with ef = n every row is
 * returned. The filtered search seeds both up front.
 *
 * The pool, the filtered two-heap loop, visited epochs and the scratch are graph.h's
 * (sx__graph_pool_search / sx__graph_filtered_search, specialised here by inline callbacks: this
 * file supplies how a list is gathered, prefetched and scored). Each thread keeps one
 * sx__graph_scratch in graph.h's TLS (freed at thread exit), so steady-state searches do not
 * allocate. The tags are only cleared when the 16-bit epoch wraps (every 65535 queries).
 *
 * Thread-safety: searching a built index is read-only and may run on any number of threads. The
 * build variants read link lists with atomic loads because other build threads write them
 * (hnsw_build.c explains the publication protocol).
 */
#include <limits.h>
#include <string.h>

#include "index/hnsw/hnsw.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

/* cache lines of each neighbour's vector prefetched up front, and of the next one in the loop:
 * the whole next vector up to 1024 float32 dimensions (64 lines). Capping at 24 lines was 3-5%
 * slower on Fashion-MNIST (49 lines per vector), interleaved runs on one graph,
 * docs/internals/SEARCH-SPEED.md entry 3. */
#define PF_FIRST_LINES 2u
#define PF_NEXT_LINES  64u

/* ---------------------------------------------------------------- scratch */

static void scratch_fini(void *p)
{
    sx__graph_scratch_fini(p);
}

static const sx__graph_tls_class tls_class = { SX__GRAPH_TLS_HNSW, sizeof(sx__graph_scratch),
                                               scratch_fini };

/* ---------------------------------------------------------------- helpers */

/* Link-list loads: plain for a built index, atomic during the build (count with acquire so the
 * ids written before it are visible). */
static inline __attribute__((always_inline)) uint32_t ld_count(const uint32_t *p, bool conc)
{
    return conc ? __atomic_load_n(p, __ATOMIC_ACQUIRE) : *p;
}

static inline __attribute__((always_inline)) uint32_t ld_id(const uint32_t *p, bool conc)
{
    return conc ? __atomic_load_n(p, __ATOMIC_RELAXED) : *p;
}

static inline void prefetch_lines(const void *p, size_t from, size_t to)
{
    const char *c = p;
    for (size_t i = from; i < to; i++)
        __builtin_prefetch(c + 64 * i, 0, 3);
}

/* Collects the unvisited ids of list `ll` into todo (marking them visited) and prefetches their
 * vectors' first lines. Returns how many. */
static inline __attribute__((always_inline)) size_t
gather(const sx__hnsw *h, sx__graph_scratch *s, const uint32_t *ll, bool conc, size_t lines)
{
    uint32_t cnt = ld_count(ll, conc);
    uint16_t *tags = s->vis.tags, ep = s->vis.epoch;
    uint32_t *todo = s->todo;
    size_t nt = 0, first = lines < PF_FIRST_LINES ? lines : PF_FIRST_LINES;
    for (uint32_t j = 1; j <= cnt; j++)
        __builtin_prefetch(tags + ld_id(ll + j, conc), 1, 3);
    for (uint32_t j = 1; j <= cnt; j++) {
        uint32_t id = ld_id(ll + j, conc);
        if (tags[id] == ep)
            continue;
        tags[id] = ep;
        todo[nt++] = id;
        prefetch_lines(sx__hnsw_vec(h, id), 0, first);
    }
    return nt;
}

/* ---------------------------------------------------------------- greedy descent */

static inline __attribute__((always_inline)) uint32_t greedy(const sx__hnsw *h,
                                                             const float *q,
                                                             uint32_t cur,
                                                             float *cur_dist,
                                                             uint32_t top,
                                                             uint32_t bottom,
                                                             bool conc)
{
    float cd = *cur_dist;
    for (uint32_t l = top; l >= bottom && l > 0; l--) {
        bool changed = true;
        while (changed) {
            changed = false;
            const uint32_t *ll = sx__hnsw_links(h, cur, l);
            uint32_t cnt = ld_count(ll, conc);
            for (uint32_t j = 1; j <= cnt; j++) {
                uint32_t id = ld_id(ll + j, conc);
                if (j < cnt)
                    __builtin_prefetch(sx__hnsw_vec(h, ld_id(ll + j + 1, conc)), 0, 3);
                float d = h->dist(q, sx__hnsw_vec(h, id), h->dim);
                if (d < cd) {
                    cd = d;
                    cur = id;
                    changed = true;
                }
            }
        }
    }
    *cur_dist = cd;
    return cur;
}

uint32_t sx__hnsw_greedy(const sx__hnsw *h,
                         const float *q,
                         uint32_t cur,
                         float *cur_dist,
                         uint32_t top,
                         uint32_t bottom,
                         bool concurrent)
{
    if (concurrent)
        return greedy(h, q, cur, cur_dist, top, bottom, true);
    return greedy(h, q, cur, cur_dist, top, bottom, false);
}

/* ---------------------------------------------------------------- pool search */

/* What the graph.h drivers' callbacks need: the index, the scratch, the query, the level. */
typedef struct sctx {
    const sx__hnsw *h;
    sx__graph_scratch *s;
    const float *q;
    sx__dist_fn dist;
    size_t dim, ef, lines, next_lines;
    uint32_t level;
} sctx;

static inline sctx
make_ctx(const sx__hnsw *h, sx__graph_scratch *s, const float *q, size_t ef, uint32_t level)
{
    size_t lines = (h->row_bytes + 63) / 64;
    sctx x = { h,      s,  q,     h->dist,
               h->dim, ef, lines, lines < PF_NEXT_LINES ? lines : PF_NEXT_LINES,
               level };
    return x;
}

/* Expands node c (graph.h's sx__graph_expand_fn): gathers its unvisited neighbours, computes
 * their distances while prefetching the next one's vector, offers them to the pool, and
 * prefetches the list of any that enters ahead of the others. */
static inline __attribute__((always_inline)) size_t
expand_at(void *vx, uint32_t c, size_t *size, bool conc)
{
    sctx *x = vx;
    const sx__hnsw *h = x->h;
    sx__graph_scratch *s = x->s;
    const uint32_t *todo = s->todo;
    size_t nt = gather(h, s, sx__hnsw_links(h, c, x->level), conc, x->lines);
    size_t lowest = SIZE_MAX;
    for (size_t t = 0; t < nt; t++) {
        if (t + 1 < nt)
            prefetch_lines(sx__hnsw_vec(h, todo[t + 1]), PF_FIRST_LINES, x->next_lines);
        uint32_t id = todo[t];
        float d = x->dist(x->q, sx__hnsw_vec(h, id), x->dim);
        size_t p = sx__pool_insert(s->pool, size, x->ef, d, id);
        if (p < lowest && p < x->ef) {
            lowest = p;
            __builtin_prefetch(sx__hnsw_links(h, id, x->level), 0, 3);
        }
    }
    return lowest;
}

static size_t expand_plain(void *vx, uint32_t c, float cd, size_t *size)
{
    (void)cd;
    return expand_at(vx, c, size, false);
}

static size_t expand_conc(void *vx, uint32_t c, float cd, size_t *size)
{
    (void)cd;
    return expand_at(vx, c, size, true);
}

static void prefetch_list(void *vx, uint32_t id)
{
    const sctx *x = vx;
    __builtin_prefetch(sx__hnsw_links(x->h, id, x->level), 0, 3);
}

/* ef-search at `level` over the pool already holding `size` seeds (marked visited). Returns the
 * pool size; entries carry SX__GRAPH_FLAG. */
static inline __attribute__((always_inline)) size_t pool_search(const sx__hnsw *h,
                                                                sx__graph_scratch *s,
                                                                const float *q,
                                                                size_t size,
                                                                size_t ef,
                                                                uint32_t level,
                                                                bool conc)
{
    sctx x = make_ctx(h, s, q, ef, level);
    return sx__graph_pool_search(s->pool, size, 1, 0, NULL, conc ? expand_conc : expand_plain,
                                 prefetch_list, &x);
}

size_t sx__hnsw_search_level_build(const sx__hnsw *h,
                                   sx__graph_scratch *s,
                                   const float *q,
                                   const sx__hit *seeds,
                                   size_t nseeds,
                                   size_t ef,
                                   uint32_t level,
                                   uint32_t self)
{
    size_t size = sx__pool_start(&s->vis, s->pool, ef, seeds, nseeds, self);
    size = pool_search(h, s, q, size, ef, level, true);
    sx__pool_unflag(s->pool, size);
    return size;
}

/* ---------------------------------------------------------------- filtered search */

/* graph.h's sx__graph_gather_fn: the unvisited level-0 neighbours of c and their distances. */
static size_t gather_scored(void *vx, uint32_t c)
{
    sctx *x = vx;
    const sx__hnsw *h = x->h;
    sx__graph_scratch *s = x->s;
    size_t nt = gather(h, s, sx__hnsw_links(h, c, 0), false, x->lines);
    const uint32_t *todo = s->todo;
    for (size_t t = 0; t < nt; t++) {
        if (t + 1 < nt)
            prefetch_lines(sx__hnsw_vec(h, todo[t + 1]), PF_FIRST_LINES, x->next_lines);
        s->dists[t] = x->dist(x->q, sx__hnsw_vec(h, todo[t]), x->dim);
    }
    return nt;
}

/* ---------------------------------------------------------------- vtable: search */

/* Parses `ef` (default max(k, 64)); ef < k is an error, as in Milvus. */
static sx_status parse_ef(const sx_param *p, size_t np, size_t k, long *ef)
{
    long def = k > SX__HNSW_EF_DEF ? (long)k : SX__HNSW_EF_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, SX__HNSW_EF_MAX, def, ef);
    if (rc != SX_OK)
        return rc;
    if ((size_t)*ef < k)
        return sx__err(SX_EINVAL, "ef(%ld) should be larger than or equal to k(%zu)", *ef, k);
    return SX_OK;
}

sx_status sx__hnsw_check_search_params(const sx_param *p, size_t np, size_t k)
{
    long ef;
    return parse_ef(p, np, k, &ef);
}

/* index.h's filter_cost: the distances of graph.h's filtered loop at the search's ef (capped at
 * n, as the search caps it), each a float32 one (sx__graph_filtered_visits has the model). */
double sx__hnsw_filter_cost(
    const sx__index *idx, const sx_param *sp, size_t nsp, size_t k, size_t n_allowed)
{
    const sx__hnsw *h = (const sx__hnsw *)idx;
    long ef;
    if (parse_ef(sp, nsp, k, &ef) != SX_OK || h->n == 0)
        return -1.0;
    sx__err_clear();
    size_t cap = (size_t)ef < h->n ? (size_t)ef : h->n;
    return sx__graph_filtered_visits(h->n, h->M0, cap, n_allowed);
}

sx_status sx__hnsw_search(const sx__index *idx,
                          const float *query,
                          size_t k,
                          const sx_param *sp,
                          size_t nsp,
                          const uint64_t *allow,
                          sx__topk *out)
{
    const sx__hnsw *h = (const sx__hnsw *)idx;
    long efl;
    sx_status rc = parse_ef(sp, nsp, k, &efl);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || h->n == 0)
        return SX_OK;
    size_t ef = (size_t)efl < h->n ? (size_t)efl : h->n;
    sx__graph_scratch *s = sx__graph_tls_get(&tls_class);
    if (!s)
        return sx__err(SX_ENOMEM, "HNSW: cannot allocate search scratch");
    rc = sx__graph_scratch_reserve(s, h->n, ef, h->M0, "HNSW");
    if (rc != SX_OK)
        return rc;

    /* level 0 starts from the descent's result and from the entry point (see the header) */
    sx__hit seeds[2];
    seeds[1].id = h->entry;
    seeds[1].dist = h->dist(query, sx__hnsw_vec(h, h->entry), h->dim);
    seeds[0] = seeds[1];
    if (h->max_level > 0)
        seeds[0].id = greedy(h, query, h->entry, &seeds[0].dist, h->max_level, 1, false);
    if (allow) {
        rc = sx__graph_scratch_filtered(s, ef, (size_t)h->M0 + 2, "HNSW");
        if (rc != SX_OK)
            return rc;
        sctx x = make_ctx(h, s, query, ef, 0);
        size_t nr = 0;
        rc = sx__graph_filtered_search(s, seeds, 2, ef, allow, gather_scored, &x, "HNSW", &nr);
        if (rc != SX_OK)
            return rc;
        for (size_t i = 0; i < nr; i++)
            sx__topk_push(out, s->res[i].dist, s->res[i].id);
        return SX_OK;
    }

    size_t size = sx__pool_start(&s->vis, s->pool, ef, seeds, 1, SX__GRAPH_NONE);
    size = pool_search(h, s, query, size, ef, 0, false);
    if (sx__pool_late_seed(&s->vis, s->pool, &size, ef, seeds[1]))
        size = pool_search(h, s, query, size, ef, 0, false);
    size_t m = size < k ? size : k;
    for (size_t i = 0; i < m; i++)
        sx__topk_push(out, s->pool[i].dist, s->pool[i].id & SX__GRAPH_ID_MASK);
    return SX_OK;
}

sx_status sx__hnsw_search_typed(const sx__index *idx,
                                const void *query,
                                size_t k,
                                const sx_param *sp,
                                size_t nsp,
                                const uint64_t *allow,
                                sx__topk *out)
{
    return sx__hnsw_search(idx, query, k, sp, nsp, allow, out);
}
