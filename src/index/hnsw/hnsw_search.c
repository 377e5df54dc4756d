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
 * Scratch. Each thread keeps one sx__hnsw_scratch (uint16 epoch tags for n nodes, the pool, the
 * heaps) in a pthread key (freed at thread exit), so steady-state searches do not allocate. The
 * tags are only cleared when the 16-bit epoch wraps (every 65535 queries).
 *
 * Thread-safety: searching a built index is read-only and may run on any number of threads. The
 * build variants read link lists with atomic loads because other build threads write them
 * (hnsw_build.c explains the publication protocol).
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "index/hnsw/hnsw.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define ID_MASK        0x7FFFFFFFu
/* cache lines of each neighbour's vector prefetched up front, and of the next one in the loop */
#define PF_FIRST_LINES 2u
#define PF_NEXT_LINES  24u

/* ---------------------------------------------------------------- scratch */

sx_status sx__hnsw_scratch_reserve(sx__hnsw_scratch *s, size_t n, size_t ef, size_t max_deg)
{
    if (n > s->tags_cap) {
        uint16_t *t = sx__calloc(n, sizeof *t);
        if (!t)
            return sx__err(SX_ENOMEM, "HNSW: cannot allocate visited tags for %zu nodes", n);
        sx__free(s->tags);
        s->tags = t;
        s->tags_cap = n;
        s->epoch = 0;
    }
    if (ef + 1 > s->pool_cap) {
        sx__hit *p = sx__malloc((ef + 1) * sizeof *p);
        if (!p)
            return sx__err(SX_ENOMEM, "HNSW: cannot allocate a search pool of %zu", ef);
        sx__free(s->pool);
        s->pool = p;
        s->pool_cap = ef + 1;
    }
    if (max_deg > s->todo_cap) {
        uint32_t *t = sx__malloc(max_deg * sizeof *t);
        if (!t)
            return sx__err(SX_ENOMEM, "HNSW: cannot allocate search scratch");
        sx__free(s->todo);
        s->todo = t;
        s->todo_cap = max_deg;
    }
    return SX_OK;
}

void sx__hnsw_scratch_fini(sx__hnsw_scratch *s)
{
    sx__free(s->tags);
    sx__free(s->pool);
    sx__free(s->cand);
    sx__free(s->res);
    sx__free(s->todo);
    memset(s, 0, sizeof *s);
}

/* Starts a new visited set. */
static inline void new_epoch(sx__hnsw_scratch *s)
{
    if (++s->epoch == 0) {
        memset(s->tags, 0, s->tags_cap * sizeof *s->tags);
        s->epoch = 1;
    }
}

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
/* cache of the pthread key's value: one TLS load per query instead of pthread_getspecific */
static _Thread_local sx__hnsw_scratch *tls_scratch;

static void tls_destroy(void *p)
{
    sx__hnsw_scratch_fini(p);
    sx__free(p);
    tls_scratch = NULL;
}

