/*
 * graph.h: the graph-index core shared by HNSW, HNSW_SQ, GPU_CAGRA (its CPU side) and DISKANN, in
 * the spirit of pgvector's hnswutils.c: what every proximity-graph family needs once, so that a
 * family keeps only its record layout, its distance functions and its own algorithm (HNSW's
 * neighbour heuristic, Vamana's RobustPrune, CAGRA's pruning and merge, DiskANN's beam I/O).
 *
 * Files:
 *   graph.h         (this) the hot-path pieces, all static inline: the node spinlock, visited
 *                   epochs, the sorted candidate pool with its "expanded" bit and the two search
 *                   drivers built on it (pool search, filtered two-heap search); the adjacency
 *                   view, the reachability check and the repair (declared here)
 *   graph_search.c  visited tags and per-thread search scratch: allocation, and the one TLS
 *                   mechanism (a pthread key + a _Thread_local cache, freed at thread exit)
 *   graph_repair.c  the BFS reachability check and the guaranteed repair over a view
 * docs/internals/GRAPH.md explains the invariant, the repair and its proof at more length.
 *
 * ---- The invariant every graph index keeps ----
 *
 *   R. Every node is reachable, following out-links (level 0 for HNSW), from the SEED SET that
 *      the family's search always starts from:
 *        HNSW, HNSW_SQ  {entry point}: level-0 search is seeded with the entry point as well as
 *                       the greedy-descent result (whose own reachability is not guaranteed:
 *                       links are directed): offered after the search from the descent's
 *                       result, resuming it when the entry could still count
 *                       (sx__pool_late_seed), so the common case costs one tag load;
 *        GPU_CAGRA      the entry list (every search starts from all of them);
 *        DISKANN        {medoid}.
 *   With a pool as large as the graph (ef / itopk_size / search_list = n) a search therefore
 *   expands every node and returns all n rows, exact top-1 included. With a small pool the far
 *   seed is pushed out of the pool by the first expansions, so seeding it costs ~nothing
 *   (HNSW: its distance was computed anyway, at the start of the descent).
 *   R is established by sx__graph_repair after every build and verified by sx__graph_check_reach
 *   after every build and on every load (a stored graph failing it is SX_ECORRUPT, so the engine
 *   rebuilds it).
 *
 * ---- The repair (sx__graph_repair) and why it terminates with every node reached ----
 *
 *   1. BFS from the seeds; every node reached for the first time through list slot (p, j) gets
 *      parent[x] = p: the edge p -> x is x's TREE EDGE. Seeds have no tree edge. kids[p] counts
 *      p's tree edges, deg[p] its list length.
 *   2. For each unreached node u (ascending id): choose a reached parent p near u: the best of a
 *      pool search for u's vector from the seeds (every node it finds is reached, because it only
 *      follows links from the seeds) that has room (deg < cap), else the best one with a non-tree
 *      edge (deg > kids); if the search offers neither, a scan of all reached nodes in the same
 *      order of preference. Then link p -> u: append u if p has room, else REPLACE p's last
 *      non-tree edge. Set parent[u] = p, and continue the BFS from u (everything newly reachable
 *      through u is reached and gets its tree edges), then go on with the next unreached node.
 *   Why nothing reached is ever lost: only non-tree edges are ever removed, and every reached
 *   node keeps its tree edge, so the tree edges form a spanning forest rooted at the seeds that
 *   only grows; "reached" stays exactly "reachable from the seeds".
 *   Why a parent always exists: the r reached nodes (s of them seeds, s >= 1) have exactly
 *   r - s tree edges between them. If every reached node were full (deg = cap >= 1) with only
 *   tree edges, their lists would hold r * cap >= r > r - s tree edges: impossible. So the scan
 *   of step 2 always finds a node with room or a non-tree edge (lists hold distinct ids, which
 *   every family checks before the repair runs).
 *   Hence each unreached node costs one link and is then reached: ONE pass over the nodes, at most
 *   n - |reached after step 1| links, no rounds, no give-up. A replaced edge is an approximation
 *   the graph can afford (the node it pointed to stays reachable through its tree edge); an
 *   append never removes anything. Fixed-degree rows (CAGRA) are handled the same way: "room" is
 *   a padding slot; the CPU build fills every row, so there it only ever replaces.
 *
 * ---- Adjacency views ----
 *
 * One repair and one check serve every layout through sx__graph_view: node i's list starts at
 * base + i * stride bytes and is either COUNTED (u32 count, then up to cap u32 ids: HNSW level 0,
 * HNSW_SQ records, Vamana's lists) or PADDED (cap u32 slots, valid ids first, then
 * SX__GRAPH_NONE: CAGRA rows). Lists that are not in memory (DiskANN's file) go through a store
 * (get / put callbacks). Distances for choosing parents come from a callback.
 *
 * Thread-safety: the inline helpers work on caller-owned memory (one scratch per thread; the
 * spinlock is the exception, made for sharing). The check and the repair are single-threaded
 * over their view (the repair writes lists: no other thread may read them meanwhile).
 * sx__graph_tls_get is thread-safe (each thread gets its own object).
 */
