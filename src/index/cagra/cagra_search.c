/*
 * cagra_search.c: search of a CAGRA graph on the CPU (the path by which a GPU-built graph is
 * served by CPU-only machines: the graph is stored in this family's own format, cagra_io.c, and
 * searched here; cuVS instead converts to hnswlib's format, Milvus's adapt_for_cpu).
 *
 * Algorithm (CAGRA's single-CTA search, arXiv 2308.15136 section 4.2, done by one thread): an
 * "itopk" buffer of L = max(itopk_size, k) candidates sorted by distance (capped at n), seeded
 * with the index's entry points (the node nearest the mean and rows drawn at build time, cagra.h);
 * each iteration takes the search_width best not yet expanded candidates as parents and offers
 * all their unvisited neighbours to the buffer; the search stops when every candidate in the
 * buffer has been expanded (or after max_iterations, when set). The buffer is graph.h's sorted
 * "pool" (the top id bit marks "expanded") driven by sx__graph_pool_search, so search_width = 1
 * is exactly HNSW's ef-search at level 0 with ef = L. The visited set is graph.h's per-thread
 * array of 16-bit epoch tags (one store per visit, cleared only when the epoch wraps), not
 * CAGRA's forgettable hash: on a CPU the n * 2 bytes cost nothing and there are no false
 * re-visits. Every node is reachable from the entry list (invariant 4 of cagra.h), so with
 * itopk_size = n every row is found.
 *
 * Parameters (Milvus / cuVS names): itopk_size [1, 65536] (default 64; "ef" is accepted as its
 * alias, as Milvus searches an adapt_for_cpu index with ef), search_width [1, 1024] = 1,
 * max_iterations [0, 65536] (0 = until converged), min_iterations [0, 65536] (<= max_iterations
 * when that is set; on one CPU thread the search only stops when no candidate is left to expand, so
 * it has no further effect), team_size 0 | 2 | 4 | 8 | 16 | 32 (GPU warp split; ignored here).
 * Other keys are ignored, as HNSW does (generic search params reach every index type).
 *
 * Filtered search (allow bitset): graph.h's sx__graph_filtered_search, as HNSW's: disallowed
 * rows are traversed but never returned; a min-heap of candidates and a max-heap of L allowed
 * results, stopping when the nearest candidate is farther than the worst of L allowed results.
 * search_width does not apply (one parent at a time). A very selective filter degrades to a
 * traversal of everything reachable from the entry points, never a hang; the engine switches to
 * exact search for those.
 *
 * Thread-safety: read-only on the index; scratch is per thread (graph.h's TLS, freed at thread
 * exit), so any number of threads may search at once.
 */
#include <limits.h>
#include <string.h>

#include "index/cagra/cagra.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    sx__graph_scratch g; /* tags, pool, gathered ids, filtered heaps */
    sx__hit *parents;    /* the parents of one iteration (search_width) */
    size_t parents_cap;
} scratch;

static void scratch_fini(void *p)
{
    scratch *s = p;
    sx__graph_scratch_fini(&s->g);
    sx__free(s->parents);
    memset(s, 0, sizeof *s);
}

static const sx__graph_tls_class tls_class = { SX__GRAPH_TLS_CAGRA, sizeof(scratch), scratch_fini };

static sx_status scratch_reserve(scratch *s, size_t n, size_t L, size_t degree, size_t width)
{
    sx_status rc = sx__graph_scratch_reserve(&s->g, n, L, degree, "GPU_CAGRA");
    if (rc != SX_OK)
        return rc;
    if (!sx__graph_grow((void **)&s->parents, &s->parents_cap, width, sizeof *s->parents))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate search scratch");
    return SX_OK;
}

/* ---------------------------------------------------------------- params */

typedef struct sparams {
    long itopk, width, min_it, max_it, team;
} sparams;

static sx_status parse_search(const sx_param *p, size_t np, size_t k, sparams *o)
{
    long def = SX__CAGRA_ITOPK_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, SX__CAGRA_ITOPK_MAX, def, &def);
    if (rc != SX_OK)
        return rc;
    rc = sx__param_int(p, np, "itopk_size", 1, SX__CAGRA_ITOPK_MAX, def, &o->itopk);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "search_width", 1, SX__CAGRA_WIDTH_MAX, SX__CAGRA_WIDTH_DEF,
                           &o->width);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "min_iterations", 0, SX__CAGRA_ITERS_MAX, 0, &o->min_it);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "max_iterations", 0, SX__CAGRA_ITERS_MAX, 0, &o->max_it);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "team_size", 0, 32, 0, &o->team);
    if (rc != SX_OK)
        return rc;
    if (o->team != 0 && o->team != 2 && o->team != 4 && o->team != 8 && o->team != 16 &&
        o->team != 32)
        return sx__err(SX_EINVAL, "team_size must be 0, 2, 4, 8, 16 or 32, got %ld", o->team);
    if (o->max_it > 0 && o->min_it > o->max_it)
        return sx__err(SX_EINVAL, "min_iterations (%ld) must not exceed max_iterations (%ld)",
                       o->min_it, o->max_it);
    if (k > (size_t)SX__CAGRA_ITOPK_MAX)
        return sx__err(SX_EINVAL, "GPU_CAGRA: k (%zu) above %u", k, SX__CAGRA_ITOPK_MAX);
    return SX_OK;
}

sx_status sx__cagra_check_search_params(const sx_param *p, size_t np, size_t k)
{
    sparams o;
    return parse_search(p, np, k, &o);
}