static void tls_init(void)
{
    tls_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

/* The calling thread's scratch, or NULL on allocation failure. */
static sx__hnsw_scratch *thread_scratch(void)
{
    if (tls_scratch)
        return tls_scratch;
    if (pthread_once(&tls_once, tls_init) != 0 || !tls_ok)
        return NULL;
    sx__hnsw_scratch *s = sx__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (pthread_setspecific(tls_key, s) != 0) {
        sx__free(s);
        return NULL;
    }
    tls_scratch = s;
    return s;
}

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

/* Inserts (d, id) into the sorted pool[0..*size) of capacity ef. Returns the position, or ef when
 * d does not beat the worst of a full pool. Ties go after the existing entries. */
static inline size_t pool_insert(sx__hit *pool, size_t *size, size_t ef, float d, uint32_t id)
{
    size_t n = *size;
    if (n == ef && !(d < pool[n - 1].dist))
        return ef;
    /* branch-free upper bound (first entry with dist > d): the compare feeds a cmov */
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
    size_t last = n == ef ? n - 1 : n;
    memmove(pool + lo + 1, pool + lo, (last - lo) * sizeof *pool);
    pool[lo].dist = d;
    pool[lo].id = id;
    if (n < ef)
        *size = n + 1;
    return lo;
}

/* Collects the unvisited ids of list `ll` into todo (marking them visited) and prefetches their
 * vectors' first lines. Returns how many. */
static inline __attribute__((always_inline)) size_t
gather(const sx__hnsw *h, sx__hnsw_scratch *s, const uint32_t *ll, bool conc, size_t lines)
{
    uint32_t cnt = ld_count(ll, conc);
    uint16_t *tags = s->tags, ep = s->epoch;
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

/* ef-search at `level` over the pool already holding `size` seeds (marked visited). Returns the
 * pool size; entries carry SX__HNSW_FLAG. */
static inline __attribute__((always_inline)) size_t pool_search(const sx__hnsw *h,
                                                                sx__hnsw_scratch *s,
                                                                const float *q,
                                                                size_t size,
                                                                size_t ef,
                                                                uint32_t level,
                                                                bool conc)
{
    sx__hit *pool = s->pool;
    const uint32_t *todo = s->todo;
    sx__dist_fn dist = h->dist;
    const size_t dim = h->dim;
    const size_t lines = (dim * sizeof(float) + 63) / 64;
    const size_t next_lines = lines < PF_NEXT_LINES ? lines : PF_NEXT_LINES;
    size_t cur = 0;
    while (cur < size) {
        uint32_t c = pool[cur].id;
        pool[cur].id = c | SX__HNSW_FLAG;
        /* the next node to expand is most likely the next unexpanded one: fetch its list now */
        for (size_t nx = cur + 1; nx < size; nx++) {
            if (!(pool[nx].id & SX__HNSW_FLAG)) {
                __builtin_prefetch(sx__hnsw_links(h, pool[nx].id, level), 0, 3);
                break;
            }
        }
        size_t nt = gather(h, s, sx__hnsw_links(h, c, level), conc, lines);
        size_t lowest = SIZE_MAX;
        for (size_t t = 0; t < nt; t++) {
            if (t + 1 < nt)
                prefetch_lines(sx__hnsw_vec(h, todo[t + 1]), PF_FIRST_LINES, next_lines);
            uint32_t id = todo[t];
            float d = dist(q, sx__hnsw_vec(h, id), dim);
            size_t p = pool_insert(pool, &size, ef, d, id);
            if (p < lowest && p < ef) {
                lowest = p;
                __builtin_prefetch(sx__hnsw_links(h, id, level), 0, 3);
            }
        }
        if (lowest <= cur)
            cur = lowest;
        else
            cur++;
        while (cur < size && (pool[cur].id & SX__HNSW_FLAG))
            cur++;
    }
    return size;
}

size_t sx__hnsw_search_level_build(const sx__hnsw *h,
                                   sx__hnsw_scratch *s,
                                   const float *q,
                                   const sx__hit *seeds,
                                   size_t nseeds,
                                   size_t ef,
                                   uint32_t level,
                                   uint32_t self)
{
    new_epoch(s);
    if (self != SX__HNSW_NONE)
        s->tags[self] = s->epoch;
    size_t size = 0;
    for (size_t i = 0; i < nseeds; i++) {
        uint32_t id = seeds[i].id & ID_MASK;
        if (s->tags[id] == s->epoch)
            continue;
        s->tags[id] = s->epoch;
        (void)pool_insert(s->pool, &size, ef, seeds[i].dist, id);
    }
    size = pool_search(h, s, q, size, ef, level, true);
    for (size_t i = 0; i < size; i++)
        s->pool[i].id &= ID_MASK;
    return size;
}

/* ---------------------------------------------------------------- filtered search */


/* max-heap on dist (results); keeps at most cap entries */
static void res_push(sx__hit *hp, size_t *n, size_t cap, sx__hit x)
{
    if (*n == cap) {
        if (!(x.dist < hp[0].dist))
            return;
        size_t i = 0, m = *n;
        for (;;) {
            size_t l = 2 * i + 1, b = i;
            float bd = x.dist;
            if (l < m && hp[l].dist > bd) {
                b = l;
                bd = hp[l].dist;
            }
            if (l + 1 < m && hp[l + 1].dist > bd)
                b = l + 1;
            if (b == i)
                break;
            hp[i] = hp[b];
            i = b;
        }
        hp[i] = x;
        return;
    }
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(x.dist > hp[p].dist))
            break;
        hp[i] = hp[p];
        i = p;
    }
    hp[i] = x;
}