#ifndef SX_INDEX_GRAPH_H
#define SX_INDEX_GRAPH_H
#include <math.h>
#include <sched.h>
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/bitset.h"
#include "util/deadline.h"
#include "util/heap.h"

/* Node ids use 31 bits: the top bit marks an entry of a search pool as expanded. */
#define SX__GRAPH_FLAG    0x80000000u
#define SX__GRAPH_ID_MASK 0x7FFFFFFFu
#define SX__GRAPH_MAX_N   ((size_t)0x7FFFFFFF)
/* An empty slot of a padded list (CAGRA's SX__CAGRA_NONE) and "no node". */
#define SX__GRAPH_NONE    UINT32_MAX

/* ---------------------------------------------------------------- node spinlock */

/* A 1-byte spinlock per node, for builds that write link lists from several threads (HNSW,
 * Vamana, NN-descent). Acquire on lock, release on unlock; spins with pause and yields after
 * 1000 spins (critical sections are a list append or a prune of <= a few hundred candidates).
 * Rejected: a pthread mutex per node (40 bytes per node). The lock byte is written through the
 * __atomic builtins, which clang-tidy does not see. */
static inline void sx__spin_lock(uint8_t *l) /* NOLINT(readability-non-const-parameter) */
{
    unsigned spins = 0;
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if (++spins > 1000) {
                spins = 0;
                (void)sched_yield();
            }
        }
    }
}

static inline void sx__spin_unlock(uint8_t *l) /* NOLINT(readability-non-const-parameter) */
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- visited epochs */

/* Visited set of one search: node id is visited <=> tags[id] == epoch. A new search only bumps
 * the epoch (the tags are cleared when the 16-bit epoch wraps, every 65535 searches), so a search
 * costs nothing per node of the graph. 2 bytes per node. Owned by one thread at a time. */
typedef struct sx__visited {
    uint16_t *tags; /* cap entries; owned (sx__visited_fini) unless the caller says otherwise */
    size_t cap;
    uint16_t epoch;
} sx__visited;

/* Makes room for n nodes (grows, never shrinks; growing clears). Errors: SX_ENOMEM (the set
 * keeps its old tags). */
SX_NODISCARD sx_status sx__visited_reserve(sx__visited *v, size_t n);
/* Frees the tags (the struct is the caller's). */
void sx__visited_fini(sx__visited *v);

/* Starts a new, empty visited set. */
static inline void sx__visited_next(sx__visited *v)
{
    if (++v->epoch == 0) {
        memset(v->tags, 0, v->cap * sizeof *v->tags);
        v->epoch = 1;
    }
}