/* ---------------------------------------------------------------- search */

/* What the graph.h drivers' callbacks need. */
typedef struct sctx {
    const sx__cagra *g;
    scratch *s;
    const float *q;
    size_t L;
} sctx;

/* Collects the unvisited neighbours of `parent` into s->g.todo (marking them visited) and
 * prefetches their vectors. Returns how many. */
static inline size_t gather(const sx__cagra *g, scratch *s, uint32_t parent)
{
    const uint32_t *row = sx__cagra_row(g, parent);
    uint16_t *tags = s->g.vis.tags, ep = s->g.vis.epoch;
    size_t nt = 0;
    for (uint32_t j = 0; j < g->degree; j++) {
        uint32_t id = row[j];
        if (id == SX__CAGRA_NONE)
            break;
        if (tags[id] == ep)
            continue;
        tags[id] = ep;
        s->g.todo[nt++] = id;
        __builtin_prefetch(sx__cagra_vec(g, id), 0, 3);
    }
    return nt;
}

/* graph.h's sx__graph_expand_fn: offers parent c's unvisited neighbours to the pool. */
static size_t expand(void *vx, uint32_t c, float cd, size_t *size)
{
    (void)cd;
    const sctx *x = vx;
    const sx__cagra *g = x->g;
    scratch *s = x->s;
    size_t nt = gather(g, s, c), lowest = SIZE_MAX;
    for (size_t t = 0; t < nt; t++) {
        if (t + 1 < nt)
            __builtin_prefetch(sx__cagra_vec(g, s->g.todo[t + 1]) + 16, 0, 3);
        uint32_t id = s->g.todo[t];
        size_t p =
            sx__pool_insert(s->g.pool, size, x->L, g->dist(x->q, sx__cagra_vec(g, id), g->dim), id);
        if (p < lowest)
            lowest = p;
    }
    return lowest;
}

static void prefetch_row(void *vx, uint32_t id)
{
    const sctx *x = vx;
    __builtin_prefetch(sx__cagra_row(x->g, id), 0, 3);
}

/* graph.h's sx__graph_gather_fn (filtered search): ids and exact distances. */
static size_t gather_scored(void *vx, uint32_t c)
{
    const sctx *x = vx;
    const sx__cagra *g = x->g;
    size_t nt = gather(g, x->s, c);
    for (size_t t = 0; t < nt; t++)
        x->s->g.dists[t] = g->dist(x->q, sx__cagra_vec(g, x->s->g.todo[t]), g->dim);
    return nt;
}

static void search_plain(const sx__cagra *g,
                         scratch *s,
                         const float *q,
                         size_t L,
                         const sparams *o,
                         size_t k,
                         sx__topk *out)
{
    sx__hit *pool = s->g.pool;
    size_t size = 0;
    sx__visited_next(&s->g.vis);
    for (uint32_t e = 0; e < g->n_entries; e++) {
        uint32_t id = g->entries[e];
        sx__pool_seed(&s->g.vis, pool, &size, L, g->dist(q, sx__cagra_vec(g, id), g->dim), id);
    }
    sctx x = { g, s, q, L };
    size = sx__graph_pool_search(pool, size, (size_t)o->width, (size_t)o->max_it, s->parents,
                                 expand, prefetch_row, &x);
    size_t m = size < k ? size : k;
    for (size_t i = 0; i < m; i++)
        sx__topk_push(out, pool[i].dist, pool[i].id & SX__GRAPH_ID_MASK);
}

static sx_status search_filtered(
    const sx__cagra *g, scratch *s, const float *q, size_t L, const uint64_t *allow, sx__topk *out)
{
    sx_status rc =
        sx__graph_scratch_filtered(&s->g, L, (size_t)g->n_entries + g->degree, "GPU_CAGRA");
    if (rc != SX_OK)
        return rc;
    /* the entry points with their distances: seeds of the two-heap search (in the pool's
     * storage, which the filtered search does not use) */
    sx__hit *seeds = s->g.pool;
    for (uint32_t e = 0; e < g->n_entries; e++) {
        seeds[e].id = g->entries[e];
        seeds[e].dist = g->dist(q, sx__cagra_vec(g, g->entries[e]), g->dim);
    }
    sctx x = { g, s, q, L };
    size_t nr = 0;
    rc = sx__graph_filtered_search(&s->g, seeds, g->n_entries, L, allow, gather_scored, &x,
                                   "GPU_CAGRA", &nr);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < nr; i++)
        sx__topk_push(out, s->g.res[i].dist, s->g.res[i].id);
    return SX_OK;
}

sx_status sx__cagra_search(const sx__index *idx,
                           const float *query,
                           size_t k,
                           const sx_param *sp,
                           size_t nsp,
                           const uint64_t *allow,
                           sx__topk *out)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    sparams o;
    sx_status rc = parse_search(sp, nsp, k, &o);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || g->n == 0)
        return SX_OK;
    size_t L = (size_t)o.itopk > k ? (size_t)o.itopk : k;
    if (L > g->n)
        L = g->n;
    scratch *s = sx__graph_tls_get(&tls_class);
    if (!s)
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate search scratch");
    /* the pool also holds the entry points as the filtered search's seeds */
    size_t pool = L > g->n_entries ? L : g->n_entries;
    rc = scratch_reserve(s, g->n, pool, g->degree, (size_t)o.width);
    if (rc != SX_OK)
        return rc;
    if (allow)
        return search_filtered(g, s, query, L, allow, out);
    search_plain(g, s, query, L, &o, k, out);
    return SX_OK;
}