static sx_status grow_cand(sx__hnsw_scratch *s, size_t need)
{
    if (need <= s->cand_cap)
        return SX_OK;
    size_t cap = s->cand_cap ? s->cand_cap : 256;
    while (cap < need)
        cap *= 2;
    sx__hit *c = sx__realloc(s->cand, cap * sizeof *c);
    if (!c)
        return sx__err(SX_ENOMEM, "HNSW: cannot grow the candidate heap to %zu", cap);
    s->cand = c;
    s->cand_cap = cap;
    return SX_OK;
}

/* Two-heap ef-search at level 0 where only rows in `allow` may be returned (see the header). */
static sx_status filtered_search(const sx__hnsw *h,
                                 sx__hnsw_scratch *s,
                                 const float *q,
                                 uint32_t ep,
                                 float ep_dist,
                                 size_t ef,
                                 const uint64_t *allow,
                                 sx__topk *out)
{
    if (ef > s->res_cap) {
        sx__hit *r = sx__malloc(ef * sizeof *r);
        if (!r)
            return sx__err(SX_ENOMEM, "HNSW: cannot allocate %zu results", ef);
        sx__free(s->res);
        s->res = r;
        s->res_cap = ef;
    }
    sx_status rc = grow_cand(s, h->M0 + 1);
    if (rc != SX_OK)
        return rc;
    sx__dist_fn dist = h->dist;
    const size_t dim = h->dim;
    const size_t lines = (dim * sizeof(float) + 63) / 64;
    const size_t next_lines = lines < PF_NEXT_LINES ? lines : PF_NEXT_LINES;
    size_t nc = 0, nr = 0;
    float bound = __builtin_inff();

    new_epoch(s);
    s->tags[ep] = s->epoch;
    if (sx__bits_test_atomic(allow, ep)) {
        res_push(s->res, &nr, ef, (sx__hit){ ep_dist, ep });
        bound = ep_dist;
    }
    sx__minheap_push(s->cand, &nc, (sx__hit){ ep_dist, ep });
    while (nc > 0) {
        if (s->cand[0].dist > bound && nr == ef)
            break;
        sx__hit c = sx__minheap_pop(s->cand, &nc);
        size_t nt = gather(h, s, sx__hnsw_links(h, c.id, 0), false, lines);
        rc = grow_cand(s, nc + nt);
        if (rc != SX_OK)
            return rc;
        const uint32_t *todo = s->todo;
        for (size_t t = 0; t < nt; t++) {
            if (t + 1 < nt)
                prefetch_lines(sx__hnsw_vec(h, todo[t + 1]), PF_FIRST_LINES, next_lines);
            uint32_t id = todo[t];
            float d = dist(q, sx__hnsw_vec(h, id), dim);
            if (nr < ef || d < bound) {
                sx__minheap_push(s->cand, &nc, (sx__hit){ d, id });
                if (sx__bits_test_atomic(allow, id)) {
                    res_push(s->res, &nr, ef, (sx__hit){ d, id });
                    bound = s->res[0].dist;
                }
            }
        }
    }
    for (size_t i = 0; i < nr; i++)
        sx__topk_push(out, s->res[i].dist, s->res[i].id);
    return SX_OK;
}

/* ---------------------------------------------------------------- vtable: search */

/* Parses `ef` (default max(k, 64)); ef < k is an error, as in Milvus. */
static sx_status parse_ef(const sx_param *p, size_t np, size_t k, long *ef)
{
    long def = k > SX__HNSW_EF_DEF ? (long)k : SX__HNSW_EF_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, INT_MAX, def, ef);
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
    sx__hnsw_scratch *s = thread_scratch();
    if (!s)
        return sx__err(SX_ENOMEM, "HNSW: cannot allocate search scratch");
    rc = sx__hnsw_scratch_reserve(s, h->n, ef, h->M0);
    if (rc != SX_OK)
        return rc;

    uint32_t cur = h->entry;
    float d = h->dist(query, sx__hnsw_vec(h, cur), h->dim);
    if (h->max_level > 0)
        cur = greedy(h, query, cur, &d, h->max_level, 1, false);
    if (allow)
        return filtered_search(h, s, query, cur, d, ef, allow, out);

    new_epoch(s);
    s->tags[cur] = s->epoch;
    s->pool[0].dist = d;
    s->pool[0].id = cur;
    size_t size = pool_search(h, s, query, 1, ef, 0, false);
    size_t m = size < k ? size : k;
    for (size_t i = 0; i < m; i++)
        sx__topk_push(out, s->pool[i].dist, s->pool[i].id & ID_MASK);
    return SX_OK;
}