/* Marks id visited; returns whether it already was. */
static inline bool sx__visited_test_set(sx__visited *v, uint32_t id)
{
    if (v->tags[id] == v->epoch)
        return true;
    v->tags[id] = v->epoch;
    return false;
}

/* ---------------------------------------------------------------- candidate pool */

/* The sorted candidate pool of a graph search (NSG/DiskANN's form of HNSW's Alg. 2): one array,
 * sorted by distance, of at most cap entries (cap 0: nothing enters); an entry's top id bit
 * (SX__GRAPH_FLAG) marks it expanded. Inserts (d, id) into pool[0..*size): returns its position, or
 * cap when d does not beat the worst entry of a full pool (the worst entry falls off otherwise).
 * Ties go after the existing entries. The binary search is branch-free (the compare feeds a cmov).
 */
static inline size_t sx__pool_insert(sx__hit *pool, size_t *size, size_t cap, float d, uint32_t id)
{
    size_t n = *size;
    if (n == cap && (n == 0 || !(d < pool[n - 1].dist)))
        return cap;
    size_t lo = 0;
    if (n > 0) {
        const sx__hit *b = pool;
        size_t len = n;
        while (len > 1) {
            size_t half = len / 2;
            b = b[half].dist <= d ? b + half : b;
            len -= half;
        }
        lo = (size_t)(b - pool) + (b[0].dist <= d);
    }
    size_t last = n == cap ? n - 1 : n;
    memmove(pool + lo + 1, pool + lo, (last - lo) * sizeof *pool);
    pool[lo].dist = d;
    pool[lo].id = id;
    if (n < cap)
        *size = n + 1;
    return lo;
}

/* The first unexpanded entry at or after position `from` (size when none). */
static inline size_t sx__pool_next(const sx__hit *pool, size_t size, size_t from)
{
    while (from < size && (pool[from].id & SX__GRAPH_FLAG))
        from++;
    return from;
}

/* Clears the expanded bits of pool[0..size). */
static inline void sx__pool_unflag(sx__hit *pool, size_t size)
{
    for (size_t i = 0; i < size; i++)
        pool[i].id &= SX__GRAPH_ID_MASK;
}

/* Offers a seed (distance known) to the pool unless it was visited; marks it visited. */
static inline void
sx__pool_seed(sx__visited *v, sx__hit *pool, size_t *size, size_t cap, float d, uint32_t id)
{
    if (!sx__visited_test_set(v, id))
        (void)sx__pool_insert(pool, size, cap, d, id);
}

/* Level-0 seeding (invariant R): starts a new visited set and puts the search's start nodes
 * seeds[0..nseeds) (distances known; HNSW: the greedy-descent result and the entry point;
 * duplicates skipped) into the empty pool of capacity cap. `skip` (SX__GRAPH_NONE: none) is
 * marked visited first, so it is never a seed nor found (a build's own node). Returns the pool
 * size. */
static inline size_t sx__pool_start(
    sx__visited *v, sx__hit *pool, size_t cap, const sx__hit *seeds, size_t nseeds, uint32_t skip)
{
    size_t size = 0;
    sx__visited_next(v);
    if (skip != SX__GRAPH_NONE)
        (void)sx__visited_test_set(v, skip);
    for (size_t i = 0; i < nseeds; i++)
        sx__pool_seed(v, pool, &size, cap, seeds[i].dist, seeds[i].id & SX__GRAPH_ID_MASK);
    return size;
}

/* A start node offered after a first pool search has run (HNSW's entry point behind the
 * greedy-descent result): it enters only when it is unvisited and could still be among the cap
 * best (the pool is not full, or it beats the worst entry), and then the caller runs the pool
 * search again, which expands it and what it leads to. The result is that of a search seeded
 * with both from the start whenever the far seed would have been pushed out unexpanded, and in
 * the common case (a full pool of nearer nodes) it costs one visited-tag load instead of a pool
 * entry that every insertion shifts until it falls off (~1% of the search's instructions,
 * callgrind). Returns whether the caller must search again. */
static inline bool
sx__pool_late_seed(sx__visited *v, sx__hit *pool, size_t *size, size_t cap, sx__hit seed)
{
    if (v->tags[seed.id] == v->epoch || (*size == cap && !(seed.dist < pool[cap - 1].dist)))
        return false;
    v->tags[seed.id] = v->epoch;
    return sx__pool_insert(pool, size, cap, seed.dist, seed.id) < cap;
}

/* Expands node `node` (its distance `dist`, id without the flag): offers its unvisited
 * neighbours to the pool (sx__pool_insert, marking them visited). Returns the smallest position
 * an offer landed at, SIZE_MAX when none entered. */
typedef size_t (*sx__graph_expand_fn)(void *ctx, uint32_t node, float dist, size_t *size);
/* Prefetches what expanding `node` will read first (its link list). */
typedef void (*sx__graph_prefetch_fn)(void *ctx, uint32_t node);

/* The pool search over pool[0..size) (seeds already in, marked visited): expands the best
 * unexpanded entries, `width` of them per iteration (HNSW: 1; CAGRA's search_width), until every
 * entry is expanded or after max_iters iterations (0: no limit). Before each expansion the link
 * list of the next unexpanded entry is prefetched (width 1). Returns the pool size; entries keep
 * SX__GRAPH_FLAG (sx__pool_unflag). `parents` is scratch for width entries (unused for width 1).
 * Inline with constant callbacks, so the compiler specialises it per family: no indirect calls on
 * the hot path. With width > 1 the parents of one iteration are taken first, then expanded in
 * order: the same offers in the same order as gathering all their neighbours first (CAGRA's
 * single-CTA search). */
static inline __attribute__((always_inline)) size_t
sx__graph_pool_search(sx__hit *pool,
                      size_t size,
                      size_t width,
                      size_t max_iters,
                      sx__hit *parents,
                      sx__graph_expand_fn expand,
                      sx__graph_prefetch_fn pf,
                      void *ctx)
{
    size_t cur = sx__pool_next(pool, size, 0), it = 0;
    while (cur < size) {
        if (width == 1) {
            uint32_t c = pool[cur].id;
            float cd = pool[cur].dist;
            pool[cur].id = c | SX__GRAPH_FLAG;
            size_t nx = sx__pool_next(pool, size, cur + 1);
            if (nx < size)
                pf(ctx, pool[nx].id);
            size_t lowest = expand(ctx, c, cd, &size);
            cur = sx__pool_next(pool, size, lowest <= cur ? lowest : cur + 1);
        } else {
            size_t np = 0, lowest = SIZE_MAX;
            for (size_t i = cur; i < size && np < width; i++) {
                if (pool[i].id & SX__GRAPH_FLAG)
                    continue;
                parents[np++] = pool[i];
                pool[i].id |= SX__GRAPH_FLAG;
            }
            for (size_t i = 0; i < np; i++) {
                size_t p = expand(ctx, parents[i].id, parents[i].dist, &size);
                lowest = p < lowest ? p : lowest;
            }
            cur = sx__pool_next(pool, size, lowest < cur ? lowest : cur);
        }
        if (max_iters > 0 && ++it >= max_iters)
            break;
    }
    return size;
}

/* ---------------------------------------------------------------- per-thread search scratch */

/* What one thread needs to search any graph family: the visited set, the pool, the gathered
 * neighbours (ids and distances), and the two heaps of the filtered search. Grown on demand,
 * never shrunk. Owned by one thread at a time; families embed it in their own scratch. */
typedef struct sx__graph_scratch {
    sx__visited vis;
    sx__hit *pool; /* pool_cap entries (a pool of pool_cap - 1, plus one) */
    size_t pool_cap;
    uint32_t *todo; /* todo_cap gathered ids */
    float *dists;   /* todo_cap distances of the gathered ids (filtered search) */
    size_t todo_cap;
    sx__hit *cand; /* filtered search: min-heap of candidates, cand_cap */
    size_t cand_cap;
    sx__hit *res; /* filtered search: max-heap of allowed results, res_cap */
    size_t res_cap;
} sx__graph_scratch;

/* Makes room for a graph of n nodes, a pool of `pool` entries and `todo` gathered ids.
 * Errors: SX_ENOMEM naming `who` (the scratch keeps its old buffers). */
SX_NODISCARD sx_status sx__graph_scratch_reserve(
    sx__graph_scratch *s, size_t n, size_t pool, size_t todo, const char *who);
/* Makes room for a filtered search: `res` results and at least `cand` candidates (the candidate
 * heap also grows during the search, sx__graph_filtered_search). Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__graph_scratch_filtered(sx__graph_scratch *s,
                                                  size_t res,
                                                  size_t cand,
                                                  const char *who);
/* Frees the buffers (the struct is the caller's) and zeroes it. */
void sx__graph_scratch_fini(sx__graph_scratch *s);
/* Grows *buf (*cap elements of `elem` bytes, sx__malloc'd) to at least need, doubling from 64;
 * the contents are kept. For a family's own scratch buffers. Returns false on ENOMEM (*buf and
 * *cap unchanged). */
bool sx__graph_grow(void **buf, size_t *cap, size_t need, size_t elem);

/* Gathers the unvisited neighbours of `node` into s->todo (marking them visited) with their
 * distances in s->dists. Returns how many. */
typedef size_t (*sx__graph_gather_fn)(void *ctx, uint32_t node);

/* Filtered search (the two-heap form of HNSW's Alg. 2): rows not in `allow` are traversed (they
 * keep the graph connected) but never enter the results. The candidates C (min-heap s->cand)
 * hold every node closer than the worst of `cap` allowed results (or all while fewer are held);
 * the results W (max-heap s->res, at most cap) hold allowed rows only; the search stops when the
 * nearest candidate is farther than the worst of a full W. A very selective filter degrades to a
 * traversal of everything reachable from the seeds (never a hang; the engine uses exact search
 * for such filters). seeds[0..nseeds) are the start nodes with their distances (duplicates are
 * skipped). On SX_OK s->res[0..*nres) is a max-heap (sx__maxheap_sort sorts it).
 * Errors: SX_ENOMEM (the candidate heap cannot grow), SX_ETIMEDOUT (the calling thread's
 * deadline, util/deadline.h, checked every 1024 expansions). Needs sx__graph_scratch_filtered(s,
 * cap, nseeds + max degree). */
static inline __attribute__((always_inline)) sx_status
sx__graph_filtered_search(sx__graph_scratch *s,
                          const sx__hit *seeds,
                          size_t nseeds,
                          size_t cap,
                          const uint64_t *allow,
                          sx__graph_gather_fn gather,
                          void *ctx,
                          const char *who,
                          size_t *nres)
{
    size_t nc = 0, nr = 0, pops = 0;
    float bound = __builtin_inff();
    sx__visited_next(&s->vis);
    for (size_t i = 0; i < nseeds; i++) {
        sx__hit x = seeds[i];
        if (sx__visited_test_set(&s->vis, x.id))
            continue;
        sx__minheap_push(s->cand, &nc, x);
        if (sx__bits_test_atomic(allow, x.id)) {
            sx__maxheap_push(s->res, &nr, cap, x);
            if (nr == cap)
                bound = s->res[0].dist;
        }
    }
    while (nc > 0) {
        if (nr == cap && s->cand[0].dist > bound)
            break;
        /* a selective filter can make this a traversal of the whole graph: the calling
         * thread's deadline (util/deadline.h) is checked every 1024 expansions */
        if ((++pops & 1023) == 0) {
            sx_status dl = sx__deadline_check_ambient();
            if (dl != SX_OK)
                return dl;
        }
        sx__hit c = sx__minheap_pop(s->cand, &nc);
        size_t nt = gather(ctx, c.id);
        if (nc + nt > s->cand_cap) {
            sx_status rc = sx__graph_scratch_filtered(s, cap, nc + nt, who);
            if (rc != SX_OK)
                return rc;
        }
        const uint32_t *todo = s->todo;
        const float *dd = s->dists;
        for (size_t t = 0; t < nt; t++) {
            uint32_t id = todo[t];
            float d = dd[t];
            if (nr < cap || d < bound) {
                sx__minheap_push(s->cand, &nc, (sx__hit){ d, id });
                if (sx__bits_test_atomic(allow, id)) {
                    sx__maxheap_push(s->res, &nr, cap, (sx__hit){ d, id });
                    if (nr == cap)
                        bound = s->res[0].dist;
                }
            }
        }
    }
    *nres = nr;
    return SX_OK;
}

/* The distances sx__graph_filtered_search computes when `allowed` of the graph's n nodes pass
 * the filter, cap results are wanted and level-0 nodes have up to `degree` neighbours. The loop
 * stops once it holds cap allowed results and its nearest candidate is farther than their
 * worst, so it expands about x = cap / s candidates (s = allowed / n); the distances grow more
 * slowly than x because the neighbourhoods of nearby candidates overlap (a visited node is
 * computed once). Fitted on HNSW over Fashion-MNIST (60,000 x 784, M=16, 1,000 queries, k=10,
 * filters id >= n*r keeping 50/20/10/5%, ef 10 and 100): expansions per query 20.7 / 50.4 /
 * 100.5 / 201.4 at ef 10 and 197.7 / 496.2 / 994.6 / 2000.8 at ef 100, i.e. x; distances 239 /
 * 456 / 740 / 1,193 and 1,190 / 2,185 / 3,451 / 5,491, a function of x alone: 0.95 * degree *
 * x^0.68 within 10%. Capped at n. Used by the indexes' filter_cost (index.h). */
static inline double sx__graph_filtered_visits(size_t n, size_t degree, size_t cap, size_t allowed)
{
    double nn = (double)n;
    double s = allowed > 0 ? (double)allowed / nn : 1.0 / nn;
    double v = 0.95 * (double)degree * pow((double)cap / s, 0.68);
    return v < nn ? v : nn;
}

/* ---------------------------------------------------------------- per-thread storage */

/* One TLS mechanism for every family's search scratch: a pthread key whose destructor frees the
 * calling thread's objects at thread exit, and a _Thread_local cache of them so a query costs one
 * TLS load. A class names its slot, the object's size (zeroed on the thread's first use) and a
 * fini that frees what the object holds (not the object itself). */
typedef struct sx__graph_tls_class {
    unsigned slot; /* SX__GRAPH_TLS_* */
    size_t bytes;
    void (*fini)(void *obj);
} sx__graph_tls_class;

enum {
    SX__GRAPH_TLS_HNSW = 0,
    SX__GRAPH_TLS_HNSW_SQ,
    SX__GRAPH_TLS_CAGRA,
    SX__GRAPH_TLS_DISKANN,
    SX__GRAPH_TLS_SLOTS
};

/* The calling thread's object of class c, created on first use. Returns NULL on allocation
 * failure. Ownership: the thread's until it exits (then fini + free). Thread-safety: any thread;
 * each sees its own object. */
void *sx__graph_tls_get(const sx__graph_tls_class *c);

/* ---------------------------------------------------------------- adjacency views */

typedef enum sx__graph_format {
    SX__GRAPH_COUNTED = 0, /* u32 count, then up to cap u32 ids */
    SX__GRAPH_PADDED = 1   /* cap u32 slots: valid ids first, then SX__GRAPH_NONE */
} sx__graph_format;

/* Lists kept outside memory (DiskANN's file). get: node id's list, either into buf (cap ids) or
 * as a pointer into the store's own memory valid until the next call; put: replaces it.
 * Errors are returned as they are (SX_EIO, SX_ECORRUPT, ...). put may be NULL for a check. */
typedef struct sx__graph_store {
    void *ctx;
    sx_status (*get)(void *ctx, uint32_t id, uint32_t *buf, const uint32_t **ids, uint32_t *count);
    sx_status (*put)(void *ctx, uint32_t id, const uint32_t *ids, uint32_t count);
} sx__graph_store;

/* A graph of n nodes whose lists hold at most cap ids: node i's list at base + i * stride
 * (format above), or through store when store is non-NULL (base and stride unused). Borrowed:
 * the view points into the family's arrays. */
typedef struct sx__graph_view {
    size_t n;
    uint32_t cap; /* 1..65535 */
    sx__graph_format format;
    uint8_t *base;
    size_t stride; /* bytes; a multiple of 4 */
    const sx__graph_store *store;
} sx__graph_view;

/* Nodes reachable from seeds[0..nseeds) (distinct or not, each < n): *nreached, and the smallest
 * unreached id in *first (SX__GRAPH_NONE when all are). Errors: SX_ECORRUPT (a seed or a listed
 * id >= n, a count above cap), SX_ENOMEM, the store's errors. */
SX_NODISCARD sx_status sx__graph_reach(const sx__graph_view *v,
                                       const uint32_t *seeds,
                                       size_t nseeds,
                                       size_t *nreached,
                                       uint32_t *first);
/* Invariant R: SX_OK when every node is reachable from the seeds, else SX_ECORRUPT "<who>: N of
 * n nodes unreachable from <what> (first: u)"; n == 0 needs no seed, n > 0 at least one.
 * Errors as sx__graph_reach. Thread-safety: reads the view only. */
SX_NODISCARD sx_status sx__graph_check_reach(const sx__graph_view *v,
                                             const uint32_t *seeds,
                                             size_t nseeds,
                                             const char *who,
                                             const char *what);

/* How the repair measures "near": dist(ctx, a, b) between nodes a and b (smaller is closer; need
 * not be symmetric: a is the node being linked). ef: pool of the parent search (0: scan only). */
typedef struct sx__graph_repair_opts {
    float (*dist)(const void *ctx, uint32_t a, uint32_t b);
    const void *ctx;
    size_t ef;
} sx__graph_repair_opts;

typedef struct sx__graph_repair_stats {
    size_t unreached; /* nodes not reachable from the seeds before the repair */
    size_t linked;    /* links added (<= unreached: the rest became reachable through them) */
    size_t replaced;  /* of those, links that replaced a non-tree edge of a full list */
    size_t scanned;   /* of those, parents found by the scan (the search offered none) */
} sx__graph_repair_stats;

/* Makes every node reachable from the seeds (invariant R), as described in the header: one pass,
 * guaranteed to leave every node reached. Lists must already be valid (ids < n, distinct, not the
 * owner; counts <= cap). stats (optional) says what it did. Errors: SX_EINVAL (no seed, a seed
 * >= n, cap 0 or > 65535), SX_ENOMEM, SX_ECORRUPT (a list broke the precondition), the store's
 * errors; the graph may then be partly repaired (still valid). Thread-safety: single-threaded;
 * writes the lists of the view. */
SX_NODISCARD sx_status sx__graph_repair(const sx__graph_view *v,
                                        const uint32_t *seeds,
                                        size_t nseeds,
                                        const sx__graph_repair_opts *o,
                                        sx__graph_repair_stats *stats);
/* Peak bytes sx__graph_repair allocates for n nodes (for memory-limited builds). */
uint64_t sx__graph_repair_bytes(size_t n, uint32_t cap, size_t ef);

#endif
